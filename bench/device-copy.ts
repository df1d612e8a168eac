// The device's copy bandwidth, the floor the GPU benchmarks measure themselves against:
// copyBuffer (a bandwidth-bound copy kernel) of n f32 values between two device arrays, median
// time, bytes = read + write = 8n. With host arrays (dryRun) it times the CPU copy instead:
// that checks a benchmark's code path, not a GPU.
import { medianMs } from './common.js';
import { copyBuffer, cuda, DeviceArray, type Tensor } from '../lib/native.js';

export interface CopyBandwidth {
  /** f32 values copied. */
  n: number;
  median_ms: number;
  /** bytes moved per copy: read + write */
  bytes: number;
  gbps: number;
}

export function copyBandwidth(n: number, o: { dryRun: boolean; minMs?: number }): CopyBandwidth {
  const host = new Float32Array(n);
  for (let i = 0; i < n; i++) host[i] = (i % 1024) * 0.5;
  const src = (o.dryRun ? host : cuda.upload(host)) as Tensor<'f32'>;
  const dst = (o.dryRun ? new Float32Array(n) : DeviceArray.empty('f32', n)) as Tensor<'f32'>;
  try {
    const ms = medianMs(() => copyBuffer(src, dst), 10, o.minMs ?? 1000);
    const bytes = 8 * n;
    return { n, median_ms: +ms.toFixed(4), bytes, gbps: +(bytes / (ms * 1e-3) / 1e9).toFixed(1) };
  } finally {
    for (const t of [src, dst]) if (t instanceof DeviceArray && !t.freed) t.free();
  }
}
