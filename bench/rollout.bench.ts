// Rollout throughput: completion tokens per second of the embedded engine called directly
// (EmbeddedBackend) and through `murphy-native serve` with the vLLM client over HTTP, with
// 1, 8 and 64 concurrent requests; the HTTP overhead is direct / served.
//
//   node --import tsx bench/rollout.bench.ts [--preset small|tiny] [--tokens 64] [--prompt 64]
//        [--rounds 3] [--seeded] [--json FILE]
//
// Requests are unseeded by default, so concurrent ones share engine calls (the batching that
// serve does for concurrent clients); --seeded gives each its own seed, which the native
// engine runs one call per request (see docs/rollout.md).
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cpuInfo } from '../lib/native.js';
import { initModel, type PresetName } from '../lib/model/index.js';
import { EmbeddedBackend, NativeEngine, startServer, VllmBackend, type RolloutBackend } from '../lib/rollout/index.js';

const argv = process.argv.slice(2);
const opt = (f: string, d: string) => {
  const i = argv.indexOf(f);
  return i >= 0 ? argv[i + 1] : d;
};
const preset = opt('--preset', 'small') as PresetName;
const maxTokens = Number(opt('--tokens', '64'));
const promptLen = Number(opt('--prompt', '64'));
const rounds = Number(opt('--rounds', '3'));
const seeded = argv.includes('--seeded');
const jsonOut = argv.includes('--json') ? opt('--json', '') : undefined;
const log = (m: string) => process.stderr.write(`${m}\n`);

interface Row {
  concurrency: number;
  path: 'direct' | 'serve';
  median_s: number;
  completion_tokens: number;
  tokens_per_s: number;
  engine_calls_per_round: number;
}

async function round(b: RolloutBackend, conc: number, r: number): Promise<{ s: number; tokens: number }> {
  const t0 = performance.now();
  const out = await Promise.all(Array.from({ length: conc }, (_, i) => {
    const prompt = Array.from({ length: promptLen }, (_, k) => (i * 7919 + k * 31 + r) % 250 + 1);
    return b.generate(prompt, 1, { maxTokens, temperature: 1, stopTokenIds: [], ...(seeded ? { seed: r * 1000 + i } : {}) });
  }));
  const s = (performance.now() - t0) / 1000;
  return { s, tokens: out.reduce((a, c) => a + c.reduce((x, y) => x + y.tokenIds.length, 0), 0) };
}

async function measure(b: RolloutBackend, conc: number, calls: () => number): Promise<{ median: number; tokens: number; calls: number }> {
  await round(b, conc, 999); // warm-up
  const times: number[] = [];
  let tokens = 0;
  const c0 = calls();
  for (let r = 0; r < rounds; r++) {
    const x = await round(b, conc, r);
    times.push(x.s);
    tokens = x.tokens;
  }
  times.sort((a, b2) => a - b2);
  return { median: times[Math.floor(times.length / 2)], tokens, calls: (calls() - c0) / rounds };
}

const work = mkdtempSync(join(tmpdir(), 'murphy-rollout-bench-'));
try {
  const { dir, params } = await initModel({ out: join(work, 'model'), preset, seed: 1, initStd: 0.02 });
  log(`model: preset ${preset}, ${(params / 1e6).toFixed(1)}M parameters; prompt ${promptLen} tokens, ${maxTokens} completion tokens per request, ${seeded ? 'seeded' : 'unseeded'}; ${cpuInfo().threads} threads`);
  const direct = new EmbeddedBackend({ engine: await NativeEngine.load(dir) });
  const srvEngine = await NativeEngine.load(dir);
  const srv = await startServer({ engine: srvEngine, modelName: 'bench' });
  const client = await VllmBackend.connect({ servers: [srv.url] });
  const rows: Row[] = [];
  for (const conc of [1, 8, 64]) {
    for (const [path, b, calls] of [
      ['direct', direct, () => direct.stats.batches],
      ['serve', client, () => srv.batcher.stats.batches],
    ] as const) {
      const m = await measure(b, conc, calls);
      const row: Row = { concurrency: conc, path, median_s: m.median, completion_tokens: m.tokens, tokens_per_s: m.tokens / m.median, engine_calls_per_round: m.calls };
      rows.push(row);
      log(`${String(conc).padStart(3)} concurrent  ${path.padEnd(6)}  ${row.tokens_per_s.toFixed(0).padStart(7)} tok/s  (${m.tokens} tokens in ${m.median.toFixed(3)} s, ${m.calls.toFixed(1)} engine calls)`);
    }
  }
  const overhead = [1, 8, 64].map((c) => {
    const d = rows.find((r) => r.concurrency === c && r.path === 'direct') as Row;
    const s = rows.find((r) => r.concurrency === c && r.path === 'serve') as Row;
    return { concurrency: c, direct_over_serve: d.tokens_per_s / s.tokens_per_s };
  });
  for (const o of overhead) log(`HTTP overhead at ${o.concurrency}: direct / serve = ${o.direct_over_serve.toFixed(3)}`);
  await srv.close();
  if (jsonOut) {
    mkdirSync(dirname(jsonOut), { recursive: true });
    const tmp = `${jsonOut}.tmp`;
    writeFileSync(tmp, `${JSON.stringify({ bench: 'rollout', preset, params, promptLen, maxTokens, seeded, threads: cpuInfo().threads, rows, overhead }, null, 2)}\n`);
    renameSync(tmp, jsonOut);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
