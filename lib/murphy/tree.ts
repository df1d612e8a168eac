// Building feedback-conditioned rollout trees (docs/method.md §1).

import { extractCode } from '../prompt/extract.js';
import { Limiter } from './limit.js';
import { mix32 } from './rng.js';
import {
  MurphyError,
  type CodeExtractor,
  type Completion,
  type ExecResult,
  type Executor,
  type Group,
  type PromptBuilder,
  type RolloutTree,
  type SampleParams,
  type Sampler,
  type TreeNode,
} from './types.js';

/** How rewards enter credit: the executor's pass fraction, or 1/0 from its `passed` flag. */
export type RewardMode = 'fraction' | 'binary';

/** Options of the tree builder. Only groupSize is required. */
export interface TreeBuildConfig<P = unknown> {
  /** G: completions sampled for the turn-1 prompt. */
  groupSize: number;
  /** G': completions sampled for each follow-up prompt. Default: groupSize. */
  followUpGroupSize?: number;
  /** S: maximum number of turns (>= 1). Default 2. */
  maxTurns?: number;
  /** A node with reward below this at turn t < S is expanded. Default 1. */
  successThreshold?: number;
  /** Default 'fraction'. */
  rewardMode?: RewardMode;
  /** Forwarded to the sampler. */
  sampling?: SampleParams;
  /**
   * When set, each sampler call gets seed = mix(seed, hash(problem id), group id): results
   * do not depend on batch composition or completion order. Vary it per training step,
   * or a problem seen again gets the same samples.
   */
  seed?: number;
  /** Maximum sampler calls in flight (across problems). Default 64. */
  samplerConcurrency?: number;
  /** Maximum executor calls in flight (across problems). Default 16. */
  executorConcurrency?: number;
  /** Feedback given (with reward 0) when no code could be extracted; the executor is not called. */
  noCodeFeedback?: string;
  /** Problem id for logs and samples. Default: the problem's string `id`/`task_id` field, else its index. */
  problemId?: (problem: P, index: number) => string;
}

/** What the builder needs from the outside world. */
export interface TreeBuildDeps<P = unknown> {
  sampler: Sampler;
  executor: Executor<P>;
  prompts: PromptBuilder<P>;
  /** Default: extractCode from lib/prompt (last fenced python block, HumanEval-aware). */
  extractCode?: CodeExtractor<P>;
}

export const DEFAULT_NO_CODE_FEEDBACK =
  'No code was found in your answer. Please give your complete solution in a single ```python code block.';

/** Resolved builder options (every default filled in). */
export interface ResolvedTreeBuildConfig<P> {
  groupSize: number;
  followUpGroupSize: number;
  maxTurns: number;
  successThreshold: number;
  rewardMode: RewardMode;
  sampling: SampleParams;
  seed: number | undefined;
  samplerConcurrency: number;
  executorConcurrency: number;
  noCodeFeedback: string;
  problemId: (problem: P, index: number) => string;
}

function positiveInt(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
    throw new MurphyError(`${name} must be an integer >= 1, got ${String(v)}`);
  }
  return v;
}

function positiveLimit(name: string, v: unknown): number {
  if (v === Infinity) return v;
  return positiveInt(name, v);
}

/** A problem's id when the config gives no problemId: an id-like field, else its index. */
export function defaultProblemId(problem: unknown, index: number): string {
  if (problem !== null && typeof problem === 'object') {
    const o = problem as Record<string, unknown>;
    for (const k of ['id', 'task_id', 'problemId', 'name']) {
      const v = o[k];
      if (typeof v === 'string' || typeof v === 'number') return String(v);
    }
  }
  return String(index);
}

/** Validates a builder configuration and fills in defaults. Throws MurphyError on bad values. */
export function resolveTreeBuildConfig<P>(config: TreeBuildConfig<P>): ResolvedTreeBuildConfig<P> {
  if (config === null || typeof config !== 'object') throw new MurphyError('config must be an object');
  const groupSize = positiveInt('groupSize (G)', config.groupSize);
  const followUpGroupSize = positiveInt('followUpGroupSize (G\')', config.followUpGroupSize ?? groupSize);
  const maxTurns = positiveInt('maxTurns (S)', config.maxTurns ?? 2);
  const successThreshold = config.successThreshold ?? 1;
  if (typeof successThreshold !== 'number' || !(successThreshold > 0 && successThreshold <= 1)) {
    throw new MurphyError(`successThreshold must be in (0, 1], got ${String(successThreshold)}`);
  }
  const rewardMode = config.rewardMode ?? 'fraction';
  if (rewardMode !== 'fraction' && rewardMode !== 'binary') {
    throw new MurphyError(`rewardMode must be 'fraction' or 'binary', got ${String(rewardMode)}`);
  }
  if (config.seed !== undefined && !Number.isFinite(config.seed)) throw new MurphyError('seed must be a finite number');
  return {
    groupSize,
    followUpGroupSize,
    maxTurns,
    successThreshold,
    rewardMode,
    sampling: config.sampling ?? {},
    seed: config.seed,
    samplerConcurrency: positiveLimit('samplerConcurrency', config.samplerConcurrency ?? 64),
    executorConcurrency: positiveLimit('executorConcurrency', config.executorConcurrency ?? 16),
    noCodeFeedback: config.noCodeFeedback ?? DEFAULT_NO_CODE_FEEDBACK,
    problemId: config.problemId ?? defaultProblemId,
  };
}

interface OpenGroup<P> {
  tree: RolloutTree<P>;
  /** Hash of the tree's problem id, for per-group seeds. */
  treeKey: number;
  group: Group;
}

/** 32-bit FNV-1a hash of a string. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}


function isPromise<T>(x: T | Promise<T>): x is Promise<T> {
  return typeof (x as { then?: unknown } | null)?.then === 'function';
}

function checkIds(what: string, ids: unknown): number[] {
  if (!Array.isArray(ids)) throw new MurphyError(`${what} must be an array of token ids`);
  return ids as number[];
}

function checkCompletion(c: unknown, where: () => string): Completion {
  if (c === null || typeof c !== 'object') throw new MurphyError(`sampler returned a non-object completion (${where()})`);
  const o = c as Completion;
  if (!Array.isArray(o.tokenIds)) throw new MurphyError(`sampler completion without tokenIds (${where()})`);
  if (typeof o.text !== 'string') throw new MurphyError(`sampler completion without text (${where()})`);
  if (o.logprobs !== undefined && (!Array.isArray(o.logprobs) || o.logprobs.length !== o.tokenIds.length)) {
    throw new MurphyError(`sampler completion logprobs length ${o.logprobs?.length} != tokenIds length ${o.tokenIds.length} (${where()})`);
  }
  return o;
}

function validResult(r: ExecResult): boolean {
  return r !== null && typeof r === 'object' && typeof r.reward === 'number' && r.reward >= 0 && r.reward <= 1 && typeof r.passed === 'boolean' && typeof r.feedback === 'string';
}

function checkResult(r: unknown, where: () => string): ExecResult {
  if (r === null || typeof r !== 'object') throw new MurphyError(`executor returned a non-object result (${where()})`);
  const o = r as ExecResult;
  if (typeof o.reward !== 'number' || !(o.reward >= 0 && o.reward <= 1)) {
    throw new MurphyError(`executor reward must be a number in [0, 1], got ${String(o.reward)} (${where()})`);
  }
  if (typeof o.passed !== 'boolean') throw new MurphyError(`executor result.passed must be a boolean (${where()})`);
  if (typeof o.feedback !== 'string') throw new MurphyError(`executor result.feedback must be a string (${where()})`);
  return o;
}

/**
 * Builds one rollout tree per problem. Turns are synchronous across problems: all open
 * groups of turn t (of every problem) are sampled and executed concurrently, bounded by
 * samplerConcurrency / executorConcurrency, and each completion is executed as soon as its
 * group's sampling returns. Node and group ids are assigned in a fixed order (problem,
 * parent node, sample index), so results do not depend on completion timing.
 */
export async function buildTrees<P>(
  problems: readonly P[],
  deps: TreeBuildDeps<P>,
  config: TreeBuildConfig<P>,
): Promise<RolloutTree<P>[]> {
  const cfg = resolveTreeBuildConfig(config);
  if (!Array.isArray(problems)) throw new MurphyError('problems must be an array');
  if (!deps || typeof deps.sampler?.generate !== 'function') throw new MurphyError('deps.sampler.generate is required');
  if (typeof deps.executor?.execute !== 'function') throw new MurphyError('deps.executor.execute is required');
  if (typeof deps.prompts?.initial !== 'function' || typeof deps.prompts.followUp !== 'function') {
    throw new MurphyError('deps.prompts must implement initial() and followUp()');
  }
  const { sampler, executor, prompts } = deps;
  const extract: CodeExtractor<P> = deps.extractCode ?? ((c) => extractCode(c.text));
  const samplerLimit = cfg.samplerConcurrency === Infinity ? null : new Limiter(cfg.samplerConcurrency);
  const execLimit = cfg.executorConcurrency === Infinity ? null : new Limiter(cfg.executorConcurrency);

  const trees: RolloutTree<P>[] = [];
  let open: OpenGroup<P>[] = [];
  for (let i = 0; i < problems.length; i++) {
    const problem = problems[i] as P;
    const r = prompts.initial(problem);
    const promptIds = checkIds('initial prompt', isPromise(r) ? await r : r);
    const group: Group = { id: 0, turn: 1, parent: null, promptIds, nodes: [], pruned: false };
    const tree: RolloutTree<P> = {
      problemId: cfg.problemId(problem, i),
      problem,
      maxTurns: cfg.maxTurns,
      groups: [group],
      nodes: [],
    };
    trees.push(tree);
    open.push({ tree, treeKey: hashString(tree.problemId), group });
  }

  const noCode: ExecResult = Object.freeze({ reward: 0, passed: false, feedback: cfg.noCodeFeedback });
  const runExec = (problem: P, code: string): Promise<ExecResult> | ExecResult =>
    execLimit ? execLimit.run(() => executor.execute(problem, code)) : executor.execute(problem, code);

  // Per open group k: its completions, extracted code and execution results (filled as they arrive).
  let comps: Completion[][] = [];
  let codes: Array<Array<string | null>> = [];
  let results: ExecResult[][] = [];

  /** Extracts and executes completion j of group k; returns a promise only when the executor is async. */
  const executeOne = (og: OpenGroup<P>, k: number, c: Completion, j: number): void | Promise<void> => {
    if (
      c === null || typeof c !== 'object' || !Array.isArray(c.tokenIds) || typeof c.text !== 'string' ||
      (c.logprobs !== undefined && (!Array.isArray(c.logprobs) || c.logprobs.length !== c.tokenIds.length))
    ) {
      checkCompletion(c, () => `problem ${og.tree.problemId}, group ${og.group.id}, sample ${j}`);
    }
    const code = extract(c, og.tree.problem);
    codes[k]![j] = code;
    if (code === null) {
      results[k]![j] = noCode;
      return;
    }
    const r = runExec(og.tree.problem, code);
    if (isPromise(r)) {
      return r.then((res) => {
        results[k]![j] = validResult(res) ? res : checkResult(res, () => `problem ${og.tree.problemId}, group ${og.group.id}, sample ${j}`);
      });
    }
    results[k]![j] = validResult(r) ? r : checkResult(r, () => `problem ${og.tree.problemId}, group ${og.group.id}, sample ${j}`);
  };

  for (let turn = 1; turn <= cfg.maxTurns && open.length > 0; turn++) {
    const n = turn === 1 ? cfg.groupSize : cfg.followUpGroupSize;
    comps = new Array(open.length);
    codes = new Array(open.length);
    results = new Array(open.length);
    const pending: Promise<void>[] = [];
    for (let k = 0; k < open.length; k++) {
      const og = open[k]!;
      const params: SampleParams =
        cfg.seed === undefined ? cfg.sampling : { ...cfg.sampling, seed: mix32(cfg.seed, og.treeKey, og.group.id) };
      const afterSample = (cs: Completion[]): void | Promise<void> => {
        if (!Array.isArray(cs) || cs.length !== n) {
          throw new MurphyError(
            `sampler returned ${Array.isArray(cs) ? cs.length : typeof cs} completions, expected ${n} (problem ${og.tree.problemId}, group ${og.group.id})`,
          );
        }
        comps[k] = cs;
        codes[k] = new Array(n);
        results[k] = new Array(n);
        let waits: Promise<void>[] | null = null;
        for (let j = 0; j < n; j++) {
          const w = executeOne(og, k, cs[j]!, j);
          if (w) (waits ??= []).push(w);
        }
        if (waits) return Promise.all(waits).then(() => undefined);
      };
      try {
        const s = samplerLimit
          ? samplerLimit.run(() => sampler.generate(og.group.promptIds, n, params))
          : sampler.generate(og.group.promptIds, n, params);
        if (isPromise(s)) {
          pending.push(s.then(afterSample));
        } else {
          const a = afterSample(s);
          if (a) pending.push(a);
        }
      } catch (e) {
        // A synchronous failure: don't leave requests already in flight unobserved.
        for (const p of pending) p.catch(() => undefined);
        throw e;
      }
    }
    if (pending.length > 0) await Promise.all(pending);

    // Materialise nodes in a fixed order.
    const expandGroups: OpenGroup<P>[] = [];
    const expandNodes: TreeNode[] = [];
    for (let k = 0; k < open.length; k++) {
      const og = open[k]!;
      const tree = og.tree;
      const cs = comps[k]!;
      const cd = codes[k]!;
      const rs = results[k]!;
      for (let j = 0; j < cs.length; j++) {
        const c = cs[j]!;
        const code = cd[j]!;
        const result = rs[j]!;
        const reward = cfg.rewardMode === 'binary' ? (result.passed ? 1 : 0) : result.reward;
        const node: TreeNode = {
          id: tree.nodes.length,
          turn,
          parent: og.group.parent,
          group: og.group.id,
          index: j,
          completionIds: c.tokenIds,
          text: c.text,
          finishReason: c.finishReason,
          code,
          reward,
          passed: result.passed,
          feedback: result.feedback,
          childGroup: null,
          credit: NaN,
          advantage: NaN,
          pruned: false,
          // Always present (possibly undefined) so every node has one shape.
          logprobs: c.logprobs,
          tests: result.tests,
          prunedBy: undefined,
        };
        tree.nodes.push(node);
        og.group.nodes.push(node.id);
        if (turn < cfg.maxTurns && reward < cfg.successThreshold) {
          expandGroups.push(og);
          expandNodes.push(node);
        }
      }
    }

    // Expand failed nodes: their feedback becomes the next turn's prompt.
    const next: OpenGroup<P>[] = [];
    for (let e = 0; e < expandNodes.length; e++) {
      const og = expandGroups[e]!;
      const node = expandNodes[e]!;
      const tree = og.tree;
      const r = prompts.followUp({ problem: tree.problem, tree, node, promptIds: og.group.promptIds, feedback: node.feedback });
      const promptIds = checkIds('follow-up prompt', isPromise(r) ? await r : r);
      const group: Group = { id: tree.groups.length, turn: turn + 1, parent: node.id, promptIds, nodes: [], pruned: false };
      tree.groups.push(group);
      node.childGroup = group.id;
      next.push({ tree, treeKey: og.treeKey, group });
    }
    open = next;
  }
  return trees;
}

/** Builds the rollout tree of a single problem (see buildTrees). */
export async function buildTree<P>(
  problem: P,
  deps: TreeBuildDeps<P>,
  config: TreeBuildConfig<P>,
): Promise<RolloutTree<P>> {
  const [t] = await buildTrees([problem], deps, config);
  return t!;
}

/** Node ids from the root to `nodeId`, inclusive (turn 1 first). */
export function pathToNode(tree: RolloutTree<unknown>, nodeId: number): TreeNode[] {
  const path: TreeNode[] = [];
  let cur: number | null = nodeId;
  let guard = 0;
  while (cur !== null) {
    const n: TreeNode | undefined = tree.nodes[cur];
    if (!n) throw new MurphyError(`node ${cur} does not exist`);
    path.push(n);
    cur = n.parent;
    if (++guard > tree.nodes.length) throw new MurphyError('cycle in parent links');
  }
  return path.reverse();
}

/**
 * Checks a tree's structure: ids, group membership, parent/child links, turns within
 * [1, maxTurns], children exactly one turn deeper, rewards finite in [0, 1].
 * Throws MurphyError naming the first problem found.
 */
export function validateTree(tree: RolloutTree<unknown>): void {
  const bad = (msg: string): never => {
    throw new MurphyError(`malformed tree${tree && typeof tree === 'object' ? ` ${String(tree.problemId)}` : ''}: ${msg}`);
  };
  if (tree === null || typeof tree !== 'object') bad('not an object');
  if (!Array.isArray(tree.nodes) || !Array.isArray(tree.groups)) bad('nodes and groups must be arrays');
  const S = tree.maxTurns;
  if (!Number.isInteger(S) || S < 1) bad(`maxTurns must be an integer >= 1, got ${String(S)}`);
  const nodes = tree.nodes;
  const groups = tree.groups;
  const seen = new Uint8Array(nodes.length);
  for (let g = 0; g < groups.length; g++) {
    const grp = groups[g];
    if (!grp || grp.id !== g) bad(`group at index ${g} has id ${String(grp?.id)}`);
    const gr = grp!;
    if (!Array.isArray(gr.nodes) || gr.nodes.length === 0) bad(`group ${g} has no nodes`);
    if (!Number.isInteger(gr.turn) || gr.turn < 1 || gr.turn > S) bad(`group ${g} turn ${String(gr.turn)} outside [1, ${S}]`);
    if (gr.parent === null) {
      if (gr.turn !== 1) bad(`group ${g} has no parent but turn ${gr.turn}`);
    } else {
      const p = nodes[gr.parent];
      if (!p) bad(`group ${g} parent node ${gr.parent} does not exist`);
      if (p!.childGroup !== g) bad(`group ${g} parent node ${gr.parent} does not point back (childGroup ${String(p!.childGroup)})`);
      if (p!.turn + 1 !== gr.turn) bad(`group ${g} at turn ${gr.turn} but parent node ${gr.parent} at turn ${p!.turn}`);
    }
    for (const id of gr.nodes) {
      const n = nodes[id];
      if (!n) bad(`group ${g} lists missing node ${id}`);
      if (n!.group !== g) bad(`node ${id} listed in group ${g} but says group ${n!.group}`);
      if (seen[id]) bad(`node ${id} listed twice`);
      seen[id] = 1;
    }
  }
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i];
    if (!n || n.id !== i) bad(`node at index ${i} has id ${String(n?.id)}`);
    const nd = n!;
    if (!seen[i]) bad(`node ${i} belongs to no group`);
    const g = groups[nd.group]!;
    if (nd.turn !== g.turn) bad(`node ${i} turn ${nd.turn} != its group's turn ${g.turn}`);
    if (nd.parent !== g.parent) bad(`node ${i} parent ${String(nd.parent)} != its group's parent ${String(g.parent)}`);
    if (typeof nd.reward !== 'number' || !(nd.reward >= 0 && nd.reward <= 1)) bad(`node ${i} reward ${String(nd.reward)} not in [0, 1]`);
    if (nd.childGroup !== null) {
      const c = groups[nd.childGroup];
      if (!c || c.parent !== i) bad(`node ${i} childGroup ${nd.childGroup} does not name it as parent`);
    }
  }
  if (groups.length === 0) bad('no groups');
  if (groups[0]!.parent !== null) bad('group 0 must be the turn-1 group');
  for (let g = 1; g < groups.length; g++) if (groups[g]!.parent === null) bad(`more than one root group (group ${g})`);
}
