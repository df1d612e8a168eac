// Flattening trees into training samples, and per-tree statistics (docs/method.md §5).

import { MurphyError, type RolloutTree } from './types.js';

/** One training example: a completion with its prompt and advantage. */
export interface TrainingSample {
  problemId: string;
  /** Node id within its tree. */
  nodeId: number;
  /** Group id within its tree (the prompt reference). */
  group: number;
  /** Batch-unique group key: `${problemId}#${group}`. */
  groupId: string;
  turn: number;
  /** Prompt token ids (shared, not copied, between siblings: do not mutate). */
  promptIds: number[];
  /** Completion token ids as sampled (do not mutate). */
  completionIds: number[];
  /** Rollout log-probs, when the sampler returned them (else undefined). */
  logprobs?: number[];
  advantage: number;
  reward: number;
  credit: number;
}

export interface FlattenOptions {
  /** Leave out samples whose advantage is exactly 0 (zero-variance groups). Default false. */
  dropZeroAdvantage?: boolean;
}

/**
 * Kept (non-pruned) nodes of every tree as flat samples, in tree then node order; nodes whose
 * prompt left no room in the context (no tokens) are not samples. Needs advantages.
 */
export function flattenSamples(trees: readonly RolloutTree<unknown>[], options: FlattenOptions = {}): TrainingSample[] {
  const out: TrainingSample[] = [];
  for (const t of trees) {
    const keys: string[] = new Array(t.groups.length);
    for (const n of t.nodes) {
      if (n.pruned || n.noRoom === true) continue;
      if (!Number.isFinite(n.advantage)) {
        throw new MurphyError(`tree ${t.problemId}: node ${n.id} has advantage ${String(n.advantage)}; compute advantages first`);
      }
      if (options.dropZeroAdvantage && n.advantage === 0) continue;
      const s: TrainingSample = {
        problemId: t.problemId,
        nodeId: n.id,
        group: n.group,
        groupId: (keys[n.group] ??= `${t.problemId}#${n.group}`),
        turn: n.turn,
        promptIds: t.groups[n.group]!.promptIds,
        completionIds: n.completionIds,
        advantage: n.advantage,
        reward: n.reward,
        credit: n.credit,
        logprobs: n.logprobs,
      };
      out.push(s);
    }
  }
  return out;
}

/** Statistics of one tree. Arrays are indexed by turn - 1. */
export interface TreeStats {
  problemId: string;
  nodes: number;
  groups: number;
  nodesPerTurn: number[];
  /** Fraction of the turn's nodes whose execution passed (NaN for a turn with no nodes). */
  passRatePerTurn: number[];
  meanRewardPerTurn: number[];
  /** Any node passed. */
  solved: boolean;
  /** Failed nodes that were expanded. */
  expanded: number;
  /** Expanded nodes with a passing child. */
  fixedNextTurn: number;
  /** Expanded nodes with a passing descendant at any later turn. */
  fixedLater: number;
  prunedIntra: number;
  prunedInter: number;
  groupsPrunedInter: number;
  /** Nodes whose prompt left no room in the context (leaves, not samples). */
  noRoom: number;
  samplesKept: number;
  completionTokensSampled: number;
  completionTokensKept: number;
  promptTokensKept: number;
}

export function treeStats(tree: RolloutTree<unknown>): TreeStats {
  const S = tree.maxTurns;
  const nodesPerTurn = new Array<number>(S).fill(0);
  const passed = new Array<number>(S).fill(0);
  const rsum = new Array<number>(S).fill(0);
  const st: TreeStats = {
    problemId: tree.problemId,
    nodes: tree.nodes.length,
    groups: tree.groups.length,
    nodesPerTurn,
    passRatePerTurn: [],
    meanRewardPerTurn: [],
    solved: false,
    expanded: 0,
    fixedNextTurn: 0,
    fixedLater: 0,
    prunedIntra: 0,
    prunedInter: 0,
    groupsPrunedInter: 0,
    noRoom: 0,
    samplesKept: 0,
    completionTokensSampled: 0,
    completionTokensKept: 0,
    promptTokensKept: 0,
  };
  // subtreePass[i]: some node in i's subtree (children downwards) passed. Bottom-up over ids descending works
  // for builder trees; compute by turn buckets to be order-independent.
  const nodes = tree.nodes;
  const subtreePass = new Uint8Array(nodes.length);
  const byTurn = nodes.map((n) => n.id).sort((a, b) => nodes[b]!.turn - nodes[a]!.turn);
  for (const id of byTurn) {
    const n = nodes[id]!;
    if (n.passed) subtreePass[id] = 1;
    if (n.childGroup !== null) {
      for (const c of tree.groups[n.childGroup]!.nodes) if (subtreePass[c]) subtreePass[id] = 1;
    }
  }
  for (const n of nodes) {
    const t = n.turn - 1;
    nodesPerTurn[t]!++;
    if (n.passed) {
      passed[t]!++;
      st.solved = true;
    }
    rsum[t]! += n.reward;
    st.completionTokensSampled += n.completionIds.length;
    if (n.noRoom === true) {
      st.noRoom++;
    } else if (n.pruned) {
      if (n.prunedBy === 'inter') st.prunedInter++;
      else st.prunedIntra++;
    } else {
      st.samplesKept++;
      st.completionTokensKept += n.completionIds.length;
      st.promptTokensKept += tree.groups[n.group]!.promptIds.length;
    }
    if (n.childGroup !== null) {
      st.expanded++;
      const kids = tree.groups[n.childGroup]!.nodes;
      if (kids.some((c) => nodes[c]!.passed)) st.fixedNextTurn++;
      if (kids.some((c) => subtreePass[c])) st.fixedLater++;
    }
  }
  for (const g of tree.groups) if (g.pruned) st.groupsPrunedInter++;
  st.passRatePerTurn = nodesPerTurn.map((c, i) => (c === 0 ? NaN : passed[i]! / c));
  st.meanRewardPerTurn = nodesPerTurn.map((c, i) => (c === 0 ? NaN : rsum[i]! / c));
  return st;
}

/** Aggregate statistics of a batch of trees. */
export interface BatchStats {
  trees: number;
  /** Average sampled completions per problem: what compute-matched GRPO uses as G. */
  avgCompletionsPerProblem: number;
  nodesPerTurn: number[];
  passRatePerTurn: number[];
  /** Problems with any passing attempt / with a passing turn-1 attempt. */
  solved: number;
  solvedFirstTurn: number;
  expanded: number;
  fixedNextTurn: number;
  fixedLater: number;
  prunedIntra: number;
  prunedInter: number;
  /** Nodes whose prompt left no room in the context. */
  noRoom: number;
  samplesKept: number;
  completionTokensSampled: number;
  completionTokensKept: number;
}

export function batchStats(trees: readonly RolloutTree<unknown>[]): BatchStats {
  const S = trees.reduce((m, t) => Math.max(m, t.maxTurns), 0);
  const b: BatchStats = {
    trees: trees.length,
    avgCompletionsPerProblem: 0,
    nodesPerTurn: new Array<number>(S).fill(0),
    passRatePerTurn: [],
    solved: 0,
    solvedFirstTurn: 0,
    expanded: 0,
    fixedNextTurn: 0,
    fixedLater: 0,
    prunedIntra: 0,
    prunedInter: 0,
    noRoom: 0,
    samplesKept: 0,
    completionTokensSampled: 0,
    completionTokensKept: 0,
  };
  const passed = new Array<number>(S).fill(0);
  let nodes = 0;
  for (const t of trees) {
    const s = treeStats(t);
    nodes += s.nodes;
    s.nodesPerTurn.forEach((c, i) => {
      b.nodesPerTurn[i]! += c;
      passed[i]! += Number.isNaN(s.passRatePerTurn[i]) ? 0 : s.passRatePerTurn[i]! * c;
    });
    if (s.solved) b.solved++;
    if ((s.passRatePerTurn[0] ?? 0) > 0) b.solvedFirstTurn++;
    b.expanded += s.expanded;
    b.fixedNextTurn += s.fixedNextTurn;
    b.fixedLater += s.fixedLater;
    b.prunedIntra += s.prunedIntra;
    b.prunedInter += s.prunedInter;
    b.noRoom += s.noRoom;
    b.samplesKept += s.samplesKept;
    b.completionTokensSampled += s.completionTokensSampled;
    b.completionTokensKept += s.completionTokensKept;
  }
  b.avgCompletionsPerProblem = trees.length === 0 ? 0 : nodes / trees.length;
  b.passRatePerTurn = b.nodesPerTurn.map((c, i) => (c === 0 ? NaN : Math.round(passed[i]!) / c));
  return b;
}
