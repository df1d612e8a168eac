// The MURPHY-shaped rollout workload (issue 14's benchmark): per problem, G first attempts
// sampled from the problem prompt, then for each failed attempt G' repairs sampled from the
// whole conversation so far (prompt + attempt + feedback turn), as lib/murphy's tree builder
// and lib/prompt's ChatPromptBuilder.followUp request them. Runs through any StepExecutor: the
// reference model here (prefill accounting, no GPU), the device engine in
// bench/gpu-generate.bench.ts once it exists.
import { mix32, mulberry32 } from '../../murphy/rng.js';
import { RolloutError } from '../types.js';
import { drain, type StepExecutor } from './drive.js';
import type { PagedRequest, SampleResult, Scheduler, SchedulerMetrics } from './scheduler.js';

export interface TreeWorkloadOptions {
  /** Problems in the batch. Default 8. */
  problems?: number;
  /** G: first attempts per problem. Default 8. */
  groupSize?: number;
  /** G': repairs of each failed attempt. Default 4. */
  repairs?: number;
  /** Tokens of each problem prompt. Default 512. */
  promptTokens?: number;
  /** Tokens of every completion (max tokens, no stop token). Default 256. */
  completionTokens?: number;
  /** Feedback turn length, uniform in [min, max]. Default [200, 400]. */
  feedbackTokens?: readonly [number, number];
  /** Fraction of first attempts that fail and are repaired. Default 1 (every attempt gets its G' repairs). */
  failRate?: number;
  /** Token ids are drawn below this. Default 151,936 (Qwen3). */
  vocab?: number;
  seed?: number;
}

export const TREE_WORKLOAD_DEFAULTS = {
  problems: 8, groupSize: 8, repairs: 4, promptTokens: 512, completionTokens: 256,
  feedbackTokens: [200, 400] as const, failRate: 1, vocab: 151_936, seed: 1,
};

/** One turn's requests and, after the run, their samples. */
export interface TurnResult {
  requests: PagedRequest[];
  ids: number[];
  samples: SampleResult[][];
}

export class TreeWorkload {
  readonly o: Required<TreeWorkloadOptions>;

  constructor(o: TreeWorkloadOptions = {}) {
    this.o = { ...TREE_WORKLOAD_DEFAULTS, ...o } as Required<TreeWorkloadOptions>;
    const [lo, hi] = this.o.feedbackTokens;
    if (!(Number.isInteger(lo) && Number.isInteger(hi) && lo >= 0 && hi >= lo)) throw new RolloutError(`feedbackTokens must be [min, max] integers with 0 <= min <= max, got [${lo}, ${hi}]`);
    if (!(this.o.failRate >= 0 && this.o.failRate <= 1)) throw new RolloutError(`failRate must be in [0, 1], got ${this.o.failRate}`);
  }

  private ids(n: number, ...key: number[]): number[] {
    const r = mulberry32(mix32(this.o.seed, ...key));
    return Array.from({ length: n }, () => Math.floor(r() * this.o.vocab));
  }

  /** One request per problem: its prompt, n = G. */
  firstTurn(): PagedRequest[] {
    return Array.from({ length: this.o.problems }, (_, p) => ({
      promptIds: this.ids(this.o.promptTokens, 1, p), n: this.o.groupSize, maxTokens: this.o.completionTokens, seed: mix32(this.o.seed, 2, p),
    }));
  }

  /** For each failed first attempt: prompt + attempt + a feedback turn, n = G'. */
  repairTurn(first: TurnResult): PagedRequest[] {
    const out: PagedRequest[] = [];
    first.requests.forEach((req, p) => {
      first.samples[p].forEach((s, j) => {
        const r = mulberry32(mix32(this.o.seed, 3, p, j));
        if (r() >= this.o.failRate) return;
        const [lo, hi] = this.o.feedbackTokens;
        const feedback = this.ids(lo + Math.floor(r() * (hi - lo + 1)), 4, p, j);
        out.push({ promptIds: [...req.promptIds, ...s.tokenIds, ...feedback], n: this.o.repairs, maxTokens: this.o.completionTokens, seed: mix32(this.o.seed, 5, p, j) });
      });
    });
    return out;
  }
}

/** Submits a turn's requests, runs the scheduler until they are done, collects their samples. */
export async function runTurn(s: Scheduler, exec: StepExecutor, requests: PagedRequest[]): Promise<TurnResult> {
  const ids = requests.map((r) => s.submit(r));
  await drain(s, exec);
  const samples = ids.map((id) => s.result(id));
  for (const id of ids) s.forget(id);
  return { requests, ids, samples };
}

export interface TreeRun {
  first: TurnResult;
  repair: TurnResult;
  metrics: SchedulerMetrics;
}

/** Both turns of the workload on one scheduler (its prefix cache carries over from the first turn to the repairs). */
export async function runTreeWorkload(w: TreeWorkload, s: Scheduler, exec: StepExecutor): Promise<TreeRun> {
  const first = await runTurn(s, exec, w.firstTurn());
  const repair = await runTurn(s, exec, w.repairTurn(first));
  return { first, repair, metrics: { ...s.metrics } };
}
