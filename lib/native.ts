// The one typed face of the native addon. Everything else in lib/ reaches native code
// through this module; nothing else loads the binary or calls the raw addon.
//
// The binary is loaded on first use, not on import (lib/native/loader.ts: the documented
// order, useNativeBinary(), MURPHY_NATIVE_BINARY). Every option is resolved and checked in
// TypeScript before the addon is called (lib/native/options.ts: one default and one range
// per option, taken from the run-configuration schema where the option is a config key);
// the addon reads the resolved structs as they are. Errors at the boundary are
// MurphyNativeErrors with a `code`; async calls keep the caller's stack.
//
// Tensors are plain typed arrays on the host (bf16 values travel as the raw bits in a
// Uint16Array) or DeviceArrays in GPU memory. Every kernel runs where its arrays live:
// all host arrays -> the CPU kernels, all device arrays -> the CUDA kernels (needs the
// CUDA-enabled binary); mixing the two in one call is an error.
import { callSite, MurphyNativeError, withCallerStack } from './native/errors.js';
import { loadedChoice, nativeAddon, type BinarySource } from './native/loader.js';
import { checkPagedSampling, checkPlanArrays, type PagedSampling } from './native/paged.js';
import {
  resolveAdamWKernelOptions, resolveAdamWOptions, resolveGenerateOptions, resolveGrpoLossOptions, resolveLogprobOptions,
  resolveTrainOptions,
} from './native/options.js';
import type {
  DType, ElemKind, GrpoLossStats, HostArray, KernelCase, KernelRun, KernelTensors, RawAddon, RawBatch, RawCublasLtLoader, RawDeviceBuffer, RawEngine, RawEngineChoice, RawKvInfo, RawNcclComm, RawPlanArrays, RawTensor, SavedFile,
  RawOverlapTrace, RawZeroPlan, RawZeroShard,
} from './native/raw.js';

export { MurphyNativeError, NATIVE_ERROR_CODES, type NativeErrorCode } from './native/errors.js';
export { packageRoot, useNativeBinary, type BinarySource } from './native/loader.js';
export {
  ADAMW_OPTIONS, ADAMW_KERNEL_OPTIONS, GENERATE_OPTIONS, GRPO_LOSS_OPTIONS, TRAIN_OPTIONS, LOGPROB_OPTIONS,
  type OptionDef, type ResolvedAdamWOptions, type ResolvedAdamWKernelOptions, type ResolvedGenerateOptions,
  type ResolvedGrpoLossOptions, type ResolvedTrainOptions,
} from './native/options.js';
export type { DType, GrpoLossStats, HostArray, SavedFile } from './native/raw.js';

const addon = nativeAddon;

/** How the addon binary was found. */
export interface BinaryInfo {
  /** Absolute path of the loaded .node file. */
  path: string;
  /** Which rule of the documented order matched (lib/native/loader.ts, docs/kernels.md). */
  source: BinarySource;
  /** Why this binary, in one sentence. */
  reason: string;
  /** E.g. a newer local build that the order passed over. */
  notes: string[];
  /** True when the binary contains the CUDA kernels. */
  cuda: boolean;
  napiVersion: number;
  compiler?: string;
}

/** Which binary is loaded (loading it if needed), why, and what it contains. */
export function binaryInfo(): BinaryInfo {
  const c = loadedChoice();
  const b = addon().buildInfo();
  return { path: c.path, source: c.source, reason: c.reason, notes: c.notes, cuda: b.cuda, napiVersion: b.napiVersion, compiler: b.compiler };
}

// ---------------------------------------------------------------------------------------
// Tensors

type HostOf<K extends ElemKind> = K extends 'f32'
  ? Float32Array
  : K extends 'bf16'
    ? Uint16Array
    : K extends 'i32'
      ? Int32Array
      : K extends 'u8'
        ? Uint8Array
        : BigInt64Array;

/** The kind of a host typed array (the inverse of HostOf). */
type KindOf<T extends HostArray> = T extends Float32Array
  ? 'f32'
  : T extends Uint16Array
    ? 'bf16'
    : T extends Int32Array
      ? 'i32'
      : T extends Uint8Array
        ? 'u8'
        : 'i64';

function kindOf<T extends HostArray>(a: T): KindOf<T>;
function kindOf(a: HostArray): ElemKind {
  if (a instanceof Float32Array) return 'f32';
  if (a instanceof Uint16Array) return 'bf16';
  if (a instanceof Int32Array) return 'i32';
  if (a instanceof Uint8Array) return 'u8';
  if (a instanceof BigInt64Array) return 'i64';
  throw new TypeError('expected a Float32Array, Uint16Array (bf16), Int32Array, Uint8Array or BigInt64Array');
}

/** A zero-filled host array of `n` elements of `kind` (bf16: Uint16Array of the bits). */
export function hostArray<K extends ElemKind>(kind: K, n: number): HostOf<K> {
  switch (kind) {
    case 'f32': return new Float32Array(n) as HostOf<K>;
    case 'bf16': return new Uint16Array(n) as HostOf<K>;
    case 'i32': return new Int32Array(n) as HostOf<K>;
    case 'u8': return new Uint8Array(n) as HostOf<K>;
    default: return new BigInt64Array(n) as HostOf<K>;
  }
}

/** An array in GPU memory. Free it with free() when done (it is also freed when collected). */
export class DeviceArray<K extends ElemKind = ElemKind> {
  /** @internal */ readonly raw: RawDeviceBuffer;
  private constructor(raw: RawDeviceBuffer) {
    this.raw = raw;
  }
  /** A zero-filled device array of `length` elements of `kind`. */
  static empty<K extends ElemKind>(kind: K, length: number): DeviceArray<K> {
    return new DeviceArray<K>(new (addon().DeviceBuffer)(kind, length));
  }
  /** Copies a host typed array to a new device array of the same kind. */
  static from<T extends HostArray>(a: T): DeviceArray<KindOf<T>> {
    const d = new DeviceArray<KindOf<T>>(new (addon().DeviceBuffer)(kindOf(a), a.length));
    d.raw.upload(a);
    return d;
  }
  get length(): number {
    return this.raw.length;
  }
  get kind(): K {
    return this.raw.kind as K;
  }
  get freed(): boolean {
    return this.raw.freed;
  }
  /** Copies the contents back into a new host typed array. */
  download(): HostOf<K> {
    return this.raw.download(hostArray(this.kind, this.length)) as HostOf<K>;
  }
  free(): void {
    this.raw.free();
  }
}

/** A tensor argument: a typed array on the host or a DeviceArray. */
export type Tensor<K extends ElemKind = ElemKind> = HostOf<K> | DeviceArray<K>;

function raw(t: Tensor | undefined | null): RawTensor | undefined {
  if (t === undefined || t === null) return undefined;
  return t instanceof DeviceArray ? t.raw : t;
}

function likeOf<K extends ElemKind>(ref: Tensor, kind: K, n: number): Tensor<K> {
  return ref instanceof DeviceArray ? DeviceArray.empty(kind, n) : hostArray(kind, n);
}

// Sizes are checked before any output array is allocated, so that a bad size reports
// itself instead of failing inside the typed-array constructor.
function checkCount(name: string, v: number, lo: number, hi: number): void {
  if (!Number.isInteger(v) || v < lo || v > hi) {
    throw new MurphyNativeError(`'${name}' must be an integer in [${lo}, ${hi}], got ${v}`, 'EINVAL');
  }
}
const MAX_ROWS = 2 ** 40;
const MAX_VOCAB = 2 ** 31 - 1;

function dtypeOf(logits: Tensor, dtype?: DType): DType {
  if (dtype) return dtype;
  // anything else is reported by the addon with the argument's name
  const k = logits instanceof DeviceArray ? logits.kind : logits instanceof Uint16Array ? 'bf16' : 'f32';
  return k === 'bf16' ? 'bf16' : 'f32';
}

// ---------------------------------------------------------------------------------------
// Kernel 1: log-prob gathering

export interface LogprobForwardInput {
  /** [nRows, vocab] logits, row-major: Float32Array (f32) or Uint16Array (bf16 bits), or a device array. */
  logits: Tensor<'f32'> | Tensor<'bf16'>;
  /** Defaults from the array type: Uint16Array -> 'bf16', Float32Array -> 'f32'. */
  dtype?: DType;
  /** [nRows] target token ids; each must lie in [0, vocab). */
  targets: Tensor<'i32'>;
  nRows: number;
  vocab: number;
  /** Sampling temperature T > 0: logits are divided by T. Default 1. */
  temperature?: number;
  /** Also compute the entropy of each row's distribution. */
  entropy?: boolean;
  /** Arrays to write into instead of allocating new ones ([nRows] each, where the logits live). */
  out?: { logp?: Tensor<'f32'>; lse?: Tensor<'f32'>; entropy?: Tensor<'f32'> };
}

export interface LogprobForwardOutput<T extends Tensor<'f32'> = Tensor<'f32'>> {
  /** [nRows] log softmax(z / T)[target]. -inf for a fully masked row. */
  logp: T;
  /** [nRows] logsumexp(z / T): keep it for logprobBackward. */
  lse: T;
  /** [nRows] entropy (nats) when requested. */
  entropy?: T;
}

/**
 * Batched log-prob gathering: logp[n] = z[n, y_n]/T - logsumexp(z[n, :]/T), without ever
 * materialising the probabilities. -inf logits are allowed (zero probability); a row of
 * only -inf gives logp = lse = -inf and entropy 0. NaN in a row and out-of-range targets
 * throw. Outputs live where the inputs live.
 */
export function logprobForward(input: LogprobForwardInput): LogprobForwardOutput {
  const { logits, targets, nRows, vocab } = input;
  checkCount('nRows', nRows, 0, MAX_ROWS);
  checkCount('vocab', vocab, 1, MAX_VOCAB);
  const t = resolveLogprobOptions('logprobForward', { temperature: input.temperature }, []).temperature;
  const logp = input.out?.logp ?? likeOf(logits, 'f32', nRows);
  const lse = input.out?.lse ?? likeOf(logits, 'f32', nRows);
  const entropy = input.entropy ? (input.out?.entropy ?? likeOf(logits, 'f32', nRows)) : undefined;
  addon().logprobForward(
    raw(logits)!, dtypeOf(logits, input.dtype), raw(targets)!, nRows, vocab, t, raw(logp)!, raw(lse)!,
    raw(entropy) ?? null,
  );
  return entropy ? { logp, lse, entropy } : { logp, lse };
}

export interface LogprobBackwardInput extends Omit<LogprobForwardInput, 'entropy' | 'out'> {
  /** [nRows] from logprobForward. */
  lse: Tensor<'f32'>;
  /** [nRows] dL/dlogp. */
  gradLogp: Tensor<'f32'>;
  /** Optional output array to fill ([nRows * vocab], same dtype and place as logits). */
  out?: Tensor<'f32'> | Tensor<'bf16'>;
}

/**
 * Gradient of the log-probs with respect to the logits:
 * dlogits[n, j] = g[n] * (1[j = y_n] - softmax(z[n]/T)_j) / T, written in the logits' dtype.
 * Rows with g = 0 or a fully masked row get zeros.
 */
export function logprobBackward(input: LogprobBackwardInput): Tensor<'f32'> | Tensor<'bf16'> {
  const { logits, targets, nRows, vocab } = input;
  checkCount('nRows', nRows, 0, MAX_ROWS);
  checkCount('vocab', vocab, 1, MAX_VOCAB);
  const dtype = dtypeOf(logits, input.dtype);
  const t = resolveLogprobOptions('logprobBackward', { temperature: input.temperature }, []).temperature;
  const out: Tensor<'f32'> | Tensor<'bf16'> = input.out ?? (likeOf(logits, dtype, nRows * vocab) as Tensor<'f32'> | Tensor<'bf16'>);
  addon().logprobBackward(
    raw(logits)!, dtype, raw(targets)!, nRows, vocab, t, raw(input.lse)!, raw(input.gradLogp)!,
    raw(out)!,
  );
  return out;
}

// ---------------------------------------------------------------------------------------
// Kernel 2: clipped GRPO surrogate + KL

/** TRL's loss_type names. */
export type LossType = 'dapo' | 'grpo' | 'dr_grpo';

/** The loss options (defaults and ranges: GRPO_LOSS_OPTIONS; the same for the model's accumulate). */
export interface GrpoLossOptions {
  /** Lower clip: ratio >= 1 - epsLow. Default: the config key epsilon's (0.2); range (0, 1). */
  epsLow?: number;
  /** Upper clip: ratio <= 1 + epsHigh. Default = epsLow (DAPO's clip-higher uses e.g. 0.28). */
  epsHigh?: number;
  /** Dual-clip constant c > 1 for negative advantages (verl's clip_ratio_c); 0 = off (default). */
  dualClip?: number;
  /** KL weight (k3 estimator), >= 0. Default 0. */
  beta?: number;
  /** Aggregation: 'dapo' token mean (default), 'grpo' per-sequence mean, 'dr_grpo' constant normaliser. */
  lossType?: LossType;
  /** 'dr_grpo' only: the constant length L (TRL: max_completion_length). */
  normLength?: number;
}

const GRPO_TENSOR_KEYS = ['logp', 'oldLogp', 'refLogp', 'advantages', 'mask', 'seqOffsets', 'tokenLoss', 'out'] as const;

export interface GrpoLossInput extends GrpoLossOptions {
  /** [T] log-probs of the sampled tokens under the current policy. */
  logp: Tensor<'f32'>;
  /** [T] log-probs under the policy that sampled them (rollout). */
  oldLogp: Tensor<'f32'>;
  /** [T] log-probs under the frozen reference policy; required when beta != 0. */
  refLogp?: Tensor<'f32'>;
  /** [T] advantage of each token (a sequence's advantage repeated over its tokens). */
  advantages: Tensor<'f32'>;
  /** [T] 1 = token is in the loss (completion token), 0 = masked. Default: all 1. */
  mask?: Tensor<'u8'>;
  /** [S + 1] sequence boundaries: sequence s is tokens [off[s], off[s+1]). */
  seqOffsets: Tensor<'i64'>;
  /** Also return the per-token loss l_t. */
  tokenLoss?: boolean;
  /** Arrays to write into instead of allocating new ones ([T] each, where the inputs live). */
  out?: { gradLogp?: Tensor<'f32'>; tokenLoss?: Tensor<'f32'> };
}

export interface GrpoLossOutput {
  loss: number;
  /** [T] dL/dlogp (0 on masked tokens); where the inputs live. */
  gradLogp: Tensor<'f32'>;
  /** [T] per-token loss when requested. */
  tokenLoss?: Tensor<'f32'>;
  stats: GrpoLossStats;
}

/**
 * The clipped GRPO surrogate with optional KL (formulas in docs/kernels.md):
 * l_t = -min(r A, clip(r, 1-epsLow, 1+epsHigh) A) [dual clip] + beta * k3(ref, logp),
 * aggregated as TRL's loss types. Returns the loss, dL/dlogp and statistics.
 */
export function grpoLoss(input: GrpoLossInput): GrpoLossOutput {
  const opts = resolveGrpoLossOptions('grpoLoss', input, GRPO_TENSOR_KEYS);
  const n = input.logp.length;
  const gradLogp = input.out?.gradLogp ?? likeOf(input.logp, 'f32', n);
  const tokenLoss = input.tokenLoss ? (input.out?.tokenLoss ?? likeOf(input.logp, 'f32', n)) : undefined;
  const s = addon().grpoLoss({
    ...opts,
    logp: raw(input.logp)!,
    oldLogp: raw(input.oldLogp)!,
    refLogp: raw(input.refLogp),
    advantages: raw(input.advantages)!,
    mask: raw(input.mask),
    seqOffsets: raw(input.seqOffsets)!,
    gradLogp: raw(gradLogp),
    tokenLoss: raw(tokenLoss),
  });
  const { loss, ...stats } = s;
  return tokenLoss ? { loss, gradLogp, tokenLoss, stats } : { loss, gradLogp, stats };
}

// ---------------------------------------------------------------------------------------
// Kernel 3: fused AdamW

export interface AdamWTensor {
  /** fp32 master weights, updated in place. */
  param: Tensor<'f32'>;
  /** Gradient: Float32Array or Uint16Array (bf16). */
  grad: Tensor<'f32'> | Tensor<'bf16'>;
  /** First and second moments (fp32, start at zero), updated in place. */
  m: Tensor<'f32'>;
  v: Tensor<'f32'>;
  /** Optional bf16 copy of the updated weights, written in the same pass. */
  paramBf16?: Tensor<'bf16'>;
  /** Apply weight decay to this tensor (default true; usually false for norms and biases). */
  decay?: boolean;
}

/**
 * AdamW's hyper-parameters, shared by the kernel (adamw) and the model (optimizerStep): one
 * set of defaults, the run configuration's (ADAMW_OPTIONS).
 */
export interface AdamWHyper {
  /** Learning rate, >= 0. Required. */
  lr: number;
  /** Default: config key adamBeta1 (0.9); range [0, 1). */
  beta1?: number;
  /** Default: config key adamBeta2 (0.999); range [0, 1). */
  beta2?: number;
  /** Default 1e-8; > 0. */
  eps?: number;
  /** Decoupled weight decay (torch.optim.AdamW's weight_decay). Default: config key weightDecay (0). */
  weightDecay?: number;
  /** Clip the global gradient L2 norm to this value first; 0: no clipping. Default: config key maxGradNorm (1). */
  maxGradNorm?: number;
}

export interface AdamWOptions extends AdamWHyper {
  /** The 1-based number of this step (for bias correction). */
  step: number;
  /** Round the bf16 copy stochastically (unbiased) instead of to nearest even. */
  stochasticRounding?: boolean;
  /** Seed for stochastic rounding. */
  seed?: number;
}

export interface AdamWResult {
  /** Global L2 norm of the gradients before clipping. */
  gradNorm: number;
  /** Factor the gradients were scaled by (1 when not clipped). */
  clipCoef: number;
  /** True when clipping was on and the norm was not finite: nothing was updated. */
  skipped: boolean;
}

/**
 * One AdamW step over many tensors in one call, as torch.optim.AdamW preceded by
 * torch.nn.utils.clip_grad_norm_(max_norm). See docs/kernels.md.
 */
export function adamw(tensors: AdamWTensor[], opts: AdamWOptions): AdamWResult {
  const hyper = resolveAdamWKernelOptions(opts);
  return addon().adamw(
    tensors.map((t) => ({
      param: raw(t.param)!,
      grad: raw(t.grad)!,
      m: raw(t.m)!,
      v: raw(t.v)!,
      paramBf16: raw(t.paramBf16),
      decay: t.decay ?? true,
    })),
    hyper,
  );
}

// ---------------------------------------------------------------------------------------
// Kernel 4: support

/** f32 -> bf16 bits, round to nearest even. */
export function toBf16<T extends Tensor<'f32'>>(src: T, out?: Tensor<'bf16'>): Tensor<'bf16'> {
  const dst = out ?? likeOf(src, 'bf16', src.length);
  addon().f32ToBf16(raw(src)!, raw(dst)!);
  return dst;
}

/** bf16 bits -> f32 (exact). */
export function fromBf16(src: Tensor<'bf16'>, out?: Tensor<'f32'>): Tensor<'f32'> {
  const dst = out ?? likeOf(src, 'f32', src.length);
  addon().bf16ToF32(raw(src)!, raw(dst)!);
  return dst;
}

/** Copies src into dst (same length); the bandwidth probe of the benchmarks. */
export function copyBuffer(src: Tensor<'f32'>, dst: Tensor<'f32'>): Tensor<'f32'> {
  addon().copy(raw(src)!, raw(dst)!);
  return dst;
}

// ---------------------------------------------------------------------------------------
// System

export interface CpuInfo {
  /** Threads the CPU kernels use (MURPHY_NUM_THREADS or the CPUs this process may use). */
  threads: number;
  hardwareConcurrency: number;
  /** The SIMD level the kernels dispatch to: 'avx512', 'avx2' or 'baseline'. */
  simd: string;
  avx512bf16: boolean;
  /** AMX bf16 tiles usable by this process (the CPU has them and the OS grants them): the bf16 matrix products of more than 32 rows run on them. */
  amxBf16: boolean;
}

export interface CudaDevice {
  index: number;
  name: string;
  totalMemory: number;
  freeMemory: number;
  computeCapability: string;
  multiprocessors: number;
}

export interface CudaStatus {
  /** The binary contains the CUDA kernels. */
  built: boolean;
  /** A usable device exists. */
  available: boolean;
  /** Why not, e.g. "no CUDA device: ..."; empty when available. */
  reason: string;
  runtimeVersion: number;
  driverVersion: number;
  devices: CudaDevice[];
}

export function cpuInfo(): CpuInfo {
  return addon().cpuInfo();
}

// The names linearProduct accepts: the types below and the call's checks come from these.
const LINEAR_PRODUCTS = ['forward', 'backwardInput', 'backwardWeight'] as const;
const GEMM_PATHS = ['auto', 'amx-bf16', 'avx512-bf16', 'avx512', 'avx2', 'baseline', 'generic', 'reference'] as const;
/** The products of a linear layer y = x W^T (W [n, k], nn.Linear's layout). */
export type LinearProductKind = (typeof LINEAR_PRODUCTS)[number];
/** Which implementation of the CPU matrix product runs (docs/kernels.md, "CPU GEMM"). */
export type GemmPathName = (typeof GEMM_PATHS)[number];

type GemmAddon = { linearProduct: NonNullable<RawAddon['linearProduct']>; gemmInfo: NonNullable<RawAddon['gemmInfo']> };
let gemmFns: GemmAddon | undefined;
function gemmAddon(): GemmAddon {
  if (gemmFns) return gemmFns;
  const a = addon();
  if (!a.linearProduct || !a.gemmInfo) throw new MurphyNativeError('this native binary predates linearProduct: rebuild it (npm run build:native)', 'ENOLIB');
  if (a.gemmInfo().call !== 'positional') throw new MurphyNativeError('this native binary takes linearProduct\'s arguments as one object (before 2026-12-07): rebuild it (npm run build:native)', 'ENOLIB');
  return (gemmFns = { linearProduct: a.linearProduct, gemmInfo: a.gemmInfo });
}

const MAX_DIM = 2 ** 31;  // (the addon's kMaxDim, native/addon/gemm.cc)
const MAX_REPEAT = 1_000_000;  // (the addon's kMaxRepeat)

/**
 * One product of the model's CPU matrix multiply, on host arrays (for tests and benchmarks):
 * `forward` out[m,n] (+)= a[m,k] b[n,k]^T (b may be bf16 bits: then a is rounded to bf16 and the
 * products are summed in fp32); `backwardInput` out[m,k] (+)= a[m,n] b[n,k]; `backwardWeight`
 * out[n,k] += a[m,n]^T b[m,k] (always accumulates). `path` forces an implementation for this
 * call ('auto' = the CPU's best). `repeat` (default 1) runs the product that many times back to
 * back in native code, the arguments checked once: benchmarks time the product as the model
 * calls it (from C++), without this call's own cost (~0.8 us here; docs/kernels.md). Returns the
 * path that ran. The options are checked here, the arrays' types and lengths in the addon.
 */
export function linearProduct(product: LinearProductKind, a: Float32Array, b: Float32Array | Uint16Array, out: Float32Array,
  sizes: { m: number; n: number; k: number }, opts: { accumulate?: boolean; path?: GemmPathName; repeat?: number } = {}): string {
  if (!(LINEAR_PRODUCTS as readonly string[]).includes(product)) {
    const names = LINEAR_PRODUCTS.map((p) => `'${p}'`);
    throw new MurphyNativeError(`linearProduct: 'product' must be ${names.slice(0, -1).join(', ')} or ${names.at(-1)}; got ${JSON.stringify(product)}`, 'EINVAL');
  }
  const { m, n, k } = sizes;
  checkCount('m', m, 0, MAX_DIM);
  checkCount('n', n, 0, MAX_DIM);
  checkCount('k', k, 0, MAX_DIM);
  const accumulate = opts.accumulate ?? product === 'backwardWeight';
  if (typeof accumulate !== 'boolean') throw new MurphyNativeError(`linearProduct: 'accumulate' must be true or false; got ${JSON.stringify(accumulate)}`, 'EINVAL');
  const path = opts.path ?? 'auto';
  if (!(GEMM_PATHS as readonly string[]).includes(path)) throw new MurphyNativeError(`linearProduct: 'path' must be one of ${GEMM_PATHS.map((p) => `'${p}'`).join(', ')}; got ${JSON.stringify(path)}`, 'EINVAL');
  const repeat = opts.repeat ?? 1;
  checkCount('repeat', repeat, 1, MAX_REPEAT);
  return gemmAddon().linearProduct(product, a, b, out, m, n, k, accumulate, path, repeat);
}

/** The GEMM path 'auto' takes on this CPU and the paths this CPU can run. */
export function gemmInfo(): { best: string; paths: string[] } {
  return gemmAddon().gemmInfo();
}

/** The address of a typed array's first element modulo 64, in bytes. */
export function addressMod64(view: ArrayBufferView): number {
  const a = addon();
  if (!a.addressMod64) throw new MurphyNativeError('this native binary predates addressMod64: rebuild it (npm run build:native)', 'ENOLIB');
  return a.addressMod64(view);
}

/**
 * A Float32Array or Uint16Array of n zeros whose first element is on a 64-byte boundary, as the
 * model's weights are (native code aligns them; a JS typed array is only 8- or 16-byte aligned,
 * and a vector load straddling two cache lines costs two): for benchmarks that time the native
 * products on host arrays.
 */
export function alignedArray<T extends Float32Array | Uint16Array>(Kind: { new (n: number): T; BYTES_PER_ELEMENT: number }, n: number): T {
  const raw = new Kind(n + 64 / Kind.BYTES_PER_ELEMENT);
  const skip = ((64 - addressMod64(raw)) % 64) / Kind.BYTES_PER_ELEMENT;
  if (!Number.isInteger(skip)) return raw.subarray(0, n) as T;  // not even element-aligned: leave it
  return raw.subarray(skip, skip + n) as T;
}

function hashAddon() {
  const a = addon();
  if (!a.xxh64File || !a.xxh64Buffers) throw new MurphyNativeError('this native binary predates the checkpoint hash (xxh64File): rebuild it (npm run build:native)', 'ENOLIB');
  return { xxh64File: a.xxh64File, xxh64Buffers: a.xxh64Buffers };
}

/**
 * XXH64 (seed 0) of a file and its byte count, as 16 hex digits (what `xxhsum -H1` prints).
 * Runs on a libuv worker thread: files hashed at once are hashed in parallel.
 */
export function xxh64File(path: string): Promise<{ bytes: number; xxh64: string }> {
  return withCallerStack(hashAddon().xxh64File(path), callSite(xxh64File));
}

/** XXH64 of the concatenation of `chunks`, on a libuv worker thread; the chunks must not change until it resolves. */
export function xxh64Buffers(chunks: readonly ArrayBufferView[]): Promise<string> {
  return withCallerStack(hashAddon().xxh64Buffers(chunks), callSite(xxh64Buffers));
}

/** Sets the number of CPU threads the kernels use. */
export function setNumThreads(n: number): void {
  addon().setNumThreads(n);
}

/** GPU helpers: status and moving arrays. */
export const cuda = {
  status(): CudaStatus {
    return addon().cudaStatus();
  },
  upload<T extends HostArray>(a: T): DeviceArray {
    return DeviceArray.from(a);
  },
};



// ---------------------------------------------------------------------------------------
// The policy model's engine (native/model via native/addon/model.cc). lib/model builds the
// user-facing PolicyModel on this; every option is resolved here and every async call keeps
// its caller's stack.

export type { RawBatch as EngineBatch, RawModelConfig as EngineConfig, RawParamMeta as EngineParam, RawEngineChoice as EngineChoice } from './native/raw.js';
export type { RawKvInfo as EngineKvInfo, RawPlanArrays as EnginePlanArrays } from './native/raw.js';
export type { RawOverlapTrace as OverlapTrace, RawZeroPlan as ZeroPlan, RawZeroShard as ZeroShard } from './native/raw.js';
export type { PagedSampling } from './native/paged.js';
export type { RawTrainStats as EngineTrainStats, RawGeneration as EngineGeneration, RawMemoryReport as EngineMemory } from './native/raw.js';

/** One native model: weights, gradients, AdamW state, KV-cache generation. */
export class ModelEngine {
  private constructor(private readonly e: RawEngine) {}

  /** Loads a Hugging Face directory (config.json + safetensors). */
  static async load(dir: string, engine?: RawEngineChoice): Promise<ModelEngine> {
    const site = callSite(ModelEngine.load);
    return new ModelEngine(await withCallerStack(addon().loadModel(dir, engine), site));
  }

  /** A random model of a config.json text, normal(0, initStd) matrices, seeded. */
  static async random(configJson: string, seed: number, initStd: number, engine?: RawEngineChoice): Promise<ModelEngine> {
    const site = callSite(ModelEngine.random);
    return new ModelEngine(await withCallerStack(addon().randomModel(configJson, seed, initStd, engine), site));
  }

  config(): ReturnType<RawEngine['config']> { return this.e.config(); }
  engine(): ReturnType<RawEngine['engine']> { return this.e.engine(); }
  params(): ReturnType<RawEngine['params']> { return this.e.params(); }
  getParam(name: string): Float32Array { return this.e.getParam(name); }
  setParam(name: string, values: Float32Array): void { this.e.setParam(name, values); }
  getGrad(name: string): Float32Array { return this.e.getGrad(name); }
  getAdamState(name: string): { m: Float32Array; v: Float32Array; step: number } { return this.e.getAdamState(name); }
  setAdamState(name: string, m: Float32Array, v: Float32Array, step: number): void { this.e.setAdamState(name, m, v, step); }
  zeroGrad(): void { this.e.zeroGrad(); }
  makeReference(): void { this.e.makeReference(); }
  memory(): ReturnType<RawEngine['memory']> { return this.e.memory(); }
  /** bf16 weights for generation and/or the layers' forward (docs/model.md, "bf16 weights"). */
  setBf16(use: { generate: boolean; forward: boolean }): void {
    if (!this.e.setBf16) throw new MurphyNativeError('setBf16: this native binary predates bf16 weights; rebuild it (npm run build:native)', 'ENOLIB');
    this.e.setBf16(use);
  }
  bf16(): { generate: boolean; forward: boolean } { return this.e.bf16?.() ?? { generate: false, forward: false }; }

  private zero(op: string): Required<Pick<RawEngine, 'zeroInit' | 'zeroStep' | 'zeroShard' | 'zeroSetShard'>> {
    const e = this.e;
    if (!e.zeroInit || !e.zeroStep || !e.zeroShard || !e.zeroSetShard) {
      throw new MurphyNativeError(`${op}: the loaded native binary predates ZeRO-1 on the device engine; rebuild it (npm run build:native)`, 'ENOLIB');
    }
    return { zeroInit: e.zeroInit.bind(e), zeroStep: e.zeroStep.bind(e), zeroShard: e.zeroShard.bind(e), zeroSetShard: e.zeroSetShard.bind(e) };
  }
  /** ZeRO-1 on the engine's memory (device engines): takes over the weights as this rank's shard of `plan`, zero moments. */
  zeroInit(plan: RawZeroPlan): void { this.zero('zeroInit').zeroInit(plan); }
  /** The ZeRO-1 step over `comm` (collective; ADAMW_OPTIONS resolved here). */
  zeroStep(comm: RawNcclComm, h: AdamWHyper, timeoutMs: number): Promise<AdamWResult & { step: number }> {
    const site = callSite(this.zeroStep);
    try {
      return withCallerStack(this.zero('zeroStep').zeroStep(comm, resolveAdamWOptions('zeroStep', h), timeoutMs), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }
  zeroShard(): RawZeroShard { return this.zero('zeroShard').zeroShard(); }
  private overlap(op: string): Required<Pick<RawEngine, 'zeroOverlapNext' | 'zeroFlush' | 'zeroOverlapTrace'>> {
    const e = this.e;
    if (!e.zeroOverlapNext || !e.zeroFlush || !e.zeroOverlapTrace) throw new MurphyNativeError(`${op}: the loaded native binary predates the overlapped ZeRO-1 reductions; rebuild it (npm run build:native)`, 'ENOLIB');
    return { zeroOverlapNext: e.zeroOverlapNext.bind(e), zeroFlush: e.zeroFlush.bind(e), zeroOverlapTrace: e.zeroOverlapTrace.bind(e) };
  }
  /** Where the last overlapped step started each bucket, and its device timeline (RawOverlapTrace; tests). */
  zeroOverlapTrace(): RawOverlapTrace { return this.overlap('zeroOverlapTrace').zeroOverlapTrace(); }
  /** Arms the next accumulate: its backward starts each bucket's gradient reduction on `comm` once the bucket is final (ZeRO-1's overlap). */
  zeroOverlapNext(comm: RawNcclComm, timeoutMs: number, timeline = false): void { this.overlap('zeroOverlapNext').zeroOverlapNext(comm, timeoutMs, timeline); }
  /** Starts the bucket reductions not started yet (collective); zeroStep waits for them. */
  zeroFlush(comm: RawNcclComm, timeoutMs: number): Promise<void> {
    const site = callSite(this.zeroFlush);
    try {
      return withCallerStack(this.overlap('zeroFlush').zeroFlush(comm, timeoutMs), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }
  /** Each parameter's bf16 weights at its byte offset of `out` (where the engine's memory is: a Uint8Array for emulate, a u8 DeviceArray for cuda). */
  packBf16(entries: { name: string; offset: number }[], out: Tensor<'u8'>): void {
    if (!this.e.packBf16) throw new MurphyNativeError('packBf16: the loaded native binary predates it; rebuild it (npm run build:native)', 'ENOLIB');
    this.e.packBf16(entries, raw(out)!);
  }
  zeroSetShard(master: Float32Array, m: Float32Array, v: Float32Array, step: number): void { this.zero('zeroSetShard').zeroSetShard(master, m, v, step); }

  /** Each file written (relative to dir) with its size and XXH64, hashed while written. */
  save(dir: string, dtype: 'float32' | 'bfloat16' | 'float16', maxShardBytes: number): Promise<SavedFile[]> {
    return withCallerStack(this.e.save(dir, dtype, maxShardBytes), callSite(this.save));
  }

  /** Forward + loss + backward of one micro-batch; `loss` takes GRPO_LOSS_OPTIONS and TRAIN_OPTIONS. */
  accumulate(batch: RawBatch, loss: object | undefined, gradScale: number): Promise<ReturnType<RawEngine['accumulate']> extends Promise<infer R> ? R : never> {
    const site = callSite(this.accumulate);
    try {
      return withCallerStack(this.e.accumulate(batch, resolveTrainOptions(loss, gradScale)), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** AdamW on the accumulated gradients (ADAMW_OPTIONS: the same defaults as the kernel's). */
  optimizerStep(h: AdamWHyper): Promise<AdamWResult & { step: number }> {
    const site = callSite(this.optimizerStep);
    try {
      return withCallerStack(this.e.optimizerStep(resolveAdamWOptions('optimizerStep', h)), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  score(batch: RawBatch, temperature: number, reference: boolean): Promise<Float32Array> {
    const site = callSite(this.score);
    try {
      const t = resolveLogprobOptions('score', { temperature }, []).temperature;
      return withCallerStack(this.e.score(batch, t, reference), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  logits(batch: RawBatch): Promise<Float32Array> {
    return withCallerStack(this.e.logits(batch), callSite(this.logits));
  }

  private paged(op: string): Required<Pick<RawEngine, 'kvAllocate' | 'kvRelease' | 'kvInfo' | 'pagedStep' | 'pagedLogits'>> {
    const e = this.e;
    if (!e.kvAllocate || !e.kvRelease || !e.kvInfo || !e.pagedStep || !e.pagedLogits) {
      throw new MurphyNativeError(`${op}: the loaded native binary predates paged generation; rebuild it (npm run build:native)`, 'ENOLIB');
    }
    return { kvAllocate: e.kvAllocate.bind(e), kvRelease: e.kvRelease.bind(e), kvInfo: e.kvInfo.bind(e), pagedStep: e.pagedStep.bind(e), pagedLogits: e.pagedLogits.bind(e) };
  }

  /** K and V pools of `blocks` x `blockSize` slots for every layer (device engines; replaces any pools). */
  kvAllocate(blocks: number, blockSize: number): void { this.paged('kvAllocate').kvAllocate(blocks, blockSize); }
  /** Frees the pools (the training phase gets the memory back). */
  kvRelease(): void { this.paged('kvRelease').kvRelease(); }
  kvInfo(): RawKvInfo { return this.paged('kvInfo').kvInfo(); }

  /** One paged step: copies, forward over the paged cache, then one draw per sample row. */
  pagedStep(arrays: RawPlanArrays, sampling: PagedSampling): Promise<{ tokens: Int32Array; logprobs: Float32Array }> {
    const site = callSite(this.pagedStep);
    try {
      const a = checkPlanArrays('pagedStep', arrays);
      const s = checkPagedSampling('pagedStep', sampling, a.sampleRows.length);
      return withCallerStack(this.paged('pagedStep').pagedStep(a, s), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The same step without sampling: fp32 logits of the logitsIndices rows, [L x vocab]. */
  pagedLogits(arrays: RawPlanArrays): Promise<Float32Array> {
    const site = callSite(this.pagedLogits);
    try {
      return withCallerStack(this.paged('pagedLogits').pagedLogits(checkPlanArrays('pagedLogits', arrays)), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Sampling (GENERATE_OPTIONS; `seeds` one per prompt, `stopIds` token ids). */
  generate(prompts: Int32Array[], opts: object): Promise<ReturnType<RawEngine['generate']> extends Promise<infer R> ? R : never> {
    const site = callSite(this.generate);
    try {
      return withCallerStack(this.e.generate(prompts, resolveGenerateOptions(opts, prompts.length)), site);
    } catch (err) {
      return Promise.reject(err);
    }
  }
}

/** Checks config.json text the way the model loader does; throws a MurphyNativeError naming the field. */
export function checkModelConfigText(json: string, where: string): void {
  addon().parseModelConfig(json, where);
}

/** Tests: run the plain reference loops instead of the fast paths (process-wide). */
export function setReferenceOps(on: boolean): void {
  addon().setReferenceOps(on);
}

/** The bf16 GEMM rate (TFLOP/s) cuBLASLt reaches on device 0 for Y[m,n] = X[m,k] W^T; the GPU benchmark's peak. */
export function deviceGemmTflops(m: number, n: number, k: number, iters: number): number {
  const f = addon().deviceGemmTflops;
  if (f === undefined) throw new MurphyNativeError('deviceGemmTflops: the loaded native binary predates it; rebuild it', 'ENOLIB');
  return f(m, n, k, iters);
}

// ---------------------------------------------------------------------------------------
// The GPU engine's host-side pieces (native/gpu/binding.cc), used by lib/gpu/ and its tests.

export type { KernelCase, KernelRun, KernelTensors, RawCublasLtLoad as CublasLtLoadResult, RawCublasLtLoader as CublasLtLoader } from './native/raw.js';

/** The addon's cuBLASLt loader, or undefined when the binary predates it. */
export function cublasLtLoader(): RawCublasLtLoader | undefined {
  return addon().cublasLtLoad;
}

export type { NcclBuffer, NcclDType, NcclRedOp, RawNccl, RawNcclComm, RawNcclLoad } from './native/raw.js';

/** The addon's NCCL entry points (native/gpu/nccl_binding.cc), or undefined when the binary predates them. */
export function ncclNative(): import('./native/raw.js').RawNccl | undefined {
  const a = addon();
  if (a.ncclLoad === undefined || a.ncclUniqueId === undefined || a.ncclInit === undefined) return undefined;
  return { ncclLoad: a.ncclLoad, ncclUniqueId: a.ncclUniqueId, ncclInit: a.ncclInit };
}

/** Runs a GPU-engine kernel case on the CPU harness (the kernel code block by block) and the CPU reference op. */
export function kernelHarness(c: KernelCase): KernelRun {
  const f = addon().kernelHarness;
  if (f === undefined) throw new MurphyNativeError('kernelHarness: the loaded native binary predates it; rebuild it (npm run build:native)', 'ENOLIB');
  return f(c);
}

/** The GPU run of a kernel case (CUDA builds), or undefined when the binary has none. */
export function kernelCudaRunner(): ((c: KernelCase) => KernelRun & { harness: KernelTensors }) | undefined {
  return addon().kernelCuda;
}
