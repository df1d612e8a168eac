// One error class across the boundary: C++ throws MurphyNativeError with a `code`, async
// calls reject with it carrying the caller's stack, and the library exports it.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import * as lib from '../../lib/index.js';
import { cuda, DeviceArray, grpoLoss, MurphyNativeError } from '../../lib/native.js';
import { PolicyModel, packSequences } from '../../lib/model/index.js';

const isNative = (code: string, msg: RegExp) => (e: unknown) => {
  assert.ok(e instanceof MurphyNativeError, `a MurphyNativeError, got ${String(e)}`);
  assert.equal(e.name, 'MurphyNativeError');
  assert.equal(e.code, code);
  assert.match(e.message, msg);
  return true;
};

describe('MurphyNativeError', () => {
  it('is exported from the library', () => {
    assert.equal(lib.MurphyNativeError, MurphyNativeError);
  });

  it('C++ throws it with code EINVAL for a bad argument', () => {
    assert.throws(
      () => grpoLoss({ logp: new Float32Array(3), oldLogp: new Float32Array(3), advantages: new Float32Array(2), seqOffsets: new BigInt64Array([0n, 3n]) }),
      isNative('EINVAL', /'advantages' has 2 elements but 3 are needed/),
    );
  });

  it('async calls reject with it, a code, and the stack of the caller', async () => {
    const missing = join(tmpdir(), `murphy-no-such-model-${process.pid}`);
    async function loadFromTheCaller(): Promise<PolicyModel> {
      return PolicyModel.load(missing);
    }
    await assert.rejects(loadFromTheCaller(), (e: unknown) => {
      isNative('EIO', /config\.json: cannot open/)(e);
      assert.match((e as Error).stack ?? '', /loadFromTheCaller/, 'the stack names the caller');
      assert.match((e as Error).stack ?? '', /^MurphyNativeError: /);
      return true;
    });
    const m = await PolicyModel.random('tiny', { seed: 1 });
    async function scoreFromTheCaller(): Promise<Float32Array> {
      return m.score(packSequences([[1, 2, 100000]]));
    }
    await assert.rejects(scoreFromTheCaller(), (e: unknown) => {
      isNative('EINVAL', /outside the vocabulary/)(e);
      assert.match((e as Error).stack ?? '', /scoreFromTheCaller/);
      return true;
    });
  });

  it('ENOLIB when the binary lacks a backend', { skip: cuda.status().built ? 'a CUDA build (test:gpu covers device arrays)' : false }, () => {
    assert.throws(() => DeviceArray.empty('f32', 4), isNative('ENOLIB', /built without CUDA/));
  });
});
