// Iter-k pass@1: attempt, run, feed the executor's feedback back, retry, up to k attempts.
//
// This is a rollout tree with G = n samples at turn 1 and one sample per feedback prompt
// (G' = 1), S = k turns and binary rewards, so it reuses the tree builder: every sample of a
// problem is one conversation, and it counts as solved at iteration k when one of its first
// k attempts passes all tests (a passing attempt ends the conversation). pass@1 at
// iteration k is the mean over problems of the fraction of their n conversations solved.
import { buildTrees } from '../murphy/tree.js';
import { extractFromCompletion } from '../prompt/extract.js';
import type { CodeExtractor, Executor, PromptBuilder, RolloutTree, Sampler, SampleParams } from '../murphy/types.js';

export interface IterKOptions<P> {
  /** Maximum attempts per conversation. Default 5. */
  k?: number;
  /** Conversations per problem. Default 1 (greedy); with n > 1 sample at `temperature`. */
  n?: number;
  /** 0 = greedy. Default 0. */
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  stopTokenIds?: number[];
  seed?: number;
  /** Groups problems for the breakdown (e.g. LiveCodeBench difficulty). */
  groupBy?: (problem: P) => string | undefined;
  problemId?: (problem: P, index: number) => string;
  concurrency?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface IterKPoint {
  k: number;
  /** pass@1 at iteration k, in [0, 1]. */
  pass1: number;
  /** Problems counted solved at iteration k (sum over problems of the solved fraction of their conversations; integer when n = 1). */
  solved: number;
}

export interface IterKProblem {
  id: string;
  group?: string;
  /** Per conversation: the attempt (1-based) that first passed, or null. */
  solvedAt: (number | null)[];
  /** Why the problem was never attempted (counted as failed): its prompt does not fit the model's context. */
  failure?: string;
}

export interface IterKResult {
  problems: number;
  iterations: IterKPoint[];
  /** The same curve per group (e.g. difficulty), when groupBy was given. */
  byGroup?: Record<string, { problems: number; iterations: IterKPoint[] }>;
  perProblem: IterKProblem[];
  /** Sampled completion tokens in total. */
  completionTokens: number;
  /** Conversations that ended because the prompt left no room in the model's context (counted as not solved). */
  noRoom: number;
  /** Problems whose first prompt does not fit the context: never attempted, counted as failed (perProblem[].failure says why). */
  unfit: number;
  seconds: number;
}

/** Attempt at which a conversation rooted at turn-1 node `root` first passed (null if never). */
export function firstPass(tree: RolloutTree<unknown>, root: number): number | null {
  let cur: number | null = root;
  while (cur !== null) {
    const n: RolloutTree<unknown>['nodes'][number] = tree.nodes[cur]!;
    if (n.passed) return n.turn;
    if (n.childGroup === null) return null;
    cur = tree.groups[n.childGroup]!.nodes[0] ?? null;
  }
  return null;
}

function curve(rows: readonly IterKProblem[], k: number): IterKPoint[] {
  const out: IterKPoint[] = [];
  for (let it = 1; it <= k; it++) {
    let solved = 0;
    for (const r of rows) {
      const n = r.solvedAt.length;
      solved += r.solvedAt.filter((a) => a !== null && a <= it).length / n;
    }
    out.push({ k: it, pass1: rows.length ? solved / rows.length : 0, solved: Math.round(solved * 1e6) / 1e6 });
  }
  return out;
}

export async function evaluateIterK<P>(
  problems: readonly P[],
  /** extractCode: default lib/prompt's extractFromCompletion. */
  deps: { sampler: Sampler; executor: Executor<P>; prompts: PromptBuilder<P>; extractCode?: CodeExtractor<P> },
  o: IterKOptions<P> = {},
): Promise<IterKResult> {
  const t0 = performance.now();
  const k = o.k ?? 5;
  const temperature = o.temperature ?? 0;
  const n = temperature === 0 ? 1 : (o.n ?? 1);
  if (!Number.isInteger(k) || k < 1) throw new Error(`k must be an integer >= 1, got ${k}`);
  // (an evaluation reads no log-probs: the embedded engine's greedy draws then skip their softmax)
  const sampling: SampleParams & { stopTokenIds?: number[] } = { temperature, maxTokens: o.maxTokens, logprobs: false };
  if (o.topP !== undefined) sampling.topP = o.topP;
  if (o.stopTokenIds) sampling.stopTokenIds = o.stopTokenIds;
  let calls = 0;
  const sampler: Sampler = {
    generate: async (ids, m, params) => {
      const r = await deps.sampler.generate(ids, m, params);
      o.onProgress?.(++calls, 0);
      return r;
    },
  };
  const trees = await buildTrees(problems, { sampler, executor: deps.executor, prompts: deps.prompts, extractCode: deps.extractCode ?? extractFromCompletion }, {
    groupSize: n,
    followUpGroupSize: 1,
    maxTurns: k,
    rewardMode: 'binary',
    sampling,
    seed: o.seed ?? 0,
    problemId: o.problemId,
    samplerConcurrency: o.concurrency ?? 64,
    executorConcurrency: o.concurrency ?? 64,
  });
  const rows: IterKProblem[] = trees.map((t, i) => {
    const first = t.groups[0]!;
    const row: IterKProblem = { id: t.problemId, solvedAt: first.nodes.map((root) => firstPass(t, root)) };
    // every turn-1 attempt found no room: the problem's prompt does not fit the context at all
    if (first.nodes.length > 0 && first.nodes.every((j) => t.nodes[j]!.noRoom === true)) {
      row.failure = `its prompt (${first.promptIds.length} tokens) does not fit the model's context`;
    }
    const g = o.groupBy?.(problems[i]!);
    if (g !== undefined) row.group = g;
    return row;
  });
  const result: IterKResult = {
    problems: rows.length,
    iterations: curve(rows, k),
    perProblem: rows,
    completionTokens: trees.reduce((a, t) => a + t.nodes.reduce((b, x) => b + x.completionIds.length, 0), 0),
    noRoom: trees.reduce((a, t) => a + t.nodes.reduce((b, x) => b + (x.noRoom === true ? 1 : 0), 0), 0),
    unfit: rows.filter((r) => r.failure !== undefined).length,
    seconds: (performance.now() - t0) / 1000,
  };
  if (o.groupBy) {
    const groups = new Map<string, IterKProblem[]>();
    for (const r of rows) if (r.group !== undefined) groups.set(r.group, [...(groups.get(r.group) ?? []), r]);
    result.byGroup = Object.fromEntries([...groups.entries()].sort().map(([g, rs]) => [g, { problems: rs.length, iterations: curve(rs, k) }]));
  }
  return result;
}

/** The results file of `murphy-native eval` (and of the demo's before/after evaluations). */
export interface EvalResultsFile {
  version: 1;
  label?: string;
  dataset: string;
  model: string;
  /** Training step the policy had (runs only). */
  step?: number;
  settings: { k: number; n: number; temperature: number; topP?: number; maxTokens?: number; seed: number; backend: string; device?: string; storage?: string; feedback: string; split?: string };
  problems: number;
  iterations: IterKPoint[];
  byGroup?: IterKResult['byGroup'];
  perProblem: IterKProblem[];
  /** Conversations that ended at the model's context limit (IterKResult.noRoom); absent in files written before it was counted. */
  noRoom?: number;
  /** Problems never attempted because their prompt does not fit the context (IterKResult.unfit). */
  unfit?: number;
  seconds: number;
  createdAt: string;
}

export function formatIterKTable(r: {
  dataset: string;
  model: string;
  iterations: IterKPoint[];
  problems: number;
  byGroup?: IterKResult['byGroup'];
  noRoom?: number;
  unfit?: number;
  perProblem?: IterKProblem[];
}): string {
  const ks = r.iterations.map((p) => p.k);
  const head = `${'Iter-k pass@1'.padEnd(16)}${ks.map((k) => `k=${k}`.padStart(9)).join('')}`;
  const row = (name: string, its: IterKPoint[], n: number): string =>
    `${`${name} (${n})`.padEnd(16)}${its.map((p) => `${(100 * p.pass1).toFixed(1)}%`.padStart(9)).join('')}`;
  const lines = [`${r.dataset} — ${r.model}`, head, row('all', r.iterations, r.problems)];
  for (const [g, v] of Object.entries(r.byGroup ?? {})) lines.push(row(g, v.iterations, v.problems));
  if (r.unfit) {
    const first = r.perProblem?.find((p) => p.failure !== undefined);
    lines.push(`${r.unfit} of ${r.problems} problems did not fit the model's context and count as failed${first ? ` (first: ${first.id}: ${first.failure})` : ''}`);
  }
  if (r.noRoom) lines.push(`${r.noRoom} conversations ended at the model's context limit (counted as not solved)`);
  return lines.join('\n');
}
