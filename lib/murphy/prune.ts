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

// Scratch buffers reused across calls (single-threaded).
let sOrder = new Int32Array(64);
let sPs = new Float64Array(65);
let sPq = new Float64Array(65);

function ensureScratch(n: number): void {
  if (sOrder.length >= n) return;
  const cap = Math.max(n, sOrder.length * 2);
  sOrder = new Int32Array(cap);
  sPs = new Float64Array(cap + 1);
  sPq = new Float64Array(cap + 1);
}

/**
 * Core of maxVarianceSubset over values[0..n): writes keep[i] = 1 for the chosen indices
 * (keep must have length >= n and be zeroed by the caller). Values must be finite, 1 <= m < n.
 */
function markMaxVariance(values: ArrayLike<number>, n: number, m: number, keep: Uint8Array): void {
  ensureScratch(n);
  const order = sOrder;
  // Stable insertion sort by value (index order among ties): groups are small.
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    let j = i - 1;
    while (j >= 0 && values[order[j]!]! > v) {
      order[j + 1] = order[j]!;
      j--;
    }
    order[j + 1] = i;
  }
  // Prefix sums over the sorted values, centred on the overall mean for numerical stability.
  let c = 0;
  for (let i = 0; i < n; i++) c += values[i]!;
  c /= n;
  const ps = sPs;
  const pq = sPq;
  ps[0] = 0;
  pq[0] = 0;
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
  for (let i = 0; i < lo; i++) keep[order[i]!] = 1;
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
    for (let i = from; i < from + (be - hi); i++) keep[order[i]!] = 1;
    for (let i = be; i < n; i++) keep[order[i]!] = 1;
  }
}

/**
 * Max-variance down-sampling: indices (ascending) of m values whose variance is maximal.
 * Sort ascending; for k = 0..m take the k highest and the m - k lowest; keep the best k
 * (smallest k on ties, lower index first among equal values). Optimal: see docs/method.md §4.
 */
export function maxVarianceSubset(values: readonly number[], m: number): number[] {
  const n = values.length;
  if (!Number.isInteger(m) || m < 0) throw new MurphyError(`m must be an integer >= 0, got ${String(m)}`);
  for (let i = 0; i < n; i++) {
    if (!Number.isFinite(values[i])) throw new MurphyError(`maxVarianceSubset: value ${i} is ${String(values[i])}`);
  }
  if (m >= n) return Array.from({ length: n }, (_, i) => i);
  if (m === 0) return [];
  const keep = new Uint8Array(n);
  markMaxVariance(values, n, m, keep);
  const picked: number[] = [];
  for (let i = 0; i < n; i++) if (keep[i]) picked.push(i);
  return picked;
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
  /** m: samples kept per group (>= 2: a group of one has advantage 0, so m = 1 would leave no training signal). */
  keep: number;
}

/**
 * IntraP, in place: in every non-pruned group with more than m kept members, keep the m
 * whose credit has maximal variance; mark the rest pruned ('intra'). Needs credit.
 */
export function intraPrune(trees: readonly RolloutTree<unknown>[], options: IntraPOptions): PruneReport {
  const m = options?.keep;
  if (typeof m !== 'number' || !Number.isInteger(m) || m < 2) {
    throw new MurphyError(`IntraP keep (m) must be an integer >= 2, got ${String(m)} (one sample per group has advantage 0: nothing to train on)`);
  }
  const report = emptyReport();
  let live: number[] = [];
  let vals = new Float64Array(64);
  let keep = new Uint8Array(64);
  for (const t of trees) {
    const nodes = t.nodes;
    for (const g of t.groups) {
      if (g.pruned || g.nodes.length <= m) continue;
      live.length = 0;
      for (const id of g.nodes) if (!nodes[id]!.pruned) live.push(id);
      const n = live.length;
      if (n <= m) continue;
      if (vals.length < n) {
        vals = new Float64Array(2 * n);
        keep = new Uint8Array(2 * n);
      }
      for (let i = 0; i < n; i++) {
        const c = nodes[live[i]!]!.credit;
        if (!Number.isFinite(c)) throw new MurphyError(`tree ${t.problemId}: node ${live[i]} has credit ${String(c)}; assign credit first`);
        vals[i] = c;
        keep[i] = 0;
      }
      markMaxVariance(vals, n, m, keep);
      for (let i = 0; i < n; i++) {
        if (keep[i]) continue;
        const node = nodes[live[i]!]!;
        node.pruned = true;
        node.prunedBy = 'intra';
        report.samples++;
        report.completionTokens += node.completionIds.length;
        report.promptTokens += g.promptIds.length;
      }
    }
  }
  live = [];
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
  const nodes = tree.nodes;
  const ids = group.nodes;
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (let i = 0; i < ids.length; i++) {
    const v = nodes[ids[i]!]!.credit;
    if (!Number.isFinite(v)) throw new MurphyError(`tree ${tree.problemId}: group ${group.id} has unassigned credit`);
    if (v < min) min = v;
    if (v > max) max = v;
    sum += v;
  }
  if (ids.length === 0 || max - min <= ZERO_VARIANCE_TOL) return 0;
  const mean = sum / ids.length;
  let ss = 0;
  for (let i = 0; i < ids.length; i++) {
    const d = nodes[ids[i]!]!.credit - mean;
    ss += d * d;
  }
  return Math.sqrt(ss / ids.length);
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
  const needBatch = perBatch !== Infinity;
  for (const tree of trees) {
    let expanded = 0;
    for (const group of tree.groups) if (group.parent !== null && !group.pruned) expanded++;
    // Nothing to decide for this tree: skip ranking it.
    if (expanded <= perProblem && !options.dropZeroVariance && !needBatch) continue;
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
