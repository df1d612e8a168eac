// What the training loop does differently on N ranks (lib/train/loop.ts takes it as
// TrainOptions.parallel): each rank builds the trees of a contiguous share of the step's
// problems; the trees are all-gathered, so credit, pruning, advantages (also batch-level
// scaling), the loss normaliser and the micro-batch plan are those of one process on the same
// global batch; the plan's micro-batches are dealt to ranks by tokens; their statistics are
// gathered back in plan order for the metrics. Rank 0 alone writes run files.
import { treeToJSON, deserializeTree } from '../murphy/serialize.js';
import type { RolloutTree } from '../murphy/types.js';
import type { TrainingSample } from '../murphy/flatten.js';
import { sampleTokens } from '../train/batching.js';
import type { TrainStats } from '../train/policy.js';
import { allGatherJson, allReduceNumbers, splitCounts, type Collective } from './collective.js';
import type { DistributedPolicy } from './zero.js';

/** The loop's view of data parallelism (a one-rank implementation is not needed: no parallel = one process). */
export interface StepParallel {
  readonly rank: number;
  readonly worldSize: number;
  /** This rank writes the run's files (metrics, trees, checkpoint state, manifest). */
  readonly writer: boolean;
  /** This rank's contiguous share [begin, end) of a step's n problems. */
  share(n: number): { begin: number; end: number };
  /** Every rank's trees in global order (this rank's own objects in its share). */
  gatherTrees<P>(local: RolloutTree<P>[], problems: readonly P[]): Promise<RolloutTree<P>[]>;
  /** Indices (ascending) of the plan's micro-batches this rank trains. */
  trainShare(plan: readonly (readonly TrainingSample[])[]): number[];
  /** The statistics of every micro-batch of the plan, in plan order. */
  gatherMicro(mine: { index: number; stats: TrainStats }[], n: number): Promise<TrainStats[]>;
  /** Every rank's value (JSON), in rank order. */
  gatherJson<T>(mine: T): Promise<T[]>;
  /** Element-wise sums over ranks. */
  sum(values: number[]): Promise<number[]>;
  /** True when any rank passes true (stop requests). */
  any(flag: boolean): Promise<boolean>;
  /** Ranks other than 0: their part of the checkpoint rank 0 writes; returns its directory. */
  joinCheckpoint(): Promise<string>;
}

/** Deals micro-batches (by token count, longest first) to the least-loaded rank; ties: lowest index/rank. */
export function dealMicroBatches(tokens: readonly number[], worldSize: number): number[][] {
  const order = tokens.map((t, i) => [t, i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  const load = new Array<number>(worldSize).fill(0);
  const out: number[][] = Array.from({ length: worldSize }, () => []);
  for (const [t, i] of order) {
    let r = 0;
    for (let k = 1; k < worldSize; k++) if (load[k]! < load[r]!) r = k;
    load[r]! += t;
    out[r]!.push(i);
  }
  return out.map((x) => x.sort((a, b) => a - b));
}

export class DataParallel implements StepParallel {
  constructor(
    readonly coll: Collective,
    readonly policy: DistributedPolicy,
  ) {}

  get rank(): number { return this.coll.rank; }
  get worldSize(): number { return this.coll.worldSize; }
  get writer(): boolean { return this.coll.rank === 0; }

  share(n: number): { begin: number; end: number } {
    const c = splitCounts(n, this.worldSize);
    let begin = 0;
    for (let r = 0; r < this.rank; r++) begin += c[r]!;
    return { begin, end: begin + c[this.rank]! };
  }

  async gatherTrees<P>(local: RolloutTree<P>[], problems: readonly P[]): Promise<RolloutTree<P>[]> {
    const all = await allGatherJson(this.coll, local.map((t) => treeToJSON(t)));
    const out: RolloutTree<P>[] = [];
    for (let r = 0; r < all.length; r++) {
      if (r === this.rank) out.push(...local);
      else for (const t of all[r]!) out.push(deserializeTree(t, problems[out.length]) as RolloutTree<P>);
    }
    if (out.length !== problems.length) throw new Error(`gathered ${out.length} trees for ${problems.length} problems`);
    return out;
  }

  trainShare(plan: readonly (readonly TrainingSample[])[]): number[] {
    return dealMicroBatches(plan.map((mb) => mb.reduce((a, s) => a + sampleTokens(s), 0)), this.worldSize)[this.rank]!;
  }

  async gatherMicro(mine: { index: number; stats: TrainStats }[], n: number): Promise<TrainStats[]> {
    const all = (await allGatherJson(this.coll, mine)).flat();
    const out = new Array<TrainStats>(n);
    for (const x of all) out[x.index] = x.stats;
    for (let i = 0; i < n; i++) if (out[i] === undefined) throw new Error(`micro-batch ${i} was trained by no rank`);
    return out;
  }

  gatherJson<T>(mine: T): Promise<T[]> {
    return allGatherJson(this.coll, mine);
  }

  sum(values: number[]): Promise<number[]> {
    return allReduceNumbers(this.coll, values);
  }

  async any(flag: boolean): Promise<boolean> {
    return (await allReduceNumbers(this.coll, [flag ? 1 : 0], 'max'))[0]! > 0;
  }

  joinCheckpoint(): Promise<string> {
    return this.policy.joinSave();
  }
}
