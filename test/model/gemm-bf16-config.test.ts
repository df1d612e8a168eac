// The bf16 run-configuration keys (bf16Generate, bf16Forward) and the serve/eval flag reach the
// CPU engine: train's policy, serve's engine (also after a weight reload), eval's embedded backend.
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { defaultConfig, resolveConfig } from '../../lib/config/index.js';
import { loadPolicyModel } from '../../lib/commands/run-training.js';
import { serveModel } from '../../lib/commands/serve.js';
import { EmbeddedBackend } from '../../lib/rollout/embedded.js';
import { NativeEngine } from '../../lib/rollout/engine.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

describe('bf16 configuration keys', () => {
  const work = mkdtempSync(join(tmpdir(), 'murphy-bf16cfg-'));
  let dir = '';
  before(async () => {
    dir = await writeTinyModel(join(work, 'model'), 1);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('are off by default and set from flags', () => {
    const d = defaultConfig();
    assert.equal(d.bf16Generate, false);
    assert.equal(d.bf16Forward, false);
    const c = resolveConfig({ flags: { bf16Generate: true, bf16Forward: true } });
    assert.equal(c.bf16Generate, true);
    assert.equal(c.bf16Forward, true);
    assert.throws(() => resolveConfig({ flags: { bf16Generate: 'yes' } }), /bf16Generate/);
  });

  it("reach train's policy: demo model, model directory, checkpoint", async () => {
    for (const [generate, forward] of [[true, false], [false, true], [true, true], [false, false]]) {
      const c = { ...defaultConfig(), bf16Generate: generate, bf16Forward: forward };
      assert.deepEqual((await loadPolicyModel(c, null)).bf16(), { generate, forward }, 'demo model');
      assert.deepEqual((await loadPolicyModel({ ...c, model: dir }, null)).bf16(), { generate, forward }, 'model directory');
      assert.deepEqual((await loadPolicyModel(c, dir)).bf16(), { generate, forward }, 'checkpoint policy');
    }
  });

  it("reach serve's engine and survive a weight reload", async () => {
    const e = await NativeEngine.load(dir, { bf16Generate: true });
    assert.deepEqual(e.model.bf16(), { generate: true, forward: false });
    await e.loadWeights(dir);
    assert.deepEqual(e.model.bf16(), { generate: true, forward: false }, 'loadWeights kept bf16 generation');
    assert.deepEqual((await NativeEngine.load(dir)).model.bf16(), { generate: false, forward: false });

    const srv = await serveModel({ model: dir, port: 0, host: '127.0.0.1', maxBatch: 4, bf16Generate: true, weightSync: false });
    try {
      assert.equal((srv.batcher.engine as NativeEngine).model.bf16().generate, true);
    } finally {
      await srv.close();
    }
  });

  it("reach eval's embedded backend", async () => {
    const b = await EmbeddedBackend.fromDir(dir, { bf16Generate: true });
    try {
      assert.equal((b.engine as NativeEngine).model.bf16().generate, true);
    } finally {
      await b.close();
    }
  });
});
