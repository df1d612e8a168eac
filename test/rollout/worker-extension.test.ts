// The vLLM worker extension's pure-Python parts (checkpoint discovery, safetensors reading, the
// load_weights call) under /usr/bin/python3 with a fake worker: it must hand vLLM every tensor
// of a checkpoint written by the native model, single-file and sharded, bf16 and f32.
// vLLM itself is not installed here; see docs/rollout.md for what that leaves unverified.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';
import { testSeed } from '../helpers/random.js';

const PY = '/usr/bin/python3';
const hasTorch = existsSync(PY) && spawnSync(PY, ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;
const seed = testSeed('rollout/worker-extension');
const work = mkdtempSync(join(tmpdir(), 'murphy-wext-'));
after(() => rmSync(work, { recursive: true, force: true }));

interface Seen { name: string; dtype: string; shape: number[]; sum: number; head: number[] }
interface LoadResult { loaded: boolean; tensors: number; params: number; path: string; rank: number; dp_rank: number; tp_size: number; pp_size: number; world_size: number; layerwise: boolean }
function run(dir: string, mode: 'plain' | 'v1' | 'layerwise' = 'plain'): { result?: LoadResult; seen?: Seen[]; events?: unknown[]; error?: string } {
  const r = spawnSync(PY, [join(import.meta.dirname, 'worker_extension_check.py'), dir, mode], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as ReturnType<typeof run>;
}

const bf16 = (x: number) => {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer);
  u[0] = (u[0] + 0x7fff + ((u[0] >> 16) & 1)) & 0xffff0000;
  return f[0];
};

describe('vLLM worker extension (fake worker)', { skip: hasTorch ? false : 'no python3 with torch' }, () => {
  for (const [dtype, shard] of [['float32', 0], ['bfloat16', 20_000]] as const) {
    it(`loads every tensor of a ${dtype} checkpoint${shard > 0 ? ' (sharded)' : ''}`, async () => {
      const m = await PolicyModel.random({ modelType: 'qwen3', vocabSize: 64, hiddenSize: 32, intermediateSize: 48, numLayers: 2, numHeads: 2, numKvHeads: 1, headDim: 16, maxPositionEmbeddings: 64, tieWordEmbeddings: false, dtype }, { seed, initStd: 0.5 });
      const dir = join(work, `${dtype}-${shard}`);
      await m.save(dir, { maxShardBytes: shard });
      if (shard > 0) assert.ok(existsSync(join(dir, 'model.safetensors.index.json')));
      const out = run(dir);
      assert.equal(out.error, undefined);
      const params = m.params();
      assert.equal(out.result?.loaded, true);
      assert.equal(out.result?.tensors, params.length);
      assert.equal(out.result?.params, params.length);
      const seen = new Map((out.seen ?? []).map((s) => [s.name, s]));
      for (const p of params) {
        const s = seen.get(p.name);
        assert.ok(s, `${p.name} not loaded`);
        assert.deepEqual(s.shape, p.shape);
        assert.equal(s.dtype, dtype);
        const w = m.getParam(p.name);
        const want = Array.from(w.subarray(0, 4), (x) => (dtype === 'bfloat16' ? bf16(x) : x));
        assert.deepEqual(s.head, want, p.name);
      }
    });
  }

  it('loads through get_model(), reports the data-parallel rank and TP x PP size, and wraps the load in the layerwise reload helpers where they import', async () => {
    const m = await PolicyModel.random({ modelType: 'qwen3', vocabSize: 32, hiddenSize: 16, intermediateSize: 24, numLayers: 1, numHeads: 2, numKvHeads: 1, headDim: 8, maxPositionEmbeddings: 32, tieWordEmbeddings: true, dtype: 'float32' }, { seed, initStd: 0.5 });
    const dir = join(work, 'layout');
    await m.save(dir);
    const n = m.params().length;
    const plain = run(dir, 'plain');
    assert.deepEqual([plain.result?.dp_rank, plain.result?.tp_size, plain.result?.pp_size, plain.result?.world_size, plain.result?.layerwise], [0, 1, 1, 1, false]);
    const v1 = run(dir, 'v1');
    assert.equal(v1.error, undefined);
    assert.equal(v1.seen?.length, n, 'loaded into get_model()');
    assert.deepEqual([v1.result?.dp_rank, v1.result?.tp_size, v1.result?.pp_size, v1.result?.world_size, v1.result?.layerwise], [1, 2, 3, 6, false]);
    const lw = run(dir, 'layerwise');
    assert.equal(lw.result?.layerwise, true);
    // initialize before any tensor, finalize after all of them, with the model config
    assert.deepEqual(lw.events, [['init', 0], ['finalize', n, 'the-model-config']]);
  });

  it('a missing or empty directory is a clear error', () => {
    assert.match(run(join(work, 'nope')).error ?? '', /FileNotFoundError: checkpoint directory .* does not exist/);
    assert.match(run(work).error ?? '', /no model.safetensors or model.safetensors.index.json/);
  });
});
