// Iter-k pass@1: attempt, run, feed the executor's feedback back, retry, up to k attempts.
//
// This is a rollout tree with G = n samples at turn 1 and one sample per feedback prompt
// (G' = 1), S = k turns and binary rewards, so it reuses the tree builder: every sample of a
// problem is one conversation, and it counts as solved at iteration k when one of its first
// k attempts passes all tests (a passing attempt ends the conversation). pass@1 at
// iteration k is the mean over problems of the fraction of their n conversations solved.
import { buildTrees, defaultProblemId } from '../murphy/tree.js';
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
  /**
   * The model's context in tokens. A problem whose first prompt does not fit is not sampled:
   * it is recorded as failed with the reason (IterKProblem.failure) and counted in `unfit`;
   * a later turn whose prompt no longer fits gets an empty attempt, so that conversation fails.
   */
  contextLength?: number;
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
  /** Why the problem was not attempted (counted as failed), e.g. its prompt exceeds the context. */
  failure?: string;
}

export interface IterKResult {
  problems: number;
  iterations: IterKPoint[];
  /** The same curve per group (e.g. difficulty), when groupBy was given. */
  byGroup?: Record<string, { problems: number; iterations: IterKPoint[] }>;
  perProblem: IterKProblem[];
  /** Problems not attempted because their first prompt does not fit the context (counted as failed). */
  unfit: number;
  /** Later-turn prompts that outgrew the context (each got an empty, failing attempt). */
  contextOverflows: number;
  /** Sampled completion tokens in total. */
  completionTokens: number;
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
  deps: { sampler: Sampler; executor: Executor<P>; prompts: PromptBuilder<P>; extractCode?: CodeExtractor<P> },
  o: IterKOptions<P> = {},
): Promise<IterKResult> {
  const t0 = performance.now();
  const k = o.k ?? 5;
  const temperature = o.temperature ?? 0;
  const n = temperature === 0 ? 1 : (o.n ?? 1);
  if (!Number.isInteger(k) || k < 1) throw new Error(`k must be an integer >= 1, got ${k}`);
  const sampling: SampleParams & { stopTokenIds?: number[] } = { temperature, maxTokens: o.maxTokens };
  if (o.topP !== undefined) sampling.topP = o.topP;
  if (o.stopTokenIds) sampling.stopTokenIds = o.stopTokenIds;
  let calls = 0;
  let overflows = 0;
  const ctx = o.contextLength;
  const sampler: Sampler = {
    generate: async (ids, m, params) => {
      if (ctx !== undefined && ids.length >= ctx) {
        overflows++;
        o.onProgress?.(++calls, 0);
        return Array.from({ length: m }, () => ({ tokenIds: [], text: '', finishReason: 'length' as const }));
      }
      const r = await deps.sampler.generate(ids, m, params);
      o.onProgress?.(++calls, 0);
      return r;
    },
  };
  // Problems whose first prompt does not fit the context are recorded as failed, not sampled.
  const idOf = (p: P, i: number): string => (o.problemId ? o.problemId(p, i) : defaultProblemId(p, i));
  const failures = new Map<number, string>();
  if (ctx !== undefined) {
    for (const [i, p] of problems.entries()) {
      const len = (await deps.prompts.initial(p)).length;
      if (len >= ctx) failures.set(i, `prompt has ${len} tokens, the model's context is ${ctx}`);
    }
  }
  const index = problems.map((_, i) => i).filter((i) => !failures.has(i));
  const trees = await buildTrees(index.map((i) => problems[i]!), { sampler, executor: deps.executor, prompts: deps.prompts, extractCode: deps.extractCode }, {
    groupSize: n,
    followUpGroupSize: 1,
    maxTurns: k,
    rewardMode: 'binary',
    sampling,
    seed: o.seed ?? 0,
    problemId: failures.size ? (p, j) => idOf(p, index[j]!) : o.problemId,
    samplerConcurrency: o.concurrency ?? 64,
    executorConcurrency: o.concurrency ?? 64,
  });
  const byIndex = new Map(index.map((i, j) => [i, trees[j]!] as const));
  const rows: IterKProblem[] = problems.map((p, i) => {
    const t = byIndex.get(i);
    const row: IterKProblem = t
      ? { id: t.problemId, solvedAt: t.groups[0]!.nodes.map((root) => firstPass(t, root)) }
      : { id: idOf(p, i), solvedAt: new Array<number | null>(n).fill(null), failure: failures.get(i)! };
    const g = o.groupBy?.(p);
    if (g !== undefined) row.group = g;
    return row;
  });
  const result: IterKResult = {
    problems: rows.length,
    iterations: curve(rows, k),
    perProblem: rows,
    unfit: failures.size,
    contextOverflows: overflows,
    completionTokens: trees.reduce((a, t) => a + t.nodes.reduce((b, x) => b + x.completionIds.length, 0), 0),
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
  settings: { k: number; n: number; temperature: number; topP?: number; maxTokens?: number; seed: number; backend: string; feedback: string; split?: string };
  problems: number;
  iterations: IterKPoint[];
  byGroup?: IterKResult['byGroup'];
  perProblem: IterKProblem[];
  /** Problems not attempted because their prompt does not fit the model's context (counted as failed; see perProblem[].failure). */
  unfit?: number;
  /** Later-turn prompts that outgrew the context (empty, failing attempts). */
  contextOverflows?: number;
  seconds: number;
  createdAt: string;
}

export function formatIterKTable(r: { dataset: string; model: string; iterations: IterKPoint[]; problems: number; byGroup?: IterKResult['byGroup']; unfit?: number; contextOverflows?: number; perProblem?: IterKProblem[] }): string {
  const ks = r.iterations.map((p) => p.k);
  const head = `${'Iter-k pass@1'.padEnd(16)}${ks.map((k) => `k=${k}`.padStart(9)).join('')}`;
  const row = (name: string, its: IterKPoint[], n: number): string =>
    `${`${name} (${n})`.padEnd(16)}${its.map((p) => `${(100 * p.pass1).toFixed(1)}%`.padStart(9)).join('')}`;
  const lines = [`${r.dataset} — ${r.model}`, head, row('all', r.iterations, r.problems)];
  for (const [g, v] of Object.entries(r.byGroup ?? {})) lines.push(row(g, v.iterations, v.problems));
  if (r.unfit) {
    const first = r.perProblem?.find((p) => p.failure);
    lines.push(`${r.unfit} of ${r.problems} problems did not fit the model's context and count as failed${first ? ` (first: ${first.id}: ${first.failure})` : ''}`);
  }
  if (r.contextOverflows) lines.push(`${r.contextOverflows} feedback turns outgrew the model's context (empty attempts, counted as failed)`);
  return lines.join('\n');
}
