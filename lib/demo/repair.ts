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
//     user:      assert g(1) == 1*7 failed: got 8
//
// shows the first failing assert, as a test runner does, and so carries what a fix needs. A model that learns to
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
    tests: { kind: 'assert', asserts: REPAIR_INPUTS.map((x) => repairAssert(spec, x)) },
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

/** One test, written as the expression it checks (as a test file would). */
export function repairAssert(spec: RepairSpec, x: number): string {
  return `assert ${spec.name}(${x}) == ${x}${spec.op}${spec.k}`;
}

/** Feedback lines for failed tests (what the executor prints: the assert, then what the call returned). */
export function repairFeedback(spec: RepairSpec, failed: { x: number; got: number }[]): string {
  return failed.map((f) => `${repairAssert(spec, f.x)} failed: got ${f.got}`).join('\n');
}

/**
 * Failing tests described in the feedback, at most: the first one, as a test runner that stops
 * at the first failure prints it. It carries all a fix needs (the expected expression), and
 * a second line only made the turn-2 prompt a third longer (every sample trains its prompt).
 */
export const REPAIR_MAX_FAILURES = 1;

/** Grades programs of the demo grammar against a repair problem's tests. */
export class RepairExecutor implements Executor<Problem> {
  calls = 0;
  async execute(problem: Problem, code: string): Promise<ExecResult> {
    return this.grade(problem, code);
  }

  /** The result of running `code` on the problem's tests, synchronously. */
  grade(problem: Problem, code: string): ExecResult {
    this.calls++;
    const spec = repairSpecOf(problem);
    const prog = parseRepairProgram(code);
    if (!prog) return { reward: 0, passed: false, feedback: 'SyntaxError: expected def NAME(x): return x<op><number>' };
    if (prog.name !== spec.name) return { reward: 0, passed: false, feedback: `NameError: name '${spec.name}' is not defined` };
    const failed: { x: number; got: number }[] = [];
    for (const x of REPAIR_INPUTS) {
      const got = apply(prog.op, x, prog.k);
      if (got !== apply(spec.op, x, spec.k)) failed.push({ x, got });
    }
    if (failed.length === 0) return { reward: 1, passed: true, feedback: `All ${REPAIR_INPUTS.length} tests passed.` };
    const reward = (REPAIR_INPUTS.length - failed.length) / REPAIR_INPUTS.length;
    return { reward, passed: false, feedback: repairFeedback(spec, failed.slice(0, REPAIR_MAX_FAILURES)) };
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
