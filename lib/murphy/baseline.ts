// GRPO baselines (docs/method.md §6).

/** The part of a builder configuration (TreeBuildConfig) the baselines change. */
export interface GroupShape {
  groupSize: number;
  followUpGroupSize?: number;
  maxTurns?: number;
}

import { MurphyError, type RolloutTree } from './types.js';

/** Plain GRPO: the same configuration with S = 1 (no feedback turns). */
export function grpoBaselineConfig<C extends GroupShape>(config: C): C {
  return { ...config, maxTurns: 1 };
}

/**
 * G for compute-matched GRPO: MURPHY's measured average number of sampled completions per
 * problem, rounded to the nearest integer (at least 1). Accepts trees or the average itself.
 */
export function computeMatchedGroupSize(source: readonly RolloutTree<unknown>[] | number): number {
  let avg: number;
  if (typeof source === 'number') avg = source;
  else {
    if (source.length === 0) throw new MurphyError('computeMatchedGroupSize needs at least one tree');
    avg = source.reduce((s, t) => s + t.nodes.length, 0) / source.length;
  }
  if (!Number.isFinite(avg) || avg <= 0) throw new MurphyError(`average completions per problem must be > 0, got ${String(avg)}`);
  return Math.max(1, Math.round(avg));
}

/** Compute-matched GRPO: S = 1 with G = computeMatchedGroupSize(source). */
export function computeMatchedGrpoConfig<C extends GroupShape>(
  config: C,
  source: readonly RolloutTree<unknown>[] | number,
): C {
  const G = computeMatchedGroupSize(source);
  return { ...config, maxTurns: 1, groupSize: G, followUpGroupSize: G };
}
