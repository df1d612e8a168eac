// The metrics of one training step (a line of RUN/metrics.jsonl), computed from the step's
// trees, and the one-line progress summary printed per step.
import { batchStats } from '../murphy/flatten.js';
import type { RolloutTree } from '../murphy/types.js';

/** Prefill of one step's rollouts on the paged engine. */
export interface StepPrefill {
  computed: number;
  saved: number;
  preemptions: number;
}

/** One rank's weight sync of a step (StepMetrics.weightSync). */
export interface StepWeightSync {
  method: string;
  fallback?: string;
}

export interface StepMetrics {
  step: number;
  epoch: number;
  lr: number;
  problems: number;
  /** Mean reward of all sampled nodes, and per turn. */
  reward: number;
  rewardPerTurn: number[];
  /** Pass rate of the nodes of each turn (pass@1 per turn). */
  passAt1PerTurn: number[];
  /** Problems with any passing attempt / with a passing turn-1 attempt. */
  solvedFraction: number;
  solvedFirstTurnFraction: number;
  /** Failed attempts that were expanded, and how many of them a later turn fixed. */
  expanded: number;
  fixedLater: number;
  fixedLaterFraction: number;
  nodesPerTree: number;
  nodesPerTurn: number[];
  groupsPerTree: number;
  prunedIntraFraction: number;
  prunedInterFraction: number;
  prunedTokens: number;
  /** Nodes whose prompt left no room in the model's context (leaves, not trained on). */
  noRoom: number;
  /** Rollout requests the server aborted (finish_reason "abort") and the backend retried. */
  aborted: number;
  /**
   * Paged (colocated) rollouts only: prompt tokens prefilled this step (recomputes included),
   * prompt tokens not computed thanks to prefix sharing (cache hits and forks), preemptions.
   */
  prefill?: StepPrefill;
  /**
   * Backend vllm: how this step's weights reached the servers, one entry per rank (rank order):
   * the sync's method ('nccl', 'loopback' for serve's fake, 'disk') and, when an NCCL sync failed
   * and the step fell back to the disk, why.
   */
  weightSync?: StepWeightSync[];
  zeroVarianceGroups: number;
  samples: number;
  samplesTrained: number;
  microBatches: number;
  tokensSampled: number;
  tokensTrained: number;
  loss: number;
  kl: number;
  clipLowFraction: number;
  clipHighFraction: number;
  clipFraction: number;
  meanRatio: number;
  gradNorm: number;
  /** Set on the last step when training stopped early (earlyStopWindow): why, in one line. */
  earlyStop?: string;
  /** Wall-clock figures (the only fields that differ between identical runs). */
  time: {
    rollout: number;
    execution: number;
    training: number;
    sync: number;
    total: number;
    tokensPerSecond: number;
    trainTokensPerSecond: number;
  };
}

/** Metrics of one step from its trees (training figures filled in by the caller). */
export function treeMetrics(trees: readonly RolloutTree<unknown>[]): Pick<
  StepMetrics,
  | 'problems' | 'reward' | 'rewardPerTurn' | 'passAt1PerTurn' | 'solvedFraction' | 'solvedFirstTurnFraction' | 'expanded' | 'fixedLater'
  | 'fixedLaterFraction' | 'nodesPerTree' | 'nodesPerTurn' | 'groupsPerTree' | 'prunedIntraFraction' | 'prunedInterFraction' | 'prunedTokens' | 'tokensSampled'
  | 'noRoom'
> {
  const b = batchStats(trees);
  const S = b.nodesPerTurn.length;
  const rsum = new Array<number>(S).fill(0);
  let all = 0;
  let nodes = 0;
  let groups = 0;
  let prunedTokens = 0;
  for (const t of trees) {
    groups += t.groups.length;
    for (const n of t.nodes) {
      rsum[n.turn - 1]! += n.reward;
      all += n.reward;
      nodes++;
      if (n.pruned) prunedTokens += n.completionIds.length + t.groups[n.group]!.promptIds.length;
    }
  }
  const T = Math.max(1, trees.length);
  const nz = (x: number): number => (Number.isFinite(x) ? x : 0);
  return {
    problems: trees.length,
    reward: nodes ? all / nodes : 0,
    rewardPerTurn: b.nodesPerTurn.map((c, i) => (c ? rsum[i]! / c : 0)),
    passAt1PerTurn: b.passRatePerTurn.map(nz),
    solvedFraction: b.solved / T,
    solvedFirstTurnFraction: b.solvedFirstTurn / T,
    expanded: b.expanded,
    fixedLater: b.fixedLater,
    fixedLaterFraction: b.expanded ? b.fixedLater / b.expanded : 0,
    nodesPerTree: nodes / T,
    nodesPerTurn: b.nodesPerTurn,
    groupsPerTree: groups / T,
    prunedIntraFraction: nodes ? b.prunedIntra / nodes : 0,
    prunedInterFraction: nodes ? b.prunedInter / nodes : 0,
    prunedTokens,
    noRoom: b.noRoom,
    tokensSampled: b.completionTokensSampled,
  };
}

export function formatStepLine(m: StepMetrics, maxSteps: number): string {
  const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;
  const turns = m.passAt1PerTurn.map((p, i) => `t${i + 1} ${pct(p)}`).join(' ');
  return (
    `step ${String(m.step).padStart(String(maxSteps).length)}/${maxSteps}  reward ${m.reward.toFixed(3)}  pass@1 ${turns}  ` +
    `fixed ${m.fixedLater}/${m.expanded}  nodes/tree ${m.nodesPerTree.toFixed(1)}  loss ${m.loss.toFixed(4)}  |g| ${m.gradNorm.toFixed(3)}  ` +
    `lr ${m.lr.toExponential(2)}  ${m.prefill === undefined ? '' : `prefill saved ${prefillSavedPct(m.prefill)}  `}${m.time.total.toFixed(1)}s (roll ${m.time.rollout.toFixed(1)} exec ${m.time.execution.toFixed(1)} train ${m.time.training.toFixed(1)})`
  );
}

/** Share of the prompt tokens that prefix sharing saved: saved / (saved + computed). */
export function prefillSavedPct(p: StepPrefill): string {
  const all = p.saved + p.computed;
  return `${all > 0 ? ((100 * p.saved) / all).toFixed(0) : '0'}% (${p.saved} tokens)`;
}
