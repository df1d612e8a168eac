// Kernel 4 (bf16 conversion, copy) and device arrays on the GPU: bit-exact against the CPU.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { copyBuffer, fromBf16, toBf16, type Tensor } from '../../lib/native.js';
import { Rng } from '../helpers/random.js';
import { announceSeed, empty, freeAll, gpuOnly, host, up } from './common.js';

const rng = new Rng(announceSeed('gpu/convert'));

function bits(a: Float32Array): Uint32Array {
  return new Uint32Array(a.buffer, a.byteOffset, a.length);
}

function specials(): Float32Array {
  const u = new Uint32Array([
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc12345, 0x00000001, 0x807fffff,
    0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x00008000, 0x00018000,
  ]);
  return new Float32Array(u.buffer);
}

describe('gpu conversion and copy vs cpu', () => {
  it('toBf16 (round to nearest even) is bit-exact: specials, ties, random, odd lengths', gpuOnly, () => {
    for (const n of [0, 1, 3, 4, 5, 1023, 100_003]) {
      const x = rng.normals(n, 10);
      for (let i = 0; i < n; i++) if (rng.next() < 0.1) bits(x)[i] = (rng.int(2 ** 16) << 16) | 0x8000; // exact ties
      const all = new Float32Array(n + 18);
      all.set(x);
      all.set(specials(), n);
      const cpu = toBf16(all) as Uint16Array;
      const d = up(all) as Tensor<'f32'>;
      const g = toBf16(d);
      assert.deepEqual(host<Uint16Array>(g), cpu, `n=${n}`);
      freeAll(d, g);
    }
  });
  it('fromBf16 is exact for all 65536 bit patterns', gpuOnly, () => {
    const all = Uint16Array.from({ length: 65536 }, (_, i) => i);
    const cpu = fromBf16(all) as Float32Array;
    const d = up(all) as Tensor<'bf16'>;
    const g = fromBf16(d);
    assert.deepEqual(bits(host<Float32Array>(g)), bits(cpu));
    freeAll(d, g);
  });
  it('copyBuffer copies every byte (lengths 0, 1, 3, 4, 1M + 3)', gpuOnly, () => {
    for (const n of [0, 1, 3, 4, 1_000_003]) {
      const x = rng.normals(n);
      const src = up(x) as Tensor<'f32'>, dst = empty('f32', n);
      copyBuffer(src, dst);
      assert.deepEqual(bits(host<Float32Array>(dst)), bits(x), `n=${n}`);
      freeAll(src, dst);
    }
  });
  it('device arrays round-trip every element kind; empty() is zero-filled', gpuOnly, () => {
    const arrays = [
      rng.normals(1001), Uint16Array.from({ length: 77 }, () => rng.int(65536)), Int32Array.from({ length: 5 }, () => rng.int(2 ** 31) - 2 ** 30),
      Uint8Array.from({ length: 33 }, () => rng.int(256)), BigInt64Array.from({ length: 9 }, () => BigInt(rng.int(2 ** 31)) * 4096n - 77n),
    ];
    for (const a of arrays) {
      const d = up(a);
      assert.deepEqual(host(d), a);
      freeAll(d);
    }
    const z = empty('f32', 4097);
    assert.ok(host<Float32Array>(z).every((x) => x === 0));
    freeAll(z);
  });
});
