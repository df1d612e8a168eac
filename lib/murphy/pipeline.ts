// One MURPHY rollout phase end to end: build → credit → InterP → IntraP → advantages → samples.

import { computeAdvantages, type AdvantageReport, type RewardScaling } from './advantage.js';
import { assignCredit, type CreditMethod } from './credit.js';
import { batchStats, flattenSamples, type BatchStats, type TrainingSample } from './flatten.js';
import { interPrune, intraPrune, type InterPOptions, type IntraPOptions, type PruneReport } from './prune.js';
import { buildTrees, type TreeBuildConfig, type TreeBuildDeps } from './tree.js';
import type { RolloutTree } from './types.js';

/** Options of the post-rollout steps. All have defaults (docs/method.md). */
export interface ProcessConfig {
  /** Default 'mars'. */
  credit?: CreditMethod;
  /** Default 1. */
  gamma?: number;
  /** Std scaling of advantages. Default 'group'. */
  scaleRewards?: RewardScaling;
  /** Default 1e-4. */
  eps?: number;
  /** IntraP; off (null/undefined) by default. */
  intraP?: IntraPOptions | null;
  /** InterP; off (null/undefined) by default. */
  interP?: InterPOptions | null;
  /** Leave zero-advantage samples out of the flat output. Default false. */
  dropZeroAdvantage?: boolean;
}

/** Builder options plus post-rollout options. */
export interface MurphyConfig<P = unknown> extends TreeBuildConfig<P>, ProcessConfig {}

export interface ProcessReport {
  interP: PruneReport;
  intraP: PruneReport;
  advantages: AdvantageReport;
}

const none = (): PruneReport => ({ groups: 0, samples: 0, completionTokens: 0, promptTokens: 0 });

/**
 * In place, on trees whose rollouts are done: credit (MaRS/MeRS), then InterP, then IntraP
 * (both optional), then group advantages over the kept samples.
 */
export function processTrees(trees: readonly RolloutTree<unknown>[], config: ProcessConfig = {}, trusted = false): ProcessReport {
  for (const t of trees) assignCredit(t, { method: config.credit ?? 'mars', gamma: config.gamma ?? 1, trusted });
  const interP = config.interP ? interPrune(trees, config.interP) : none();
  const intraP = config.intraP ? intraPrune(trees, config.intraP) : none();
  const advantages = computeAdvantages(trees, { scale: config.scaleRewards ?? 'group', eps: config.eps ?? 1e-4 });
  return { interP, intraP, advantages };
}

export interface MurphyResult<P> {
  trees: RolloutTree<P>[];
  samples: TrainingSample[];
  report: ProcessReport;
  stats: BatchStats;
}

/** Builds trees for a batch of problems and turns them into training samples. */
export async function runMurphy<P>(problems: readonly P[], deps: TreeBuildDeps<P>, config: MurphyConfig<P>): Promise<MurphyResult<P>> {
  const trees = await buildTrees(problems, deps, config);
  const report = processTrees(trees, config, true);
  const samples = flattenSamples(trees, { dropZeroAdvantage: config.dropZeroAdvantage ?? false });
  return { trees, samples, report, stats: batchStats(trees) };
}
