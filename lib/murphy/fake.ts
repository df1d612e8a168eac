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
 * results never depend on call order. Completion text is "```python\n# fake k/T\n```",
 * which FakeExecutor grades as k of T tests passed.
 */
export class FakeSampler implements Sampler {
  calls = 0;
  private readonly passProb: number[];
  private readonly tests: number;
  private readonly len: number;
  private readonly withLogprobs: boolean;
  private readonly noCodeEvery: number;
  private readonly texts: string[];

  constructor(options: FakeSamplerOptions = {}) {
    this.passProb = options.passProbByTurn ?? [0.4, 0.3];
    this.tests = options.tests ?? 4;
    this.len = options.completionTokens ?? 8;
    this.withLogprobs = options.logprobs ?? true;
    this.noCodeEvery = options.noCodeEvery ?? 0;
    this.texts = Array.from({ length: this.tests + 1 }, (_, k) => `\`\`\`python\n# fake ${k}/${this.tests}\n\`\`\``);
  }

  generate(promptIds: number[], n: number, params: SampleParams): Completion[] {
    this.calls++;
    let turn = 1;
    for (let i = 0; i < promptIds.length; i++) if (promptIds[i] === FAKE_FEEDBACK_TOKEN) turn++;
    const p = this.passProb[Math.min(turn, this.passProb.length) - 1] ?? 0;
    const rng = mulberry32(params.seed !== undefined ? mix32(params.seed, promptIds.length) : hashIds(promptIds));
    const out: Completion[] = new Array(n);
    for (let j = 0; j < n; j++) {
      const k = rng() < p ? this.tests : Math.floor(rng() * this.tests);
      const tokenIds = new Array<number>(this.len + 1);
      const logprobs = this.withLogprobs ? new Array<number>(this.len + 1) : undefined;
      for (let i = 0; i < this.len; i++) {
        tokenIds[i] = 10 + ((rng() * 50000) | 0);
        if (logprobs) logprobs[i] = -rng();
      }
      tokenIds[this.len] = FAKE_EOS_TOKEN;
      if (logprobs) logprobs[this.len] = -0.01;
      const noCode = this.noCodeEvery > 0 && (j + 1) % this.noCodeEvery === 0;
      const c: Completion = { tokenIds, text: noCode ? 'I am not sure how to solve this.' : this.texts[k]!, finishReason: 'stop' };
      if (logprobs) c.logprobs = logprobs;
      out[j] = c;
    }
    return out;
  }
}

const FAKE_RE = /# fake (\d+)\/(\d+)/;

/** Grades FakeSampler's completions: "# fake k/T" → reward k/T, passed when k = T. */
export class FakeExecutor implements Executor<unknown> {
  calls = 0;
  execute(_problem: unknown, code: string): ExecResult {
    this.calls++;
    const m = FAKE_RE.exec(code);
    if (!m) return { reward: 0, passed: false, feedback: 'SyntaxError: invalid syntax' };
    const k = Number(m[1]);
    const T = Number(m[2]);
    if (k >= T) return { reward: 1, passed: true, feedback: `All ${T} tests passed.` };
    return { reward: k / T, passed: false, feedback: `Failed ${T - k} of ${T} tests: AssertionError` };
  }
}

/** Async wrappers (a microtask each), to exercise the builder's Promise paths. */
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
    const ids = ctx.promptIds.concat(ctx.node.completionIds);
    ids.push(FAKE_FEEDBACK_TOKEN);
    const rng = mulberry32(mix32(ctx.feedback.length, ctx.node.id));
    for (let i = 0; i < this.feedbackTokens; i++) ids.push(10 + ((rng() * 50000) | 0));
    return ids;
  }
}
