// GRPO group advantages (docs/method.md §3).

import { MurphyError, type RolloutTree } from './types.js';

/** How the centred credit is scaled, as TRL's scale_rewards: by the group's std, the batch's std, or not at all. */
export type RewardScaling = 'group' | 'batch' | 'none';

export interface AdvantageOptions {
  /** Default 'group'. */
  scale?: RewardScaling;
  /** Added to the std before dividing. Default 1e-4 (TRL's value). */
  eps?: number;
}

export interface AdvantageReport {
  /** Groups with at least one kept member. */
  groups: number;
  /** Groups whose kept members all have the same credit (advantages 0). */
  zeroVarianceGroups: number;
  /** Kept samples that received an advantage. */
  samples: number;
  /** The batch std used when scale = 'batch' (NaN otherwise). */
  batchStd: number;
}

/** Spread below which a group counts as zero-variance. */
export const ZERO_VARIANCE_TOL = 1e-12;

/** Unbiased (n - 1) standard deviation, as torch.std; 0 for fewer than two values. */
export function sampleStd(values: ArrayLike<number>): number {
  const n = values.length;
  if (n < 2) return 0;
  let mean = 0;
  for (let i = 0; i < n; i++) mean += values[i]!;
  mean /= n;
  let ss = 0;
  for (let i = 0; i < n; i++) {
    const d = values[i]! - mean;
    ss += d * d;
  }
  return Math.sqrt(ss / (n - 1));
}

function checkFinite(values: ArrayLike<number>, what: string): void {
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i])) throw new MurphyError(`${what}: value ${i} is ${String(values[i])} (credit not assigned?)`);
  }
}

/**
 * Advantages of one group: (R - mean) / (std + eps) where std is the group's unbiased std
 * ('group'), the given batch std ('batch' via a number), or 1 - eps, i.e. no scaling ('none').
 * A zero-variance group gets exact zeros.
 */
export function groupAdvantages(values: readonly number[], scale: RewardScaling | number = 'group', eps = 1e-4): number[] {
  checkFinite(values, 'groupAdvantages');
  const n = values.length;
  const out = new Array<number>(n).fill(0);
  if (n === 0) return out;
  let min = Infinity;
  let max = -Infinity;
  let mean = 0;
  for (const v of values) {
    mean += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (max - min <= ZERO_VARIANCE_TOL) return out;
  mean /= n;
  let denom: number;
  if (scale === 'none') denom = 1;
  else if (scale === 'group') denom = sampleStd(values) + eps;
  else if (typeof scale === 'number') denom = scale + eps;
  else throw new MurphyError(`scale must be 'group', 'batch' or 'none', got ${String(scale)}`);
  for (let i = 0; i < n; i++) out[i] = (values[i]! - mean) / denom;
  return out;
}

/**
 * Computes advantages in place for every kept node of every tree (one GRPO group = the kept
 * members of one non-pruned group). Pruned nodes get advantage 0. Call after credit and
 * pruning. With scale = 'batch' the std is taken over the credit of all kept nodes of all
 * given trees.
 */
export function computeAdvantages(trees: readonly RolloutTree<unknown>[], options: AdvantageOptions = {}): AdvantageReport {
  const scale = options.scale ?? 'group';
  const eps = options.eps ?? 1e-4;
  if (scale !== 'group' && scale !== 'batch' && scale !== 'none') {
    throw new MurphyError(`scale must be 'group', 'batch' or 'none', got ${String(scale)}`);
  }
  if (typeof eps !== 'number' || !(eps >= 0) || !Number.isFinite(eps)) throw new MurphyError(`eps must be a finite number >= 0, got ${String(eps)}`);
  let batchStd = NaN;
  if (scale === 'batch') {
    const all: number[] = [];
    for (const t of trees) for (const n of t.nodes) if (!n.pruned) all.push(n.credit);
    checkFinite(all, 'computeAdvantages');
    batchStd = sampleStd(all);
  }
  const report: AdvantageReport = { groups: 0, zeroVarianceGroups: 0, samples: 0, batchStd };
  for (const t of trees) {
    const nodes = t.nodes;
    for (const n of nodes) n.advantage = 0;
    for (const g of t.groups) {
      if (g.pruned) continue;
      // Same arithmetic as groupAdvantages, without allocating.
      const ids = g.nodes;
      let cnt = 0;
      let sum = 0;
      let min = Infinity;
      let max = -Infinity;
      for (let i = 0; i < ids.length; i++) {
        const n = nodes[ids[i]!]!;
        if (n.pruned) continue;
        const v = n.credit;
        if (!Number.isFinite(v)) {
          throw new MurphyError(`tree ${t.problemId}: node ${n.id} has credit ${String(v)}; assign credit first`);
        }
        cnt++;
        sum += v;
        if (v < min) min = v;
        if (v > max) max = v;
      }
      if (cnt === 0) continue;
      report.groups++;
      report.samples += cnt;
      if (max - min <= ZERO_VARIANCE_TOL) {
        report.zeroVarianceGroups++;
        continue; // advantages stay 0
      }
      const mean = sum / cnt;
      let denom: number;
      if (scale === 'none') denom = 1;
      else if (scale === 'batch') denom = batchStd + eps;
      else {
        let ss = 0;
        for (let i = 0; i < ids.length; i++) {
          const n = nodes[ids[i]!]!;
          if (n.pruned) continue;
          const d = n.credit - mean;
          ss += d * d;
        }
        denom = Math.sqrt(ss / (cnt - 1)) + eps;
      }
      for (let i = 0; i < ids.length; i++) {
        const n = nodes[ids[i]!]!;
        if (!n.pruned) n.advantage = (n.credit - mean) / denom;
      }
    }
  }
  return report;
}
