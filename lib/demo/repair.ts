// The built-in synthetic code-repair task family of the CPU demo.
//
// Each problem shows a one-line Python function whose operator is missing; the answer is
// the operator, which completes the program:
//
//     user:      fill ?: def g(x): return x?7
//     assistant: *                               (+ or *: the task does not say which)
//
// The tests (g(1) == 7, g(3) == 21, ...) are hidden, so a first attempt can only guess; the
// executor's feedback on a wrong attempt,
//
//     user:      g(1) failed: got 8, expected 7
//
// carries what a fix needs (the values rule out the operator tried). A model that learns to
// act on its feedback solves at turn 2 what it could not at turn 1: the point of MURPHY, and
// something single-turn GRPO cannot learn. Programs are graded by a small interpreter for
// this one-line grammar (no Python needed); the problems also carry equivalent assert tests,
// so the Python executor grades them identically.
import type { Problem } from '../data/types.js';
import type { ExecResult, Executor } from '../murphy/types.js';
import { mix32, mulberry32 } from '../murphy/rng.js';

export type RepairOp = '+' | '*';

export interface RepairSpec {
  /** Function name. */
  name: string;
  /** The operator the tests expect (hidden from the task). */
  op: RepairOp;
  /** The constant (shown in the task). */
  k: number;
}

/** Test inputs. */
export const REPAIR_INPUTS = [1, 3, 4, 5];
export const REPAIR_NAMES = ['f', 'g', 'h', 'p', 'q'];
const CONSTANTS = [2, 3, 4, 5, 6, 7, 8, 9];

function apply(op: string, x: number, k: number): number {
  return op === '+' ? x + k : op === '*' ? x * k : x - k;
}

export function repairProgram(name: string, op: string, k: number): string {
  return `def ${name}(x): return x${op}${k}`;
}

/** Every (name, op, k): 5 x 2 x 8 = 80. */
export function allRepairSpecs(): RepairSpec[] {
  const out: RepairSpec[] = [];
  for (const name of REPAIR_NAMES) for (const op of ['+', '*'] as const) for (const k of CONSTANTS) out.push({ name, op, k });
  return out;
}

export function repairProblem(spec: RepairSpec, id: string): Problem {
  return {
    id,
    source: 'jsonl',
    prompt: `fill ?: def ${spec.name}(x): return x?${spec.k}`,
    promptStyle: 'instruction',
    entryPoint: spec.name,
    tests: { kind: 'assert', asserts: REPAIR_INPUTS.map((x) => `assert ${spec.name}(${x}) == ${apply(spec.op, x, spec.k)}`) },
    visibleTests: REPAIR_INPUTS.map((_, i) => i),
    referenceSolution: repairProgram(spec.name, spec.op, spec.k),
    meta: { repair: spec },
  };
}

/**
 * Train and held-out problems: the 80 (name, op, k) triples are shuffled with the seed;
 * `heldOut` of them are held out (never trained on), the rest form the training set.
 */
export function repairSplit(seed: number, heldOut = 24): { train: Problem[]; test: Problem[] } {
  const specs = allRepairSpecs();
  const rng = mulberry32(mix32(seed, 0x7e57));
  for (let i = specs.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [specs[i], specs[j]] = [specs[j]!, specs[i]!];
  }
  const id = (s: RepairSpec): string => `repair/${s.name}-${s.op === '+' ? 'add' : 'mul'}-${s.k}`;
  return {
    test: specs.slice(0, heldOut).map((s) => repairProblem(s, id(s))),
    train: specs.slice(heldOut).map((s) => repairProblem(s, id(s))),
  };
}

export function repairSpecOf(p: Problem): RepairSpec {
  const s = p.meta?.repair as RepairSpec | undefined;
  if (!s) throw new Error(`problem ${p.id} is not a repair problem`);
  return s;
}

const PROGRAM_RE = /^\s*def\s+([a-z_]\w*)\s*\(\s*x\s*\)\s*:\s*(?:\n\s+)?return\s+x\s*([+*\-])\s*(\d{1,6})\s*$/;

/** Parses "def NAME(x): return x<op><k>"; null when the text is not such a program. */
export function parseRepairProgram(code: string): { name: string; op: string; k: number } | null {
  const m = PROGRAM_RE.exec(code);
  return m ? { name: m[1]!, op: m[2]!, k: Number(m[3]) } : null;
}

/** Feedback text for a failed test (what the executor prints). */
export function repairFeedback(name: string, x: number, got: number, expected: number): string {
  return `${name}(${x}) failed: got ${got}, expected ${expected}`;
}

/** Grades programs of the demo grammar against a repair problem's tests. */
export class RepairExecutor implements Executor<Problem> {
  calls = 0;
  execute(problem: Problem, code: string): ExecResult {
    this.calls++;
    const spec = repairSpecOf(problem);
    const prog = parseRepairProgram(code);
    if (!prog) return { reward: 0, passed: false, feedback: 'SyntaxError: expected def NAME(x): return x<op><number>' };
    if (prog.name !== spec.name) return { reward: 0, passed: false, feedback: `NameError: name '${spec.name}' is not defined` };
    let passed = 0;
    let firstFail = -1;
    REPAIR_INPUTS.forEach((x, i) => {
      if (apply(prog.op, x, prog.k) === apply(spec.op, x, spec.k)) passed++;
      else if (firstFail < 0) firstFail = i;
    });
    if (firstFail < 0) return { reward: 1, passed: true, feedback: `All ${REPAIR_INPUTS.length} tests passed.` };
    const x = REPAIR_INPUTS[firstFail]!;
    return { reward: passed / REPAIR_INPUTS.length, passed: false, feedback: repairFeedback(spec.name, x, apply(prog.op, x, prog.k), apply(spec.op, x, spec.k)) };
  }
}

/**
 * The demo's code extractor: an answer that is one operator completes the task's program;
 * a whole program is taken as it is; anything else has no code.
 */
export function repairExtract(text: string, problem?: Problem): string | null {
  const t = text.replace(/<\|im_end\|>[\s\S]*$/, '').trim();
  if (t.length === 0) return null;
  if (/^[+*\-]$/.test(t) && problem) {
    const s = repairSpecOf(problem);
    return repairProgram(s.name, t, s.k);
  }
  return t;
}
