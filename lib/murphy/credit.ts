// Credit assignment: propagating rewards up the rollout tree (docs/method.md §2).

import { validateTree } from './tree.js';
import { MurphyError, type RolloutTree } from './types.js';

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
 * MaRS, in place: R(n) = r(n) for a leaf, else max(r(n), gamma * max over children R(c)).
 * Writes node.credit for every node and returns the tree.
 */
export function marsCredit<T extends RolloutTree<unknown>>(tree: T, options: CreditOptions = {}): T {
  const gamma = checkGamma(options.gamma ?? 1);
  if (!options.trusted) validateTree(tree);
  const { nodes, groups } = tree;
  const order = bottomUpOrder(tree);
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[order === null ? i : order[nodes.length - 1 - i]!]!;
    if (n.childGroup === null) {
      n.credit = n.reward;
      continue;
    }
    let best = -Infinity;
    for (const c of groups[n.childGroup]!.nodes) {
      const r = nodes[c]!.credit;
      if (r > best) best = r;
    }
    const prop = gamma * best;
    n.credit = n.reward > prop ? n.reward : prop;
  }
  return tree;
}

/**
 * MeRS, in place: R(n) = r(n) for a leaf; for an expanded node at turn t,
 * R(n) = (r(n) + (S - t) * gamma * mean over children R(c)) / (S - t + 1),
 * S = tree.maxTurns. Writes node.credit for every node and returns the tree.
 */
export function mersCredit<T extends RolloutTree<unknown>>(tree: T, options: CreditOptions = {}): T {
  const gamma = checkGamma(options.gamma ?? 1);
  if (!options.trusted) validateTree(tree);
  const { nodes, groups } = tree;
  const S = tree.maxTurns;
  const order = bottomUpOrder(tree);
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[order === null ? i : order[nodes.length - 1 - i]!]!;
    if (n.childGroup === null) {
      n.credit = n.reward;
      continue;
    }
    const kids = groups[n.childGroup]!.nodes;
    let sum = 0;
    for (const c of kids) sum += nodes[c]!.credit;
    const w = S - n.turn;
    n.credit = (n.reward + w * gamma * (sum / kids.length)) / (w + 1);
  }
  return tree;
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
