// The device part of bench/gpu-generate.bench.ts (its header says what is measured and how):
// decode throughput at batch 1 / 32 / 256 against the bandwidth bound and HF generate, and the
// MURPHY tree workload with and without prefix sharing, through the device engine's paged step.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { machineInfo, noDeviceReason, writeJsonAtomic } from './common.js';
import { copyBandwidth, type CopyBandwidth } from './device-copy.js';
import { boundFraction, decodeStepBytes } from './generate-bound.js';
import { PolicyModel, type ModelSizes } from '../lib/model/index.js';
import { cuda } from '../lib/native.js';
import { mix32, mulberry32 } from '../lib/murphy/rng.js';
import {
  KvPool, Scheduler, TreeWorkload, blocksFor, kvBlockBytes, runTreeWorkload, type PagedRequest, type StepExecutor, type StepOutput, type StepPlan,
} from '../lib/rollout/paged/index.js';
import { DeviceExecutor } from '../lib/rollout/paged/device-executor.js';

export interface DeviceBenchOptions {
  dryRun: boolean;
  quick: boolean;
  /** Run the HF transformers peer (bench/torch_gpu_generate.py). */
  torch: boolean;
  jsonPath?: string;
  /** KV pool of the tree workload, GiB (default 16). */
  kvGib?: string;
}

const log = (m: string) => process.stderr.write(`${m}\n`);

const qwen3 = (hidden: number, inter: number): ModelSizes => ({
  modelType: 'qwen3', vocabSize: 151936, hiddenSize: hidden, intermediateSize: inter, numLayers: 28, numHeads: 16,
  numKvHeads: 8, headDim: 128, maxPositionEmbeddings: 40960, tieWordEmbeddings: true, ropeTheta: 1000000,
});
/** The shapes, with the name bench/torch_gpu_generate.py knows them by. */
const FULL_SHAPES = [
  { name: 'Qwen3-0.6B', peer: '0.6B', sizes: qwen3(1024, 3072) },
  { name: 'Qwen3-1.7B', peer: '1.7B', sizes: qwen3(2048, 6144) },
];
/** bench/torch_gpu_generate.py's and bench/gpu-model.bench.ts's tiny shape. */
const TINY = {
  name: 'tiny (dry run)', peer: 'tiny',
  sizes: { modelType: 'qwen3', vocabSize: 512, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, maxPositionEmbeddings: 512, tieWordEmbeddings: true } as ModelSizes,
};
const STORAGE = 'bf16';
const STORAGE_BYTES = 2;
const BLOCK_SIZE = 16;
const TOKEN_BUDGET = 2048;
/** Batch at which the HF peer runs and torch_ratio is taken. */
const PEER_BATCH_FULL = 32;

/** What the timed drive loop adds up over a run's steps. */
interface StepTotals {
  /** Steps in which every sequence decodes (one token each), after the first such step (warm-up). */
  decodeSteps: number;
  decodeTokens: number;
  decodeMs: number;
  /** Of decodeMs: inside the device step (StepExecutor.execute). */
  decodeDeviceMs: number;
  /** Bytes the decode steps must read (bench/generate-bound.ts). */
  decodeBytes: number;
  /** The other steps (prefill chunks, mixed steps, the warm-up decode step). */
  otherSteps: number;
  otherMs: number;
  prefillTokens: number;
}

/**
 * Runs the scheduler dry like drain(), timing each step (schedule + execute + complete). A
 * decode step is timed when every one of `batch` sequences decodes in it (after the first such
 * step); once `steps` are timed, the requests `ids` are aborted (the tail is not measured).
 */
async function timedDrain(s: Scheduler, exec: StepExecutor, sizes: ModelSizes, t: StepTotals, full: { batch: number; steps: number; ids: number[] }): Promise<void> {
  let warm = false;
  while (s.hasWork) {
    if (t.decodeSteps >= full.steps) {
      for (const id of full.ids) s.abort(id);
      continue;
    }
    const t0 = performance.now();
    const plan = s.schedule();
    const t1 = performance.now();
    const out = await exec.execute(plan);
    const t2 = performance.now();
    s.complete(plan, out);
    const t3 = performance.now();
    const decodeOnly = plan.seqs.length === full.batch && plan.seqs.every((q) => q.kind === 'decode');
    if (decodeOnly && warm) {
      t.decodeSteps++;
      t.decodeTokens += plan.seqs.length;
      t.decodeMs += t3 - t0;
      t.decodeDeviceMs += t2 - t1;
      t.decodeBytes += decodeStepBytes(sizes, STORAGE_BYTES, plan.seqs.map((q) => q.start + q.tokenIds.length)).total;
    } else {
      warm ||= decodeOnly;
      t.otherSteps++;
      t.otherMs += t3 - t0;
      t.prefillTokens += plan.counts.prefillTokens;
    }
  }
}

function randomIds(n: number, vocab: number, ...key: number[]): number[] {
  const r = mulberry32(mix32(0x9e3779b9, ...key));
  return Array.from({ length: n }, () => Math.floor(r() * vocab));
}

interface DecodeRow {
  model: string;
  batch: number;
  prompt_tokens: number;
  new_tokens: number;
  decode_steps: number;
  decode_tokens: number;
  decode_s: number;
  decode_tokens_per_s: number | null;
  /** Share of the decode steps' wall time spent in the device step (the rest: the host's scheduling). */
  device_step_share: number | null;
  prefill_tokens: number;
  prefill_s: number;
  /** Bytes a decode step must read, mean over the timed steps; the bound's numerator. */
  bytes_per_decode_step: number | null;
  bound_tokens_per_s: number | null;
  bound_fraction: number | null;
  torch_decode_tokens_per_s?: number | null;
  torch_ratio?: number | null;
  note?: string;
}

async function decodeRun(model: PolicyModel, shape: { name: string; sizes: ModelSizes }, B: number, P: number, N: number, copy: CopyBandwidth): Promise<DecodeRow> {
  // Prompts are prefilled in chunks of the token budget while the sequences admitted first
  // already decode, so each may draw `extra` more tokens than N: every sequence is still
  // running when the last prefill ends, and N - 1 steps then decode the whole batch.
  const extra = Math.ceil((B * P) / Math.max(1, TOKEN_BUDGET - B)) + 2;
  const blocks = B * blocksFor(P + N + extra, BLOCK_SIZE) + 8;
  await model.kvAllocate({ blocks, blockSize: BLOCK_SIZE });
  try {
    const s = new Scheduler(new KvPool({ blocks, blockSize: BLOCK_SIZE }), { maxModelLen: shape.sizes.maxPositionEmbeddings, tokenBudget: TOKEN_BUDGET, maxRunning: Math.max(256, B), prefixSharing: true });
    const ids: number[] = [];
    for (let b = 0; b < B; b++) {
      ids.push(s.submit({ promptIds: randomIds(P, shape.sizes.vocabSize, 1, B, b), maxTokens: N + extra, seed: b, sampling: { temperature: 0 } }));
    }
    const t: StepTotals = { decodeSteps: 0, decodeTokens: 0, decodeMs: 0, decodeDeviceMs: 0, decodeBytes: 0, otherSteps: 0, otherMs: 0, prefillTokens: 0 };
    await timedDrain(s, new DeviceExecutor(model), shape.sizes, t, { batch: B, steps: N - 1, ids });
    const sec = t.decodeMs / 1000;
    const measured = t.decodeSteps > 0 && sec > 0;
    const tps = measured ? t.decodeTokens / sec : null;
    const boundTps = measured ? t.decodeTokens / (t.decodeBytes / (copy.gbps * 1e9)) : null;
    return {
      model: shape.name, batch: B, prompt_tokens: P, new_tokens: N,
      decode_steps: t.decodeSteps, decode_tokens: t.decodeTokens, decode_s: +sec.toFixed(4),
      decode_tokens_per_s: tps === null ? null : +tps.toFixed(1),
      device_step_share: measured ? +(t.decodeDeviceMs / t.decodeMs).toFixed(3) : null,
      prefill_tokens: t.prefillTokens, prefill_s: +(t.otherMs / 1000).toFixed(4),
      bytes_per_decode_step: measured ? Math.round(t.decodeBytes / t.decodeSteps) : null,
      bound_tokens_per_s: boundTps === null ? null : +boundTps.toFixed(1),
      bound_fraction: measured ? +boundFraction(t.decodeBytes, sec, copy.gbps).toPrecision(3) : null,
    };
  } finally {
    await model.kvRelease();
  }
}

/** A StepExecutor that adds up its own time (the device steps of the tree workload). */
class Timed implements StepExecutor {
  ms = 0;
  constructor(private readonly inner: StepExecutor) {}
  async execute(plan: StepPlan): Promise<StepOutput> {
    const t0 = performance.now();
    const out = await this.inner.execute(plan);
    this.ms += performance.now() - t0;
    return out;
  }
}

interface TreeSide {
  seconds: number;
  generated_tokens: number;
  tokens_per_s: number;
  device_s: number;
  prefill_tokens: number;
  prefill_saved: number;
  cache_hit_tokens: number;
  preemptions: number;
  cow_copies: number;
  steps: number;
  max_batch: number;
}

async function treeRun(model: PolicyModel, sizes: ModelSizes, w: TreeWorkload, blocks: number, prefixSharing: boolean): Promise<{ side: TreeSide; samples: number[][] }> {
  await model.kvAllocate({ blocks, blockSize: BLOCK_SIZE });
  try {
    const s = new Scheduler(new KvPool({ blocks, blockSize: BLOCK_SIZE }), { maxModelLen: sizes.maxPositionEmbeddings, tokenBudget: TOKEN_BUDGET, maxRunning: 256, prefixSharing });
    const exec = new Timed(new DeviceExecutor(model));
    const t0 = performance.now();
    const r = await runTreeWorkload(w, s, exec);
    const seconds = (performance.now() - t0) / 1000;
    const samples = [...r.first.samples, ...r.repair.samples].flat().map((x) => x.tokenIds);
    const generated = samples.reduce((a, x) => a + x.length, 0);
    const m = r.metrics;
    return {
      side: {
        seconds: +seconds.toFixed(3), generated_tokens: generated, tokens_per_s: +(generated / seconds).toFixed(1), device_s: +(exec.ms / 1000).toFixed(3),
        prefill_tokens: m.prefillTokens, prefill_saved: m.prefillSaved, cache_hit_tokens: m.cacheHitTokens, preemptions: m.preemptions, cow_copies: m.copies, steps: m.steps, max_batch: m.maxBatch,
      },
      samples,
    };
  } finally {
    await model.kvRelease();
  }
}

const torchScript = new URL('./torch_gpu_generate.py', import.meta.url).pathname;

/** HF generate's decode tokens/s at batch B on the shape (the script's JSON), or why there is none. */
function torchPeer(peerShape: string, B: number, P: number, N: number, o: DeviceBenchOptions): { tokensPerS: number | null; note: string; raw: unknown } {
  if (!o.torch) return { tokensPerS: null, note: 'torch_ratio: not run (--no-torch)', raw: null };
  if (!existsSync(torchScript)) return { tokensPerS: null, note: 'torch_ratio: bench/torch_gpu_generate.py is not in the tree', raw: null };
  const args = [torchScript, '--shape', peerShape, '--device', o.dryRun ? 'cpu' : 'cuda', '--batch', String(B), '--prompt', String(P), '--new-tokens', String(N), '--reps', o.quick || o.dryRun ? '1' : '2'];
  const r = spawnSync('python3', args, { encoding: 'utf8', timeout: o.quick ? 180_000 : 600_000 });
  const line = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !line.startsWith('{')) {
    return { tokensPerS: null, note: `torch_ratio: torch_gpu_generate.py failed: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n').at(-1)}`, raw: null };
  }
  const j = JSON.parse(line) as { rows: { batch: number; decode_tokens_per_s: number | null; reason?: string }[] | null; reason?: string; torch?: string; transformers?: string };
  if (j.rows === null) return { tokensPerS: null, note: `torch_ratio: ${j.reason}`, raw: j };
  const row = j.rows.find((x) => x.batch === B);
  if (!row || row.decode_tokens_per_s === null) return { tokensPerS: null, note: `torch_ratio: no figure at batch ${B}${row?.reason ? ` (${row.reason})` : ''}`, raw: j };
  return { tokensPerS: row.decode_tokens_per_s, note: `HF transformers ${j.transformers} generate, torch ${j.torch}, bf16, sdpa${o.dryRun ? ' (CPU, tiny shape: checks the script only)' : ''}`, raw: j };
}

const goal = (value: number | null, min: number) => ({ value, met: value === null ? null : value >= min });

export async function deviceBench(o: DeviceBenchOptions): Promise<void> {
  const status = cuda.status();
  const noDevice = noDeviceReason(status, o.dryRun);
  if (noDevice) {
    console.log(`gpu-generate.bench --device: ${noDevice} — device generation benchmark not run`);
    return;
  }
  const kvGib = o.kvGib === undefined ? 16 : Number(o.kvGib);
  if (!(kvGib > 0)) throw new Error(`--kv-gib must be a positive number, got ${o.kvGib}`);
  const device = o.dryRun ? 'emulate' : 'cuda';
  const shapes = o.dryRun ? [TINY] : FULL_SHAPES;
  const batches = o.dryRun ? [1, 4] : o.quick ? [1, 32] : [1, 32, 256];
  const peerBatch = o.dryRun ? 4 : PEER_BATCH_FULL;
  const [P, N] = o.dryRun ? [32, 8] : [1024, o.quick ? 32 : 128];
  const tree = o.dryRun
    ? { problems: 1, groupSize: 8, repairs: 4, promptTokens: 32, completionTokens: 4, feedbackTokens: [4, 8] as const, vocab: TINY.sizes.vocabSize }
    : { problems: o.quick ? 2 : 8, groupSize: 8, repairs: 4, promptTokens: 512, completionTokens: o.quick ? 64 : 256 };

  const doc: Record<string, unknown> = {
    date: new Date().toISOString(), machine: machineInfo(),
    device: o.dryRun ? 'dry-run (CPU, emulated engine: checks the script, not a GPU)' : status.devices[0]!.name,
    engine: { device, storage: STORAGE, block_size: BLOCK_SIZE, token_budget: TOKEN_BUDGET }, quick: o.quick,
    copy: null, decode: [], torch_peer: {}, tree: null, goals: null,
  };
  const save = () => { if (o.jsonPath) writeJsonAtomic(o.jsonPath, doc); };

  // ---- the floor: the device's copy bandwidth, in this run
  const copy = copyBandwidth(o.dryRun ? 1 << 20 : 1 << 28, { dryRun: o.dryRun, minMs: o.dryRun ? 50 : 1000 });
  doc.copy = copy;
  log(`gpu-generate.bench: copy ${copy.gbps} GB/s (copyBuffer, ${copy.n} f32, read + write)`);
  save();

  // ---- decode throughput per shape and batch
  const rows = doc.decode as DecodeRow[];
  let first: PolicyModel | null = null; // the first shape's model, kept for the tree workload
  for (const shape of shapes) {
    const model = await PolicyModel.random(shape.sizes, { seed: 1, initStd: 0.02, device, storage: STORAGE });
    first ??= model;
    for (const B of batches) {
      const row = await decodeRun(model, shape, B, P, N, copy);
      if (B === peerBatch) {
        const peer = torchPeer(shape.peer, B, P, N, o);
        row.torch_decode_tokens_per_s = peer.tokensPerS === null ? null : +peer.tokensPerS.toFixed(1);
        row.torch_ratio = peer.tokensPerS && row.decode_tokens_per_s ? +(row.decode_tokens_per_s / peer.tokensPerS).toFixed(2) : null;
        row.note = peer.note;
        // the peer's whole report: its configuration (bench/peer.ts's TorchPeer, CUDA / cuDNN, sdpa backends), versions and times
        (doc.torch_peer as Record<string, unknown>)[shape.name] = peer.raw ?? { note: peer.note };
      }
      rows.push(row);
      log(`gpu-generate.bench: ${shape.name} batch ${B}: ${row.decode_tokens_per_s ?? 'n/a'} decode tokens/s, ${row.bound_fraction ?? 'n/a'} of the bound (${row.bound_tokens_per_s ?? 'n/a'})` +
        (row.torch_ratio !== undefined ? `, torch_ratio ${row.torch_ratio ?? `null (${row.note})`}` : ''));
      save();
    }
  }

  // ---- the MURPHY tree workload, with and without prefix sharing, on the first shape
  {
    const shape = shapes[0]!;
    const w = new TreeWorkload({ ...tree, vocab: shape.sizes.vocabSize });
    const bytesPerBlock = kvBlockBytes({ numLayers: shape.sizes.numLayers, numKvHeads: shape.sizes.numKvHeads, headDim: shape.sizes.headDim, dtypeBytes: STORAGE_BYTES }, BLOCK_SIZE);
    const t = w.o;
    const roomy = Math.ceil((t.problems * t.groupSize * (1 + t.repairs) * (t.promptTokens + 2 * t.completionTokens + t.feedbackTokens[1])) / BLOCK_SIZE) + 16;
    const blocks = Math.min(roomy, Math.floor((kvGib * 2 ** 30) / bytesPerBlock));
    const model = first!;
    const shared = await treeRun(model, shape.sizes, w, blocks, true);
    const plain = await treeRun(model, shape.sizes, w, blocks, false);
    const saved = 1 - shared.side.prefill_tokens / plain.side.prefill_tokens;
    let same = 0;
    shared.samples.forEach((x, i) => { if (JSON.stringify(x) === JSON.stringify(plain.samples[i])) same++; });
    doc.tree = {
      model: shape.name, workload: { ...t, max_model_len: shape.sizes.maxPositionEmbeddings, sampling: 'temperature 1' }, pool_blocks: blocks, pool_gib: +((blocks * bytesPerBlock) / 2 ** 30).toFixed(2),
      sharing: shared.side, no_sharing: plain.side, prefill_saved_fraction: +saved.toFixed(4),
      speedup: +(shared.side.tokens_per_s / plain.side.tokens_per_s).toFixed(3),
      samples_identical: `${same} of ${shared.samples.length}`,
    };
    log(`gpu-generate.bench: tree workload (${shape.name}): ${shared.side.tokens_per_s} tokens/s shared, ${plain.side.tokens_per_s} not; prefill ${shared.side.prefill_tokens} vs ${plain.side.prefill_tokens} tokens (${(100 * saved).toFixed(1)}% saved); ${same} of ${shared.samples.length} samples identical`);
    save();
  }

  // ---- goals: what this run measured against issue 14's targets (null: not measured)
  const at = (B: number) => rows.filter((r) => r.batch === B);
  doc.goals = {
    bound_fraction_batch1: { goal: '>= 0.6 of the bandwidth bound at batch 1', rows: at(1).map((r) => ({ model: r.model, ...goal(r.bound_fraction, 0.6) })) },
    torch_ratio_batch32: { goal: `>= 5x HF transformers generate at batch ${peerBatch}`, rows: at(peerBatch).map((r) => ({ model: r.model, ...goal(r.torch_ratio ?? null, 5) })) },
    prefill_saved: { goal: 'prefix sharing cuts the tree workload\'s prefill tokens by >= 70%', ...goal((doc.tree as { prefill_saved_fraction: number }).prefill_saved_fraction, 0.7) },
  };
  save();
  console.log(JSON.stringify(doc, null, 2));
  if (o.jsonPath) log(`gpu-generate.bench: wrote ${o.jsonPath}`);
}
