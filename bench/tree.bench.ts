// Benchmark: build, credit, prune and flatten MURPHY rollout trees with a fake sampler and
// executor (no model). Reports trees per second on one core (target >= 10,000/s at G = 8, S = 3).
//
//   node --import tsx bench/tree.bench.ts [--trees N] [--batch B] [--pass p1,p2,p3] [--json FILE]
//
// --pass: probability that a fake completion passes, by turn (default 0.4,0.3,0.3). Tree size
// (and so trees/s) depends strongly on it: about 260 completions per tree at the default.

import { writeFileSync } from 'node:fs';
import {
  buildTrees, processTrees, flattenSamples, batchStats,
  FakeExecutor, FakePromptBuilder, FakeSampler, type ProcessConfig, type TreeBuildConfig,
} from '../lib/murphy/index.js';
import { extractFromCompletion } from '../lib/prompt/index.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const TREES = Number(arg('--trees') ?? 10_000);
const BATCH = Number(arg('--batch') ?? 256);
const G = 8;
const S = 3;
const PASS = (arg('--pass') ?? '0.4,0.3,0.3').split(',').map(Number);
const config: TreeBuildConfig<number> & ProcessConfig = {
  groupSize: G,
  maxTurns: S,
  seed: 1,
  credit: 'mars',
  intraP: { keep: 6 },
  interP: { perProblem: 8 },
  samplerConcurrency: Infinity,
  executorConcurrency: Infinity,
  problemId: (p) => `p${p}`,
};

async function runOnce(nTrees: number) {
  const sampler = new FakeSampler({ passProbByTurn: PASS, completionTokens: 16 });
  const deps = { sampler, executor: new FakeExecutor(), prompts: new FakePromptBuilder(32, 8), extractCode: extractFromCompletion };
  let nodes = 0;
  let samples = 0;
  let kept = 0;
  let sampled = 0;
  let avgSum = 0;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let start = 0; start < nTrees; start += BATCH) {
    const problems = Array.from({ length: Math.min(BATCH, nTrees - start) }, (_, i) => start + i);
    const trees = await buildTrees(problems, deps, config);
    processTrees(trees, config, { trusted: true });
    const flat = flattenSamples(trees);
    samples += flat.length;
    for (const t of trees) nodes += t.nodes.length;
    if (start === 0) {
      const st = batchStats(trees);
      kept = st.completionTokensKept;
      sampled = st.completionTokensSampled;
      avgSum = st.avgCompletionsPerProblem;
    }
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const cu = process.cpuUsage(c0);
  return { seconds: s, cpuSeconds: (cu.user + cu.system) / 1e6, nodes, samples, keptTokenFraction: kept / sampled, avgCompletionsPerProblem: avgSum };
}

await runOnce(Math.min(2_000, TREES)); // warm-up (JIT)
const r = await runOnce(TREES);
const result = {
  name: 'murphy.tree.build+credit+prune+flatten',
  trees_per_s: TREES / r.seconds,
  trees_per_cpu_s: TREES / r.cpuSeconds,
  nodes_per_s: r.nodes / r.seconds,
  cpu_seconds: r.cpuSeconds,
  batch: BATCH,
  trees: TREES,
  seconds: r.seconds,
  G,
  S,
  pass_prob_by_turn: PASS,
  avg_completions_per_tree: r.nodes / TREES,
  samples_kept: r.samples,
  kept_completion_token_fraction: r.keptTokenFraction,
  target_trees_per_s: 10_000,
  node: process.version,
};
console.log(
  `${result.name}: ${result.trees_per_s.toFixed(0)} trees/s wall, ${result.trees_per_cpu_s.toFixed(0)} trees per CPU-second ` +
    `(${(result.nodes_per_s / 1e6).toFixed(2)} M nodes/s wall), ` +
    `${TREES} trees, G=${G}, S=${S}, ${result.avg_completions_per_tree.toFixed(1)} completions/tree, ` +
    `${r.samples} samples kept; target >= 10000 trees/s`,
);
const jsonPath = arg('--json');
if (jsonPath) writeFileSync(jsonPath, JSON.stringify(result, null, 2) + '\n');
