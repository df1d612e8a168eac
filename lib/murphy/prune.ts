// Pruning after rollouts, before the update (docs/method.md §4): IntraP and InterP.

import { ZERO_VARIANCE_TOL } from './advantage.js';
import { MurphyError, type Group, type RolloutTree } from './types.js';

/** Population variance of the values at the given indices. */
export function subsetVariance(values: readonly number[], indices: readonly number[]): number {
  const m = indices.length;
  if (m === 0) return 0;
  let s = 0;
  for (const i of indices) s += values[i]!;
  const mean = s / m;
  let ss = 0;
  for (const i of indices) {
    const d = values[i]! - mean;
    ss += d * d;
  }
  return ss / m;
}

/**
 * Max-variance down-sampling: indices (ascending) of m values whose variance is maximal.
 * Sort ascending; for k = 0..m take the k highest and the m - k lowest; keep the best k
 * (smallest k on ties, lower index first among equal values). Optimal: see docs/method.md §4.
 * O(n log n).
 */
export function maxVarianceSubset(values: readonly number[], m: number): number[] {
  const n = values.length;
  if (!Number.isInteger(m) || m < 0) throw new MurphyError(`m must be an integer >= 0, got ${String(m)}`);
  for (let i = 0; i < n; i++) {
    if (!Number.isFinite(values[i])) throw new MurphyError(`maxVarianceSubset: value ${i} is ${String(values[i])}`);
  }
  if (m >= n) return Array.from({ length: n }, (_, i) => i);
  if (m === 0) return [];
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => values[a]! - values[b]! || a - b);
  // Prefix sums over the sorted values, centred on the overall mean for numerical stability.
  let c = 0;
  for (const v of values) c += v;
  c /= n;
  const ps = new Float64Array(n + 1);
  const pq = new Float64Array(n + 1);
  for (let i = 0; i < n; i++) {
    const v = values[order[i]!]! - c;
    ps[i + 1] = ps[i]! + v;
    pq[i + 1] = pq[i]! + v * v;
  }
  let bestK = 0;
  let bestVar = -Infinity;
  for (let k = 0; k <= m; k++) {
    const lo = m - k; // lowest lo values: sorted [0, lo); highest k: sorted [n - k, n)
    const s = ps[lo]! + (ps[n]! - ps[n - k]!);
    const q = pq[lo]! + (pq[n]! - pq[n - k]!);
    const v = q / m - (s / m) * (s / m);
    if (v > bestVar + 1e-12) {
      bestVar = v;
      bestK = k;
    }
  }
  const lo = m - bestK;
  const picked: number[] = [];
  for (let i = 0; i < lo; i++) picked.push(order[i]!);
  if (bestK > 0) {
    // Highest bestK, preferring lower indices among equal values: the tie block at the
    // boundary is taken from its start (after any members the low side already took).
    const hi = n - bestK;
    const v = values[order[hi]!]!;
    let bs = hi;
    while (bs > 0 && values[order[bs - 1]!]! === v) bs--;
    let be = hi;
    while (be < n && values[order[be]!]! === v) be++;
    const from = Math.max(lo, bs);
    for (let i = from; i < from + (be - hi); i++) picked.push(order[i]!);
    for (let i = be; i < n; i++) picked.push(order[i]!);
  }
  return picked.sort((a, b) => a - b);
}

/** Samples and tokens removed by one pruning pass. */
export interface PruneReport {
  /** Groups dropped whole (InterP). */
  groups: number;
  samples: number;
  completionTokens: number;
  /** Prompt tokens of the dropped samples (each sample carries its prompt into training). */
  promptTokens: number;
}

function emptyReport(): PruneReport {
  return { groups: 0, samples: 0, completionTokens: 0, promptTokens: 0 };
}

export interface IntraPOptions {
  /** m: samples kept per group (>= 1). */
  keep: number;
}

/**
 * IntraP, in place: in every non-pruned group with more than m kept members, keep the m
 * whose credit has maximal variance; mark the rest pruned ('intra'). Needs credit.
 */
export function intraPrune(trees: readonly RolloutTree<unknown>[], options: IntraPOptions): PruneReport {
  const m = options?.keep;
  if (typeof m !== 'number' || !Number.isInteger(m) || m < 1) throw new MurphyError(`IntraP keep (m) must be an integer >= 1, got ${String(m)}`);
  const report = emptyReport();
  for (const t of trees) {
    for (const g of t.groups) {
      if (g.pruned) continue;
      const live = g.nodes.filter((id) => !t.nodes[id]!.pruned);
      if (live.length <= m) continue;
      const vals = live.map((id) => {
        const c = t.nodes[id]!.credit;
        if (!Number.isFinite(c)) throw new MurphyError(`tree ${t.problemId}: node ${id} has credit ${String(c)}; assign credit first`);
        return c;
      });
      const keep = new Set(maxVarianceSubset(vals, m));
      for (let i = 0; i < live.length; i++) {
        if (keep.has(i)) continue;
        const n = t.nodes[live[i]!]!;
        n.pruned = true;
        n.prunedBy = 'intra';
        report.samples++;
        report.completionTokens += n.completionIds.length;
        report.promptTokens += g.promptIds.length;
      }
    }
  }
  return report;
}

export interface InterPOptions {
  /** b: expanded (turn >= 2) groups kept per problem. Default: no limit. */
  perProblem?: number;
  /** Expanded groups kept per batch (all trees given). Default: no limit. */
  perBatch?: number;
  /** Also drop every zero-variance expanded group, whatever the budget. Default false. */
  dropZeroVariance?: boolean;
}

/** Reward spread of a group, used to rank groups for InterP: population std of its members' credit. */
export function groupSpread(tree: RolloutTree<unknown>, group: Group): number {
  const vals = group.nodes.map((id) => tree.nodes[id]!.credit);
  let min = Infinity;
  let max = -Infinity;
  for (const v of vals) {
    if (!Number.isFinite(v)) throw new MurphyError(`tree ${tree.problemId}: group ${group.id} has unassigned credit`);
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (max - min <= ZERO_VARIANCE_TOL) return 0;
  return Math.sqrt(subsetVariance(vals, vals.map((_, i) => i)));
}

interface Ranked {
  tree: RolloutTree<unknown>;
  group: Group;
  spread: number;
  order: number;
}

function rank(a: Ranked, b: Ranked): number {
  // Highest spread first; ties: shallower turn first, then original order.
  return b.spread - a.spread || a.group.turn - b.group.turn || a.order - b.order;
}

function dropGroup(r: Ranked, report: PruneReport): void {
  const { tree, group } = r;
  group.pruned = true;
  report.groups++;
  for (const id of group.nodes) {
    const n = tree.nodes[id]!;
    if (n.pruned) continue;
    n.pruned = true;
    n.prunedBy = 'inter';
    report.samples++;
    report.completionTokens += n.completionIds.length;
    report.promptTokens += group.promptIds.length;
  }
}

function checkBudget(name: string, v: number | undefined): number {
  if (v === undefined) return Infinity;
  if (typeof v !== 'number' || !(Number.isInteger(v) || v === Infinity) || v < 0) {
    throw new MurphyError(`InterP ${name} must be an integer >= 0, got ${String(v)}`);
  }
  return v;
}

/**
 * InterP, in place: keep at most `perProblem` expanded groups per tree and `perBatch` over
 * all trees, ranked by reward spread (population std of credit, highest kept; zero-variance
 * groups go first). The turn-1 group is never dropped. Needs credit.
 */
export function interPrune(trees: readonly RolloutTree<unknown>[], options: InterPOptions = {}): PruneReport {
  const perProblem = checkBudget('perProblem', options.perProblem);
  const perBatch = checkBudget('perBatch', options.perBatch);
  const report = emptyReport();
  const survivors: Ranked[] = [];
  let order = 0;
  for (const tree of trees) {
    const ranked: Ranked[] = [];
    for (const group of tree.groups) {
      if (group.parent === null || group.pruned) continue;
      ranked.push({ tree, group, spread: groupSpread(tree, group), order: order++ });
    }
    ranked.sort(rank);
    for (let i = 0; i < ranked.length; i++) {
      const r = ranked[i]!;
      if (i >= perProblem || (options.dropZeroVariance && r.spread <= 0)) dropGroup(r, report);
      else survivors.push(r);
    }
  }
  if (perBatch < survivors.length) {
    survivors.sort(rank);
    for (let i = perBatch; i < survivors.length; i++) dropGroup(survivors[i]!, report);
  }
  return report;
}
