// NCCL weight sync, trainer side (lib/rollout/weight-sync*.ts): the bucket plan, the group
// layout and its refusals, and the whole sequence end to end against `murphy-native serve`'s
// murphy_nccl_* methods over the loopback fake: info -> init on both sides -> receive +
// broadcast per bucket -> loaded -> prefix-cache reset; a worker that never receives (the
// broadcast's deadline: abort, disk fallback for that step, set-up again next step); the
// refusals in auto (disk for the run) and nccl (an error) modes.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PolicyModel } from '../../lib/model/index.js';
import { fromBf16, toBf16 } from '../../lib/native.js';
import { loadChatTokenizer, type HfChatTokenizer } from '../../lib/prompt/index.js';
import {
  bucketPlan, groupLayout, LoopbackChannel, NativeEngine, NcclWeightSync, packBucket, startServer, unpackBucket, VllmBackend, WeightSyncRefused,
  type FetchLike, type RolloutServer, type WeightSyncMode,
} from '../../lib/rollout/index.js';
import { sameNcclVersion } from '../../lib/rollout/weight-sync.js';
import { weightSyncFor } from '../../lib/rollout/weight-sync-channel.js';
import { LoopbackReceiver, loopbackIdHex } from '../../lib/rollout/weight-sync-loopback.js';
import { cuda } from '../../lib/native.js';
import { configDifferences } from '../../lib/commands/run-training.js';
import { resolveConfig } from '../../lib/config/index.js';
import { Rng, testSeed } from '../helpers/random.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

const seed = testSeed('rollout/weight-sync');
const rng = new Rng(seed);
const work = mkdtempSync(join(tmpdir(), 'murphy-wsync-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('bucket plan', () => {
  it('parameter order, buckets up to the size, an oversized tensor alone; offsets pack bf16 back to back', () => {
    const ps = [{ name: 'a', shape: [3, 4], numel: 12 }, { name: 'b', shape: [10], numel: 10 }, { name: 'big', shape: [40], numel: 40 }, { name: 'c', shape: [2], numel: 2 }, { name: 'd', shape: [5], numel: 5 }];
    const plan = bucketPlan(ps, 48);
    assert.deepEqual(plan.map((b) => [b.bytes, b.tensors.map((t) => `${t.name}@${t.offset}`)]), [
      [44, ['a@0', 'b@24']], [80, ['big@0']], [14, ['c@0', 'd@4']],
    ]);
    assert.deepEqual(plan.flatMap((b) => b.tensors.map((t) => t.name)), ps.map((p) => p.name));
    assert.throws(() => bucketPlan([ps[0], ps[0]], 48), /listed twice/);
  });
  it('pack then unpack gives the bf16-rounded weights (fresh random values)', () => {
    const w = new Map([['x', rng.normals(37, 3)], ['y', rng.normals(64, 0.01)]]);
    const plan = bucketPlan([...w].map(([name, d]) => ({ name, shape: [d.length], numel: d.length })), 1 << 20);
    assert.equal(plan.length, 1);
    const got = unpackBucket(packBucket({ getParam: (n) => w.get(n)! }, plan[0]), plan[0]);
    for (const t of got) {
      const want = fromBf16(toBf16(w.get(t.name)!)) as Float32Array;
      assert.deepEqual(t.data, want, t.name);
    }
  });
});

describe('config', () => {
  it('--weight-sync auto|nccl|disk (default auto), the bucket size within 256-1024 MiB; all three may change on resume', () => {
    const c = resolveConfig({ file: null, flags: { backend: 'vllm', serverUrl: 'http://127.0.0.1:8000', model: '/m' } });
    assert.deepEqual([c.weightSync, c.weightSyncBucketMb, c.weightSyncTimeoutS], ['auto', 512, 300]);
    assert.throws(() => resolveConfig({ file: null, flags: { weightSync: 'tcp' } }), /weightSync/);
    assert.throws(() => resolveConfig({ file: null, flags: { weightSyncBucketMb: 100 } }), /weightSyncBucketMb/);
    assert.deepEqual(configDifferences({ ...c, weightSync: 'nccl', weightSyncBucketMb: 1024 }, { ...c, weightSync: 'disk' }), []);
  });
});

describe('loopback fake of the group', () => {
  it('the group forms when every rank arrives; a missing rank is named at the deadline; a wrong token or a real NCCL id is refused', async () => {
    const ch = await LoopbackChannel.open();
    const r1 = LoopbackReceiver.connect(ch.idHex, 1, 5000);
    const join = ch.join(3, 400);
    const [rx] = await Promise.all([r1, join.catch(() => undefined)]);
    await assert.rejects(join, /did not form within 400 ms: rank\(s\) 2 of 3 did not join/);
    ch.abort();
    await assert.rejects(rx.recv(4, 5000), /the trainer closed the weight-sync connection/);
    const ok = await LoopbackChannel.open();
    const port = Number(/127\.0\.0\.1:(\d+)/.exec(Buffer.from(ok.idHex, 'hex').toString('latin1'))![1]);
    const intruder = await LoopbackReceiver.connect(loopbackIdHex(port, '0123456789abcdef'), 1, 5000);
    const good = LoopbackReceiver.connect(ok.idHex, 1, 5000);
    await ok.join(2, 5000);
    const bytes = new Uint8Array([1, 2, 3, 4, 5]);
    const [got] = await Promise.all([(await good).recv(5, 5000), ok.broadcast(bytes, 5000)]);
    assert.deepEqual(got, bytes);
    await assert.rejects(intruder.recv(5, 5000), /closed the weight-sync connection/);
    ok.abort();
    await assert.rejects(LoopbackReceiver.connect('ab'.repeat(128), 1, 1000), /not one of its ids \(a real NCCL trainer\?\): use --weight-sync disk with murphy-native serve/);
  });
});

describe('group layout and checks', () => {
  const w = (o: Partial<Record<string, unknown>> = {}) => ({ rank: 0, tp_size: 1, pp_size: 1, dp_rank: 0, dp_size: 1, gpu_uuid: 'GPU-aaa', nccl_version: '2.21.5', ...o });
  const trainer = { gpuUuid: 'GPU-TRAINER', ncclVersion: '2.21.5' };
  it('world = 1 + every server\'s TP x PP x DP workers; offsets in server order', () => {
    const l = groupLayout(trainer, [
      { server: 'a', results: [w({ rank: 0, tp_size: 2, dp_size: 2 }), w({ rank: 1, tp_size: 2, dp_size: 2 })] },
      { server: 'b', results: [w()] },
    ]);
    assert.deepEqual(l, { world: 6, offsets: [1, 5] });
  });
  it('refuses the trainer\'s GPU among the workers\', another NCCL version, missing workers', () => {
    assert.throws(() => groupLayout(trainer, [{ server: 'a', results: [w({ gpu_uuid: 'gpu-trainer' })] }]), (e: Error) => e instanceof WeightSyncRefused && /runs on the trainer's GPU/.test(e.message));
    assert.throws(() => groupLayout(trainer, [{ server: 'a', results: [w({ nccl_version: '2.20.3' })] }]), /has NCCL 2\.20\.3, the trainer 2\.21\.5; point MURPHY_NCCL/);
    assert.throws(() => groupLayout(trainer, [{ server: 'a', results: [w({ tp_size: 2 })] }]), /1 worker\(s\) answered for tensor x pipeline parallel size 2/);
    assert.throws(() => groupLayout(trainer, [{ server: 'a', results: [] }]), /returned no workers/);
  });
  it('NCCL versions compare as numbers: vLLM prints 2.21.0 as "2.21."', () => {
    assert.deepEqual(groupLayout({ gpuUuid: null, ncclVersion: '2.21.0' }, [{ server: 'a', results: [w({ nccl_version: '2.21.' })] }]), { world: 2, offsets: [1] });
    assert.equal(sameNcclVersion('2.21.5', '2.21.05'), true);
    assert.equal(sameNcclVersion('2.21.5', '2.21.6'), false);
    assert.equal(sameNcclVersion('loopback', 'loopback'), true);
  });
});

describe('NCCL weight sync end to end against serve (loopback fake)', () => {
  let dir = '';
  let tok: HfChatTokenizer;
  const servers: RolloutServer[] = [];
  before(async () => {
    dir = await writeTinyModel(join(work, 'model'), seed, 0.3);
    tok = loadChatTokenizer(dir);
    for (let i = 0; i < 2; i++) servers.push(await startServer({ engine: await NativeEngine.load(dir), tokenizer: tok, modelName: 'tiny' }));
  });
  after(async () => { for (const s of servers) await s.close(); });

  /** A trainer whose weights moved away from the served ones and are exact in bf16. */
  async function trainer(): Promise<PolicyModel> {
    const t = await PolicyModel.load(dir);
    for (const p of t.params()) {
      const x = t.getParam(p.name);
      for (let i = 0; i < x.length; i++) x[i] += 0.2 * rng.normal();
      t.setParam(p.name, fromBf16(toBf16(x)) as Float32Array);
    }
    return t;
  }

  function client(mode: Exclude<WeightSyncMode, 'disk'>, o: { fetch?: FetchLike; timeoutMs?: number; channel?: () => Promise<LoopbackChannel>; log?: string[] } = {}) {
    return VllmBackend.connect({
      servers: servers.map((s) => s.url), syncDir: join(work, `sync-${mode}`), tokenizer: tok, fetch: o.fetch,
      weightSync: (c, disk) => new NcclWeightSync(c, { mode, channel: o.channel ?? (() => LoopbackChannel.open()), fallback: disk, bucketBytes: 4096, timeoutMs: o.timeoutMs ?? 30_000, log: (l) => o.log?.push(l) }),
    });
  }

  const prompt = () => tok.encode('def f(x):');
  const params = { seed: 5, temperature: 0.8, maxTokens: 12 };

  it('both servers serve exactly the trainer\'s weights after a sync, in the documented order of calls', async () => {
    const t = await trainer();
    const seen: string[] = [];
    const fetchSpy: FetchLike = (url, init) => {
      const path = new URL(url).pathname;
      if (path === '/collective_rpc') seen.push(`${new URL(url).port} ${(JSON.parse(init.body!) as { method: string }).method}`);
      else if (path === '/reset_prefix_cache') seen.push(`${new URL(url).port} reset`);
      return fetch(url, init) as ReturnType<FetchLike>;
    };
    const c = await client('nccl', { fetch: fetchSpy });
    const want = await t.generate([prompt()], { maxNewTokens: 12, temperature: 0.8, seed: 5, n: 1, stopIds: [...tok.eosTokenIds] });
    const rep = await c.syncWeights(t, 1);
    assert.equal(rep.method, 'loopback');
    assert.equal(rep.fallback, undefined);
    assert.deepEqual(rep.servers, servers.map((s) => s.url).sort());
    for (const s of servers) {
      const one = await VllmBackend.connect({ servers: [s.url], tokenizer: tok });
      const [got] = await one.generate(prompt(), 1, params);
      assert.deepEqual(got.logprobs, Array.from(want[0].logprobs));
    }
    const per = (port: string) => seen.filter((l) => l.startsWith(port)).map((l) => l.split(' ')[1]);
    for (const s of servers) assert.deepEqual(per(new URL(s.url).port), ['murphy_nccl_info', 'murphy_nccl_init', 'murphy_nccl_recv', 'reset']);
    // the group stays formed: the next sync only receives
    await c.syncWeights(t, 2);
    for (const s of servers) assert.deepEqual(per(new URL(s.url).port).slice(4), ['murphy_nccl_recv', 'reset']);
    await c.close();
    for (const s of servers) assert.equal(per(new URL(s.url).port).at(-1), 'murphy_nccl_close');
  });

  it('a worker that never receives: the broadcast\'s deadline aborts the group, the step syncs through the disk, the next step sets NCCL up again', async () => {
    const t = await trainer();
    let drop = true;
    const stuck: FetchLike = (url, init) => {
      if (drop && new URL(url).pathname === '/collective_rpc' && init.body?.includes('murphy_nccl_recv') && url.startsWith(servers[1].url)) {
        return new Promise(() => undefined); // the request never reaches the worker
      }
      return fetch(url, init) as ReturnType<FetchLike>;
    };
    const log: string[] = [];
    const c = await client('nccl', { fetch: stuck, timeoutMs: 1000, log });
    const rep = await c.syncWeights(t, 1);
    assert.equal(rep.method, 'disk');
    assert.match(rep.fallback ?? '', /timed out/);
    assert.match(log.join('\n'), /the NCCL sync of step 1 failed .*; the group was aborted, this step syncs through the disk and the next one sets NCCL up again/);
    const want = await t.generate([prompt()], { maxNewTokens: 12, temperature: 0.8, seed: 5, n: 1, stopIds: [...tok.eosTokenIds] });
    const [got] = await c.generate(prompt(), 1, params);
    assert.deepEqual(got.logprobs, Array.from(want[0].logprobs));
    drop = false;
    const again = await c.syncWeights(t, 2);
    assert.equal(again.method, 'loopback');
    await c.close();
  });

  it('a worker that confirms less than was sent (a bucket short): the step syncs through the disk, naming what it confirmed', async () => {
    const t = await trainer();
    const short: FetchLike = async (url, init) => {
      const res = await fetch(url, init); // a Response: the body is read here and rewritten
      if (new URL(url).pathname !== '/collective_rpc' || !init.body?.includes('murphy_nccl_recv') || !url.startsWith(servers[0].url)) return res;
      const body = await res.json() as { results: Array<Record<string, unknown>> };
      body.results[0].buckets = Number(body.results[0].buckets) - 1;
      return new Response(JSON.stringify(body), { status: res.status, headers: { 'content-type': 'application/json' } });
    };
    const c = await client('nccl', { fetch: short, timeoutMs: 5000 });
    try {
      const rep = await c.syncWeights(t, 1);
      assert.equal(rep.method, 'disk');
      assert.match(rep.fallback ?? '', /a worker confirmed \d+ buckets \/ \d+ bytes of step 1, not the \d+ \/ \d+ of step 1 sent/);
    } finally {
      await c.close();
    }
  });

  it('refusals: auto falls back to the disk for the run (no second attempt); nccl stops with the reason', async () => {
    const t = await trainer();
    const log: string[] = [];
    let opened = 0;
    const sameGpu = () => { opened++; return LoopbackChannel.open({ gpuUuid: 'loopback-serve' }); };
    const a = await client('auto', { channel: sameGpu, log });
    assert.equal((await a.syncWeights(t, 1)).method, 'disk');
    assert.equal((await a.syncWeights(t, 2)).method, 'disk');
    assert.equal(opened, 1);
    assert.match(log.join('\n'), /NCCL not used \(.*runs on the trainer's GPU .*\); syncing through the disk for the rest of the run/);
    const n = await client('nccl', { channel: () => LoopbackChannel.open({ ncclVersion: '2.99.0' }) });
    await assert.rejects(n.syncWeights(t, 1), /has NCCL loopback, the trainer 2\.99\.0/);
  });

  it('the config\'s modes (weightSyncFor) against serve: disk is the plain disk sync; nccl uses serve\'s loopback fake; auto keeps the disk, saying why once', async () => {
    assert.equal(weightSyncFor('disk'), undefined);
    const t = await trainer();
    const log: string[] = [];
    const a = await VllmBackend.connect({ servers: [servers[0].url], syncDir: join(work, 'sync-auto-serve'), tokenizer: tok, weightSync: weightSyncFor('auto', { log: (l) => log.push(l) }) });
    assert.equal((await a.syncWeights(t, 1)).method, 'disk');
    assert.match(log.join('\n'), /NCCL not used \(the servers are murphy-native serve, whose NCCL methods are a loopback fake: auto keeps the disk sync/);
    const n = await VllmBackend.connect({ servers: servers.map((s) => s.url), syncDir: join(work, 'sync-nccl-serve'), tokenizer: tok, weightSync: weightSyncFor('nccl', { bucketBytes: 4096 }) });
    const rep = await n.syncWeights(t, 1);
    assert.deepEqual([rep.method, rep.fallback], ['loopback', undefined]);
    await n.close();
    // a serve behind a non-loopback address cannot reach the trainer's loopback channel: refused
    const remote = servers[0].url.replace('127.0.0.1', 'localhost.invalid');
    const viaName: FetchLike = (url, init) => fetch(url.replace('localhost.invalid', '127.0.0.1'), init) as ReturnType<FetchLike>;
    const r = await VllmBackend.connect({ servers: [remote], syncDir: join(work, 'sync-remote'), tokenizer: tok, fetch: viaName, weightSync: weightSyncFor('nccl') });
    await assert.rejects(r.syncWeights(t, 1), /loopback fake of NCCL reaches only a trainer on the same machine; use --weight-sync disk/);
  });

  it('against vLLM-like workers (a real NCCL version) without a CUDA device in the trainer: auto syncs through the disk and nccl stops, each saying why', { skip: cuda.status().available ? 'this machine has a CUDA device' : false }, async () => {
    const t = await trainer();
    // serve's murphy_nccl_info answer with a real NCCL version, as vLLM's workers give
    const asVllm: FetchLike = async (url, init) => {
      const r = await fetch(url, init);
      const text = await r.text();
      return { status: r.status, text: async () => (init.body?.includes('murphy_nccl_info') ? text.replace('"loopback"', '"2.21.5"') : text) };
    };
    const log: string[] = [];
    const a = await VllmBackend.connect({ servers: [servers[0].url], syncDir: join(work, 'sync-auto'), tokenizer: tok, fetch: asVllm, weightSync: weightSyncFor('auto', { log: (l) => log.push(l) }) });
    assert.equal((await a.syncWeights(t, 1)).method, 'disk');
    assert.match(log.join('\n'), /NCCL not used \(NCCL weight sync needs a CUDA device in the trainer process: no CUDA device/);
    const n = await VllmBackend.connect({ servers: [servers[0].url], syncDir: join(work, 'sync-nccl'), tokenizer: tok, fetch: asVllm, weightSync: weightSyncFor('nccl') });
    await assert.rejects(n.syncWeights(t, 1), /needs a CUDA device in the trainer process/);
  });
});
