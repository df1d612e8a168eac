// What a sleeping pool worker costs a product: `node --import tsx bench/pool-wake.ts [GAP_US ...]`
// (run it with MURPHY_POOL_SPIN_US=0, unset (100) and 2000 to compare).
//
// Times 3,000 calls of one 512 x 256 x 128 fp32 forward product (the small preset's k/v
// projection, ~0.1 ms on 2 threads), each call after the calling thread busy-waits GAP_US
// microseconds (default 0 and 300), and prints the distribution of the per-call times. A gap
// longer than the pool's idle spin (MURPHY_POOL_SPIN_US, default 100 us: native/cpu/threads.cc)
// finds the worker asleep, so the call pays its wake-up; a gap inside the spin does not.
import { alignedArray, linearProduct } from '../lib/native.js';

const [m, k, n] = [512, 256, 128];
const x = alignedArray(Float32Array, m * k), w = alignedArray(Float32Array, n * k), y = alignedArray(Float32Array, m * n);
for (let i = 0; i < x.length; i++) x[i] = Math.random() - 0.5;
for (let i = 0; i < w.length; i++) w[i] = Math.random() - 0.5;
const gaps = process.argv.slice(2).map(Number);
for (const gap of gaps.length ? gaps : [0, 300]) {
  const t: number[] = [];
  for (let r = 0; r < 3000; r++) {
    const until = performance.now() + gap / 1000;
    while (performance.now() < until);
    const t0 = performance.now();
    linearProduct('forward', x, w, y, { m, n, k });
    t.push((performance.now() - t0) * 1000);
  }
  t.sort((a, b) => a - b);
  const q = (p: number) => (t[Math.floor(p * (t.length - 1))] ?? NaN).toFixed(0);
  console.log(`gap ${gap} us, spin ${process.env.MURPHY_POOL_SPIN_US || '100 (default)'} us: per call min ${q(0)}, p10 ${q(0.1)}, median ${q(0.5)}, p90 ${q(0.9)} us`);
}
