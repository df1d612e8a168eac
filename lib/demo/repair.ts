// The built-in synthetic code-repair task family of the CPU demo.
//
// Each problem shows a one-line Python function with a wrong constant:
//
//     user:      fix: def f(x): return x+3
//     assistant: def f(x): return x+7            (the right constant is not in the task)
//
// The tests (f(0) == 7, f(1) == 8, ... for "+"; f(1) == 7, f(2) == 14, ... for "*") are hidden, so a
// first attempt can only guess the constant; the executor's feedback on a wrong attempt,
//
//     user:      f(0) failed: got 5, expected 7
//
// carries exactly what a fix needs. A model that learns to read its feedback solves at turn 2
// what it could not at turn 1 — the point of MURPHY. Programs are graded by a small
// interpreter for this one-line grammar (no Python needed); the same problems carry assert
// tests, so the Python executor grades them identically.
import type { Problem } from '../data/types.js';
import type { ExecResult, Executor } from '../murphy/types.js';
import { mix32, mulberry32 } from '../murphy/rng.js';

export type RepairOp = '+' | '*';

export interface RepairSpec {
  op: RepairOp;
  /** The constant in the buggy program. */
  bug: number;
  /** The constant the tests expect. */
  fix: number;
}

/** Inputs of the tests: chosen so that the first one's expected value is the constant itself. */
export const REPAIR_INPUTS: Record<RepairOp, number[]> = { '+': [0, 1, 2, 5], '*': [1, 2, 3, 5] };
const DIGITS = [1, 2, 3, 4, 5];

function apply(op: RepairOp, x: number, k: number): number {
  return op === '+' ? x + k : x * k;
}

export function repairProgram(op: RepairOp, k: number): string {
  return `def f(x): return x${op}${k}`;
}

/** Every (op, bug, fix) triple with bug != fix: 2 x 5 x 4 = 40. */
export function allRepairSpecs(): RepairSpec[] {
  const out: RepairSpec[] = [];
  for (const op of ['+', '*'] as const) for (const bug of DIGITS) for (const fix of DIGITS) if (bug !== fix) out.push({ op, bug, fix });
  return out;
}

export function repairProblem(spec: RepairSpec, id: string): Problem {
  const inputs = REPAIR_INPUTS[spec.op];
  return {
    id,
    source: 'jsonl',
    prompt: `fix: ${repairProgram(spec.op, spec.bug)}`,
    promptStyle: 'instruction',
    entryPoint: 'f',
    tests: { kind: 'assert', asserts: inputs.map((x) => `assert f(${x}) == ${apply(spec.op, x, spec.fix)}`) },
    visibleTests: inputs.map((_, i) => i),
    referenceSolution: repairProgram(spec.op, spec.fix),
    meta: { repair: spec },
  };
}

/**
 * Train and held-out problems: the 144 triples are shuffled with the seed; `heldOut` of them
 * are held out (never trained on), the rest form the training set.
 */
export function repairSplit(seed: number, heldOut = 12): { train: Problem[]; test: Problem[] } {
  const specs = allRepairSpecs();
  const rng = mulberry32(mix32(seed, 0x7e57));
  for (let i = specs.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [specs[i], specs[j]] = [specs[j]!, specs[i]!];
  }
  const name = (s: RepairSpec): string => `repair/${s.op === '+' ? 'add' : 'mul'}-${s.bug}-${s.fix}`;
  return {
    test: specs.slice(0, heldOut).map((s) => repairProblem(s, name(s))),
    train: specs.slice(heldOut).map((s) => repairProblem(s, name(s))),
  };
}

export function repairSpecOf(p: Problem): RepairSpec {
  const s = p.meta?.repair as RepairSpec | undefined;
  if (!s) throw new Error(`problem ${p.id} is not a repair problem`);
  return s;
}

const PROGRAM_RE = /^\s*def\s+f\s*\(\s*x\s*\)\s*:\s*(?:\n\s+)?return\s+x\s*([+*\-])\s*(\d{1,6})\s*$/;

/** Parses "def f(x): return x<op><k>"; null when the text is not such a program. */
export function parseRepairProgram(code: string): { op: string; k: number } | null {
  const m = PROGRAM_RE.exec(code);
  return m ? { op: m[1]!, k: Number(m[2]) } : null;
}

/** Feedback text for a wrong program (what the executor prints). */
export function repairFeedback(x: number, got: number, expected: number): string {
  return `f(${x}) failed: got ${got}, expected ${expected}`;
}

/** Grades programs of the demo grammar against a repair problem's tests. */
export class RepairExecutor implements Executor<Problem> {
  calls = 0;
  execute(problem: Problem, code: string): ExecResult {
    this.calls++;
    const spec = repairSpecOf(problem);
    const prog = parseRepairProgram(code);
    const inputs = REPAIR_INPUTS[spec.op];
    if (!prog) return { reward: 0, passed: false, feedback: 'SyntaxError: expected def f(x): return x<op><number>' };
    const got = (x: number): number => (prog.op === '+' ? x + prog.k : prog.op === '*' ? x * prog.k : x - prog.k);
    let passed = 0;
    let firstFail = -1;
    inputs.forEach((x, i) => {
      if (got(x) === apply(spec.op, x, spec.fix)) passed++;
      else if (firstFail < 0) firstFail = i;
    });
    if (firstFail < 0) return { reward: 1, passed: true, feedback: `All ${inputs.length} tests passed.` };
    const x = inputs[firstFail]!;
    return { reward: passed / inputs.length, passed: false, feedback: repairFeedback(x, got(x), apply(spec.op, x, spec.fix)) };
  }
}

/** The demo's code extractor: the completion text up to the end-of-turn marker, trimmed. */
export function repairExtract(text: string): string | null {
  const t = text.replace(/<\|im_end\|>[\s\S]*$/, '').trim();
  return t.length ? t : null;
}
