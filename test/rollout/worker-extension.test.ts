// The vLLM worker extension's pure-Python parts (checkpoint discovery, safetensors reading, the
// load_weights call) under /usr/bin/python3 with a fake worker: it must hand vLLM every tensor
// of a checkpoint written by the native model, single-file and sharded, bf16 and f32.
// vLLM itself is not installed here; see docs/rollout.md for what that leaves unverified.
// Also its murphy_nccl_* methods with torch (CPU) and a fake of vLLM's NCCL wrapper: the rank
// arithmetic (offset + dp_rank x TP x PP + local rank), the op order (init, one broadcast of uint8
// from root 0 per bucket with the bucket's byte count, load_weights of that bucket's tensors,
// destroy), and that the tensors loaded are exactly the trainer's bf16 weights unpacked from the
// buckets the trainer packs. Every job runs in one python process (worker_extension_check.py):
// importing torch is most of the cost (~1.3 s of CPU a process).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';
import { fromBf16, toBf16 } from '../../lib/native.js';
import { bucketPlan, packBucket, type SyncBucket } from '../../lib/rollout/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { pythonHas } from '../helpers/python.js';

const PY = '/usr/bin/python3';
const hasTorch = pythonHas(PY, 'torch');
const seed = testSeed('rollout/worker-extension');
const ncclSeed = testSeed('rollout/worker-extension-nccl');
const work = mkdtempSync(join(tmpdir(), 'murphy-wext-'));
after(() => rmSync(work, { recursive: true, force: true }));

interface Seen { name: string; dtype: string; shape: number[]; sum: number; head: number[] }
interface LoadResult { loaded: boolean; tensors: number; params: number; path: string; rank: number; dp_rank: number; tp_size: number; pp_size: number; world_size: number; layerwise: boolean }
type Mode = 'plain' | 'v1' | 'layerwise' | 'nccl';
type Out = { result?: LoadResult; seen?: Seen[]; events?: unknown[]; error?: string };
interface NcclOut {
  info?: Record<string, unknown>; init?: { rank: number; world: number }; recv?: Record<string, unknown>;
  seen?: { name: string; dtype: string; shape: number[]; values: number[] }[]; calls: unknown[][]; error?: string;
}
/** Every job in one python process (importing torch is most of its cost); one result per job. */
function runAll(jobs: [string, Mode][]): unknown[] {
  const r = spawnSync(PY, [join(import.meta.dirname, 'worker_extension_check.py'), ...jobs.flat()], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const outs = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown);
  assert.equal(outs.length, jobs.length, r.stdout);
  return outs;
}

const bf16 = (x: number) => {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer);
  u[0] = (u[0] + 0x7fff + ((u[0] >> 16) & 1)) & 0xffff0000;
  return f[0];
};

const TINY = { modelType: 'qwen3', vocabSize: 64, hiddenSize: 32, intermediateSize: 48, numLayers: 2, numHeads: 2, numKvHeads: 1, headDim: 16, maxPositionEmbeddings: 64, tieWordEmbeddings: false } as const;
const LAYOUT = { modelType: 'qwen3', vocabSize: 32, hiddenSize: 16, intermediateSize: 24, numLayers: 1, numHeads: 2, numKvHeads: 1, headDim: 8, maxPositionEmbeddings: 32, tieWordEmbeddings: true, dtype: 'float32' } as const;

// The checkpoints and the NCCL job are written first, then one python process runs every job, in order.
const models = new Map<string, PolicyModel>();
const out = new Map<string, Out>();
let nccl: { m: PolicyModel; plan: SyncBucket[]; bytes: Buffer; uid: string; out: NcclOut } | undefined;
before(async () => {
  if (!hasTorch) return;
  const jobs: [string, string, Mode][] = [];
  for (const [dtype, shard] of [['float32', 0], ['bfloat16', 20_000]] as const) {
    const m = await PolicyModel.random({ ...TINY, dtype }, { seed, initStd: 0.5 });
    const dir = join(work, `${dtype}-${shard}`);
    await m.save(dir, { maxShardBytes: shard });
    models.set(dtype, m);
    jobs.push([dtype, dir, 'plain']);
  }
  const m = await PolicyModel.random(LAYOUT, { seed, initStd: 0.5 });
  await m.save(join(work, 'layout'));
  models.set('layout', m);
  for (const mode of ['plain', 'v1', 'layerwise'] as const) jobs.push([`layout-${mode}`, join(work, 'layout'), mode]);
  jobs.push(['missing', join(work, 'nope'), 'plain'], ['empty', work, 'plain']);
  // A layerwise job, then a plain one (their own test below).
  jobs.push(['then-layerwise', join(work, 'layout'), 'layerwise'], ['then-plain', join(work, 'layout'), 'plain']);
  // The NCCL job: worker 7 of an engine with TP 2 x PP 3, data-parallel rank 1 of 2, its server's
  // offset 5: rank 5 + 6 + 1.
  const rng = new Rng(ncclSeed);
  const nm = await PolicyModel.random({ ...TINY, tieWordEmbeddings: true, dtype: 'float32' }, { seed: ncclSeed, initStd: 0.5 });
  const plan = bucketPlan(nm.params(), 8192 + 2 * rng.int(4096));
  const bytes = Buffer.concat(plan.map((b) => packBucket(nm, b)));
  writeFileSync(join(work, 'buckets.bin'), bytes);
  const uid = Buffer.from(Array.from({ length: 128 }, () => rng.int(256))).toString('hex');
  const job = { uid_hex: uid, world: 20, rank_offset: 5, meta: { step: 3, dtype: 'bfloat16', buckets: plan }, buckets: join(work, 'buckets.bin'), layout: { rank: 7, dp_rank: 1, dp_size: 2, tp: 2, pp: 3 } };
  writeFileSync(join(work, 'job.json'), JSON.stringify(job));
  const rs = runAll([...jobs.map(([, dir, mode]) => [dir, mode] as [string, Mode]), [join(work, 'job.json'), 'nccl']]);
  jobs.forEach(([key], i) => out.set(key, rs[i] as Out));
  nccl = { m: nm, plan, bytes, uid, out: rs[jobs.length] as NcclOut };
});

describe('vLLM worker extension (fake worker)', { skip: hasTorch ? false : 'no python3 with torch' }, () => {
  for (const [dtype, shard] of [['float32', 0], ['bfloat16', 20_000]] as const) {
    it(`loads every tensor of a ${dtype} checkpoint${shard > 0 ? ' (sharded)' : ''}`, () => {
      const m = models.get(dtype)!;
      if (shard > 0) assert.ok(existsSync(join(work, `${dtype}-${shard}`, 'model.safetensors.index.json')));
      const o = out.get(dtype)!;
      assert.equal(o.error, undefined);
      const params = m.params();
      assert.equal(o.result?.loaded, true);
      assert.equal(o.result?.tensors, params.length);
      assert.equal(o.result?.params, params.length);
      const seen = new Map((o.seen ?? []).map((s) => [s.name, s]));
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

  it('loads through get_model(), reports the data-parallel rank and TP x PP size, and wraps the load in the layerwise reload helpers where they import', () => {
    const n = models.get('layout')!.params().length;
    const plain = out.get('layout-plain')!;
    assert.deepEqual([plain.result?.dp_rank, plain.result?.tp_size, plain.result?.pp_size, plain.result?.world_size, plain.result?.layerwise], [0, 1, 1, 1, false]);
    const v1 = out.get('layout-v1')!;
    assert.equal(v1.error, undefined);
    assert.equal(v1.seen?.length, n, 'loaded into get_model()');
    assert.deepEqual([v1.result?.dp_rank, v1.result?.tp_size, v1.result?.pp_size, v1.result?.world_size, v1.result?.layerwise], [1, 2, 3, 6, false]);
    const lw = out.get('layout-layerwise')!;
    assert.equal(lw.result?.layerwise, true);
    // initialize before any tensor, finalize after all of them, with the model config
    assert.deepEqual(lw.events, [['init', 0], ['finalize', n, 'the-model-config']]);
  });

  it('a missing or empty directory is a clear error', () => {
    assert.match(out.get('missing')!.error ?? '', /FileNotFoundError: checkpoint directory .* does not exist/);
    assert.match(out.get('empty')!.error ?? '', /no model.safetensors or model.safetensors.index.json/);
  });

  it('a job after a layerwise one does not see its fake vLLM modules', () => {
    const lw = out.get('then-layerwise')!, plain = out.get('then-plain')!;
    assert.equal(lw.error, undefined);
    assert.equal(lw.result?.layerwise, true);
    assert.equal(plain.error, undefined);
    assert.equal(plain.result?.layerwise, false);
  });
});

describe('vLLM worker extension, NCCL weight sync (fake NCCL wrapper)', { skip: hasTorch ? false : 'no python3 with torch' }, () => {
  it('joins at offset + dp_rank x TP x PP + local rank, receives each bucket by broadcast in order and loads exactly the trainer\'s bf16 weights', () => {
    const { m, plan, bytes, uid, out } = nccl!;
    assert.ok(plan.length > 2);
    assert.equal(out.error, undefined);
    assert.deepEqual(out.info, { rank: 7, tp_size: 2, pp_size: 3, dp_rank: 1, dp_size: 2, gpu_uuid: null, nccl_version: '2.21.5' });
    assert.deepEqual(out.init, { rank: 12, world: 20 });
    assert.equal(out.recv?.loaded, true);
    assert.equal(out.recv?.tensors, m.params().length);
    // what the trainer checks before it counts the sync as done
    assert.equal(out.recv?.buckets, plan.length);
    assert.equal(out.recv?.bytes, bytes.length);
    assert.equal(out.recv?.step, 3);
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
