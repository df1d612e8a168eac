// The addon's raw surface, exactly as the C++ bindings (native/addon/) export it. Internal:
// only lib/native.ts calls it, after resolving every option (lib/native/options.ts).
import type { ModelSizes } from '../model/config.js';
import type { PlanArrays } from '../rollout/paged/plan-arrays.js';
import type { NativeErrorCode } from './errors.js';
import type {
  ResolvedAdamWKernelOptions, ResolvedAdamWOptions, ResolvedGenerateOptions, ResolvedGrpoLossOptions, ResolvedTrainOptions,
} from './options.js';

export type ElemKind = 'f32' | 'bf16' | 'i32' | 'u8' | 'i64';
export type DType = 'f32' | 'bf16';
/** Host tensors: typed arrays. */
export type HostArray = Float32Array | Uint16Array | Int32Array | Uint8Array | BigInt64Array;

/** A file a native save wrote: its name relative to the directory, size and XXH64 (16 hex digits, as the manifest holds it). */
export interface SavedFile {
  file: string;
  bytes: number;
  xxh64: string;
}

export interface RawDeviceBuffer {
  readonly length: number;
  readonly kind: ElemKind;
  readonly freed: boolean;
  upload(src: HostArray): RawDeviceBuffer;
  download<T extends HostArray>(dst: T): T;
  free(): void;
}

export type RawTensor = HostArray | RawDeviceBuffer;

export interface GrpoLossStats {
  /** Fraction of active tokens with A < 0 and ratio < 1 - epsLow. */
  clipLowFrac: number;
  /** Fraction of active tokens with A > 0 and ratio > 1 + epsHigh. */
  clipHighFrac: number;
  /** Fraction of active tokens where the dual-clip bound applied. */
  dualClipFrac: number;
  /** Mean importance ratio over active tokens. */
  meanRatio: number;
  /** Mean k3 KL over active tokens (0 without refLogp). */
  meanKl: number;
  /** Number of tokens with mask 1. */
  nActive: number;
}

/** What the grpoLoss binding returns: the loss and its statistics. */
export interface RawGrpoStats extends GrpoLossStats {
  loss: number;
}

export interface RawAdamWTensor {
  param: RawTensor;
  grad: RawTensor;
  m: RawTensor;
  v: RawTensor;
  paramBf16?: RawTensor;
  decay: boolean;
}

export interface RawAdamWResult {
  gradNorm: number;
  clipCoef: number;
  skipped: boolean;
}

/** A packed batch as the model bindings take it (positions always given). */
export interface RawBatch {
  tokens: Int32Array;
  positions: Int32Array;
  seqOffsets: Int32Array;
  mask?: Uint8Array;
  advantages?: Float32Array;
  oldLogp?: Float32Array;
  refLogp?: Float32Array;
}

/** A model's config as the bindings report it: ModelSizes with every default filled in, no token ids. */
export type RawModelConfig = Required<Omit<ModelSizes, 'bosTokenId' | 'eosTokenId'>>;

/** Which engine a model runs on: the CPU engine, or the device engine over the CPU harness
 * ('emulate') or CUDA, with its storage dtype and per-layer activation checkpointing. */
export interface RawEngineChoice {
  device: 'cpu' | 'emulate' | 'cuda';
  storage: 'bf16' | 'f32';
  gradientCheckpointing: boolean;
  /** Tests, 'emulate' only: the harness runs blocks and threads in reverse order. */
  reverseHarness?: boolean;
}

export interface RawParamMeta {
  name: string;
  shape: number[];
  numel: number;
}

export interface RawTrainStats {
  loss: number;
  nTokens: number;
  nActive: number;
  meanLogp: number;
  clipLowFrac: number;
  clipHighFrac: number;
  dualClipFrac: number;
  meanRatio: number;
  meanKl: number;
}

export interface RawGeneration {
  tokens: Int32Array;
  logprobs: Float32Array;
  finishReason: 'stop' | 'length';
}

export interface RawMemoryReport {
  weights: number;
  grads: number;
  optimizer: number;
  reference: number;
  activationsPeak: number;
  matmulCache: number;
}

/** The KV pools of a device engine (native/gpu/engine/paged_inputs.h's KvInfo). */
export interface RawKvInfo {
  blocks: number;
  blockSize: number;
  bytesPerToken: number;
  /** Free device memory; null when unknown (emulate). */
  freeBytes: number | null;
}

/** lib/rollout/paged/plan-arrays.ts's PlanArrays: the binding reads them as they are (lengths checked in lib/native/paged.ts). */
export type RawPlanArrays = PlanArrays;

/** Per sample row; seed is the Uint32Array's bits as an Int32Array view. */
export interface RawPagedSampling {
  temperature: Float32Array;
  topP: Float32Array;
  topK: Int32Array;
  minP: Float32Array;
  seed: Int32Array;
  step: Int32Array;
}

/** One native model (native/addon/model.cc's ModelEngine). */
export interface RawEngine {
  config(): RawModelConfig;
  engine(): { device: RawEngineChoice['device']; storage: RawEngineChoice['storage'] };
  params(): RawParamMeta[];
  getParam(name: string): Float32Array;
  setParam(name: string, values: Float32Array): void;
  getGrad(name: string): Float32Array;
  getAdamState(name: string): { m: Float32Array; v: Float32Array; step: number };
  setAdamState(name: string, m: Float32Array, v: Float32Array, step: number): void;
  /** Each file written (name relative to dir) with its size and XXH64, hashed as it was written. */
  save(dir: string, dtype: RawModelConfig['dtype'], maxShardBytes: number): Promise<SavedFile[]>;
  accumulate(batch: RawBatch, opts: ResolvedTrainOptions): Promise<RawTrainStats>;
  optimizerStep(h: ResolvedAdamWOptions): Promise<RawAdamWResult & { step: number }>;
  zeroGrad(): void;
  score(batch: RawBatch, temperature: number, reference: boolean): Promise<Float32Array>;
  logits(batch: RawBatch): Promise<Float32Array>;
  makeReference(): void;
  generate(prompts: Int32Array[], opts: ResolvedGenerateOptions): Promise<RawGeneration[]>;
  memory(): RawMemoryReport;
  /** Paged generation (device engines; the CPU engine throws ENOTSUP); absent from binaries that predate it. */
  kvAllocate?: (blocks: number, blockSize: number) => void;
  kvRelease?: () => void;
  kvInfo?: () => RawKvInfo;
  pagedStep?: (arrays: RawPlanArrays, sampling: RawPagedSampling) => Promise<{ tokens: Int32Array; logprobs: Float32Array }>;
  pagedLogits?: (arrays: RawPlanArrays) => Promise<Float32Array>;
  /** Which calls use the bf16 copy of the weights; absent from binaries that predate it. */
  setBf16?: (use: { generate: boolean; forward: boolean }) => void;
  bf16?: () => { generate: boolean; forward: boolean };
  /** ZeRO-1 on the engine's memory (device engines; the CPU engine throws ENOTSUP); absent from binaries that predate it. */
  zeroInit?: (plan: RawZeroPlan) => void;
  zeroStep?: (comm: RawNcclComm, h: ResolvedAdamWOptions, timeoutMs: number) => Promise<RawAdamWResult & { step: number }>;
  zeroShard?: () => RawZeroShard;
  /** The overlap of ZeRO-1's gradient reductions with the backward pass (zero_shard.h); absent from binaries that predate it. */
  zeroOverlapNext?: (comm: RawNcclComm, timeoutMs: number, timeline: boolean) => void;
  zeroFlush?: (comm: RawNcclComm, timeoutMs: number) => Promise<void>;
  zeroOverlapTrace?: () => RawOverlapTrace;
  zeroSetShard?: (master: Float32Array, m: Float32Array, v: Float32Array, step: number) => void;
  /** bf16 weight-sync buckets packed in the engine's memory (device engines); absent from binaries that predate it. */
  packBf16?: (entries: { name: string; offset: number }[], out: RawTensor) => void;
}

/** ZeRO-1's plan for a device engine (native/gpu/engine/zero_plan.h): shard and bucket bounds of the flat parameter vector. */
export interface RawZeroPlan {
  rank: number;
  worldSize: number;
  /** worldSize + 1 bounds: rank r owns [shards[r], shards[r + 1]). */
  shards: number[];
  /** Bucket k is [buckets[k], buckets[k + 1]). */
  buckets: number[];
}

/**
 * Where the last overlapped ZeRO-1 step started each bucket's reduction (the gradient frontier;
 * 0: end of the backward or a flush; -1: the step), and the milliseconds from its first start to
 * the end of its backward on the device (CUDA, armed with the timeline; else null).
 */
export interface RawOverlapTrace {
  starts: number[];
  timelineMs: number | null;
}

/** Host copies of a device engine's ZeRO-1 shard. */
export interface RawZeroShard {
  master: Float32Array;
  m: Float32Array;
  v: Float32Array;
  step: number;
}

export interface RawCpuInfo {
  threads: number;
  hardwareConcurrency: number;
  simd: string;
  avx512bf16: boolean;
  amxBf16: boolean;
}

export interface RawCudaStatus {
  built: boolean;
  available: boolean;
  reason: string;
  runtimeVersion: number;
  driverVersion: number;
  devices: { index: number; name: string; totalMemory: number; freeMemory: number; computeCapability: string; multiprocessors: number }[];
}

/** cublasLtLoad's answer (native/gpu/binding.cc). */
export interface RawCublasLtLoad {
  ok: boolean;
  path: string;
  origin: string;
  version: number;
  versionText: string;
  reason: string;
  attempts: { path: string; origin: string; error: string }[];
}
export type RawCublasLtLoader = (candidates: { path: string; origin: string }[], install: boolean) => RawCublasLtLoad;

/** ncclLoad's answer (native/gpu/nccl_binding.cc): the same shape as cublasLtLoad's. */
export type RawNcclLoad = RawCublasLtLoad;
export type NcclDType = 'f32' | 'f64' | 'bf16' | 'u8';
export type NcclRedOp = 'sum' | 'prod' | 'max' | 'min' | 'avg';
/** A buffer NCCL reads or writes: a device array (a host typed array only reaches a fake library). */
export type NcclBuffer = RawTensor;
/** One rank of a communicator (native/gpu/nccl_binding.cc). Every method but abort waits off the JS thread. */
export interface RawNcclComm {
  readonly rank: number;
  readonly nranks: number;
  readonly device: number;
  allReduce(send: NcclBuffer, recv: NcclBuffer, count: number, dtype: NcclDType, op: NcclRedOp, timeoutMs: number): Promise<void>;
  reduceScatter(send: NcclBuffer, recv: NcclBuffer, recvCount: number, dtype: NcclDType, op: NcclRedOp, timeoutMs: number): Promise<void>;
  allGather(send: NcclBuffer, recv: NcclBuffer, sendCount: number, dtype: NcclDType, timeoutMs: number): Promise<void>;
  broadcast(send: NcclBuffer | null, recv: NcclBuffer, count: number, dtype: NcclDType, root: number, timeoutMs: number): Promise<void>;
  close(timeoutMs: number): Promise<void>;
  abort(): void;
}
export interface RawNccl {
  ncclLoad(candidates: { path: string; origin: string }[], install: boolean): RawNcclLoad;
  ncclUniqueId(): Uint8Array;
  ncclInit(id: Uint8Array, nranks: number, rank: number, device: number, timeoutMs: number): Promise<RawNcclComm>;
}

/** A GPU-engine kernel case for the harness (op, sizes, dtype, order, inputs, ints). */
export interface KernelCase {
  op: string;
  [k: string]: unknown;
}
export type KernelTensors = Record<string, Float32Array>;
export interface KernelRun {
  kernel: KernelTensors;
  reference: KernelTensors;
}

export interface RawAddon {
  /** The GPU engine's host-side pieces; absent from binaries that predate them. */
  cublasLtLoad?: RawCublasLtLoader;
  kernelHarness?: (c: KernelCase) => KernelRun;
  /** NCCL (native/gpu/nccl_binding.cc); absent from binaries that predate it. */
  ncclLoad?: RawNccl['ncclLoad'];
  ncclUniqueId?: RawNccl['ncclUniqueId'];
  ncclInit?: RawNccl['ncclInit'];
  /** CUDA builds only. */
  kernelCuda?: (c: KernelCase) => KernelRun & { harness: KernelTensors };
  setErrorClass(cls: new (message: string, code: NativeErrorCode) => Error): void;
  DeviceBuffer: new (kind: ElemKind, length: number) => RawDeviceBuffer;
  logprobForward(
    logits: RawTensor, dtype: DType, targets: RawTensor, nRows: number, vocab: number, temperature: number,
    logp: RawTensor, lse: RawTensor, entropy: RawTensor | null,
  ): void;
  logprobBackward(
    logits: RawTensor, dtype: DType, targets: RawTensor, nRows: number, vocab: number, temperature: number,
    lse: RawTensor, gradLogp: RawTensor, gradLogits: RawTensor,
  ): void;
  grpoLoss(args: ResolvedGrpoLossOptions & {
    logp: RawTensor; oldLogp: RawTensor; refLogp?: RawTensor; advantages: RawTensor; mask?: RawTensor; seqOffsets: RawTensor;
    gradLogp?: RawTensor; tokenLoss?: RawTensor;
  }): RawGrpoStats;
  adamw(tensors: RawAdamWTensor[], hyper: ResolvedAdamWKernelOptions): RawAdamWResult;
  f32ToBf16(src: RawTensor, dst: RawTensor): void;
  bf16ToF32(src: RawTensor, dst: RawTensor): void;
  copy(src: RawTensor, dst: RawTensor): void;
  buildInfo(): { cuda: boolean; napiVersion: number; compiler?: string };
  cpuInfo(): RawCpuInfo;
  setNumThreads(n: number): void;
  cudaStatus(): RawCudaStatus;
  loadModel(dir: string, engine?: RawEngineChoice): Promise<RawEngine>;
  randomModel(configJson: string, seed: number, initStd: number, engine?: RawEngineChoice): Promise<RawEngine>;
  parseModelConfig(json: string, where: string): boolean;
  setReferenceOps(on: boolean): void;
  /** Process exit: running generations stop at their next step, delivery fences stop waiting. */
  markExiting(): void;
  deviceGemmTflops?(m: number, n: number, k: number, iters: number): number;
  /**
   * The CPU matrix product (native/addon/gemm.cc), positional; absent from binaries that predate
   * it. Binaries before 2026-12-07 took one options object instead (their gemmInfo has no `call`).
   */
  linearProduct?: (product: string, a: Float32Array, b: Float32Array | Uint16Array, out: Float32Array, m: number, n: number, k: number,
    accumulate: boolean, path: string, repeat: number) => string;
  gemmInfo?: () => { best: string; paths: string[]; call?: 'positional' };
  addressMod64?: (view: ArrayBufferView) => number;
  /** The checkpoint integrity hash (native/addon/hash.cc); absent from binaries that predate it. */
  xxh64File?: (path: string) => Promise<{ bytes: number; xxh64: string }>;
  xxh64Buffers?: (chunks: readonly ArrayBufferView[]) => Promise<string>;
}
