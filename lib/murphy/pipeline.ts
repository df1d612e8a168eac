// The post-rollout steps of a MURPHY phase: credit → InterP → IntraP → advantages (the
// training loop builds the trees before and flattens the samples after).

import { computeAdvantages, type AdvantageReport, type RewardScaling } from './advantage.js';
import { assignCredit, type CreditMethod } from './credit.js';
import { interPrune, intraPrune, type InterPOptions, type IntraPOptions, type PruneReport } from './prune.js';
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
}

export interface ProcessReport {
  interP: PruneReport;
  intraP: PruneReport;
  advantages: AdvantageReport;
}

const none = (): PruneReport => ({ groups: 0, samples: 0, completionTokens: 0, promptTokens: 0 });

export interface ProcessOptions {
  /** Skip validateTree in credit assignment (the builder's trees are valid by construction). Default false. */
  trusted?: boolean;
}

/**
 * In place, on trees whose rollouts are done: credit (MaRS/MeRS), then InterP, then IntraP
 * (both optional), then group advantages over the kept samples. Credit comes first, from
 * every node: a group that pruning drops still feeds its parent's credit.
 */
export function processTrees(trees: readonly RolloutTree<unknown>[], config: ProcessConfig = {}, options: ProcessOptions = {}): ProcessReport {
  const trusted = options.trusted ?? false;
  for (const t of trees) assignCredit(t, { method: config.credit ?? 'mars', gamma: config.gamma ?? 1, trusted });
  const interP = config.interP ? interPrune(trees, config.interP) : none();
  const intraP = config.intraP ? intraPrune(trees, config.intraP) : none();
  const advantages = computeAdvantages(trees, { scale: config.scaleRewards ?? 'group', eps: config.eps ?? 1e-4 });
  return { interP, intraP, advantages };
}
