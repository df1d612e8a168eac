// Training step time of this build against another native binary (e.g. one built from an earlier
// commit): `node --import tsx bench/train-vs-binary.ts OTHER.node [--config small|qwen3-0.6b-2layers]
// [--seqs 8] [--len 512] [--iters 3] [--rounds 2] [--json FILE]`.
//
// Each round runs a fresh child process per binary, alternating (the other binary, then this
// build), so a host whose speed moves hits both alike. A child makes the model of the config
// (bench/model-shapes.ts), packs `seqs` sequences of `len` tokens and runs `iters` steps
// (accumulate with cross-entropy over every token, then AdamW), timing each; it reports the
// first step (which also pays for the buffers' first touch), the best later one, and the whole
// process's minor page faults and system CPU time (what the cache of big GEMM buffers cut:
// docs/kernels.md, "CPU GEMM").
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { resolve } from 'node:path';
import { cliArgs, machineInfo, writeJsonAtomic } from './common.js';
import { modelCases } from './model-shapes.js';

const { argv, flag, opt } = cliArgs();
const log = (s: string) => process.stderr.write(`${s}\n`);
const config = opt('--config') ?? 'qwen3-0.6b-2layers';
const seqs = Number(opt('--seqs') ?? 8), len = Number(opt('--len') ?? 512), iters = Number(opt('--iters') ?? 3);

if (flag('--child')) {
  const { PolicyModel, packSequences } = await import('../lib/model/index.js');
  const c = modelCases(false).find((x) => x.name === config)!;
  const s = c.sizes;
  const m = await PolicyModel.random(s, { seed: 1 });
  const rand = (n: number) => Array.from({ length: n }, (_, i) => (i * 7919 + 13) % s.vocabSize);
  const batch = packSequences(Array.from({ length: seqs }, (_, k) => rand(len).map((x) => (x + k) % s.vocabSize)));
  const ms: number[] = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await m.accumulate(batch, { crossEntropy: true });
    await m.optimizerStep({ lr: 1e-4, maxGradNorm: 1 });
    ms.push(performance.now() - t0);
  }
  const ru = process.resourceUsage();
  console.log(JSON.stringify({ first_ms: ms[0], best_later_ms: ms.length > 1 ? Math.min(...ms.slice(1)) : null, minor_faults: ru.minorPageFault, system_s: ru.systemCPUTime / 1e6 }));
  process.exit(0);
}

const other = argv[0] && !argv[0].startsWith('--') ? resolve(argv[0]) : undefined;
if (!other || !modelCases(false).some((x) => x.name === config) || !(seqs >= 1 && len >= 2 && iters >= 1)) {
  log('usage: node --import tsx bench/train-vs-binary.ts OTHER.node [--config small|qwen3-0.6b-2layers] [--seqs N] [--len N] [--iters N] [--rounds N] [--json FILE]');
  process.exit(2);
}
const rounds = Number(opt('--rounds') ?? 2);
const self = new URL(import.meta.url).pathname;
type Child = { first_ms: number; best_later_ms: number | null; minor_faults: number; system_s: number };
const run = (binary: string | undefined): Child => {
  const env = { ...process.env };
  if (binary) env.MURPHY_NATIVE_BINARY = binary;
  else delete env.MURPHY_NATIVE_BINARY;
  const r = spawnSync(process.execPath, ['--import', 'tsx', self, '--child', '--config', config, '--seqs', String(seqs), '--len', String(len), '--iters', String(iters)], { encoding: 'utf8', env });
  if (r.status !== 0) throw new Error(`child failed: ${r.stderr.trim().split('\n').slice(-3).join(' ')}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Child;
};
const results: { round: number; side: 'other' | 'this'; load_1min: number; child: Child }[] = [];
log(`train-vs-binary: ${other} vs this build, ${config}, ${seqs} x ${len} tokens, ${iters} steps a child, ${rounds} rounds`);
for (let r = 0; r < rounds; r++)
  for (const [side, binary] of [['other', other], ['this', undefined]] as const) {
    const child = run(binary);
    results.push({ round: r + 1, side, load_1min: Math.round(os.loadavg()[0] * 100) / 100, child });
    const later = child.best_later_ms === null ? '-' : `${(child.best_later_ms / 1000).toFixed(2)} s`;
    log(`round ${r + 1} ${side.padEnd(5)}: first step ${(child.first_ms / 1000).toFixed(2)} s, best later ${later}, ${child.minor_faults} page faults, ${child.system_s.toFixed(1)} s system CPU`);
  }
const out = opt('--json');
if (out) writeJsonAtomic(out, { date: new Date().toISOString(), machine: machineInfo(), other, config, seqs, len, iters, rounds, results });
