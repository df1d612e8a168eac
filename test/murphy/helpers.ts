// Test helpers: hand-written trees and scripted samplers.
import fc from 'fast-check';
import {
  batchStats, buildTrees, flattenSamples, processTrees,
  type Completion, type ExecResult, type Executor, type Group, type ProcessConfig, type RolloutTree, type Sampler, type TreeBuildConfig, type TreeBuildDeps, type TreeNode,
} from '../../lib/murphy/index.js';
import { extractFromCompletion } from '../../lib/prompt/index.js';

/** The tree builder's extractor for the fake samplers' fenced python blocks. */
export const extractCode = extractFromCompletion;

/** A rollout phase as the training loop runs it: build, process (credit, pruning, advantages), flatten. */
export async function buildAndProcess<P>(problems: readonly P[], deps: Omit<TreeBuildDeps<P>, 'extractCode'>, config: TreeBuildConfig<P> & ProcessConfig) {
  const trees = await buildTrees(problems, { ...deps, extractCode }, config);
  const report = processTrees(trees, config, { trusted: true });
  return { trees, report, samples: flattenSamples(trees), stats: batchStats(trees) };
}

/** A node spec: a leaf reward, or [reward, children specs] for an expanded node. */
export type Spec = number | [number, Spec[]];

/**
 * Builds a tree from specs, breadth-first so node ids are in turn order (as the builder
 * stores them). `roots` is the turn-1 group. Each node gets `tokens` completion tokens and
 * each group a prompt of 10 * turn tokens.
 */
export function handTree(maxTurns: number, roots: Spec[], problemId = 'p', tokens = 5): RolloutTree<null> {
  const tree: RolloutTree<null> = { problemId, problem: null, maxTurns, groups: [], nodes: [] };
  let queue: Array<{ specs: Spec[]; parent: number | null; turn: number }> = [{ specs: roots, parent: null, turn: 1 }];
  while (queue.length) {
    const next: typeof queue = [];
    for (const q of queue) {
      const g: Group = { id: tree.groups.length, turn: q.turn, parent: q.parent, promptIds: Array.from({ length: 10 * q.turn }, (_, i) => i), nodes: [], pruned: false };
      tree.groups.push(g);
      if (q.parent !== null) tree.nodes[q.parent]!.childGroup = g.id;
      q.specs.forEach((s, index) => {
        const reward = typeof s === 'number' ? s : s[0];
        const n: TreeNode = {
          id: tree.nodes.length, turn: q.turn, parent: q.parent, group: g.id, index,
          completionIds: Array.from({ length: tokens }, (_, i) => 100 + i), text: `t${tree.nodes.length}`, finishReason: 'stop',
          code: 'pass', reward, passed: reward === 1, feedback: reward === 1 ? 'ok' : 'fail',
          childGroup: null, credit: NaN, advantage: NaN, pruned: false, logprobs: undefined, tests: undefined, prunedBy: undefined, noRoom: undefined,
        };
        tree.nodes.push(n);
        g.nodes.push(n.id);
        if (typeof s !== 'number') next.push({ specs: s[1], parent: n.id, turn: q.turn + 1 });
      });
    }
    queue = next;
  }
  return tree;
}

/** Random tree: G per group, S turns; rewards consumed from the pool in BFS order (cycling); failed nodes at t < S expand. */
export function poolTree(S: number, G: number, pool: number[], problemId = 'p'): RolloutTree<null> {
  let k = 0;
  const take = () => pool[k++ % pool.length]!;
  const mk = (turn: number): Spec[] =>
    Array.from({ length: G }, () => {
      const r = take();
      return r < 1 && turn < S ? ([r, []] as [number, Spec[]]) : r;
    });
  // Breadth-first fill so the pool order is stable.
  const roots = mk(1);
  let level: Spec[][] = [roots];
  for (let t = 1; t < S; t++) {
    const nextLevel: Spec[][] = [];
    for (const specs of level) for (const s of specs) if (typeof s !== 'number') { s[1] = mk(t + 1); nextLevel.push(s[1]); }
    level = nextLevel;
  }
  return handTree(S, roots, problemId);
}

export const rewardArb = fc.oneof(fc.constant(0), fc.constant(1), fc.constant(0.5), fc.double({ min: 0, max: 1, noNaN: true }));
export const treeArb = fc.record({
  S: fc.integer({ min: 1, max: 4 }),
  G: fc.integer({ min: 1, max: 3 }),
  pool: fc.array(rewardArb, { minLength: 1, maxLength: 30 }),
}).map(({ S, G, pool }) => poolTree(S, G, pool));

/**
 * Sampler that answers each call with the next script entry: a list of "k/T" grades,
 * encoded in the text as "# fake k/T" (graded by FakeExecutor). Token ids: [call, j, 3].
 */
export class ScriptSampler implements Sampler {
  calls: Array<{ promptIds: number[]; n: number }> = [];
  constructor(private readonly script: string[][]) {}
  async generate(promptIds: number[], n: number): Promise<Completion[]> {
    const c = this.calls.length;
    this.calls.push({ promptIds, n });
    const grades = this.script[c];
    if (!grades) throw new Error(`script has no entry for call ${c}`);
    return grades.map((g, j) => ({ tokenIds: [1000 + c, j, 3], logprobs: [-0.5, -0.25, -0.125], text: `\`\`\`python\n# fake ${g}\n\`\`\``, finishReason: 'stop' }));
  }
}

export const constExecutor = (r: ExecResult): Executor<unknown> => ({ execute: async () => r });

export const close = (a: number, b: number, tol = 1e-9): boolean => Math.abs(a - b) <= tol * Math.max(1, Math.abs(a), Math.abs(b));
