// JSON (de)serialization of rollout trees for logs and the report.

import { validateTree } from './tree.js';
import { MurphyError, type FinishReason, type Group, type RolloutTree, type TestOutcome, type TreeNode } from './types.js';

export const TREE_JSON_VERSION = 1;

export interface SerializedGroup {
  id: number;
  turn: number;
  parent: number | null;
  promptTokens: number;
  /** Present unless serialized with tokenIds: false. */
  promptIds?: number[];
  nodes: number[];
  pruned: boolean;
}

export interface SerializedNode {
  id: number;
  turn: number;
  parent: number | null;
  /** Prompt reference: the group whose prompt produced this node. */
  group: number;
  index: number;
  text: string;
  code: string | null;
  finishReason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  completionIds?: number[];
  logprobs?: number[];
  reward: number;
  passed: boolean;
  feedback: string;
  tests?: TestOutcome[];
  childGroup: number | null;
  /** null until assigned. */
  credit: number | null;
  advantage: number | null;
  pruned: boolean;
  prunedBy?: 'intra' | 'inter';
  /** Present (true) only for a node whose prompt left no room in the context. */
  noRoom?: true;
}

/** The JSON shape of a tree (version 1). The problem itself is not included, only its id. */
export interface SerializedTree {
  version: number;
  problemId: string;
  maxTurns: number;
  groups: SerializedGroup[];
  nodes: SerializedNode[];
}

export interface SerializeOptions {
  /** Include prompt/completion token ids and logprobs. Default true (needed for an exact round trip). */
  tokenIds?: boolean;
}

const numOrNull = (x: number): number | null => (Number.isFinite(x) ? x : null);

/** Plain JSON-ready object for a tree. */
export function treeToJSON(tree: RolloutTree<unknown>, options: SerializeOptions = {}): SerializedTree {
  const ids = options.tokenIds ?? true;
  return {
    version: TREE_JSON_VERSION,
    problemId: tree.problemId,
    maxTurns: tree.maxTurns,
    groups: tree.groups.map((g) => {
      const o: SerializedGroup = { id: g.id, turn: g.turn, parent: g.parent, promptTokens: g.promptIds.length, nodes: g.nodes.slice(), pruned: g.pruned };
      if (ids) o.promptIds = g.promptIds.slice();
      return o;
    }),
    nodes: tree.nodes.map((n) => {
      const o: SerializedNode = {
        id: n.id,
        turn: n.turn,
        parent: n.parent,
        group: n.group,
        index: n.index,
        text: n.text,
        code: n.code,
        finishReason: n.finishReason,
        promptTokens: tree.groups[n.group]?.promptIds.length ?? 0,
        completionTokens: n.completionIds.length,
        reward: n.reward,
        passed: n.passed,
        feedback: n.feedback,
        childGroup: n.childGroup,
        credit: numOrNull(n.credit),
        advantage: numOrNull(n.advantage),
        pruned: n.pruned,
      };
      if (ids) {
        o.completionIds = n.completionIds.slice();
        if (n.logprobs !== undefined) o.logprobs = n.logprobs.slice();
      }
      if (n.tests !== undefined) o.tests = n.tests.map((t) => ({ ...t }));
      if (n.prunedBy !== undefined) o.prunedBy = n.prunedBy;
      if (n.noRoom === true) o.noRoom = true;
      return o;
    }),
  };
}

/** JSON text of a tree. */
export function serializeTree(tree: RolloutTree<unknown>, options: SerializeOptions = {}): string {
  return JSON.stringify(treeToJSON(tree, options));
}

function fail(msg: string): never {
  throw new MurphyError(`cannot deserialize tree: ${msg}`);
}

function intOrNull(v: unknown, what: string): number | null {
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v)) fail(`${what} must be an integer or null`);
  return v as number;
}

function int(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) fail(`${what} must be an integer`);
  return v as number;
}

function numArray(v: unknown, what: string): number[] {
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'number')) fail(`${what} must be an array of numbers`);
  return (v as number[]).slice();
}

/**
 * Rebuilds a tree from treeToJSON output or its JSON text, checking its structure
 * (validateTree). Token ids are empty arrays when they were not serialized. `problem` is
 * attached as the tree's problem (default null).
 */
export function deserializeTree<P = null>(json: string | SerializedTree, problem?: P): RolloutTree<P | null> {
  let o: unknown = json;
  if (typeof json === 'string') {
    try {
      o = JSON.parse(json);
    } catch (e) {
      fail(`invalid JSON (${(e as Error).message})`);
    }
  }
  if (o === null || typeof o !== 'object') fail('not an object');
  const t = o as SerializedTree;
  if (t.version !== TREE_JSON_VERSION) fail(`unsupported version ${String(t.version)}`);
  if (typeof t.problemId !== 'string') fail('problemId must be a string');
  if (!Array.isArray(t.groups) || !Array.isArray(t.nodes)) fail('groups and nodes must be arrays');
  const groups: Group[] = t.groups.map((g, i) => {
    if (g === null || typeof g !== 'object') fail(`group ${i} is not an object`);
    return {
      id: int(g.id, `group ${i} id`),
      turn: int(g.turn, `group ${i} turn`),
      parent: intOrNull(g.parent, `group ${i} parent`),
      promptIds: g.promptIds === undefined ? [] : numArray(g.promptIds, `group ${i} promptIds`),
      nodes: numArray(g.nodes, `group ${i} nodes`),
      pruned: g.pruned === true,
    };
  });
  const nodes: TreeNode[] = t.nodes.map((n, i) => {
    if (n === null || typeof n !== 'object') fail(`node ${i} is not an object`);
    if (typeof n.reward !== 'number') fail(`node ${i} reward must be a number`);
    if (typeof n.text !== 'string' || typeof n.feedback !== 'string') fail(`node ${i} text and feedback must be strings`);
    const node: TreeNode = {
      id: int(n.id, `node ${i} id`),
      turn: int(n.turn, `node ${i} turn`),
      parent: intOrNull(n.parent, `node ${i} parent`),
      group: int(n.group, `node ${i} group`),
      index: int(n.index, `node ${i} index`),
      completionIds: n.completionIds === undefined ? [] : numArray(n.completionIds, `node ${i} completionIds`),
      text: n.text,
      finishReason: n.finishReason,
      code: typeof n.code === 'string' ? n.code : null,
      reward: n.reward,
      passed: n.passed === true,
      feedback: n.feedback,
      childGroup: intOrNull(n.childGroup, `node ${i} childGroup`),
      credit: typeof n.credit === 'number' ? n.credit : NaN,
      advantage: typeof n.advantage === 'number' ? n.advantage : NaN,
      pruned: n.pruned === true,
      // Same shape as builder nodes: optional fields present, possibly undefined.
      logprobs: n.logprobs === undefined ? undefined : numArray(n.logprobs, `node ${i} logprobs`),
      tests: n.tests === undefined ? undefined : n.tests.map((x) => ({ ...x })),
      prunedBy: n.prunedBy === 'intra' || n.prunedBy === 'inter' ? n.prunedBy : undefined,
      noRoom: n.noRoom === true ? true : undefined,
    };
    return node;
  });
  const tree: RolloutTree<P | null> = { problemId: t.problemId, problem: problem ?? null, maxTurns: int(t.maxTurns, 'maxTurns'), groups, nodes };
  validateTree(tree);
  return tree;
}
