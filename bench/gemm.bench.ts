// CPU GEMM benchmark: `node --import tsx bench/gemm.bench.ts [--json FILE] [--quick] [--no-torch] [--rounds N] [--only TEXT] [--cpu-time] [--path NAME] [--4k-pages]`
// (also `npm run bench -- --gemm ...`).
//
// Each matrix product of the model benchmark's configs (bench/model-shapes.ts: the projections'
// forward, input gradient and weight gradient, the LM head, decode steps of 1, 4 and 8 rows) timed
// as the native fp32 product (linearProduct, the path 'auto' picks, or --path: avx512, avx2, ...),
// the native bf16-weight forward (forward shapes only) and the OpenBLAS peer (torch.mm and
// numpy.matmul, float32, the machine's threads, on the model's operand layouts: x @ W^T, dY @ W,
// dY^T @ X as transposed views; bench/torch_peer.py's serve_gemm, one Python process answering
// one request at a time). The
// three take turns on each shape in each of --rounds rounds (default 8, ~2 minutes), a round being
// one pass over all the shapes, so that a shape's rounds are spread over the whole run; each
// figure is the best over all rounds of a best-of-reps, so that a busy machine's slow moments
// fall out of all sides alike (on the idle Zen 4 VM, 2026-12-02, two of three 4-round runs had
// one or two products 10-35% under their other runs' figures, and an 8-round run none).
// Two native figures per product: one JS call per product (`native_f32_ms`), as the peer makes one
// Python call per product, and `inner` products in one call (linearProduct's `repeat`:
// `native_f32_loop_ms`, `native_bf16_ms`), as the model calls them from C++, without the ~0.9 us
// of a JS call (docs/kernels.md, "What a JS call of a product costs").
// Ratios: native fp32 per call / the faster of torch and numpy per call (the OpenBLAS peer, each
// side paying its language's call); bf16 / native fp32, both in the native loop.
// The 1-minute load average is recorded per shape (the highest after any of its rounds): on a
// shared machine absolute figures mean little.
// --cpu-time: one thread on both sides (OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1)) and
// CPU time instead of wall time (process.cpuUsage(), time.process_time()): a per-core comparison
// that time-slicing by other processes on a busy machine does not distort (their cache traffic
// still does). `taskset -c 0` around a --cpu-time run keeps both sides on one core.
// After each of the peer's turns the native side waits until the peer's threads have gone idle
// (quiet(), below): OpenBLAS's workers spin for a while after a call, and on 2 cores that spin
// took one core from the native products timed next (the small ones ran at one core's speed).
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import os from 'node:os';
import { alignedArray, cpuInfo, gemmInfo, linearProduct, setNumThreads, type GemmPathName, type LinearProductKind } from '../lib/native.js';
import { cliArgs, machineInfo, writeJsonAtomic } from './common.js';
import { gemmShapes, modelCases, type ModelCase, type ShapeProduct } from './model-shapes.js';
import { describePeer, peerEnv, peerEnvDropped, type TorchPeer } from './peer.js';
import { kernelPages, reexecWithHugePages } from './huge-pages.js';

const { argv, flag, opt } = cliArgs();
// The operands on 2 MiB pages, as the model's weights and the peer's tensors are (bench/huge-pages.ts;
// --4k-pages keeps 4 KiB pages). Before 2026-12-07 only the peer's were: `npm run bench -- --gemm`
// started this script before bench/run.ts re-executed itself with the tunable.
reexecWithHugePages(argv, flag('--4k-pages'));
const quick = flag('--quick');
const rounds = Number(opt('--rounds') ?? (quick ? 1 : 8));
const cpuTime = flag('--cpu-time');
const path = (opt('--path') ?? 'auto') as GemmPathName;
if (cpuTime) setNumThreads(1);
const threads = cpuInfo().threads;
const log = (s: string) => process.stderr.write(`${s}\n`);
const load1 = () => Math.round(os.loadavg()[0] * 100) / 100;

// ---- the peer: one Python process, asked shape by shape
interface PeerProc {
  info: TorchPeer;
  time(m: number, k: number, n: number, reps: number, layout: string, inner: number, warmMs: number): Promise<{ torch_best_ms: number; numpy_best_ms: number }>;
  /** Resolves once the peer's threads use no CPU (its BLAS workers stopped spinning); ms waited. */
  quiet(): Promise<number>;
  close(): void;
}

/** CPU time (clock ticks) of all threads of process `pid`, or null where /proc cannot say. */
function processTicks(pid: number): number | null {
  try {
    let sum = 0;
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      const f = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');  // from field 3 (state) on
      sum += Number(fields[11]) + Number(fields[12]);  // utime, stime (fields 14 and 15)
    }
    return sum;
  } catch {
    return null;
  }
}

/** Waits until process `pid` used no CPU over a 25 ms window (at most `maxMs`); the ms waited. */
async function waitIdle(pid: number, maxMs = 1000): Promise<number> {
  const t0 = performance.now();
  let last = processTicks(pid);
  if (last === null) return 0;
  while (performance.now() - t0 < maxMs) {
    await new Promise((r) => setTimeout(r, 25));
    const now = processTicks(pid);
    if (now === null || now === last) break;
    last = now;
  }
  return performance.now() - t0;
}

async function startPeer(): Promise<PeerProc | null> {
  if (flag('--no-torch')) return null;
  const code = 'import json, sys, torch_peer\n'
    + `print(json.dumps(torch_peer.peer_info(${threads})), flush=True)\n`
    + `torch_peer.serve_gemm(${threads}, cpu_time=${cpuTime ? 'True' : 'False'})\n`;
  const env = peerEnv({ PYTHONPATH: new URL('.', import.meta.url).pathname, ...(cpuTime ? { OPENBLAS_NUM_THREADS: '1' } : {}) });
  const p = spawn('/usr/bin/python3', ['-c', code], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  p.stderr.on('data', (d) => { stderr += String(d); });
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const r = await lines.next();
    if (r.done) throw new Error(`the peer exited: ${stderr.trim().split('\n').pop() ?? ''}`);
    return JSON.parse(r.value);
  };
  try {
    const info = (await next()) as TorchPeer;
    return {
      info,
      time: async (m, k, n, reps, layout, inner, warmMs) => {
        p.stdin.write(`${JSON.stringify({ m, k, n, reps, layout, inner, warm_ms: warmMs })}\n`);
        return next();
      },
      quiet: () => waitIdle(p.pid!),
      close: () => p.stdin.end(),
    };
  } catch (e) {
    log(`PyTorch peer unavailable (${(e as Error).message}); peer columns left empty`);
    return null;
  }
}

// ---- native side
// Operands on 64-byte boundaries (alignedArray), as the model's weights are; the peer's (PyTorch
// tensors) are 64-byte aligned too. A plain typed array is 16-byte aligned here, which cost the
// single-row products ~15% (every zmm load of a weight row straddled two cache lines).
function filled(n: number, seed: number): Float32Array {
  const a = alignedArray(Float32Array, n);
  let s = seed >>> 0;
  for (let i = 0; i < Math.min(n, 65536); i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = (s / 2 ** 32 - 0.5) * 2;
  }
  for (let i = 65536; i < n; i += 65536) a.copyWithin(i, 0, Math.min(65536, n - i));
  return a;
}
function toBf16Bits(a: Float32Array): Uint16Array {
  const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const out = alignedArray(Uint16Array, a.length);
  for (let i = 0; i < a.length; i++) out[i] = ((u[i] + 0x7fff + ((u[i] >>> 16) & 1)) >>> 16) & 0xffff;
  return out;
}

/**
 * Best of reps in ms per product: each rep times `inner` products back to back (wall time, or with
 * --cpu-time this process's CPU time (user + system)), so that a product of microseconds is not
 * measured against the clock's own cost; the peer does the same (serve_gemm's "inner").
 */
/**
 * Each side's turn on a shape starts with untimed products for WARM_MS ms (the peer's too:
 * serve_gemm's warm_ms). A side's turn follows a wait (the native side's for the peer's threads to
 * go idle, ~150 ms; the peer's for its next request), and on the 2-vCPU KVM VM the first
 * milliseconds of products after such a sleep ran slow: 1 x 1,024 x 3,072 best of 80 timed reps
 * 139-164 us after a 150 ms sleep, 98-106 us with 20 ms of products first, 119-131 us with neither
 * (2026-12-07; docs/kernels.md, "What a JS call of a product costs"). Before this, the native
 * side's per-call figures of the smallest products paid it and the peer's did not.
 */
const WARM_MS = 20;
function warm(fn: () => void, ms: number): void {
  const until = performance.now() + ms;
  do fn(); while (performance.now() < until);
}

function bestMs(fn: () => void, reps: number, inner = 1): number {
  let best = Infinity;
  for (let r = 0; r < reps; r++) {
    if (cpuTime) {
      const c0 = process.cpuUsage();
      for (let i = 0; i < inner; i++) fn();
      const c = process.cpuUsage(c0);
      best = Math.min(best, (c.user + c.system) / 1000 / inner);
    } else {
      const t0 = performance.now();
      for (let i = 0; i < inner; i++) fn();
      best = Math.min(best, (performance.now() - t0) / inner);
    }
  }
  return best;
}

interface Row {
  name: string; product: LinearProductKind; m: number; k: number; n: number; reps: number; inner: number; load_1min: number;
  native_f32_ms: number; native_f32_loop_ms: number; native_bf16_ms: number | null; torch_ms: number | null; numpy_ms: number | null;
  native_f32_gflops: number; native_f32_loop_gflops: number; native_bf16_gflops: number | null; peer_gflops: number | null;
  f32_vs_openblas: number | null; bf16_vs_f32: number | null;
}

/** The model's products plus decode steps of 1 and 8 rows (the skinny path; 4 rows is in gemmShapes). */
function shapes(c: ModelCase): [string, number, number, number, ShapeProduct][] {
  const s = c.sizes;
  return [
    ...gemmShapes(c),
    [`${c.name} decode gate/up M=1`, 1, s.hiddenSize, s.intermediateSize, 'forward'],
    [`${c.name} decode gate/up M=8`, 8, s.hiddenSize, s.intermediateSize, 'forward'],
    [`${c.name} decode down M=4`, 4, s.intermediateSize, s.hiddenSize, 'forward'],
  ];
}

// The peer multiplies the same operand layouts as the model: x @ W^T (W stored [out, in]),
// dY @ W, dY^T @ X (torch_peer.serve_gemm's "layout": which operand is a transposed view).
const peerLayout: Record<ShapeProduct, string> = { forward: 'nt', backwardInput: 'nn', backwardWeight: 'tn' };

const quietMs: number[] = [];  // how long the peer's threads went on using CPU after its start and its turns
const peer = await startPeer();
if (peer) log(describePeer(peer.info, threads));
// The peer's start-up (loading torch, its thread pools) goes on using CPU after its first line:
// the first shapes' native figures were one core's until it settled.
if (peer && !cpuTime) quietMs.push(await peer.quiet());
const gemm = gemmInfo();
log(`gemm.bench: native path ${path === 'auto' ? gemm.best : path}, ${threads} threads, ${rounds} round(s) per shape, load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
const loadStart = os.loadavg();
// Rounds are passes over every shape, not repeats of one shape in a row: a shape's rounds are
// spread over the whole run. On the shared VM a slow spell of the host lasts a second or more
// (one product ran at 115 GFLOP/s for 1.2 s, then at 186 again, both threads busy throughout):
// with a shape's rounds back to back such a spell could cover all of one side's reps of that
// shape and none of the other's. Both sides still take turns within each round of a shape.
interface ShapeRun {
  name: string; product: LinearProductKind; m: number; k: number; n: number;
  f32: () => void; f32Loop: () => void; bf16Loop: (() => void) | null; reps: number; inner: number;
  nf: number; nl: number; nb: number; tt: number; tn: number; load: number;
}
const runs: ShapeRun[] = [];
for (const c of modelCases(quick)) {
  for (const [name, m, k, n, product] of shapes(c)) {
    if (opt('--only') && !name.includes(opt('--only')!)) continue;
    // The linear layer's sizes (tokens, out, in) behind the plain (m x k) (k x n) product.
    const L = product === 'forward' ? { m, n, k } : product === 'backwardInput' ? { m, n: k, k: n } : { m: k, n: m, k: n };
    const aLen = product === 'forward' ? L.m * L.k : L.m * L.n;
    const bLen = product === 'backwardWeight' ? L.m * L.k : L.n * L.k;
    const outLen = product === 'forward' ? L.m * L.n : product === 'backwardInput' ? L.m * L.k : L.n * L.k;
    const a = filled(aLen, 1), b = filled(bLen, 2), out = alignedArray(Float32Array, outLen);
    const wb = product === 'forward' ? toBf16Bits(b) : null;
    const accumulate = product === 'backwardWeight';
    const f32 = () => { linearProduct(product, a, b, out, L, { accumulate, path }); };
    const t1 = bestMs(f32, 1);  // warm-up and size estimate
    const reps = Math.max(1, Math.min(quick ? 3 : 10, Math.round(150 / Math.max(t1, 1e-3))));
    const inner = Math.max(1, Math.min(100, Math.round(1 / Math.max(t1, 1e-3))));  // >= ~1 ms per timed rep
    // The same `inner` products in one call (repeat): timed with bestMs(fn, reps, 1) / inner.
    const f32Loop = () => { linearProduct(product, a, b, out, L, { accumulate, path, repeat: inner }); };
    const bf16Loop = wb ? () => { linearProduct('forward', a, wb, out, L, { path, repeat: inner }); } : null;
    if (bf16Loop) bestMs(bf16Loop, 1);
    runs.push({ name, product, m, k, n, f32, f32Loop, bf16Loop, reps, inner, nf: Infinity, nl: Infinity, nb: Infinity, tt: Infinity, tn: Infinity, load: 0 });
  }
}
for (let r = 0; r < rounds; r++) {
  if (rounds > 1) log(`  round ${r + 1}/${rounds}`);
  for (const s of runs) {
    warm(s.f32, WARM_MS);
    s.nf = Math.min(s.nf, bestMs(s.f32, s.reps, s.inner));
    s.nl = Math.min(s.nl, bestMs(s.f32Loop, s.reps) / s.inner);
    if (s.bf16Loop) s.nb = Math.min(s.nb, bestMs(s.bf16Loop, s.reps) / s.inner);
    if (peer) {
      const p = await peer.time(s.m, s.k, s.n, s.reps, peerLayout[s.product], s.inner, WARM_MS);
      s.tt = Math.min(s.tt, p.torch_best_ms);
      s.tn = Math.min(s.tn, p.numpy_best_ms);
      if (!cpuTime) quietMs.push(await peer.quiet());
    }
    s.load = Math.max(s.load, load1());
  }
}
const rows: Row[] = [];
for (const s of runs) {
  const { name, product, m, k, n, reps, inner, nf, nl, nb, tt, tn } = s;
  const flops = 2 * m * k * n;
  const peerMs = peer ? Math.min(tt, tn) : null;
  const fair = peer?.info.fair ?? false;
  const row: Row = {
    name, product, m, k, n, reps, inner, load_1min: s.load,
    native_f32_ms: nf, native_f32_loop_ms: nl, native_bf16_ms: s.bf16Loop ? nb : null, torch_ms: peer ? tt : null, numpy_ms: peer ? tn : null,
    native_f32_gflops: flops / nf / 1e6, native_f32_loop_gflops: flops / nl / 1e6, native_bf16_gflops: s.bf16Loop ? flops / nb / 1e6 : null,
    peer_gflops: peerMs ? flops / peerMs / 1e6 : null,
    f32_vs_openblas: peerMs && fair ? peerMs / nf : null, bf16_vs_f32: s.bf16Loop ? nl / nb : null,
  };
  rows.push(row);
}
peer?.close();

const f = (x: number | null, d = 2) => (x === null ? '-' : x.toFixed(d));
console.log('GFLOP/s per JS call (f32 call, as the peer\'s per Python call) and in a native loop (f32 loop, bf16)');
console.log('shape                                m x k x n           f32 call  OpenBLAS  f32/OpenBLAS  f32 loop      bf16  bf16/f32');
if (peer && !peer.info.fair) console.log(`peer not fair (${peer.info.unfair_reason}): no OpenBLAS ratios`);
for (const r of rows) {
  console.log(`${r.name.padEnd(36)} ${`${r.m}x${r.k}x${r.n}`.padEnd(18)} ${f(r.native_f32_gflops, 1).padStart(9)} ${f(r.peer_gflops, 1).padStart(9)} ${f(r.f32_vs_openblas).padStart(13)} ${f(r.native_f32_loop_gflops, 1).padStart(9)} ${f(r.native_bf16_gflops, 1).padStart(9)} ${f(r.bf16_vs_f32).padStart(9)}`);
}
const jsonPath = opt('--json');
if (jsonPath) {
  writeJsonAtomic(jsonPath, {
    date: new Date().toISOString(), machine: machineInfo(), load_average_at_start: loadStart.map((x) => Math.round(x * 100) / 100),
    threads, clock: cpuTime ? 'process CPU time, 1 thread each side' : 'wall time', native_path: path === 'auto' ? gemm.best : path, rounds, quick, kernel_pages: kernelPages(), torch_peer: peer?.info ?? null, peer_env_dropped: peerEnvDropped(),
    note: 'float32 GEMM (and bf16-weight forward); peer on the model layouts (forward x @ W^T, input grad dY @ W, weight grad dY^T @ X, transposed views); each figure the best over rounds of a best-of-reps, native and peer taking turns on each shape, a round being one pass over all shapes (rounds spread over the run); GFLOP/s = 2mkn / best; f32_vs_openblas = min(torch, numpy) ms / native_f32_ms (one call per product on each side); bf16_vs_f32 = native_f32_loop_ms / native_bf16_ms (products in one native call, linearProduct repeat: no JS call cost); wall-time runs wait after each peer turn until the peer process uses no CPU (its OpenBLAS threads spin after a call): peer_quiet_ms; each side\'s turn on a shape starts with 20 ms of untimed products (a sleep slows the first ones); both sides\' operands on 2 MiB pages unless --4k-pages (kernel_pages)',
    peer_quiet_ms: quietMs.length ? { median: quietMs.sort((x, y) => x - y)[quietMs.length >> 1], max: quietMs[quietMs.length - 1], turns: quietMs.length } : null,
    rows,
  });
  log(`gemm.bench: wrote ${jsonPath}`);
}
