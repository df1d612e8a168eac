// Generation speed of this build against another native binary (e.g. one built from an earlier
// commit), in one run: `node --import tsx bench/generate-vs-binary.ts OTHER.node [--json FILE]
// [--rounds N] [--config small|qwen3-0.6b-2layers] [--cpu-time]`.
//
// Each round runs the model benchmark's generation workload (bench/model-shapes.ts: 4 prompts of
// 32 tokens, greedy, batched decode with a KV cache) in a fresh child process per binary,
// alternating: the other binary (fp32), this build (fp32), this build with bf16 weights. The best
// tokens/s of each over the rounds is kept, with the load average, so a busy machine hits all alike.
// --cpu-time: tokens per second of the process's CPU time (all threads) instead of wall time:
// time slicing by other processes on a busy machine drops out (the thread pool sleeps, never spins).
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { resolve } from 'node:path';
import { cliArgs, machineInfo, writeJsonAtomic } from './common.js';
import { modelCases } from './model-shapes.js';

const { argv, flag, opt } = cliArgs();
const log = (s: string) => process.stderr.write(`${s}\n`);

if (flag('--child')) {
  // child: one generation measurement on the binary MURPHY_NATIVE_BINARY (or this build)
  const { PolicyModel } = await import('../lib/model/index.js');
  const c = modelCases(false).find((x) => x.name === opt('--config'))!;
  const m = await PolicyModel.random(c.sizes, { seed: 1 });
  if (flag('--bf16')) m.setBf16({ generate: true });
  const v = c.sizes.vocabSize;
  const prompts = Array.from({ length: c.prompts }, (_, k) => Array.from({ length: c.promptLen }, (_, i) => ((i * 7919 + 13) % v + 3 * k) % v));
  await m.generate(prompts.slice(0, 1), { maxNewTokens: 2, temperature: 0 });
  const t0 = performance.now(), c0 = process.cpuUsage();
  const gens = await m.generate(prompts, { maxNewTokens: c.newTokens, temperature: 0 });
  const cpu = process.cpuUsage(c0);
  const secs = flag('--cpu-time') ? (cpu.user + cpu.system) / 1e6 : (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ tps: gens.reduce((a, g) => a + g.tokens.length, 0) / secs }));
  process.exit(0);
}

const other = argv[0] && !argv[0].startsWith('--') ? resolve(argv[0]) : undefined;
if (!other) {
  log('usage: node --import tsx bench/generate-vs-binary.ts OTHER.node [--json FILE] [--rounds N] [--config NAME]');
  process.exit(2);
}
const config = opt('--config') ?? 'qwen3-0.6b-2layers';
const rounds = Number(opt('--rounds') ?? 3);
const self = new URL(import.meta.url).pathname;
const run = (binary: string | undefined, bf16: boolean): number => {
  const env = { ...process.env };
  if (binary) env.MURPHY_NATIVE_BINARY = binary;
  else delete env.MURPHY_NATIVE_BINARY;
  const r = spawnSync(process.execPath, ['--import', 'tsx', self, '--child', '--config', config, ...(bf16 ? ['--bf16'] : []), ...(flag('--cpu-time') ? ['--cpu-time'] : [])], { encoding: 'utf8', env });
  if (r.status !== 0) throw new Error(`child failed: ${r.stderr.trim().split('\n').slice(-3).join(' ')}`);
  return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { tps: number }).tps;
};
const best = { other: 0, fp32: 0, bf16: 0 };
const loads: number[] = [];
for (let r = 0; r < rounds; r++) {
  best.other = Math.max(best.other, run(other, false));
  best.fp32 = Math.max(best.fp32, run(undefined, false));
  best.bf16 = Math.max(best.bf16, run(undefined, true));
  loads.push(Math.round(os.loadavg()[0] * 100) / 100);
  log(`round ${r + 1}: best so far other ${best.other.toFixed(1)}, fp32 ${best.fp32.toFixed(1)}, bf16 ${best.bf16.toFixed(1)} tok/s (load ${loads.at(-1)})`);
}
const out = {
  date: new Date().toISOString(), machine: machineInfo(), config, rounds, clock: flag('--cpu-time') ? 'process CPU time (all threads)' : 'wall time', other_binary: other, load_1min_per_round: loads,
  tokens_per_s: best, fp32_vs_other: best.fp32 / best.other, bf16_vs_other: best.bf16 / best.other, bf16_vs_fp32: best.bf16 / best.fp32,
};
console.log(JSON.stringify(out, null, 2));
const jsonPath = opt('--json');
if (jsonPath) writeJsonAtomic(jsonPath, out);
