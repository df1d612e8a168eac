// Deterministic stand-ins for the sampler, executor and prompt builder: for tests, the
// benchmark and demos without a model. Token ids are synthetic (no tokenizer involved).

import { hashIds, mix32, mulberry32 } from './rng.js';
import type { Completion, ExecResult, Executor, FollowUpContext, PromptBuilder, SampleParams, Sampler } from './types.js';

/** Synthetic special ids used by the fakes. */
export const FAKE_FEEDBACK_TOKEN = 1;
export const FAKE_TASK_TOKEN = 2;
export const FAKE_EOS_TOKEN = 3;

export interface FakeSamplerOptions {
  /** Probability that a completion passes every test, by turn (last value repeats). Default [0.4, 0.3]. */
  passProbByTurn?: number[];
  /** Tests per problem. Default 4. */
  tests?: number;
  /** Content tokens per completion (an EOS token is appended). Default 8. */
  completionTokens?: number;
  /** Attach synthetic logprobs. Default true. */
  logprobs?: boolean;
  /** Every `noCodeEvery`-th completion (per call) has no code block; 0 = never. Default 0. */
  noCodeEvery?: number;

}

/**
 * A seeded fake sampler. The turn is read from the prompt (number of FAKE_FEEDBACK_TOKEN
 * markers + 1); randomness comes from params.seed, else from a hash of the prompt ids, so
 * results never depend on call order. Completion text is a python block containing
 * "# fake k/T", which FakeExecutor grades as k of T tests passed.
 */
export class FakeSampler implements Sampler {
  calls = 0;
  private readonly passProb: number[];
  private readonly tests: number;
  private readonly len: number;
  private readonly withLogprobs: boolean;
  private readonly noCodeEvery: number;
  /** texts[k][v]: a short answer graded k/T, variant v (POOL variants per grade). */
  private readonly texts: string[][];
  private readonly pool: number[][] = [];
  private readonly lpPool: number[][] = [];

  constructor(options: FakeSamplerOptions = {}) {
    this.passProb = options.passProbByTurn ?? [0.4, 0.3];
    this.tests = options.tests ?? 4;
    this.len = options.completionTokens ?? 8;
    this.withLogprobs = options.logprobs ?? true;
    this.noCodeEvery = options.noCodeEvery ?? 0;
    // Flat (JSON round-tripped) strings, like the ones a backend's JSON reply gives.
    this.texts = Array.from({ length: this.tests + 1 }, (_, k) =>
      Array.from({ length: POOL }, (_, v) =>
        JSON.parse(
          JSON.stringify(
            `Here is my solution:\n\n\`\`\`python\ndef solve(xs):\n    # fake ${k}/${this.tests}\n    return sorted(xs)[:${v}]\n\`\`\`\n\nIt sorts the list and keeps the first ${v} items.`,
          ),
        ) as string,
      ),
    );
    const rng = mulberry32(12345);
    for (let v = 0; v < POOL; v++) {
      const ids = Array.from({ length: this.len }, () => 10 + ((rng() * 50000) | 0));
      ids.push(FAKE_EOS_TOKEN);
      this.pool.push(ids);
      this.lpPool.push(ids.map(() => -rng()));
    }
  }

  /**
   * Token ids, logprobs and texts come from fixed pools (POOL variants, shared between
   * completions; callers must not mutate them), so the fake costs a few random draws per
   * completion and the benchmark measures the tree code, not the fake.
   */
  async generate(promptIds: number[], n: number, params: SampleParams): Promise<Completion[]> {
    this.calls++;
    let turn = 1;
    for (let i = 0; i < promptIds.length; i++) if (promptIds[i] === FAKE_FEEDBACK_TOKEN) turn++;
    const p = this.passProb[Math.min(turn, this.passProb.length) - 1] ?? 0;
    const rng = mulberry32(params.seed !== undefined ? mix32(params.seed, promptIds.length) : hashIds(promptIds));
    const out: Completion[] = new Array(n);
    for (let j = 0; j < n; j++) {
      const k = rng() < p ? this.tests : Math.floor(rng() * this.tests);
      const v = (rng() * POOL) | 0;
      const noCode = this.noCodeEvery > 0 && (j + 1) % this.noCodeEvery === 0;
      out[j] = {
        tokenIds: this.pool[v]!,
        logprobs: this.withLogprobs ? this.lpPool[v]! : undefined,
        text: noCode ? 'I am not sure how to solve this.' : this.texts[k]![v]!,
        finishReason: 'stop',
      };
    }
    return out;
  }
}

const POOL = 64;

const FAKE_RE = /# fake (\d+)\/(\d+)/;

/** Grades FakeSampler's completions: "# fake k/T" → reward k/T, passed when k = T. */
export class FakeExecutor implements Executor<unknown> {
  calls = 0;
  async execute(_problem: unknown, code: string): Promise<ExecResult> {
    this.calls++;
    return this.grade(code);
  }

  // One immutable result per (k, T), shared by every execution with that grade.
  private readonly graded = new Map<number, ExecResult>();
  private static readonly SYNTAX: ExecResult = Object.freeze({ reward: 0, passed: false, feedback: 'SyntaxError: invalid syntax' });

  private grade(code: string): ExecResult {
    const m = FAKE_RE.exec(code);
    if (!m) return FakeExecutor.SYNTAX;
    const k = Number(m[1]);
    const T = Number(m[2]);
    const key = k * 65536 + T;
    let r = this.graded.get(key);
    if (r === undefined) {
      r = Object.freeze(
        k >= T
          ? { reward: 1, passed: true, feedback: `All ${T} tests passed.` }
          : { reward: k / T, passed: false, feedback: `Failed ${T - k} of ${T} tests: AssertionError` },
      );
      this.graded.set(key, r);
    }
    return r;
  }
}

/** Wrappers that answer after a delay (ms, from the input), to shuffle completion order. */
export function asyncSampler(s: Sampler, delay?: (promptIds: number[]) => number): Sampler {
  return {
    generate: async (ids, n, params) => {
      const d = delay?.(ids) ?? 0;
      if (d > 0) await new Promise((r) => setTimeout(r, d));
      return s.generate(ids, n, params);
    },
  };
}

export function asyncExecutor<P>(e: Executor<P>, delay?: (code: string) => number): Executor<P> {
  return {
    execute: async (p, code) => {
      const d = delay?.(code) ?? 0;
      if (d > 0) await new Promise((r) => setTimeout(r, d));
      return e.execute(p, code);
    },
  };
}

/**
 * Token-level prompt builder without a tokenizer: turn-1 prompt = [FAKE_TASK_TOKEN, ...taskTokens
 * derived from the problem]; follow-up = previous prompt + completion + [FAKE_FEEDBACK_TOKEN,
 * ...feedbackTokens]. Reuses earlier ids exactly, like the real ChatPromptBuilder.
 */
export class FakePromptBuilder implements PromptBuilder<unknown> {
  constructor(
    private readonly taskTokens = 16,
    private readonly feedbackTokens = 6,
  ) {}

  initial(problem: unknown): number[] {
    const rng = mulberry32(hashIds(Array.from(String(JSON.stringify(problem)), (ch) => ch.charCodeAt(0))));
    const ids = [FAKE_TASK_TOKEN];
    for (let i = 0; i < this.taskTokens; i++) ids.push(10 + ((rng() * 50000) | 0));
    return ids;
  }

  followUp(ctx: FollowUpContext<unknown>): number[] {
    const p = ctx.promptIds;
    const c = ctx.node.completionIds;
    const ids = new Array<number>(p.length + c.length + 1 + this.feedbackTokens);
    let k = 0;
    for (let i = 0; i < p.length; i++) ids[k++] = p[i]!;
    for (let i = 0; i < c.length; i++) ids[k++] = c[i]!;
    ids[k++] = FAKE_FEEDBACK_TOKEN;
    const rng = mulberry32(mix32(ctx.feedback.length, ctx.node.id));
    for (let i = 0; i < this.feedbackTokens; i++) ids[k++] = 10 + ((rng() * 50000) | 0);
    return ids;
  }
}
