// The GPU policy engine's training throughput: `node --import tsx bench/gpu-model.bench.ts
// [--json FILE] [--quick] [--dry-run]` (also part of `npm run bench:gpu`).
//
// For Qwen3-0.6B and Qwen3-1.7B shapes with random weights (bf16 storage, gradient
// checkpointing on), one packed micro-batch of about 16k tokens from sequences of 512-4096
// tokens (seeded): the median time of a training step (accumulate + AdamW), training tokens/s,
// MFU = model FLOPs / step time / the bf16 GEMM peak that cuBLASLt reaches in the same run
// (a 8192^3 GEMM), and the engine's peak device memory (its allocations: state + activations).
// Model FLOPs per step: 6 x tokens x (matmul parameters incl. the lm-head) + attention
// 3 x 4 x heads x head_dim x sum_s len_s (len_s + 1) / 2 per layer (forward QK^T and PV, backward
// twice the forward); the recomputation of checkpointing is not counted (it is overhead).
// torch_ratio: our tokens/s over PyTorch's on the same shapes and token budget
// (bench/torch_gpu_model.py: Qwen3ForCausalLM, bf16 autocast over fp32 state, sdpa, fused
// AdamW) when that script is in the tree and python3 has torch; else null, saying why.
//
// Without a usable CUDA device it prints why and exits 0. --dry-run runs the same code with the
// engine emulated on the CPU at a tiny shape: it checks the script, not the GPU.
// Written without a GPU: it has not yet run on one (docs/gpu.md).
import '../test/gpu/binary.js'; // first: selects the CUDA build
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { gpuBenchStart, writeJsonAtomic } from './common.js';
import { PolicyModel, type ModelSizes } from '../lib/model/index.js';
import { cuda, deviceGemmTflops } from '../lib/native.js';

const status = cuda.status();
const { dryRun, quick, jsonPath } = gpuBenchStart('gpu-model.bench', 'GPU model benchmark', status);

const log = (m: string) => process.stderr.write(`${m}\n`);

const qwen = (name: string, layers: number, hidden: number, inter: number, heads: number, kv: number): { name: string; sizes: ModelSizes } => ({
  name,
  sizes: {
    modelType: 'qwen3', vocabSize: 151936, hiddenSize: hidden, intermediateSize: inter, numLayers: layers, numHeads: heads,
    numKvHeads: kv, headDim: 128, maxPositionEmbeddings: 40960, tieWordEmbeddings: true, ropeTheta: 1000000,
  },
});
const SHAPES = dryRun
  ? [{ name: 'tiny (dry run)', sizes: { modelType: 'qwen3', vocabSize: 512, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, maxPositionEmbeddings: 512, tieWordEmbeddings: true } as ModelSizes }]
  : [qwen('Qwen3-0.6B', 28, 1024, 3072, 16, 8), qwen('Qwen3-1.7B', 28, 2048, 6144, 16, 8)];
const TOKENS = dryRun ? 300 : quick ? 4096 : 16384;
const [MIN_LEN, MAX_LEN] = dryRun ? [20, 100] : quick ? [512, 1024] : [512, 4096];
const STEPS = dryRun ? 2 : 3;

/** Sequence lengths in [MIN_LEN, MAX_LEN] summing to TOKENS (the last one takes the rest), seeded. */
function lengths(seed: number): number[] {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  const out: number[] = [];
  let left = TOKENS;
  while (left > 0) {
    const n = left <= MAX_LEN ? left : Math.min(left, MIN_LEN + Math.floor(rnd() * (MAX_LEN - MIN_LEN + 1)));
    out.push(n);
    left -= n;
  }
  return out;
}

function batchOf(vocab: number, lens: number[]) {
  const offs = new Int32Array(lens.length + 1);
  lens.forEach((n, i) => { offs[i + 1] = offs[i]! + n; });
  const T = offs[lens.length]!;
  const tokens = new Int32Array(T), positions = new Int32Array(T);
  for (let q = 0; q < lens.length; q++) for (let t = offs[q]!; t < offs[q + 1]!; t++) tokens[t] = (t * 7919) % vocab, positions[t] = t - offs[q]!;
  const mask = Uint8Array.from(positions, (p) => (p >= 64 || p >= 2 && dryRun ? 1 : 0));
  return { tokens, positions, seqOffsets: offs, mask, advantages: new Float32Array(T).fill(0.5), oldLogp: new Float32Array(T).fill(-Math.log(vocab)) };
}

function modelFlops(s: ModelSizes, lens: number[]): number {
  const H = s.hiddenSize, qd = s.numHeads * s.headDim, kd = s.numKvHeads * s.headDim, I = s.intermediateSize;
  const perLayer = H * qd + 2 * H * kd + qd * H + 3 * H * I;
  const matmul = s.numLayers * perLayer + s.vocabSize * H;
  const T = lens.reduce((a, b) => a + b, 0);
  const pairs = lens.reduce((a, n) => a + (n * (n + 1)) / 2, 0);
  return 6 * T * matmul + 3 * 4 * s.numLayers * s.numHeads * s.headDim * pairs;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const torchScript = new URL('./torch_gpu_model.py', import.meta.url).pathname;
/** PyTorch's training tokens/s on the same shape (the script's median), or why there is none. */
function torchTokensPerS(model: string): { tokensPerS: number | null; note: string } {
  if (!existsSync(torchScript)) return { tokensPerS: null, note: 'torch_ratio: bench/torch_gpu_model.py is not in the tree' };
  const spec = { model, tokens: TOKENS, min_len: MIN_LEN, max_len: MAX_LEN, steps: STEPS, warmup: 1, checkpointing: true, device: dryRun ? 'cpu' : 'cuda' };
  const r = spawnSync('python3', [torchScript, JSON.stringify(spec)], { encoding: 'utf8', timeout: 300_000 });
  const line = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !line.startsWith('{')) return { tokensPerS: null, note: `torch_ratio: torch_gpu_model.py failed: ${(r.stderr || r.error?.message || '').trim().split('\n').at(-1)}` };
  const j = JSON.parse(line) as { tokens_per_s: number; torch: string };
  return { tokensPerS: j.tokens_per_s, note: `torch ${j.torch}` };
}

const peakTflops = dryRun ? null : deviceGemmTflops(8192, 8192, 8192, 20);
if (peakTflops !== null) log(`gpu-model.bench: bf16 GEMM peak ${peakTflops.toFixed(0)} TFLOP/s (cuBLASLt, 8192^3)`);
const rows: Record<string, unknown>[] = [];
for (const shape of SHAPES) {
  const m = await PolicyModel.random(shape.sizes, { seed: 1, initStd: 0.02, device: dryRun ? 'emulate' : 'cuda', storage: 'bf16', gradientCheckpointing: true });
  const lens = lengths(7);
  const batch = batchOf(shape.sizes.vocabSize, lens);
  const times: number[] = [];
  for (let i = 0; i <= STEPS; i++) {
    const t0 = performance.now();
    await m.accumulate(batch, { chunkTokens: 512 });
    await m.optimizerStep({ lr: 1e-6, maxGradNorm: 1.0 });
    if (i > 0) times.push(performance.now() - t0); // the first step allocates
  }
  const ms = median(times);
  const flops = modelFlops(shape.sizes, lens);
  const mem = m.memory();
  const row = {
    name: shape.name,
    tokens: TOKENS,
    sequences: lens.length,
    step_ms: +ms.toFixed(1),
    tokens_per_s: Math.round(TOKENS / (ms / 1000)),
    model_tflops: +(flops / (ms / 1000) / 1e12).toFixed(1),
    mfu: peakTflops ? +(flops / (ms / 1000) / 1e12 / peakTflops).toFixed(3) : null,
    peak_memory_gib: +((mem.weights + mem.grads + mem.optimizer + mem.reference + mem.activationsPeak) / 2 ** 30).toFixed(2),
    torch_ratio: null as number | null,
    note: '',
  };
  const torch = torchTokensPerS(dryRun ? 'tiny' : shape.name.replace('Qwen3-', ''));
  row.torch_ratio = torch.tokensPerS ? +(row.tokens_per_s / torch.tokensPerS).toFixed(2) : null;
  row.note = torch.note;
  rows.push(row);
  log(`gpu-model.bench: ${shape.name}: ${row.tokens_per_s} tokens/s, MFU ${row.mfu ?? 'n/a'}, peak ${row.peak_memory_gib} GiB`);
}

const doc = { device: dryRun ? 'dry-run (CPU, emulated engine)' : status.devices[0]!.name, peak_bf16_tflops: peakTflops, rows };
console.log(JSON.stringify(doc, null, 2));
if (jsonPath) {
  writeJsonAtomic(jsonPath, doc);
  log(`gpu-model.bench: wrote ${jsonPath}`);
}
