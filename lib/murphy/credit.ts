// Credit assignment: propagating rewards up the rollout tree (docs/method.md §2).

import { validateTree } from './tree.js';
import { MurphyError, type RolloutTree, type TreeNode } from './types.js';

/** MaRS (max-reward) or MeRS (mean-reward) propagation. */
export type CreditMethod = 'mars' | 'mers';

export interface CreditOptions {
  /** Discount applied to children's credit, in [0, 1]. Default 1. */
  gamma?: number;
  /** Skip validateTree (the builder's trees are valid by construction). Default false. */
  trusted?: boolean;
}

function checkGamma(gamma: number): number {
  if (typeof gamma !== 'number' || !(gamma >= 0 && gamma <= 1)) {
    throw new MurphyError(`gamma must be a number in [0, 1], got ${String(gamma)}`);
  }
  return gamma;
}

/**
 * Node ids ordered so that every node comes after all of its descendants (deepest turn
 * first), or null when reverse id order already is (builder trees are stored turn by turn).
 */
function bottomUpOrder(tree: RolloutTree<unknown>): number[] | null {
  const nodes = tree.nodes;
  let sorted = true;
  for (let i = 1; i < nodes.length; i++) {
    if (nodes[i]!.turn < nodes[i - 1]!.turn) {
      sorted = false;
      break;
    }
  }
  if (sorted) return null;
  const ids = nodes.map((n) => n.id);
  ids.sort((a, b) => nodes[b]!.turn - nodes[a]!.turn || b - a);
  return ids;
}

/**
 * The walk MaRS and MeRS share: checks gamma and (unless trusted) the tree, then visits every
 * node after all of its descendants, writing a leaf's credit R(n) = r(n) and an expanded node's
 * R(n) = expanded(n, its children's ids, tree.nodes, gamma), the children's credits already
 * written. Nothing is read from the tree before it is checked.
 */
function propagate<T extends RolloutTree<unknown>>(
  tree: T,
  options: CreditOptions,
  expanded: (n: TreeNode, kids: readonly number[], nodes: readonly TreeNode[], gamma: number) => number,
): T {
  const gamma = checkGamma(options.gamma ?? 1);
  if (!options.trusted) validateTree(tree);
  const { nodes, groups } = tree;
  const order = bottomUpOrder(tree);
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[order === null ? i : order[nodes.length - 1 - i]!]!;
    n.credit = n.childGroup === null ? n.reward : expanded(n, groups[n.childGroup]!.nodes, nodes, gamma);
  }
  return tree;
}

/**
 * MaRS, in place: R(n) = r(n) for a leaf, else max(r(n), gamma * max over children R(c)).
 * Writes node.credit for every node and returns the tree.
 */
export function marsCredit<T extends RolloutTree<unknown>>(tree: T, options: CreditOptions = {}): T {
  return propagate(tree, options, (n, kids, nodes, gamma) => {
    let best = -Infinity;
    for (const c of kids) {
      const r = nodes[c]!.credit;
      if (r > best) best = r;
    }
    const prop = gamma * best;
    return n.reward > prop ? n.reward : prop;
  });
}

/**
 * MeRS, in place: R(n) = r(n) for a leaf; for an expanded node at turn t,
 * R(n) = (r(n) + (S - t) * gamma * mean over children R(c)) / (S - t + 1),
 * S = tree.maxTurns. Writes node.credit for every node and returns the tree.
 */
export function mersCredit<T extends RolloutTree<unknown>>(tree: T, options: CreditOptions = {}): T {
  return propagate(tree, options, (n, kids, nodes, gamma) => {
    let sum = 0;
    for (const c of kids) sum += nodes[c]!.credit;
    const w = tree.maxTurns - n.turn;
    return (n.reward + w * gamma * (sum / kids.length)) / (w + 1);
  });
}

/** Applies MaRS or MeRS (default 'mars') in place. */
export function assignCredit<T extends RolloutTree<unknown>>(
  tree: T,
  options: CreditOptions & { method?: CreditMethod } = {},
): T {
  const method = options.method ?? 'mars';
  if (method === 'mars') return marsCredit(tree, options);
  if (method === 'mers') return mersCredit(tree, options);
  throw new MurphyError(`credit method must be 'mars' or 'mers', got ${String(method)}`);
}
