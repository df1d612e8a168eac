// The worker extension's murphy_nccl_* methods (python/murphy_vllm) under /usr/bin/python3 with
// torch (CPU) and a fake of vLLM's NCCL wrapper: the rank arithmetic (offset + dp_rank x TP x PP
// + local rank), the op order (init, one broadcast of uint8 from root 0 per bucket with the
// bucket's byte count, load_weights of that bucket's tensors, destroy), and that the tensors
// loaded are exactly the trainer's bf16 weights unpacked from the buckets the trainer packs.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';
import { fromBf16, toBf16 } from '../../lib/native.js';
import { bucketPlan, packBucket } from '../../lib/rollout/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { pythonHas } from '../helpers/python.js';

const PY = '/usr/bin/python3';
const hasTorch = pythonHas(PY, 'torch');
const seed = testSeed('rollout/worker-extension-nccl');
const rng = new Rng(seed);
const work = mkdtempSync(join(tmpdir(), 'murphy-wext-nccl-'));
after(() => rmSync(work, { recursive: true, force: true }));

interface Out {
  info?: Record<string, unknown>; init?: { rank: number; world: number }; recv?: Record<string, unknown>;
  seen?: { name: string; dtype: string; shape: number[]; values: number[] }[]; calls: unknown[][]; error?: string;
}

describe('vLLM worker extension, NCCL weight sync (fake NCCL wrapper)', { skip: hasTorch ? false : 'no python3 with torch' }, () => {
  it('joins at offset + dp_rank x TP x PP + local rank, receives each bucket by broadcast in order and loads exactly the trainer\'s bf16 weights', async () => {
    const m = await PolicyModel.random({ modelType: 'qwen3', vocabSize: 64, hiddenSize: 32, intermediateSize: 48, numLayers: 2, numHeads: 2, numKvHeads: 1, headDim: 16, maxPositionEmbeddings: 64, tieWordEmbeddings: true, dtype: 'float32' }, { seed, initStd: 0.5 });
    const plan = bucketPlan(m.params(), 8192 + 2 * rng.int(4096));
    assert.ok(plan.length > 2);
    const bytes = Buffer.concat(plan.map((b) => packBucket(m, b)));
    writeFileSync(join(work, 'buckets.bin'), bytes);
    const uid = Buffer.from(Array.from({ length: 128 }, () => rng.int(256))).toString('hex');
    // worker 7 of an engine with TP 2 x PP 3, data-parallel rank 1 of 2, its server's offset 5: rank 5 + 6 + 1
    const job = { uid_hex: uid, world: 20, rank_offset: 5, meta: { step: 3, dtype: 'bfloat16', buckets: plan }, buckets: join(work, 'buckets.bin'), layout: { rank: 7, dp_rank: 1, dp_size: 2, tp: 2, pp: 3 } };
    writeFileSync(join(work, 'job.json'), JSON.stringify(job));
    const r = spawnSync(PY, [join(import.meta.dirname, 'worker_extension_nccl_check.py'), join(work, 'job.json')], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Out;
    assert.equal(out.error, undefined);
    assert.deepEqual(out.info, { rank: 7, tp_size: 2, pp_size: 3, dp_rank: 1, dp_size: 2, gpu_uuid: null, nccl_version: '2.21.5' });
    assert.deepEqual(out.init, { rank: 12, world: 20 });
    assert.equal(out.recv?.loaded, true);
    assert.equal(out.recv?.tensors, m.params().length);
    const want: unknown[][] = [['load'], ['init', 20, 12, uid]];
    for (const b of plan) {
      want.push(['broadcast', b.bytes, 1, 0, 'comm-12', true]);
      for (const t of b.tensors) want.push(['load_weights', t.name]);
    }
    want.push(['destroy', 'comm-12']);
    assert.deepEqual(out.calls, want);
    const seen = new Map((out.seen ?? []).map((s) => [s.name, s]));
    for (const p of m.params()) {
      const s = seen.get(p.name)!;
      assert.ok(s, p.name);
      assert.equal(s.dtype, 'bfloat16');
      assert.deepEqual(s.shape, p.shape);
      assert.deepEqual(s.values, Array.from(fromBf16(toBf16(m.getParam(p.name))) as Float32Array), p.name);
    }
  });
});
