// Building feedback-conditioned rollout trees (docs/method.md §1).

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
  /**
   * Finds the code in a completion (null: none). The core knows no prompt format:
   * lib/prompt's extractFromCompletion (last fenced python block, HumanEval-aware) is the
   * one for chat models.
   */
  extractCode: CodeExtractor<P>;
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

function defaultProblemId(problem: unknown, index: number): string {
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

/** An open group's sampled completions with, per completion, the extracted code and the execution result. */
interface Attempts {
  completions: Completion[];
  codes: (string | null)[];
  results: ExecResult[];
}

/** 32-bit FNV-1a hash of a string. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function checkIds(what: string, ids: unknown): number[] {
  if (!Array.isArray(ids)) throw new MurphyError(`${what} must be an array of token ids`);
  return ids as number[];
}

/** Where in the batch an output came from, for error messages. */
function place(og: OpenGroup<unknown>, j?: number): string {
  return `problem ${og.tree.problemId}, group ${og.group.id}${j === undefined ? '' : `, sample ${j}`}`;
}

function checkCompletions(cs: unknown, n: number, og: OpenGroup<unknown>): Completion[] {
  if (!Array.isArray(cs) || cs.length !== n) {
    throw new MurphyError(`sampler returned ${Array.isArray(cs) ? cs.length : typeof cs} completions, expected ${n} (${place(og)})`);
  }
  for (let j = 0; j < n; j++) {
    const o = cs[j] as Completion;
    if (o === null || typeof o !== 'object') throw new MurphyError(`sampler returned a non-object completion (${place(og, j)})`);
    if (!Array.isArray(o.tokenIds)) throw new MurphyError(`sampler completion without tokenIds (${place(og, j)})`);
    if (typeof o.text !== 'string') throw new MurphyError(`sampler completion without text (${place(og, j)})`);
    if (o.logprobs !== undefined && (!Array.isArray(o.logprobs) || o.logprobs.length !== o.tokenIds.length)) {
      throw new MurphyError(`sampler completion logprobs length ${o.logprobs?.length} != tokenIds length ${o.tokenIds.length} (${place(og, j)})`);
    }
  }
  return cs as Completion[];
}

function checkResult(r: unknown, og: OpenGroup<unknown>, j: number): ExecResult {
  if (r === null || typeof r !== 'object') throw new MurphyError(`executor returned a non-object result (${place(og, j)})`);
  const o = r as ExecResult;
  if (typeof o.reward !== 'number' || !(o.reward >= 0 && o.reward <= 1)) {
    throw new MurphyError(`executor reward must be a number in [0, 1], got ${String(o.reward)} (${place(og, j)})`);
  }
  if (typeof o.passed !== 'boolean') throw new MurphyError(`executor result.passed must be a boolean (${place(og, j)})`);
  if (typeof o.feedback !== 'string') throw new MurphyError(`executor result.feedback must be a string (${place(og, j)})`);
  return o;
}

/** Feedback of a node whose prompt left no room in the context (never shown to the model: it is a leaf). */
export const NO_ROOM_FEEDBACK = 'The conversation reached the context limit: no room was left for an answer.';

function isPromise<T>(v: T | Promise<T>): v is Promise<T> {
  return v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function';
}

/** The builder's run: validated inputs and the concurrency limits of one buildTrees call. */
class TreeBuild<P> {
  private readonly samplerLimit: Limiter | null;
  private readonly execLimit: Limiter | null;
  private readonly noCode: ExecResult;
  private readonly noRoom: ExecResult;

  constructor(private readonly deps: TreeBuildDeps<P>, private readonly cfg: ResolvedTreeBuildConfig<P>) {
    this.samplerLimit = cfg.samplerConcurrency === Infinity ? null : new Limiter(cfg.samplerConcurrency);
    this.execLimit = cfg.executorConcurrency === Infinity ? null : new Limiter(cfg.executorConcurrency);
    this.noCode = Object.freeze({ reward: 0, passed: false, feedback: cfg.noCodeFeedback });
    this.noRoom = Object.freeze({ reward: 0, passed: false, feedback: NO_ROOM_FEEDBACK });
  }

  /**
   * Samples every open group of a turn concurrently; each group's completions are executed
   * as soon as its sampling returns. Resolves to the attempts of each group, in group order.
   */
  async sampleTurn(open: readonly OpenGroup<P>[], n: number): Promise<Attempts[]> {
    const pending = open.map((og) => this.sampleGroup(og, n));
    try {
      return await Promise.all(pending);
    } catch {
      // every group settles before the turn fails, so no request is left unobserved; the
      // error reported is the first group's in group order
      const settled = await Promise.allSettled(pending);
      throw (settled.find((r): r is PromiseRejectedResult => r.status === 'rejected') as PromiseRejectedResult).reason;
    }
  }

  /**
   * One group: sample, then execute each completion as soon as the group's sampling returns.
   * Chained promises rather than an async function with awaits: the executions are the hot
   * path (one per completion), and each suspended frame or closure here is garbage per group
   * or per completion.
   */
  private sampleGroup(og: OpenGroup<P>, n: number): Promise<Attempts> {
    const { cfg, deps } = this;
    const params: SampleParams = cfg.seed === undefined ? cfg.sampling : { ...cfg.sampling, seed: mix32(cfg.seed, og.treeKey, og.group.id) };
    let sampled: Promise<Completion[]>;
    try {
      sampled = this.samplerLimit ? this.samplerLimit.run(() => deps.sampler.generate(og.group.promptIds, n, params)) : deps.sampler.generate(og.group.promptIds, n, params);
    } catch (e) {
      return Promise.reject(e); // a synchronous throw fails this group like a rejection
    }
    return sampled.then((cs) => this.executeGroup(og, checkCompletions(cs, n, og), n));
  }

  private executeGroup(og: OpenGroup<P>, completions: Completion[], n: number): Attempts | Promise<Attempts> {
    const { deps } = this;
    const problem = og.tree.problem;
    const codes: (string | null)[] = new Array(n);
    const results: ExecResult[] = new Array(n);
    const runs: Promise<ExecResult>[] = [];
    try {
      for (let j = 0; j < n; j++) {
        const c = completions[j]!;
        const code = c.noRoom === true ? null : deps.extractCode(c, problem);
        codes[j] = code;
        if (code === null) {
          results[j] = c.noRoom === true ? this.noRoom : this.noCode;
          continue;
        }
        runs.push(this.execLimit ? this.execLimit.run(() => deps.executor.execute(problem, code)) : deps.executor.execute(problem, code));
      }
    } catch (e) {
      // executions already started settle first: none is left unobserved
      return Promise.allSettled(runs).then(() => Promise.reject(e));
    }
    const attempts: Attempts = { completions, codes, results };
    if (runs.length === 0) return attempts;
    return Promise.all(runs).then((rs) => {
      // runs are in sample order, one per completion with code
      let k = 0;
      for (let j = 0; j < n; j++) {
        if (codes[j] === null) continue;
        results[j] = checkResult(rs[k++], og, j);
      }
      return attempts;
    });
  }

  /**
   * Adds a turn's nodes to their trees in a fixed order (group, then sample index) and
   * returns the nodes to expand: failed (reward below the threshold) before the last turn,
   * and not ended by a full context.
   */
  materialise(open: readonly OpenGroup<P>[], attempts: readonly Attempts[], turn: number): { og: OpenGroup<P>; node: TreeNode }[] {
    const cfg = this.cfg;
    const expand: { og: OpenGroup<P>; node: TreeNode }[] = [];
    for (let k = 0; k < open.length; k++) {
      const og = open[k]!;
      const tree = og.tree;
      const { completions, codes, results } = attempts[k]!;
      for (let j = 0; j < completions.length; j++) {
        const c = completions[j]!;
        const code = codes[j] ?? null;
        const result = results[j]!;
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
          noRoom: c.noRoom === true ? true : undefined,
        };
        tree.nodes.push(node);
        og.group.nodes.push(node.id);
        if (turn < cfg.maxTurns && reward < cfg.successThreshold && node.noRoom !== true) expand.push({ og, node });
      }
    }
    return expand;
  }

  /** Expands failed nodes: each one's feedback becomes the prompt of a new group of the next turn. */
  async expandFailures(expand: readonly { og: OpenGroup<P>; node: TreeNode }[], turn: number): Promise<OpenGroup<P>[]> {
    const next: OpenGroup<P>[] = [];
    for (const { og, node } of expand) {
      const tree = og.tree;
      const r = this.deps.prompts.followUp({ problem: tree.problem, tree, node, promptIds: og.group.promptIds, feedback: node.feedback });
      const ids = isPromise(r) ? await r : r;
      const group: Group = { id: tree.groups.length, turn: turn + 1, parent: node.id, promptIds: checkIds('follow-up prompt', ids), nodes: [], pruned: false };
      tree.groups.push(group);
      node.childGroup = group.id;
      next.push({ tree, treeKey: og.treeKey, group });
    }
    return next;
  }
}

/**
 * Builds one rollout tree per problem. Turns are synchronous across problems: all open
 * groups of turn t (of every problem) are sampled and executed concurrently, bounded by
 * samplerConcurrency / executorConcurrency, and each completion is executed as soon as its
 * group's sampling returns. Node and group ids are assigned in a fixed order (problem,
 * parent node, sample index), so results do not depend on completion timing. A completion
 * whose prompt left no room in the context (Completion.noRoom) becomes a leaf with reward 0,
 * neither executed nor expanded.
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
  if (typeof deps.extractCode !== 'function') throw new MurphyError('deps.extractCode is required (lib/prompt\'s extractFromCompletion for chat models)');
  const build = new TreeBuild(deps, cfg);

  const trees: RolloutTree<P>[] = [];
  let open: OpenGroup<P>[] = [];
  for (let i = 0; i < problems.length; i++) {
    const problem = problems[i] as P;
    const promptIds = checkIds('initial prompt', await deps.prompts.initial(problem));
    const group: Group = { id: 0, turn: 1, parent: null, promptIds, nodes: [], pruned: false };
    const tree: RolloutTree<P> = { problemId: cfg.problemId(problem, i), problem, maxTurns: cfg.maxTurns, groups: [group], nodes: [] };
    trees.push(tree);
    open.push({ tree, treeKey: hashString(tree.problemId), group });
  }
  for (let turn = 1; turn <= cfg.maxTurns && open.length > 0; turn++) {
    const attempts = await build.sampleTurn(open, turn === 1 ? cfg.groupSize : cfg.followUpGroupSize);
    open = await build.expandFailures(build.materialise(open, attempts, turn), turn);
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
