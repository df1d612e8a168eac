// The native policy model (Qwen3 / OLMo-2 decoders) as a typed, Promise-based API over
// lib/native.ts's ModelEngine (the one typed face of the addon): load/save Hugging Face
// directories, train steps through the fused log-prob + GRPO/KL loss with AdamW, scoring,
// and KV-cache generation. Every long call runs off the event loop.
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { STORAGE_DTYPES, type StorageDType } from '../config/schema.js';
import { findCublasLt } from '../gpu/cublaslt.js';
import { checkModelConfigText, cuda, type DeviceArray, ModelEngine, MurphyNativeError, setReferenceOps as setNativeReferenceOps, type AdamWHyper, type EngineBatch, type EngineChoice, type EngineTrainStats, type GrpoLossOptions, type PagedSampling, type OverlapTrace, type RawNcclComm, type SavedFile, type ZeroPlan, type ZeroShard } from '../native.js';
import { DEFAULT_BLOCK_SIZE } from '../rollout/paged/kv-pool.js';
import type { PlanArrays } from '../rollout/paged/plan-arrays.js';
import { hfConfig, presets, type ModelSizes, type PresetName, type WeightDType } from './config.js';
import { builtinTokenizerFiles, BUILTIN_SPECIALS, BUILTIN_VOCAB } from './tokenizer.js';

export { hfConfig, presets, type ModelSizes, type ModelType, type PresetName, type WeightDType } from './config.js';
export { builtinTokenizerFiles, BUILTIN_VOCAB } from './tokenizer.js';
export type { PagedSampling } from '../native.js';

// ---------------------------------------------------------------------------------------
// public types

/** The model's shape as the native side read it from config.json. */
/** What a loaded model reports: its sizes, every optional one resolved (token ids aside). */
export type ModelInfo = Required<Omit<ModelSizes, 'bosTokenId' | 'eosTokenId'>>;

export interface ParamMeta {
  name: string;
  shape: number[];
  numel: number;
}

/**
 * Packed sequences: one flat token list; sequence s is tokens[seqOffsets[s] .. seqOffsets[s+1]).
 * Attention never crosses a sequence boundary; positions default to 0, 1, ... per sequence.
 * Log-prob t is log p(tokens[t] | earlier tokens of its sequence); the first token of each
 * sequence has none (reported as 0, never in the loss).
 */
export interface PackedBatch {
  tokens: Int32Array;
  seqOffsets: Int32Array;
  positions?: Int32Array;
}

/** A training micro-batch: per-token arrays aligned with tokens. */
export interface TrainBatch extends PackedBatch {
  /** 1 = token in the loss (completion tokens); default: every token but the first of each sequence. */
  mask?: Uint8Array;
  /** Required for the GRPO loss (not for crossEntropy). */
  advantages?: Float32Array;
  /**
   * The behaviour policy's log-probs (the rollout's). Omitted: the log-probs this call computes,
   * as constants (TRL's `old_per_token_logps = per_token_logps.detach()` for one update per
   * batch): every ratio is exactly 1 and no scoring pass is needed.
   */
  oldLogp?: Float32Array;
  /** Reference log-probs for the KL term; computed by the frozen copy when beta > 0 and omitted. */
  refLogp?: Float32Array;
}

/** The loss of a training step: the GRPO loss options (the kernel's) plus TRAIN_OPTIONS. */
export interface LossOptions extends GrpoLossOptions {
  /** Supervised cross-entropy (mean over the mask) instead of the GRPO loss. */
  crossEntropy?: boolean;
  /** Temperature of the log-probs (> 0). Default 1. */
  temperature?: number;
  /** Rows of logits computed at once (bounded further so a chunk stays under 64 MiB). */
  chunkTokens?: number;
  /** MiB of logits the CPU engine keeps between the loss's two passes instead of computing the LM head again (default 1024; 0: none). */
  keepLogitsMb?: number;
}

/** One micro-batch's loss and GRPO statistics, as the engine returns them. */
export type TrainStats = EngineTrainStats;

/** AdamW's hyper-parameters: the same type and defaults as the kernel's (lib/native.ts). Weight decay applies to matrices only (norm gains are not decayed). */
export type { AdamWHyper };

export interface OptimizerResult {
  gradNorm: number;
  clipCoef: number;
  skipped: boolean;
  step: number;
}

export interface GenerateOptions {
  maxNewTokens: number;
  /** 0 = greedy. Default 1. */
  temperature?: number;
  topP?: number;
  /** 0 = off. */
  topK?: number;
  /** Keeps the tokens with probability >= minP x the most likely one's, after temperature
   * and before top-k / top-p (as vLLM). 0 = off (default). */
  minP?: number;
  /** Samples per prompt; they share the prompt's KV cache. Default 1. */
  n?: number;
  /** Prompt p samples with seed + p. */
  seed?: number;
  /** One seed per prompt (overrides `seed`): prompt p samples with seeds[p], so requests that
   * carry their own seeds can share one call and still get exactly their own samples. */
  seeds?: number[];
  stopIds?: number[];
  /** Alternatives per sampled token (Generation.topIds/topLogprobs). Default 0. */
  topLogprobs?: number;
  /** Give the memory the call freed back to the system (GENERATE_OPTIONS.releaseHeap; serving). Default false. */
  releaseHeap?: boolean;
  /** false: no log-probs wanted (evaluations): `logprobs` all NaN, greedy draws skip their softmax (GENERATE_OPTIONS.logprobs). Default true. */
  logprobs?: boolean;
  /**
   * Stop flags, one per sample (prompt-major), on a SharedArrayBuffer: set one with
   * Atomics.store while the call runs and that sample ends before its next decode step with
   * finishReason 'abort'.
   */
  cancel?: Int32Array;
  /** Called after every decode step with the tokens it sampled (sample = prompt * n + j); every call has run when the promise resolves. */
  onStep?: (step: GenerateStep) => void;
}

/** The tokens of one decode step (GenerateOptions.onStep); top* have topLogprobs entries per token. */
export interface GenerateStep {
  samples: Int32Array;
  tokens: Int32Array;
  logprobs: Float32Array;
  topIds: Int32Array;
  topLogprobs: Float32Array;
}

/** AdamW state of a PolicyModel (see PolicyModel.optimizerState). */
export interface OptimizerState {
  /** Optimizer steps taken. */
  step: number;
  /** `<param>.exp_avg` and `<param>.exp_avg_sq` for every parameter. */
  tensors: Record<string, Float32Array>;
}

export interface Generation {
  tokens: Int32Array;
  /** Log-probs of the sampled tokens under the sampling distribution (vLLM's processed log-probs); NaN with `logprobs: false`. */
  logprobs: Float32Array;
  /** With topLogprobs = k: the k most likely tokens at each position, [tokens x k], and their
   * log-probs under the same distribution (-Infinity outside the kept set). */
  topIds?: Int32Array;
  topLogprobs?: Float32Array;
  /** 'abort': stopped by its cancel flag. */
  finishReason: 'stop' | 'length' | 'abort';
}

/** The KV pools of a device engine (PolicyModel.kvInfo). */
export interface KvInfo {
  /** Blocks allocated (0: no pools). */
  blocks: number;
  /** Tokens per block of the pools (0: no pools). */
  blockSize: number;
  /** K and V of one token over every layer, in the storage dtype: 2 x layers x kvHeads x headDim x (2 | 4). */
  bytesPerToken: number;
  /** bytesPerToken x the block size asked for (default: the pools', else DEFAULT_BLOCK_SIZE). */
  bytesPerBlock: number;
  /** Free device memory now (cudaMemGetInfo); null when unknown ('emulate'). */
  freeBytes: number | null;
}

/** One draw per sample row of a paged step. */
export interface PagedStepResult {
  tokens: Int32Array;
  /** Log-prob of each token under the distribution it was drawn from (temperature, top-k / top-p / min-p renormalised). */
  logprobs: Float32Array;
}

export interface MemoryReport {
  weights: number;
  grads: number;
  optimizer: number;
  reference: number;
  /**
   * The largest activations and loss buffers one call has used (bytes). The CPU engine keeps
   * its training step's between steps (a fresh buffer costs a page fault per 4 KiB at first
   * touch), so that much stays allocated once the model has trained.
   */
  activationsPeak: number;
  /**
   * Bytes the CPU matrix products keep in their cache of big packing buffers (up to 512 MiB, for
   * the whole process, shared by every model: docs/kernels.md, "CPU GEMM"); 0 on the device
   * engines. A CPU training step at a vocabulary of ~150 K fills it with the head's backward
   * products; `generate({ releaseHeap: true })` empties it.
   */
  matmulCache: number;
}

export interface SaveOptions {
  /** Weight dtype on disk; default: the config's torch_dtype. */
  dtype?: WeightDType;
  /** Split into shards of at most this many bytes (0 = one file). */
  maxShardBytes?: number;
  /** Copy tokenizer files from this directory (default: the directory the model was loaded from). */
  tokenizerDir?: string;
}

const TOKENIZER_FILES = [
  'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.json', 'merges.txt',
  'added_tokens.json', 'generation_config.json', 'chat_template.jinja', 'chat_template.json',
];

/** Positions 0, 1, ... restarting at each sequence. */
export function packedPositions(seqOffsets: Int32Array): Int32Array {
  const n = seqOffsets[seqOffsets.length - 1];
  const pos = new Int32Array(n);
  for (let s = 0; s + 1 < seqOffsets.length; s++) {
    for (let t = seqOffsets[s]; t < seqOffsets[s + 1]; t++) pos[t] = t - seqOffsets[s];
  }
  return pos;
}

/** Packs sequences into one PackedBatch. */
export function packSequences(seqs: ArrayLike<number>[]): PackedBatch {
  const offs = new Int32Array(seqs.length + 1);
  seqs.forEach((s, i) => { offs[i + 1] = offs[i] + s.length; });
  const tokens = new Int32Array(offs[seqs.length]);
  seqs.forEach((s, i) => tokens.set(Array.from(s), offs[i]));
  return { tokens, seqOffsets: offs, positions: packedPositions(offs) };
}

function rawBatch(b: TrainBatch): EngineBatch {
  return {
    tokens: b.tokens, seqOffsets: b.seqOffsets, positions: b.positions ?? packedPositions(b.seqOffsets),
    mask: b.mask, advantages: b.advantages, oldLogp: b.oldLogp, refLogp: b.refLogp,
  };
}

/**
 * Where a PolicyModel runs. 'cpu' (default): the CPU engine (native/model). 'cuda': the
 * device engine on the GPU (CUDA build with a device and cuBLASLt). 'emulate': the same device
 * engine over the CPU harness backend, every kernel run block by block on the host — the test
 * and debug mode of the GPU engine (slow; tiny models only). See docs/gpu.md.
 */
export interface EngineOptions {
  device?: 'cpu' | 'cuda' | 'emulate';
  /** Storage dtype of the device engines' weights and activations: 'bf16' (default, production) or 'f32' (precision mode); config key storage. */
  storage?: StorageDType;
  /** Device engines: recompute each decoder layer in the backward pass instead of keeping its activations. Default false. */
  gradientCheckpointing?: boolean;
  /** Tests, 'emulate' only: the CPU harness runs blocks and threads in reverse order (results must not change). */
  reverseHarness?: boolean;
}

function engineChoice(o: EngineOptions): EngineChoice {
  const device = o.device ?? 'cpu';
  if (device !== 'cpu' && device !== 'cuda' && device !== 'emulate') throw new Error(`device must be 'cpu', 'cuda' or 'emulate', got '${String(device)}'`);
  const storage = o.storage ?? STORAGE_DTYPES[0];
  if (!STORAGE_DTYPES.includes(storage)) throw new Error(`storage must be ${STORAGE_DTYPES.map((d) => `'${d}'`).join(' or ')}, got '${String(storage)}'`);
  if (device === 'cuda' && cuda.status().available) {
    // the GEMMs need cuBLASLt opened for the process first (a CPU-only binary or no device: the native side says so)
    const lt = findCublasLt({ install: true });
    if (!lt.found) throw new Error(`device 'cuda': ${lt.reason ?? 'cuBLASLt not found'}`);
  }
  return { device, storage, gradientCheckpointing: o.gradientCheckpointing ?? false, reverseHarness: o.reverseHarness ?? false };
}

/** The policy network. Create with PolicyModel.load(dir) or PolicyModel.random(sizes). */
export class PolicyModel {
  private readonly e: ModelEngine;
  /** config.json as an object (saved back with torch_dtype updated). */
  readonly hfConfig: Record<string, unknown>;
  /** Where the model was loaded from (tokenizer files are copied from here on save). */
  readonly sourceDir: string | undefined;

  private constructor(e: ModelEngine, cfg: Record<string, unknown>, sourceDir?: string) {
    this.e = e;
    this.hfConfig = cfg;
    this.sourceDir = sourceDir;
  }

  /** Loads a Hugging Face directory: config.json + model.safetensors or a sharded index (bf16/fp16/fp32). */
  static async load(dir: string, engine: EngineOptions = {}): Promise<PolicyModel> {
    const e = await ModelEngine.load(resolve(dir), engineChoice(engine));
    const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    return new PolicyModel(e, cfg, resolve(dir));
  }

  /** A randomly initialised model (normal(0, initStd) matrices, unit norm gains), seeded. */
  static async random(sizes: ModelSizes | PresetName, opts: { seed?: number; initStd?: number } & EngineOptions = {}): Promise<PolicyModel> {
    const s = typeof sizes === 'string' ? presets[sizes] : sizes;
    if (s === undefined) throw new Error(`unknown model preset '${String(sizes)}' (tiny, small, qwen3-0.6b)`);
    const cfg = hfConfig(s);
    const e = await ModelEngine.random(JSON.stringify(cfg), opts.seed ?? 0, opts.initStd ?? 0.02, engineChoice(opts));
    return new PolicyModel(e, cfg);
  }

  get info(): ModelInfo { return this.e.config(); }
  /** The engine this model runs on and its storage dtype ('f32' for the CPU engine). */
  get engine(): { device: 'cpu' | 'cuda' | 'emulate'; storage: 'bf16' | 'f32' } { return this.e.engine(); }
  params(): ParamMeta[] { return this.e.params(); }
  getParam(name: string): Float32Array { return this.e.getParam(name); }
  setParam(name: string, values: Float32Array): void { this.e.setParam(name, values); }
  /** The accumulated gradient of one parameter (zeros before the first micro-batch). */
  getGrad(name: string): Float32Array { return this.e.getGrad(name); }

  /**
   * The AdamW state for a checkpoint: the steps taken and, per parameter, the first and
   * second moments as `<name>.exp_avg` and `<name>.exp_avg_sq` (PyTorch's names).
   */
  optimizerState(): OptimizerState {
    const tensors: Record<string, Float32Array> = {};
    let step = 0;
    for (const p of this.e.params()) {
      const st = this.e.getAdamState(p.name);
      tensors[`${p.name}.exp_avg`] = st.m;
      tensors[`${p.name}.exp_avg_sq`] = st.v;
      step = st.step;
    }
    return { step, tensors };
  }

  /** Restores optimizerState()'s output; every parameter's moments must be present. */
  loadOptimizerState(state: OptimizerState): void {
    if (!Number.isInteger(state.step) || state.step < 0) throw new Error(`optimizer state: step must be an integer >= 0, got ${state.step}`);
    for (const p of this.e.params()) {
      const m = state.tensors[`${p.name}.exp_avg`], v = state.tensors[`${p.name}.exp_avg_sq`];
      if (m === undefined || v === undefined) throw new Error(`optimizer state: no moments for parameter '${p.name}' (${p.name}.exp_avg / .exp_avg_sq)`);
      this.e.setAdamState(p.name, m, v, state.step);
    }
  }

  /**
   * Writes a Hugging Face directory atomically: everything goes to a sibling temporary
   * directory first, which then replaces `dir`. Weights, config.json and tokenizer files.
   */
  async save(dir: string, opts: SaveOptions = {}): Promise<void> {
    await this.saveHashed(dir, opts);
  }

  /**
   * save(), returning the weight files (names relative to `dir`) with their sizes and XXH64
   * hashes, computed by the native save from the bytes it wrote: a checkpoint's manifest takes
   * them instead of reading the files back.
   */
  async saveHashed(dir: string, opts: SaveOptions = {}): Promise<SavedFile[]> {
    const out = resolve(dir);
    const dtype = opts.dtype ?? this.info.dtype;
    mkdirSync(dirname(out), { recursive: true });
    const tmp = join(dirname(out), `.${basename(out)}.tmp-${process.pid}-${Date.now()}`);
    // Not recursive: the parent exists, and Node 20's recursive mkdir loops forever on ENOENT
    // from a parent that refuses new entries (e.g. /proc).
    mkdirSync(tmp);
    try {
      const weights = await this.e.save(tmp, dtype, opts.maxShardBytes ?? 0);
      writeFileSync(join(tmp, 'config.json'), JSON.stringify({ ...this.hfConfig, torch_dtype: dtype }, null, 2) + '\n');
      const tokDir = opts.tokenizerDir ?? this.sourceDir;
      let copied = 0;
      if (tokDir !== undefined) {
        for (const f of TOKENIZER_FILES) {
          if (existsSync(join(tokDir, f))) {
            copyFileSync(join(tokDir, f), join(tmp, f));
            copied++;
          }
        }
        if (opts.tokenizerDir !== undefined && copied === 0) {
          throw new Error(`save: no tokenizer files (${TOKENIZER_FILES.slice(0, 2).join(', ')}, ...) in ${tokDir}`);
        }
      }
      const old = `${out}.old-${process.pid}-${Date.now()}`;
      const had = existsSync(out);
      if (had) renameSync(out, old);
      renameSync(tmp, out);
      if (had) rmSync(old, { recursive: true, force: true });
      return weights;
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /** Forward + loss + backward of one micro-batch; gradients add into the accumulated ones. */
  async accumulate(batch: TrainBatch, loss: LossOptions = {}, gradScale = 1): Promise<TrainStats> {
    return this.e.accumulate(rawBatch(batch), loss, gradScale);
  }

  /** AdamW on the accumulated gradients (fp32 master weights), then zeroes them. */
  async optimizerStep(h: AdamWHyper): Promise<OptimizerResult> {
    return this.e.optimizerStep(h);
  }

  /**
   * One optimizer step over several micro-batches: each one's gradient is scaled by
   * 1 / microBatches.length (the mean of the micro-batch losses), then AdamW.
   */
  async trainStep(microBatches: TrainBatch[], loss: LossOptions, h: AdamWHyper): Promise<{ loss: number; micro: TrainStats[]; optimizer: OptimizerResult }> {
    if (microBatches.length === 0) throw new Error('trainStep: no micro-batches');
    const micro: TrainStats[] = [];
    for (const mb of microBatches) micro.push(await this.accumulate(mb, loss, 1 / microBatches.length));
    const optimizer = await this.optimizerStep(h);
    return { loss: micro.reduce((a, s) => a + s.loss, 0) / micro.length, micro, optimizer };
  }

  zeroGrad(): void { this.e.zeroGrad(); }

  /** Log-probs of every token (0 at each sequence's first token), no gradients. */
  async score(batch: PackedBatch, opts: { temperature?: number; reference?: boolean } = {}): Promise<Float32Array> {
    return this.e.score(rawBatch(batch), opts.temperature ?? 1, opts.reference ?? false);
  }

  /** Logits of every position, [tokens x vocab] (tests and small models only). */
  async logits(batch: PackedBatch): Promise<Float32Array> { return this.e.logits(rawBatch(batch)); }

  /** Freezes a copy of the current weights as the KL reference. */
  makeReference(): void { this.e.makeReference(); }

  /**
   * n samples per prompt, results in order prompt-major: [p0 s0, p0 s1, ..., p1 s0, ...].
   * Prompt p's samples are drawn with seeds[p] (or seed + p), so they do not depend on the
   * other prompts.
   */
  async generate(prompts: ArrayLike<number>[], opts: GenerateOptions): Promise<Generation[]> {
    return this.e.generate(prompts.map((p) => Int32Array.from(p)), opts);
  }

  memory(): MemoryReport { return this.e.memory(); }

  // ---- paged generation (docs/gpu.md, "Generation"): device engines ('emulate' | 'cuda') only;
  // the CPU engine throws a MurphyNativeError with code ENOTSUP.

  /** Allocates the K and V pools of every layer: `blocks` x `blockSize` token slots (replaces any pools; their contents are lost). */
  kvAllocate(o: { blocks: number; blockSize: number }): void { this.e.kvAllocate(o.blocks, o.blockSize); }

  /** Frees the pools and the step's buffers (before the training phase). */
  kvRelease(): void { this.e.kvRelease(); }

  /** The pools' size, the bytes a block takes (of `blockSize`, default the pools' or DEFAULT_BLOCK_SIZE) and the device's free memory. */
  kvInfo(o: { blockSize?: number } = {}): KvInfo {
    const k = this.e.kvInfo();
    const bs = o.blockSize ?? (k.blockSize > 0 ? k.blockSize : DEFAULT_BLOCK_SIZE);
    if (!Number.isSafeInteger(bs) || bs < 1) throw new MurphyNativeError(`kvInfo: blockSize must be an integer >= 1, got ${bs}`, 'EINVAL');
    return { blocks: k.blocks, blockSize: k.blockSize, bytesPerToken: k.bytesPerToken, bytesPerBlock: k.bytesPerToken * bs, freeBytes: k.freeBytes };
  }

  /**
   * One step of paged generation over the pools: the block copies, the forward of the step's
   * new tokens (their K and V written at slotMapping; attention over each sequence's blocks),
   * the logits of the logitsIndices rows, then one draw per sample row (sampleRows[r] names its
   * logits row; a row drawn n times with different sampleIndices forks n samples). Greedy:
   * temperature 0. One entry per sample row.
   */
  async pagedStep(arrays: PlanArrays, sampling: PagedSampling): Promise<PagedStepResult> {
    return this.e.pagedStep(arrays, sampling);
  }

  /** The same step without sampling: the fp32 logits of the logitsIndices rows, [L x vocab] (tests). Writes the step's K and V like pagedStep. */
  async pagedLogits(arrays: PlanArrays): Promise<Float32Array> { return this.e.pagedLogits(arrays); }

  /**
   * bf16 weights (docs/model.md, "bf16 weights"): `generate` runs generation's projections and
   * LM head on a bf16 copy of the weights, `forward` the layers' projections of accumulate(),
   * score() and logits() (the loss's LM head stays fp32). The fp32 master weights are what
   * AdamW updates; the copy is refreshed by each optimizer step. Both off by default: generation's
   * log-probs serve as the old log-probs of the loss, and the gradient is the fp32 policy's.
   * Unset keys keep their current value.
   */
  setBf16(use: { generate?: boolean; forward?: boolean }): void {
    const now = this.e.bf16();
    for (const [k, v] of Object.entries(use)) {
      if (k !== 'generate' && k !== 'forward') throw new MurphyNativeError(`setBf16: unknown option '${k}' (known: generate, forward)`, 'EINVAL');
      if (typeof v !== 'boolean') throw new MurphyNativeError(`setBf16: '${k}' must be a boolean; got ${String(v)}`, 'EINVAL');
    }
    this.e.setBf16({ generate: use.generate ?? now.generate, forward: use.forward ?? now.forward });
  }

  /** Which calls use bf16 weights now. */
  bf16(): { generate: boolean; forward: boolean } { return this.e.bf16(); }

  // ---- ZeRO-1 on the engine's own memory (docs/distributed.md, "ZeRO-1 on the device engine"):
  // device engines ('emulate' | 'cuda') only; lib/dist/zero-device.ts drives these.

  /**
   * Takes over the current weights as this rank's shard of `plan` (fp32 master, zero moments);
   * from then on the engine's own optimizerStep and Adam state calls are refused. bf16 storage:
   * the model's weights (getParam) are the bf16 compute weights widened; the fp32 master lives in
   * the shards.
   */
  zeroInit(plan: ZeroPlan): void { this.e.zeroInit(plan); }
  /** The ZeRO-1 step on the device over an NCCL communicator (every rank calls it). */
  async zeroStep(comm: RawNcclComm, h: AdamWHyper, timeoutMs: number): Promise<OptimizerResult> { return this.e.zeroStep(comm, h, timeoutMs); }
  /**
   * ZeRO-1's overlap: the next accumulate (the last micro-batch of the step) starts each
   * bucket's gradient reduction on `comm` during its backward, as soon as the bucket's
   * gradients are final; zeroStep waits for them.
   */
  zeroOverlapNext(comm: RawNcclComm, timeoutMs: number, timeline = false): void { this.e.zeroOverlapNext(comm, timeoutMs, timeline); }
  /** Starts the bucket reductions not started yet (collective: a rank without micro-batches starts them all). */
  zeroFlush(comm: RawNcclComm, timeoutMs: number): Promise<void> { return this.e.zeroFlush(comm, timeoutMs); }
  /** Where the last overlapped step started each bucket's reduction, and its device timeline (tests). */
  zeroOverlapTrace(): OverlapTrace { return this.e.zeroOverlapTrace(); }
  /** Host copies of this rank's shard: fp32 master weights, moments, step. */
  zeroShard(): ZeroShard { return this.e.zeroShard(); }
  /** Sets the shard's master weights, moments and the step count. */
  zeroSetShard(s: ZeroShard): void { this.e.zeroSetShard(s.master, s.m, s.v, s.step); }

  /**
   * A bf16 weight-sync bucket packed where the engine's weights live (device engines): each
   * parameter's compute weights (bf16 storage: copied; f32: rounded to nearest even, as toBf16)
   * at its byte offset of `out`, a u8 DeviceArray for 'cuda' (no host round trip) or a Uint8Array
   * for 'emulate'. The CPU engine throws ENOTSUP (pack on the host: lib/rollout/weight-sync-plan.ts).
   */
  packBf16(entries: { name: string; offset: number }[], out: Uint8Array | DeviceArray<'u8'>): void { this.e.packBf16(entries, out); }
}

/** Checks config.json text the way the loader does; throws naming the field. */
export function checkModelConfig(json: string, where = 'config.json'): void {
  checkModelConfigText(json, where);
}

/** Tests: run the plain reference loops instead of the fast paths (process-wide). */
export function setReferenceOps(on: boolean): void { setNativeReferenceOps(on); }

export interface InitModelOptions {
  out: string;
  preset?: PresetName;
  /** Overrides on top of the preset. */
  sizes?: Partial<ModelSizes>;
  seed?: number;
  initStd?: number;
  dtype?: WeightDType;
  maxShardBytes?: number;
  /** A directory with tokenizer files; the built-in byte-level tokenizer otherwise. */
  tokenizerDir?: string;
}

/** Creates a random model of any config and saves it as a Hugging Face directory. */
export async function initModel(o: InitModelOptions): Promise<{ dir: string; info: ModelInfo; params: number }> {
  const base = presets[o.preset ?? 'tiny'];
  if (base === undefined) throw new Error(`unknown preset '${String(o.preset)}' (tiny, small, qwen3-0.6b)`);
  const sizes: ModelSizes = { ...base, ...o.sizes, dtype: o.dtype ?? o.sizes?.dtype ?? base.dtype ?? 'bfloat16' };
  if (o.tokenizerDir === undefined) {
    if (sizes.vocabSize < BUILTIN_VOCAB) {
      throw new Error(`vocab size ${sizes.vocabSize} is smaller than the built-in tokenizer's ${BUILTIN_VOCAB}; pass a tokenizer directory or a larger vocab`);
    }
    sizes.eosTokenId = sizes.eosTokenId ?? 256 + BUILTIN_SPECIALS.indexOf('<|im_end|>');
  }
  const m = await PolicyModel.random(sizes, { seed: o.seed, initStd: o.initStd });
  let tokDir = o.tokenizerDir;
  let tmpTok: string | undefined;
  if (tokDir === undefined) {
    tmpTok = join(dirname(resolve(o.out)), `.tokenizer-${process.pid}-${Date.now()}`);
    mkdirSync(dirname(tmpTok), { recursive: true });
    mkdirSync(tmpTok); // not recursive: see save()
    for (const [f, text] of Object.entries(builtinTokenizerFiles())) writeFileSync(join(tmpTok, f), text);
    tokDir = tmpTok;
  }
  try {
    await m.save(o.out, { dtype: sizes.dtype, maxShardBytes: o.maxShardBytes, tokenizerDir: tokDir });
  } finally {
    if (tmpTok !== undefined) rmSync(tmpTok, { recursive: true, force: true });
  }
  const params = m.params().reduce((a, p) => a + p.numel, 0);
  return { dir: resolve(o.out), info: m.info, params };
}
