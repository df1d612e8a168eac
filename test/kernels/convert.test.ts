// Kernel 4: bf16 <-> f32 conversion (round to nearest even) and copy.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { copyBuffer, fromBf16, toBf16 } from '../../lib/native.js';
import { Rng, testSeed } from '../helpers/random.js';
import { bf16BitsToNumber, numberToBf16Bits } from '../helpers/reference.js';

const rng = new Rng(testSeed('convert'));

describe('bf16 conversion', () => {
  it('f32 -> bf16 rounds to nearest even, matching an integer reference on random and special values', () => {
    const n = 3_000_001; // not a multiple of any vector width, several parallel chunks
    const x = new Float32Array(n);
    const u = new Uint32Array(x.buffer);
    for (let i = 0; i < n; i++) u[i] = (rng.next() * 2 ** 32) >>> 0; // every bit pattern, NaNs and infinities included
    const special = [0, -0, 1, -1, Infinity, -Infinity, NaN, 3.4e38, -3.4e38, 1e-45, 1.00390625, 1.01171875, 1.0078125 + 2 ** -9];
    special.forEach((v, i) => (x[i] = v));
    const b = toBf16(x) as Uint16Array;
    for (let i = 0; i < n; i++) {
      const want = numberToBf16Bits(x[i]);
      if (Number.isNaN(x[i])) assert.ok(Number.isNaN(bf16BitsToNumber(b[i])), `NaN stays NaN at ${i}`);
      else if (b[i] !== want) assert.fail(`index ${i}: ${x[i]} -> ${b[i].toString(16)}, want ${want.toString(16)}`);
    }
    // ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7; even mantissa wins (1)
    assert.equal(bf16BitsToNumber((toBf16(new Float32Array([1 + 2 ** -8])) as Uint16Array)[0]), 1);
    assert.equal(bf16BitsToNumber((toBf16(new Float32Array([1 + 3 * 2 ** -8])) as Uint16Array)[0]), 1 + 2 ** -6);
  });
  it('bf16 -> f32 is exact and round-trips', () => {
    const all = Uint16Array.from({ length: 65536 }, (_, i) => i);
    const f = fromBf16(all) as Float32Array;
    const back = toBf16(f) as Uint16Array;
    for (let i = 0; i < 65536; i++) {
      if (Number.isNaN(f[i])) continue;
      assert.equal(f[i], bf16BitsToNumber(i));
      assert.equal(back[i], i);
    }
  });
  it('copy copies, and checks lengths', () => {
    const a = rng.normals(1_234_567);
    const b = copyBuffer(a, new Float32Array(a.length)) as Float32Array;
    assert.deepEqual(b, a);
    assert.throws(() => copyBuffer(a, new Float32Array(3)), /'destination' has 3 elements but 1234567 are needed/);
  });
});

describe('device arrays', () => {
  // Every kind of binary asserts something: a CPU-only build says how to get CUDA, a CUDA
  // build without a device says why there is none, a CUDA build with one round-trips.
  it('work where there is a GPU, and say why not where there is none', async () => {
    const { DeviceArray, MurphyNativeError, cuda } = await import('../../lib/native.js');
    const st = cuda.status();
    if (!st.built) {
      assert.equal(st.available, false);
      assert.match(st.reason, /^no CUDA device: this binary was built without CUDA/);
      assert.throws(
        () => DeviceArray.empty('f32', 4),
        (e: unknown) => e instanceof MurphyNativeError && e.code === 'ENOLIB' && /built without CUDA; build it with `npm run build:cuda`/.test(e.message),
      );
    } else if (!st.available) {
      assert.match(st.reason, /^no CUDA device: /);
      assert.equal(st.devices.length, 0);
      assert.throws(() => DeviceArray.empty('f32', 4), (e: unknown) => e instanceof MurphyNativeError && e.code === 'ECUDA');
    } else {
      assert.ok(st.devices.length > 0 && st.reason === '');
      const x = rng.normals(1001);
      const d = DeviceArray.from(x);
      assert.deepEqual(d.download(), x);
      const b = toBf16(d);
      assert.ok(b instanceof DeviceArray, 'a device array in, a device array out');
      assert.deepEqual(b.download(), toBf16(x));
      d.free();
      assert.equal(d.freed, true);
    }
  });
});
