// The rollout trees the report's viewer embeds: a slim form of each logged tree, what makes a
// tree worth opening (expanded, repaired, still failing), and a sample of whole steps that
// keeps the report small.

/** A node as the viewer needs it. `text` is left out when it equals `code`. */
export interface ViewerNode {
  id: number;
  turn: number;
  parent: number | null;
  group: number;
  code: string | null;
  text?: string;
  feedback: string;
  reward: number;
  passed: boolean;
  credit: number | null;
  advantage: number | null;
  pruned: boolean;
  prunedBy?: string;
  childGroup: number | null;
  promptTokens: number;
  completionTokens: number;
  finishReason: string;
}

export interface ViewerTree {
  step: number;
  problemId: string;
  maxTurns: number;
  groups: { nodes: number[] }[];
  nodes: ViewerNode[];
  /** expanded: some node got a second turn; repaired: a failed attempt has a passing follow-up; failing: a line of attempts ends failed. */
  flags: { expanded: boolean; repaired: boolean; failing: boolean };
  /** Deepest turn present. */
  turns: number;
}

export interface TreeSampling {
  /** Trees and steps in the run's trees.jsonl.gz. */
  totalTrees: number;
  totalSteps: number;
  /** Embedded. */
  trees: number;
  steps: number;
  /** Bytes of the embedded tree JSON. */
  bytes: number;
  /** One sentence for the page. */
  note: string;
}

const r4 = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? Math.round(x * 1e4) / 1e4 : null);

/** What makes a tree interesting, from its nodes. */
export function treeFlags(nodes: readonly Pick<ViewerNode, 'passed' | 'childGroup' | 'turn' | 'parent'>[], groups: readonly { nodes: number[] }[]): ViewerTree['flags'] {
  let expanded = false;
  let repaired = false;
  let failing = false;
  for (const n of nodes) {
    if (n.turn > 1) expanded = true;
    const kids = n.childGroup !== null && n.childGroup !== undefined ? (groups[n.childGroup]?.nodes ?? []) : [];
    if (!n.passed && kids.some((k) => nodes[k]?.passed)) repaired = true;
    if (!n.passed && kids.length === 0) failing = true;
  }
  return { expanded, repaired, failing };
}

/** The viewer's form of one trees.jsonl line. */
export function viewerTree(line: Record<string, unknown>): ViewerTree {
  const groups = ((line.groups as { nodes: number[] }[] | undefined) ?? []).map((g) => ({ nodes: g.nodes }));
  const nodes: ViewerNode[] = ((line.nodes as Record<string, unknown>[] | undefined) ?? []).map((n) => {
    const v: ViewerNode = {
      id: n.id as number,
      turn: n.turn as number,
      parent: (n.parent as number | null) ?? null,
      group: n.group as number,
      code: (n.code as string | null) ?? null,
      feedback: String(n.feedback ?? ''),
      reward: r4(n.reward) ?? 0,
      passed: Boolean(n.passed),
      credit: r4(n.credit),
      advantage: r4(n.advantage),
      pruned: Boolean(n.pruned),
      childGroup: (n.childGroup as number | null) ?? null,
      promptTokens: Number(n.promptTokens ?? 0),
      completionTokens: Number(n.completionTokens ?? 0),
      finishReason: String(n.finishReason ?? ''),
    };
    if (typeof n.text === 'string' && n.text !== v.code) v.text = n.text;
    if (typeof n.prunedBy === 'string') v.prunedBy = n.prunedBy;
    return v;
  });
  return {
    step: Number(line.step ?? 0),
    problemId: String(line.problemId ?? ''),
    maxTurns: Number(line.maxTurns ?? 1),
    groups,
    nodes,
    flags: treeFlags(nodes, groups),
    turns: Math.max(0, ...nodes.map((n) => n.turn)),
  };
}

/**
 * Keeps whole steps, evenly spread from the first to the last, so that the embedded JSON stays
 * under `maxBytes` and at most `maxTrees` trees; all trees when they fit.
 */
export function sampleTrees(all: readonly ViewerTree[], o: { maxTrees: number; maxBytes: number }): { trees: ViewerTree[]; sampling: TreeSampling } {
  const bySteps = new Map<number, ViewerTree[]>();
  for (const t of all) {
    const a = bySteps.get(t.step);
    if (a) a.push(t);
    else bySteps.set(t.step, [t]);
  }
  const steps = [...bySteps.keys()].sort((a, b) => a - b);
  const stepBytes = new Map(steps.map((s) => [s, bySteps.get(s)!.reduce((a, t) => a + JSON.stringify(t).length + 1, 0)]));
  const bytesOf = (ss: readonly number[]): number => ss.reduce((a, s) => a + stepBytes.get(s)!, 0);
  const treesOf = (ss: readonly number[]): number => ss.reduce((a, s) => a + bySteps.get(s)!.length, 0);
  const totalBytes = bytesOf(steps);
  let keep = steps;
  if (steps.length > 1 && (totalBytes > o.maxBytes || all.length > o.maxTrees)) {
    const perStep = Math.max(totalBytes / steps.length, 1);
    const treesPerStep = all.length / steps.length;
    let k = Math.max(1, Math.min(steps.length, Math.floor(o.maxBytes / perStep), Math.floor(o.maxTrees / treesPerStep)));
    for (;;) {
      keep = k === 1 ? [steps[steps.length - 1]!] : Array.from(new Set(Array.from({ length: k }, (_, i) => steps[Math.round((i * (steps.length - 1)) / (k - 1))]!)));
      if (k === 1 || (bytesOf(keep) <= o.maxBytes && treesOf(keep) <= o.maxTrees)) break;
      k--; // uneven step sizes: one step fewer until it fits
    }
  }
  const trees = keep.flatMap((s) => bySteps.get(s)!);
  const bytes = bytesOf(keep);
  const note =
    keep.length === steps.length
      ? `All ${all.length} trees of the run's ${steps.length} steps are embedded.`
      : `Embedded: the trees of ${keep.length} of the ${steps.length} logged steps (every ${Math.round((steps.length - 1) / Math.max(1, keep.length - 1))}th step or so, first and last included, all problems of each), ${trees.length} of ${all.length} trees, to keep this file small. Every tree is in trees.jsonl.gz; \`murphy-native report --max-tree-bytes\` embeds more.`;
  return { trees, sampling: { totalTrees: all.length, totalSteps: steps.length, trees: trees.length, steps: keep.length, bytes, note } };
}
