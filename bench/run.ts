// Kernel benchmarks: `npm run bench [-- --json FILE] [--quick] [--no-torch] [--4k-pages] [--gpu] [--gemm]`
// (--gemm: the CPU matrix products against OpenBLAS instead, bench/gemm.bench.ts).
//
// Each kernel runs at a realistic size under tinybench; the table shows the median time, the
// bytes the kernel must move, the achieved GB/s, the ratio to this machine's memory bandwidth
// measured STREAM-style in the same run (floor_ratio = floor time / median time, where the floor
// time is the kernel's bytes over the best of the probe's sum / copy / triad figures, with and
// without non-temporal stores, and in-place update / nstream: bench/stream.ts), the same ratio
// against the best probe of the kernel's own access pattern (access_ratio: a read-only kernel
// against the best read-only probe, one that reads arrays and writes another against copy /
// triad, an in-place one against update / nstream), the speedup over a plain TypeScript implementation
// (baseline_ratio) and over PyTorch CPU on the same shapes (torch_ratio, when Debian's
// python3-torch is installed).
import { spawnSync } from 'node:child_process';
import { Bench } from 'tinybench';
import { cliArgs, machineInfo, medianOf, writeJsonAtomic, type KernelRow } from './common.js';
import { l2CacheBytes, measureStreamFloor, mergeFloors, type Access } from './stream.js';
import { describePeer, peerEnv, peerEnvDropped, type TorchPeer } from './peer.js';
import { kernelPages, reexecWithHugePages } from './huge-pages.js';
import {
  adamw, copyBuffer, cpuInfo, grpoLoss, logprobBackward, logprobForward, setNumThreads, toBf16, type AdamWTensor,
} from '../lib/native.js';

interface Row extends KernelRow {
  floor_ms: number;
  /** the kernel's access pattern, and its ratio to the best probe of that pattern */
  access: Access;
  access_floor_gbps: number;
  access_ratio: number;
  baseline_ratio: number | null;
  torch_ratio: number | null;
  /**
   * The arithmetic ceiling (log-prob kernels, ceilingSampler): the same kernel on `cache_rows`
   * rows of `cache_vocab` logits that stay in L2, its fastest batch less the call's own cost,
   * scaled to the full size: the time its instructions take when memory is not in the way.
   */
  cache_ms?: number;
  cache_rows?: number;
  cache_vocab?: number;
  /** which limit is the higher one: the access pattern's memory time or the cache-resident time */
  bound?: 'memory' | 'arithmetic';
  /** max(access floor time, cache_ms) / median: how close the kernel comes to the limit that binds it */
  roofline_ratio?: number;
}

const { argv, flag, opt } = cliArgs();

if (flag('--gemm')) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', new URL('./gemm.bench.ts', import.meta.url).pathname, ...argv.filter((a) => a !== '--gemm')], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
if (flag('--gpu')) {
  // the kernels, then the policy engine's training step (bench/gpu-model.bench.ts; --json FILE gets a .model.json sibling), then generation
  const rest = argv.filter((a) => a !== '--gpu');
  const r = spawnSync(process.execPath, ['--import', 'tsx', new URL('./gpu.bench.ts', import.meta.url).pathname, ...rest], { stdio: 'inherit' });
  const j = rest.indexOf('--json');
  const modelArgs = j >= 0 && rest[j + 1] ? [...rest.slice(0, j + 1), rest[j + 1]!.replace(/(\.json)?$/, '.model.json'), ...rest.slice(j + 2)] : rest;
  const m = spawnSync(process.execPath, ['--import', 'tsx', new URL('./gpu-model.bench.ts', import.meta.url).pathname, ...modelArgs], { stdio: 'inherit' });
  // then generation through the paged step (bench/gpu-generate.bench.ts --device; --json FILE gets a .generate.json sibling)
  const genArgs = j >= 0 && rest[j + 1] ? [...rest.slice(0, j + 1), rest[j + 1]!.replace(/(\.json)?$/, '.generate.json'), ...rest.slice(j + 2)] : rest;
  const g = spawnSync(process.execPath, ['--import', 'tsx', new URL('./gpu-generate.bench.ts', import.meta.url).pathname, '--device', ...genArgs], { stdio: 'inherit' });
  process.exit((r.status ?? 1) || (m.status ?? 1) || (g.status ?? 1));
}

// The kernels' arrays on 2 MiB pages (bench/huge-pages.ts; --4k-pages keeps 4 KiB pages).
reexecWithHugePages(argv, flag('--4k-pages'));

const quick = flag('--quick');
const SIZES = quick
  ? { n: 256, v: 151936, tokens: 1 << 20, params: 10_000_000, copy: 1 << 27 }
  : { n: 4096, v: 151936, tokens: 4 << 20, params: 100_000_000, copy: 1 << 27 };
const threads = cpuInfo().threads;

function log(msg: string) {
  process.stderr.write(`${msg}\n`);
}

/** Fills quickly with realistic values: a block of normals, tiled. */
function filled(n: number, scale: number, seed = 1): Float32Array {
  const block = new Float32Array(Math.min(n, 1 << 20));
  let s = seed >>> 0;
  const u = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  for (let i = 0; i < block.length; i++) block[i] = Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u()) * scale;
  const a = new Float32Array(n);
  for (let o = 0; o < n; o += block.length) a.set(block.subarray(0, Math.min(block.length, n - o)), o);
  return a;
}

async function timed(name: string, fn: () => void, iterations: number, stat: 'p50' | 'min'): Promise<number> {
  fn(); // warm-up outside the timing: first touch of fresh output pages, caches
  const bench = new Bench({ iterations, time: 0, warmup: false });
  bench.add(name, fn);
  await bench.run();
  const r = bench.tasks[0].result;
  if (r.state !== 'completed') throw new Error(`benchmark ${name} did not complete: ${r.state}`);
  return stat === 'min' ? r.latency.min : r.latency.p50;
}

/** Median time of fn in ms. */
const median = (name: string, fn: () => void, iterations: number) => timed(name, fn, iterations, 'p50');

function timeOnce(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

/**
 * The arithmetic ceiling of a log-prob kernel: its time per logit when memory is not in the way,
 * scaled to the full `nRows` x `vocab`. `make(rows, v)` returns a call on `rows` rows of `v`
 * logits. Two rows a thread (the fp32 forward takes rows in pairs, two streams of instructions:
 * one row a thread ran 1.3x slower than the full size), short enough that a thread's rows and
 * output (`bytesPerLogit`) take half its L2 cache (rows of 608 KB, and the last-level cache,
 * which this VM shares, ran the backward at 5.5 G logits/s where one row a thread in L2 ran at
 * 9.1 and the full size at 5.3-9.3), less the same call on rows half as long (the call's own
 * cost: the pool's hand-off, a worker's late start, each row's setup; 16-logit rows until
 * 2026-12-02, which left the hand-off in). Each `sample()` times 6 batches of 8 calls of each; the ceiling
 * is the fastest batch of all samples (the fastest the instructions went). The samples are
 * taken between the kernel's own timed runs (timedBetween), so that both see the same spells of
 * a shared host: one 200-call window (6 ms) once ran at half the speed of the windows around it.
 * The work per logit does not depend on the row's length past a few blocks of 1,024.
 */
function ceilingSampler(name: string, nRows: number, vocab: number, bytesPerLogit: number, make: (rows: number, v: number) => () => void) {
  const l2 = l2CacheBytes() || 256 * 1024;
  const v = Math.min(vocab, Math.max(1024, Math.floor(l2 / 4 / bytesPerLogit / 16) * 16));
  const rows = 2 * threads;
  // the marginal time of the second half of the rows: what a call costs besides its logits (the
  // pool's hand-off, a worker waking up late, each row's setup) is in both calls and cancels
  // (until 2026-12-02 the second call had rows of 16 logits, which the calling thread finishes
  // before a worker wakes: the hand-off stayed in the ceiling, ~30% of it on the Zen 5 VM)
  const half = Math.max(16, Math.floor(v / 32) * 16);
  const full = make(rows, v), call = make(rows, half);
  full();
  call();
  let bestFull = Infinity, bestCall = Infinity;
  const batch = (fn: () => void) => {
    const t0 = performance.now();
    for (let i = 0; i < 8; i++) fn();
    return (performance.now() - t0) / 8;
  };
  return {
    sample() {
      for (let b = 0; b < 6; b++) {
        bestFull = Math.min(bestFull, batch(full));
        bestCall = Math.min(bestCall, batch(call));
      }
    },
    result(): { cache_ms: number; cache_rows: number; cache_vocab: number } {
      const perLogit = Math.max(bestFull - bestCall, bestFull / 4) / (rows * (v - half));
      const cacheMs = perLogit * nRows * vocab;
      log(`  ${name}, ${rows} rows of ${v} in L2: ${(1 / perLogit / 1e6).toFixed(2)} G logits/s (rows of ${half}: ${(bestCall * 1000).toFixed(1)} us, of ${v}: ${(bestFull * 1000).toFixed(1)}), ${cacheMs.toFixed(2)} ms scaled up`);
      return { cache_ms: cacheMs, cache_rows: rows, cache_vocab: v };
    },
  };
}

/** Median time of fn in ms over `iterations` runs after a warm-up, with between() before each run and after the last. */
function timedBetween(fn: () => void, iterations: number, between: () => void): number {
  fn();
  const ts: number[] = [];
  for (let i = 0; i < iterations; i++) {
    between();
    const t0 = performance.now();
    fn();
    ts.push(performance.now() - t0);
  }
  between();
  return medianOf(ts);
}

// ---- plain TypeScript baselines (what one would write without the addon) ----
function tsLogprobFwd(z: Float32Array, y: Int32Array, rows: number, v: number, out: Float32Array) {
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let j = 0; j < v; j++) if (z[r * v + j] > m) m = z[r * v + j];
    let s = 0;
    for (let j = 0; j < v; j++) s += Math.exp(z[r * v + j] - m);
    out[r] = z[r * v + y[r]] - m - Math.log(s);
  }
}
function tsLogprobBwd(z: Float32Array, y: Int32Array, lse: Float32Array, g: Float32Array, rows: number, v: number, out: Float32Array) {
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < v; j++) out[r * v + j] = -g[r] * Math.exp(z[r * v + j] - lse[r]);
    out[r * v + y[r]] += g[r];
  }
}
function tsGrpo(logp: Float32Array, old: Float32Array, adv: Float32Array, mask: Uint8Array, grad: Float32Array) {
  let loss = 0, n = 0;
  for (let t = 0; t < logp.length; t++) if (mask[t]) n++;
  for (let t = 0; t < logp.length; t++) {
    if (!mask[t]) { grad[t] = 0; continue; }
    const r = Math.exp(logp[t] - old[t]);
    const rc = Math.min(Math.max(r, 0.8), 1.28);
    const u = -r * adv[t], c = -rc * adv[t];
    loss += Math.max(u, c) / n;
    grad[t] = (u >= c ? -r * adv[t] : 0) / n;
  }
  return loss;
}
function tsAdamw(p: Float32Array, g: Float32Array, m: Float32Array, v: Float32Array, step: number) {
  const lr = 1e-5, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  const bc1 = 1 - b1 ** step, bc2 = Math.sqrt(1 - b2 ** step);
  for (let i = 0; i < p.length; i++) {
    p[i] *= 1 - lr * wd;
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    p[i] -= (lr / bc1) * m[i] / (Math.sqrt(v[i]) / bc2 + eps);
  }
}

// ---- PyTorch ----
function runTorch(): { cases: Record<string, number>; peer: TorchPeer } | null {
  if (flag('--no-torch')) return null;
  const py = process.env.MURPHY_TORCH_PYTHON ?? '/usr/bin/python3';
  const spec = {
    threads, reps: quick ? 2 : 3,
    logprob: [{ n: SIZES.n, v: SIZES.v, dtype: 'f32' }, { n: SIZES.n, v: SIZES.v, dtype: 'bf16' }],
    grpo: [{ tokens: SIZES.tokens, seqlen: 1024 }],
    adamw: [{ params: SIZES.params, clip: true }],
    copy: [{ n: SIZES.copy }],
  };
  log(`running PyTorch (${py}) on the same shapes ...`);
  const r = spawnSync(py, [new URL('./torch_kernels.py', import.meta.url).pathname, JSON.stringify(spec)], { encoding: 'utf8', maxBuffer: 1 << 20, env: peerEnv() });
  if (r.status !== 0) {
    log(`PyTorch not available (${(r.stderr || r.error?.message || '').trim().split('\n').pop()}); torch_ratio left empty. apt-get install python3-torch adds it.`);
    return null;
  }
  const out = JSON.parse(r.stdout) as { peer: TorchPeer; cases: Record<string, number> };
  log(describePeer(out.peer, threads));
  return out;
}

async function main() {
  const rows: Row[] = [];
  const its = quick ? 3 : 5;
  log(`murphy-native kernel benchmarks: ${threads} threads, SIMD ${cpuInfo().simd}${quick ? ' (quick sizes)' : ''}`);

  // the floor: memory bandwidth measured STREAM-style (see bench/stream.ts)
  log('bandwidth probe (STREAM-style: sum, copy, triad, +non-temporal, in-place update/nstream; best of N) ...');
  // measured before and after the kernels, best of both: a busy machine is less likely to disturb both
  const floorBefore = measureStreamFloor(threads, quick ? 5 : 10);
  log(`floor bandwidth (before the kernels): ${floorBefore.best.gbps.toFixed(1)} GB/s (${floorBefore.best.kernel}, ${floorBefore.best.threads} threads)`);
  // the addon's own copy, timed like the other kernels (read + write counted, as STREAM does)
  const ca = filled(SIZES.copy, 1), cb = new Float32Array(SIZES.copy);
  const copyMs = await median('copy', () => copyBuffer(ca, cb), 10);
  const copyBytes = 2 * 4 * SIZES.copy;
  const run = runTorch();
  // a peer on the reference BLAS, or on fewer threads than ours, is not a fair one: no ratios
  const torch = run && run.peer.fair ? run.cases : null;
  const push = (r: Omit<Row, 'gbps' | 'floor_ms' | 'floor_ratio' | 'access_floor_gbps' | 'access_ratio'>) => {
    rows.push({ ...r, gbps: r.bytes / r.median_ms / 1e6, floor_ms: NaN, floor_ratio: NaN, access_floor_gbps: NaN, access_ratio: NaN });
    log(`  ${r.name}: ${r.median_ms.toFixed(2)} ms`);
  };
  push({ name: 'copy', access: 'copy', shape: `${SIZES.copy} f32`, median_ms: copyMs, bytes: copyBytes, baseline_ratio: null, torch_ratio: torch?.copy ? torch.copy / copyMs : null });

  // log-probs
  const { n, v } = SIZES;
  const z32 = filled(n * v, 3);
  const y = Int32Array.from({ length: n }, (_, i) => (i * 7919) % v);
  const g = filled(n, 1, 7);
  const tsRows = 16;
  const tsOut = new Float32Array(tsRows);
  const tsFwdMs = (timeOnce(() => tsLogprobFwd(z32, y, tsRows, v, tsOut)) * n) / tsRows;
  for (const dtype of ['f32', 'bf16'] as const) {
    const logits = dtype === 'f32' ? z32 : (toBf16(z32) as Uint16Array);
    const esz = dtype === 'f32' ? 4 : 2;
    log(`log-probs ${dtype} [${n} x ${v}] ...`);
    const fwdOut = { logp: new Float32Array(n), lse: new Float32Array(n) };
    const fwd = logprobForward({ logits, targets: y, nRows: n, vocab: v, out: fwdOut });
    // the ceilings' rows: fresh short rows of the same values, targets 0
    const short = (rows: number, vv: number) => (dtype === 'f32' ? z32.slice(0, rows * vv) : (toBf16(z32.subarray(0, rows * vv)) as Uint16Array));
    const fwdCeil = ceilingSampler(`logprob_fwd_${dtype}`, n, v, esz, (rows, vv) => {
      const o = { logp: new Float32Array(rows), lse: new Float32Array(rows) };
      const zs = short(rows, vv), t = new Int32Array(rows);
      return () => logprobForward({ logits: zs, targets: t, nRows: rows, vocab: vv, out: o });
    });
    // the backward in place, as the CPU engine calls it (the gradient over the logits); repeated
    // calls take the last call's gradients as logits, which costs the same (no branch on values)
    const bwdCeil = ceilingSampler(`logprob_bwd_${dtype}`, n, v, esz, (rows, vv) => {
      const zs = short(rows, vv), t = new Int32Array(rows), gl = g.subarray(0, rows);
      const lse = logprobForward({ logits: zs, targets: t, nRows: rows, vocab: vv }).lse as Float32Array;
      return () => logprobBackward({ logits: zs, targets: t, nRows: rows, vocab: vv, lse, gradLogp: gl, out: zs });
    });
    const ceilings = () => {
      fwdCeil.sample();
      bwdCeil.sample();
    };
    // (the median of its runs, as tinybench's p50 in median(); the ceilings sampled between them)
    const fwdMs = timedBetween(() => logprobForward({ logits, targets: y, nRows: n, vocab: v, out: fwdOut }), its, ceilings);
    // in place into a copy of the logits, made afresh (untimed) before each run
    const work = logits.slice();
    const bwdMs = timedBetween(() => logprobBackward({ logits: work, targets: y, nRows: n, vocab: v, lse: fwd.lse, gradLogp: g, out: work }), its, () => {
      ceilings();
      (work as Float32Array).set(logits as Float32Array);
    });
    push({ name: `logprob_fwd_${dtype}`, access: 'read', shape: `${n}x${v}`, median_ms: fwdMs, bytes: n * v * esz + n * 12, baseline_ratio: dtype === 'f32' ? tsFwdMs / fwdMs : null, torch_ratio: torch ? torch[`logprob_fwd_${dtype}`] / fwdMs : null, ...fwdCeil.result() });
    let tsBwd: number | null = null;
    if (dtype === 'f32') {
      const o = new Float32Array(tsRows * v);
      tsBwd = (timeOnce(() => tsLogprobBwd(z32, y, fwd.lse as Float32Array, g, tsRows, v, o)) * n) / tsRows;
    }
    push({
      name: `logprob_bwd_${dtype}`, access: 'inplace', shape: `${n}x${v}`, median_ms: bwdMs, bytes: 2 * n * v * esz + n * 12,
      baseline_ratio: tsBwd ? tsBwd / bwdMs : null,
      torch_ratio: torch ? torch[`logprob_fwdbwd_${dtype}`] / (fwdMs + bwdMs) : null,
      ...bwdCeil.result(),
      note: 'in place (the gradient over the logits, as the CPU engine calls it); torch_ratio compares forward+backward (autograd recomputes the softmax)',
    });
  }

  // GRPO loss
  {
    const T = SIZES.tokens;
    log(`GRPO loss, ${T} tokens ...`);
    const old = filled(T, 0.3, 3);
    for (let i = 0; i < T; i++) old[i] -= 1;
    const logp = filled(T, 0.1, 5);
    for (let i = 0; i < T; i++) logp[i] += old[i];
    const adv = new Float32Array(T);
    const seqlen = 1024;
    const offs = new BigInt64Array(T / seqlen + 1);
    for (let s = 0; s <= T / seqlen; s++) offs[s] = BigInt(s * seqlen);
    for (let s = 0; s < T / seqlen; s++) adv.fill(((s * 37) % 17) / 8 - 1, s * seqlen, (s + 1) * seqlen);
    const mask = new Uint8Array(T).map((_, i) => (i % 10 === 0 ? 0 : 1));
    const grad = new Float32Array(T);
    const ms = await median('grpo_loss', () => grpoLoss({ logp, oldLogp: old, advantages: adv, mask, seqOffsets: offs, epsLow: 0.2, epsHigh: 0.28, out: { gradLogp: grad } }), its * 2);
    const tsMs = timeOnce(() => tsGrpo(logp, old, adv, mask, grad));
    // reads logp, old, adv (12 B) + mask (1 B), writes the gradient (4 B)
    push({ name: 'grpo_loss', access: 'copy', shape: `${T} tokens`, median_ms: ms, bytes: T * 17, baseline_ratio: tsMs / ms, torch_ratio: torch ? torch.grpo_loss / ms : null, note: 'torch: TRL dapo loss, forward + backward + clip stats' });
  }

  // AdamW
  {
    const P = SIZES.params;
    log(`AdamW, ${P} parameters ...`);
    const t: AdamWTensor = { param: filled(P, 0.02, 9), grad: filled(P, 1e-3, 11), m: new Float32Array(P), v: new Float32Array(P) };
    let step = 1;
    const ms = await median('adamw', () => { adamw([t], { lr: 1e-5, step: step++, maxGradNorm: 0 }); }, its);
    const tsMs = timeOnce(() => tsAdamw(t.param as Float32Array, t.grad as Float32Array, t.m as Float32Array, t.v as Float32Array, 1));
    // param, m, v read + written (24 B), grad read (4 B)
    push({ name: 'adamw', access: 'inplace', shape: `${P} params`, median_ms: ms, bytes: P * 28, baseline_ratio: tsMs / ms, torch_ratio: torch ? torch.adamw / ms : null });
    const tb: AdamWTensor = { ...t, paramBf16: new Uint16Array(P) };
    const ms2 = await median('adamw_clip_bf16', () => { adamw([tb], { lr: 1e-5, step: step++, maxGradNorm: 1 }); }, its);
    // + the norm pass re-reads the gradient (4 B) + bf16 copy written (2 B)
    push({ name: 'adamw_clip_bf16', access: 'inplace', shape: `${P} params`, median_ms: ms2, bytes: P * 34, baseline_ratio: null, torch_ratio: torch?.adamw_clip ? torch.adamw_clip / ms2 : null, note: 'global-norm clipping + bf16 weight copy; torch: clip_grad_norm_ + step (no bf16 copy)' });
  }

  log('bandwidth probe again (after the kernels) ...');
  const floor = mergeFloors(floorBefore, measureStreamFloor(threads, quick ? 5 : 10));
  const floorGbps = floor.best.gbps;
  for (const p of floor.parts) log(`  ${p.kernel.padEnd(8)} ${String(p.threads).padStart(2)} threads  ${p.gbps.toFixed(1)} GB/s`);
  log(`floor bandwidth: ${floorGbps.toFixed(1)} GB/s (${floor.best.kernel}, ${floor.best.threads} threads)`);
  for (const r of rows) {
    r.floor_ms = r.bytes / floorGbps / 1e6;
    r.floor_ratio = r.floor_ms / r.median_ms;
    r.access_floor_gbps = floor.by_access[r.access].gbps;
    const accessMs = r.bytes / r.access_floor_gbps / 1e6;  // the kernel's bytes at its own pattern's best
    r.access_ratio = accessMs / r.median_ms;
    if (r.cache_ms !== undefined) {
      r.bound = r.cache_ms > accessMs ? 'arithmetic' : 'memory';
      r.roofline_ratio = Math.max(accessMs, r.cache_ms) / r.median_ms;
    }
  }
  const acc = floor.by_access;
  log(`best probe per access pattern: read ${acc.read.gbps.toFixed(1)} GB/s (${acc.read.variant ?? acc.read.kernel}), copy ${acc.copy.gbps.toFixed(1)} (${acc.copy.kernel}), in place ${acc.inplace.gbps.toFixed(1)} (${acc.inplace.kernel})`);

  // table
  const fmt = (x: number | null, d = 2) => (x === null ? '-' : x.toFixed(d));
  const head = ['kernel', 'shape', 'median ms', 'GB moved', 'GB/s', 'of floor', 'of own pattern', 'of roofline', 'vs TS', 'vs torch'];
  const lines = rows.map((r) => [r.name, r.shape, fmt(r.median_ms), fmt(r.bytes / 1e9, 3), fmt(r.gbps, 1), `${(r.floor_ratio * 100).toFixed(0)}%`, `${(r.access_ratio * 100).toFixed(0)}% (${r.access})`, r.roofline_ratio === undefined ? '-' : `${(r.roofline_ratio * 100).toFixed(0)}% (${r.bound})`, r.baseline_ratio === null ? '-' : `${fmt(r.baseline_ratio, 1)}x`, r.torch_ratio === null ? '-' : `${fmt(r.torch_ratio, 1)}x`]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const l of lines) console.log(line(l));
  console.log(`floor: ${floorGbps.toFixed(1)} GB/s (${floor.best.kernel}, ${floor.best.threads} threads, best of ${floor.reps / 2} before and ${floor.reps / 2} after the kernels; kernels: median); own pattern: read ${acc.read.gbps.toFixed(1)} GB/s (sum = ${acc.read.variant ?? acc.read.kernel}), copy ${acc.copy.gbps.toFixed(1)} (${acc.copy.kernel}), in place ${acc.inplace.gbps.toFixed(1)} (${acc.inplace.kernel}); ${floor.huge_pages ? '2 MiB' : '4 KiB'} pages; ${threads} threads; SIMD ${cpuInfo().simd}; targets: >= 70% of the floor and >= 2x PyTorch; roofline: the higher of the own-pattern time and the same kernel's time on rows in the cache (its arithmetic), scaled up`);
  if (run && !run.peer.fair) console.log(`PyTorch peer not fair (${run.peer.unfair_reason}): no torch ratios`);
  const pages = kernelPages();
  console.log(`kernels' arrays: ${pages.tunable ? `2 MiB pages asked for (GLIBC_TUNABLES=${pages.tunable})` : '4 KiB pages unless transparent huge pages are "always"'}; transparent_hugepage=${pages.transparent_hugepage}; ${pages.anon_huge_pages_mib ?? '?'} MiB on huge pages at the end`);

  const jsonPath = opt('--json');
  if (jsonPath) {
    writeJsonAtomic(jsonPath, {
      date: new Date().toISOString(), machine: machineInfo(), threads, simd: cpuInfo().simd, quick,
      floor_gbps: floorGbps, floor, kernel_pages: pages, torch_peer: run?.peer ?? null, peer_env_dropped: peerEnvDropped(), torch_raw_ms: run?.cases ?? null, cases: rows,
    });
    log(`wrote ${jsonPath}`);
  }

  // the host part of bench/gpu-generate.bench.ts: the rollout scheduler's prefix sharing on the
  // MURPHY tree workload (token counts; needs no GPU)
  const gen = spawnSync(process.execPath, ['--import', 'tsx', new URL('./gpu-generate.bench.ts', import.meta.url).pathname,
    ...(jsonPath ? ['--json', jsonPath.replace(/(\.json)?$/, '.generate.json')] : [])], { stdio: 'inherit' });
  if (gen.status !== 0) throw new Error(`bench/gpu-generate.bench.ts failed (exit ${gen.status})`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
