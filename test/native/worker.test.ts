// The addon in worker threads: each environment (the main thread, every worker) gets its own
// class constructors and error class (per-environment instance data, not process globals), so
// a worker can load and use it, and the main thread keeps working after the worker is gone.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { grpoLoss, MurphyNativeError, toBf16 } from '../../lib/native.js';
import { PolicyModel } from '../../lib/model/index.js';

interface WorkerResult { tokens: number[]; bits: number[]; error: { isClass: boolean; code: string } | null }

async function inWorker(seed: number, prompt: number[]): Promise<WorkerResult> {
  const script = new URL('./fixtures/worker-model.ts', import.meta.url).href;
  const w = new Worker(new URL('./fixtures/worker-entry.mjs', import.meta.url), { workerData: { seed, prompt, script } });
  const [[msg]] = await Promise.all([once(w, 'message') as Promise<[WorkerResult]>, once(w, 'exit')]);
  return msg;
}

describe('the addon in worker threads', () => {
  it('loads and runs in a worker, and the main thread still works after the worker exits', async () => {
    const prompt = [5, 17, 42, 9];
    // main thread first: its environment registers its constructors
    const main = await PolicyModel.random('tiny', { seed: 11 });
    const [before] = await main.generate([prompt], { maxNewTokens: 4, temperature: 0 });
    const r = await inWorker(11, prompt);
    assert.deepEqual(r.tokens, Array.from(before!.tokens), 'same seed, same greedy tokens in the worker');
    assert.deepEqual(r.bits, [0x3fc0, 0xc000]);
    assert.deepEqual(r.error, { isClass: true, code: 'EINVAL' }, "the worker's errors are its own MurphyNativeError");
    // the worker's environment is gone: the main thread's constructors must not have been replaced by its
    const again = await PolicyModel.random('tiny', { seed: 11 });
    const [after] = await again.generate([prompt], { maxNewTokens: 4, temperature: 0 });
    assert.deepEqual(Array.from(after!.tokens), Array.from(before!.tokens));
    assert.deepEqual(Array.from(toBf16(new Float32Array([1.5])) as Uint16Array), [0x3fc0]);
    assert.throws(
      () => grpoLoss({ logp: new Float32Array(2), oldLogp: new Float32Array(2), advantages: new Float32Array(1), seqOffsets: new BigInt64Array([0n, 2n]) }),
      (e: unknown) => e instanceof MurphyNativeError && e.code === 'EINVAL' && /'advantages' has 1 elements but 2 are needed/.test(e.message),
    );
  });

  it('two workers at once each get their own addon state', async () => {
    const [a, b] = await Promise.all([inWorker(3, [1, 2, 3]), inWorker(3, [1, 2, 3])]);
    assert.deepEqual(a.tokens, b.tokens);
    assert.equal(a.error?.isClass, true);
    assert.equal(b.error?.isClass, true);
  });
});
