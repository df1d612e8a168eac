// GPU kernel benchmarks: `node --import tsx bench/gpu.bench.ts [--json FILE] [--quick] [--dry-run]`
// (also `npm run bench:gpu`, which comes here through bench/run.ts --gpu).
//
// Each kernel runs at a realistic size on device arrays; every call is synchronous (the
// CUDA kernels synchronise before returning), so wall-clock time around the call is the
// device time plus the call's fixed overhead (argument checks, output allocation, the
// read-back of error flags / statistics). Reported per kernel: the median of >= 10 runs,
// the bytes the kernel must move at the least (its physical floor), the achieved GB/s and
// floor_ratio = achieved GB/s / copy GB/s, where copy GB/s is measured in the same run by
// copyBuffer on device arrays (a bandwidth-bound copy kernel; read + write bytes).
// Target: floor_ratio >= 0.8 on an H200 for the large kernels.
//
// Without a usable CUDA device it prints why and exits 0. --dry-run runs the same code on
// host arrays at tiny sizes (the CPU path): it checks the script, not the GPU.
import '../test/gpu/binary.js'; // first: selects the CUDA build
import { gpuBenchStart, medianMs as median, writeJsonAtomic, type KernelRow } from './common.js';
import { copyBandwidth } from './device-copy.js';
import {
  adamw, cuda, DeviceArray, grpoLoss, logprobBackward, logprobForward, toBf16,
  type AdamWTensor, type HostArray, type Tensor,
} from '../lib/native.js';

type Row = KernelRow;

const status = cuda.status();
const { dryRun, quick, jsonPath } = gpuBenchStart('gpu.bench', 'GPU benchmarks', status);

const SIZES = dryRun
  ? { n: 4, v: 151936, tokens: 1 << 14, params: 1 << 16, copy: 1 << 20 }
  : quick
    ? { n: 512, v: 151936, tokens: 1 << 20, params: 10_000_000, copy: 1 << 26 }
    : { n: 4096, v: 151936, tokens: 4 << 20, params: 100_000_000, copy: 1 << 28 };

function log(msg: string) {
  process.stderr.write(`${msg}\n`);
}

function up<T extends HostArray>(a: T): Tensor {
  return dryRun ? a : cuda.upload(a);
}
function empty(kind: 'f32' | 'bf16', n: number): Tensor {
  if (dryRun) return kind === 'f32' ? new Float32Array(n) : new Uint16Array(n);
  return DeviceArray.empty(kind, n);
}
function free(...ts: (Tensor | undefined)[]) {
  for (const t of ts) if (t instanceof DeviceArray && !t.freed) t.free();
}

/** n values: a block of pseudo-normal values (scale), tiled; cheap to make at GB sizes. */
function filled(n: number, scale: number, seed = 1, offset = 0): Float32Array {
  const block = new Float32Array(Math.min(n, 1 << 20));
  let s = seed >>> 0;
  const u = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  for (let i = 0; i < block.length; i++) block[i] = offset + Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u()) * scale;
  const a = new Float32Array(n);
  for (let o = 0; o < n; o += block.length) a.set(block.subarray(0, Math.min(block.length, n - o)), o);
  return a;
}

const rows: Row[] = [];
let copyGbps = 0;

function report(name: string, shape: string, ms: number, bytes: number, note?: string) {
  const gbps = bytes / (ms * 1e-3) / 1e9;
  const row: Row = { name, shape, median_ms: +ms.toFixed(4), bytes, gbps: +gbps.toFixed(1), floor_ratio: copyGbps > 0 ? +(gbps / copyGbps).toFixed(3) : 1 };
  if (note) row.note = note;
  rows.push(row);
  log(`${name.padEnd(28)} ${shape.padEnd(34)} ${ms.toFixed(3).padStart(9)} ms ${row.gbps.toFixed(1).padStart(8)} GB/s  floor ${row.floor_ratio.toFixed(3)}`);
}

const dev = status.devices[0];
log(dryRun ? 'gpu.bench: DRY RUN on host arrays (CPU path), tiny sizes: checks the script only' : `gpu.bench: ${dev.name} (cc ${dev.computeCapability}, ${dev.multiprocessors} SMs, ${(dev.totalMemory / 2 ** 30).toFixed(1)} GiB)`);

// ---- copy bandwidth (the floor)
{
  const c = copyBandwidth(SIZES.copy, { dryRun });
  copyGbps = c.gbps;
  report('copy (bandwidth floor)', `${c.n} f32`, c.median_ms, c.bytes, 'copyBuffer on device arrays: read + write');
}

// ---- log-probs: N x V, fp32 and bf16, forward and backward
{
  const { n, v } = SIZES;
  const hostLogits = filled(n * v, 3, 7);
  const targets = Int32Array.from({ length: n }, (_, i) => (i * 7919) % v);
  const dTargets = up(targets) as Tensor<'i32'>;
  const f32 = up(hostLogits) as Tensor<'f32'>;
  const bf16 = toBf16(f32) as Tensor<'bf16'>;
  const g = up(filled(n, 1, 3)) as Tensor<'f32'>;
  for (const [dt, logits, es] of [['f32', f32, 4], ['bf16', bf16, 2]] as const) {
    const shape = `${n}x${v} ${dt}`;
    const fwdBytes = n * v * es + n * 4 * 3;
    let lse: Tensor<'f32'> | undefined;
    const msF = median(() => {
      const out = logprobForward({ logits, targets: dTargets, nRows: n, vocab: v });
      free(lse, out.logp);
      lse = out.lse;
    });
    report(`logprob forward ${dt}`, shape, msF, fwdBytes);
    const msE = median(() => {
      const out = logprobForward({ logits, targets: dTargets, nRows: n, vocab: v, entropy: true });
      free(out.logp, out.lse, out.entropy);
    });
    report(`logprob forward+entropy ${dt}`, shape, msE, fwdBytes + n * 4);
    const out = empty(dt, n * v) as Tensor<'f32'> | Tensor<'bf16'>;
    const msB = median(() => {
      logprobBackward({ logits, targets: dTargets, nRows: n, vocab: v, lse: lse!, gradLogp: g, out });
    });
    report(`logprob backward ${dt}`, shape, msB, 2 * n * v * es + n * 4 * 3, 'reads logits, writes dlogits');
    free(out, lse);
    lse = undefined;
  }
  free(f32, bf16, g, dTargets);
}

// ---- GRPO loss over T tokens (sequences of ~1000 tokens, 80% active, KL on)
{
  const T = SIZES.tokens;
  const old = filled(T, 0.5, 11, -1);
  const logp = filled(T, 0.5, 12, -1);
  const ref = filled(T, 0.5, 13, -1);
  const adv = filled(T, 1, 14);
  const mask = Uint8Array.from({ length: T }, (_, i) => ((i * 2654435761) >>> 0) % 5 === 0 ? 0 : 1);
  const offs: bigint[] = [0n];
  for (let t = 0; t < T;) {
    t = Math.min(T, t + 500 + ((t * 31) % 1000));
    offs.push(BigInt(t));
  }
  const d = {
    logp: up(logp) as Tensor<'f32'>, oldLogp: up(old) as Tensor<'f32'>, refLogp: up(ref) as Tensor<'f32'>,
    advantages: up(adv) as Tensor<'f32'>, mask: up(mask) as Tensor<'u8'>, seqOffsets: up(BigInt64Array.from(offs)) as Tensor<'i64'>,
  };
  const shape = `${T} tokens, ${offs.length - 1} seqs`;
  for (const lossType of ['dapo', 'grpo'] as const) {
    const ms = median(() => {
      const r = grpoLoss({ ...d, beta: 0.04, epsHigh: 0.28, lossType });
      free(r.gradLogp);
    });
    report(`grpo loss ${lossType} +kl +mask`, shape, ms, T * (4 * 4 + 1 + 4), 'floor: 4 f32 in + mask + grad out; includes the output allocation');
  }
  free(d.logp, d.oldLogp, d.refLogp, d.advantages, d.mask, d.seqOffsets);
}

// ---- AdamW over ~P parameters in a realistic tensor list (embedding + 24 layers)
{
  const P = SIZES.params;
  const sizes: number[] = [];
  const layers = 24;
  const emb = Math.floor(P * 0.68);
  sizes.push(emb);
  const perLayer = Math.floor((P - emb) / layers);
  for (let l = 0; l < layers; l++) {
    const q = Math.floor(perLayer * 0.148), mlp = Math.floor(perLayer * 0.135);
    sizes.push(q, q, q, q, mlp, mlp, mlp, 1024, 1024);
  }
  const total = sizes.reduce((a, b) => a + b, 0);
  const tensors: AdamWTensor[] = sizes.map((n, i) => ({
    param: up(filled(n, 0.02, 100 + i)) as Tensor<'f32'>,
    grad: up(filled(n, 0.001, 200 + i)) as Tensor<'f32'>,
    m: empty('f32', n) as Tensor<'f32'>,
    v: empty('f32', n) as Tensor<'f32'>,
    paramBf16: empty('bf16', n) as Tensor<'bf16'>,
    decay: n !== 1024,
  }));
  const shape = `${total} params, ${sizes.length} tensors`;
  let step = 1;
  const floorBytes = total * (4 * 4 + 3 * 4 + 2);
  for (const [name, extra] of [
    ['adamw (no clip)', {}],
    ['adamw clip', { maxGradNorm: 1.0 }],
    ['adamw clip + stochastic bf16', { maxGradNorm: 1.0, stochasticRounding: true, seed: 1234 }],
  ] as const) {
    const ms = median(() => {
      adamw(tensors, { lr: 1e-5, weightDecay: 0.1, step: step++, maxGradNorm: 0, ...extra });
    });
    report(name, shape, ms, floorBytes, 'floor: read p,g,m,v + write p,m,v,bf16 once' + ('maxGradNorm' in extra ? '; clipping re-reads g (norm pass)' : ''));
  }
  for (const t of tensors) free(t.param, t.grad, t.m, t.v, t.paramBf16);
}

console.log(JSON.stringify({ device: dryRun ? 'dry-run (CPU)' : dev.name, copy_gbps: +copyGbps.toFixed(1), rows }, null, 2));
if (jsonPath) {
  writeJsonAtomic(jsonPath, { device: dryRun ? 'dry-run (CPU)' : dev.name, copy_gbps: +copyGbps.toFixed(1), sizes: SIZES, rows });
  log(`gpu.bench: wrote ${jsonPath}`);
}
