// Shared by the GPU tests: whether a CUDA device is here, and small helpers for moving
// arrays and comparing the CUDA path with the CPU path on the same inputs.
//
// Without a usable device every GPU test is *skipped* (node:test's skip, so the summary
// says "skipped", never "pass"), after one line saying why.
import { cuda, DeviceArray, hostArray, kernelCudaRunner, kernelHarness, type HostArray, type Tensor } from '../../lib/native.js';
import { testSeed } from '../helpers/random.js';

const st = cuda.status();

/**
 * MURPHY_GPU_DRYRUN=1: run the tests' logic with "device" arrays that are host copies,
 * i.e. compare the CPU path with itself. Checks the test code on machines without a
 * GPU; it proves nothing about the CUDA kernels and says so.
 */
export const dryRun = process.env.MURPHY_GPU_DRYRUN === '1';

/** false when the GPU tests can run, else the reason they are skipped. */
export const skipReason: string | false = st.available || dryRun
  ? false
  : st.built
    ? st.reason || 'no CUDA device: unknown reason'
    : /^no CUDA device/.test(st.reason)
      ? st.reason
      : `no CUDA device: the loaded binary was built without CUDA (${st.reason || 'CPU-only build'}); build one with .ci/cuda-build.sh`;

/** Prints the device (or why the tests do not run); call once per test file. */
export function announce(file: string): void {
  if (dryRun) {
    console.log(`# ${file}: MURPHY_GPU_DRYRUN=1: comparing the CPU path with itself (no CUDA kernel is tested)`);
  } else if (skipReason) {
    console.log(`# ${file}: ${skipReason} — GPU tests not run`);
  } else {
    const d = st.devices[0];
    console.log(`# ${file}: CUDA device ${d.index}: ${d.name} (sm_${d.computeCapability.replace('.', '')}, ${d.multiprocessors} SMs, ${(d.totalMemory / 2 ** 30).toFixed(1)} GiB)`);
  }
}

/**
 * announce(file), then the file's random seed: testSeed(file) (fresh, printed for replay), or 1
 * when the tests are skipped.
 */
export function announceSeed(file: string): number {
  announce(file);
  return skipReason ? 1 : testSeed(file);
}

/** node:test options for a test that needs a GPU: skipped (and counted as skipped) without one. */
export const gpuOnly = { skip: skipReason };

/** Named f32 outputs of a kernel harness case. */
export type KernelOutputs = Record<string, Float32Array>;
/** A kernel harness case (native/gpu/harness_*.h): op, sizes, dtype, inputs. */
export type KernelCaseInput = Record<string, unknown> & { op: string };

/**
 * The GPU run of a harness case: the CUDA kernel's outputs, the CPU op's (reference) and the
 * CPU harness run of the same kernel code. In a dry run the harness stands in for the GPU.
 */
export function onGpu(c: KernelCaseInput): { kernel: KernelOutputs; reference: KernelOutputs; harness: KernelOutputs } {
  if (dryRun) {
    const h = kernelHarness(c);
    return { kernel: h.kernel, reference: h.reference, harness: h.kernel };
  }
  const kernelCuda = kernelCudaRunner();
  if (!kernelCuda) throw new Error('the loaded CUDA binary predates kernelCuda: rebuild it (bash .ci/cuda-build.sh)');
  return kernelCuda(c);
}

/** Uploads every array; returns the device arrays (free them with freeAll). */
export function up<T extends HostArray>(a: T): DeviceArray | T {
  if (dryRun) return a.slice() as T;
  return cuda.upload(a);
}

type Kind = 'f32' | 'bf16' | 'i32' | 'u8' | 'i64';
/** A zero-filled device array (a host array in a dry run). */
export function empty<K extends Kind>(kind: K, n: number): Tensor<K> {
  if (dryRun) return hostArray(kind, n) as Tensor<K>;
  return DeviceArray.empty(kind, n) as Tensor<K>;
}

/** True when t is where the "device" arrays live (a DeviceArray, or anything in a dry run). */
export function onDevice(t: Tensor | undefined): boolean {
  return dryRun || t instanceof DeviceArray;
}

/** The host contents of a tensor, downloading a device array. */
export function host<T extends HostArray>(t: Tensor | T): T {
  return (t instanceof DeviceArray ? t.download() : t) as T;
}

export function freeAll(...ts: (Tensor | undefined)[]): void {
  for (const t of ts) if (t instanceof DeviceArray && !t.freed) t.free();
}

/** f32 bits of a number, as an unsigned 32-bit integer. */
const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);
export function f32Bits(x: number): number {
  f32buf[0] = x;
  return u32buf[0];
}

// splitmix64 exactly as murphy::hash_u32 (common.h), in BigInt.
const M64 = (1n << 64n) - 1n;
export function hashU32(seed: bigint, index: bigint): number {
  let z = (seed + ((0x9e3779b97f4a7c15n * (index + 1n)) & M64)) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  z ^= z >> 31n;
  return Number(z >> 32n);
}

/** The per-tensor seed AdamW uses for stochastic rounding: seed ^ (tensor * 0x9E3779B97F4A7C15). */
export function tensorSeed(seed: number, tensor: number): bigint {
  return (BigInt(seed) ^ ((BigInt(tensor) * 0x9e3779b97f4a7c15n) & M64)) & M64;
}

/** murphy::f32_to_bf16_stochastic on the f32 value x with random bits rnd. */
export function bf16Stochastic(x: number, rnd: number): number {
  const u = f32Bits(x);
  if ((u & 0x7fffffff) >>> 0 >= 0x7f800000) {
    // inf / NaN: round to nearest even
    if ((u & 0x7fffffff) >>> 0 > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
    return u >>> 16;
  }
  let r = (u + (rnd & 0xffff)) >>> 0;
  if ((r & 0x7f800000) >>> 0 === 0x7f800000) r = u;
  return r >>> 16;
}

/** Largest |a - b| / (atol + rtol |b|), with -inf/inf/NaN required to match exactly. */
export function worst(a: ArrayLike<number>, b: ArrayLike<number>, atol: number, rtol: number): { ratio: number; index: number } {
  let ratio = 0;
  let index = -1;
  for (let i = 0; i < b.length; i++) {
    const x = a[i], y = b[i];
    if (x === y || (Number.isNaN(x) && Number.isNaN(y))) continue;
    const r = Math.abs(x - y) / (atol + rtol * Math.abs(y));
    if (!(r <= ratio)) {
      ratio = Number.isNaN(r) ? Infinity : r;
      index = i;
    }
  }
  return { ratio, index };
}
