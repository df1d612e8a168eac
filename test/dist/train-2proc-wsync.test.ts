// `train --nproc-per-node 2 --device cpu --backend vllm --weight-sync nccl` against three
// `murphy-native serve` servers (the server code in this process, each behind a recording
// proxy) whose murphy_nccl_* methods are the loopback fake of NCCL: rank 0 gets servers 0 and 2,
// rank 1 server 1 (server i goes to rank i mod 2), and each rank forms its own group with them
// (its own id; world 3 with offsets 1, 2 and world 2 with offset 1). Checked from what the
// servers saw and answered: every sync (after the warm-up, after each step) reached exactly the
// rank's servers, every bucket and tensor arrived, and after the run every server holds the
// bf16 of the trainer's last checkpoint; the metrics give each rank's method. Rank 1's receive
// at step 1 never reaches its worker (the proxy holds it): that rank's broadcast times out, it
// aborts its group and syncs that step through the disk while rank 0's NCCL sync works, and
// step 2 forms rank 1's group again; rank 1 says so in its log. Fewer servers than ranks: one
// line before any rank starts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fromBf16, toBf16 } from '../../lib/native.js';
import { loadChatTokenizer } from '../../lib/prompt/index.js';
import { NativeEngine, startServer, type RolloutServer } from '../../lib/rollout/index.js';
import { parseLoopbackId } from '../../lib/rollout/weight-sync-loopback.js';
import { metrics, runTrain, weights } from './train-runs.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-dp-wsync-'));

interface Seen {
  rpc: string;
  args: unknown[];
  /** The answer's results (undefined: held, never answered). */
  results?: Record<string, unknown>[];
}

/** A serve instance behind a proxy that records every /collective_rpc and can hold one call forever. */
class Recorded {
  readonly seen: Seen[] = [];
  hold: ((rpc: string, args: unknown[]) => boolean) | undefined;
  private readonly held = new Set<ServerResponse>();
  private constructor(readonly engine: NativeEngine, readonly serve: RolloutServer, readonly proxy: Server, readonly url: string) {}

  static async start(dir: string): Promise<Recorded> {
    const engine = await NativeEngine.load(dir);
    const serve = await startServer({ engine, tokenizer: loadChatTokenizer(dir), modelName: 'tiny' });
    let self!: Recorded;
    const proxy = createServer((req, res) => void self.forward(req, res));
    await new Promise<void>((ok) => proxy.listen(0, '127.0.0.1', ok));
    self = new Recorded(engine, serve, proxy, `http://127.0.0.1:${(proxy.address() as { port: number }).port}`);
    return self;
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let entry: Seen | undefined;
    if (req.url === '/collective_rpc') {
      const b = JSON.parse(body) as { method: string; args: unknown[] };
      entry = { rpc: b.method, args: b.args };
      this.seen.push(entry);
      if (this.hold?.(b.method, b.args)) {
        this.hold = undefined;
        this.held.add(res); // never answered: the trainer's deadline ends it
        return;
      }
    }
    const headers: Record<string, string> = {};
    for (const k of ['content-type', 'authorization']) if (typeof req.headers[k] === 'string') headers[k] = req.headers[k] as string;
    const r = await fetch(this.serve.url + req.url, { method: req.method, headers, body: req.method === 'GET' ? undefined : body });
    const text = await r.text();
    if (entry && r.ok) entry.results = (JSON.parse(text) as { results: Record<string, unknown>[] }).results;
    res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
    res.end(text);
  }

  async close(): Promise<void> {
    for (const r of this.held) r.destroy();
    this.proxy.closeAllConnections();
    await new Promise<void>((ok) => this.proxy.close(() => ok()));
    await this.serve.close();
  }
}

let dir = '';
const servers: Recorded[] = [];
before(async () => {
  dir = await writeTinyModel(join(root, 'model'), 11, 0.1);
  for (let i = 0; i < 3; i++) servers.push(await Recorded.start(dir));
});
after(async () => {
  for (const s of servers) await s.close();
  rmSync(root, { recursive: true, force: true });
});

const ARGS = ['--backend', 'vllm', '--weight-sync', 'nccl', '--weight-sync-timeout-s', '3', '--max-steps', '2', '--save-steps', '2', '--batch-size', '2',
  '--num-generations', '2', '--max-completion-length', '16', '--sft-steps', '1', '--eval-problems', '1', '--eval-iterations', '1', '--eval-samples', '1', '--device', 'cpu'];

const meta = (s: Seen) => JSON.parse(s.args[0] as string) as { step: number; buckets: { bytes: number; tensors: unknown[] }[] };

describe('train --nproc-per-node 2 --backend vllm --weight-sync nccl against serve (loopback fake)', { concurrency: true }, () => {
  it('each rank syncs exactly its servers in its own group; a timed-out rank falls back to the disk for that step while the other syncs; the servers end with the trainer\'s weights', async () => {
    const out = join(root, 'run');
    // rank 1's receive of step 1 never reaches its worker
    servers[1]!.hold = (rpc, args) => rpc === 'murphy_nccl_recv' && meta({ rpc, args }).step === 1;
    const r = await runTrain([...ARGS, '--model', dir, '--server-url', servers.map((s) => s.url).join(','), '--out', out, '--nproc-per-node', '2']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /^weight sync: loopback group of 3 ranks formed \(trainer \+ 2 vLLM worker\(s\) on 2 server\(s\)\)/m);
    assert.match(r.out, /^\[rank 1\] weight sync: loopback group of 2 ranks formed \(trainer \+ 1 vLLM worker\(s\) on 1 server\(s\)\)/m);
    assert.match(r.out, /^\[rank 1\] weight sync: the NCCL sync of step 1 failed \(.*timed out.*\); the group was aborted, this step syncs through the disk/m);
    assert.doesNotMatch(r.out, /^weight sync: the NCCL sync/m, 'rank 0 fell back');

    // the groups: servers 0 and 2 in rank 0's (one id, world 3, offsets 1 and 2); server 1 alone in rank 1's
    const inits = servers.map((s) => s.seen.filter((x) => x.rpc === 'murphy_nccl_init'));
    const port = (x: Seen) => parseLoopbackId(x.args[0] as string)!.port;
    // (rank 0's group stays formed; rank 1's is formed again at step 2, after its abort)
    assert.deepEqual(inits.map((xs) => xs.map((x) => x.args.slice(1))), [[[3, 1]], [[2, 1], [2, 1]], [[3, 2]]]);
    assert.equal(port(inits[0]![0]!), port(inits[2]![0]!));
    assert.notEqual(port(inits[0]![0]!), port(inits[1]![0]!));

    // every sync: steps 0 (after the warm-up), 1 and 2; all buckets and tensors acknowledged
    const params = Object.keys(weights(join(out, 'checkpoints/step-000002'))).length;
    const recvs = servers.map((s) => s.seen.filter((x) => x.rpc === 'murphy_nccl_recv'));
    for (const [i, xs] of recvs.entries()) {
      assert.deepEqual(xs.map((x) => meta(x).step), [0, 1, 2], `server ${i}`);
      for (const x of xs) {
        if (i === 1 && meta(x).step === 1) {
          assert.equal(x.results, undefined);
          continue;
        }
        const m = meta(x);
        assert.deepEqual(x.results, [{ loaded: true, tensors: params, buckets: m.buckets.length, bytes: m.buckets.reduce((a, b) => a + b.bytes, 0), step: m.step, rank: inits[i]![0]!.args[2], world_size: 1 }], `server ${i} step ${m.step}`);
      }
    }
    // rank 1's step 1 went through the disk (its own sync directory), rank 0's servers never did
    const loads = servers.map((s) => s.seen.filter((x) => x.rpc === 'murphy_load_weights').map((x) => x.args[0]));
    assert.deepEqual(loads, [[], [join(out, 'sync-rank1', 'step-1')], []]);

    // the metrics: each rank's method per step
    const m = metrics(out);
    assert.deepEqual(m.map((x) => (x.weightSync as { method: string }[]).map((w) => w.method)), [['loopback', 'disk'], ['loopback', 'loopback']]);
    assert.match((m[0]!.weightSync as { fallback?: string }[])[1]!.fallback ?? '', /timed out/);

    // after the run every server holds the bf16 of the trainer's step-2 weights
    const w = weights(join(out, 'checkpoints/step-000002'));
    for (const [i, s] of servers.entries()) {
      for (const [name, t] of Object.entries(w)) assert.deepEqual(s.engine.model.getParam(name), fromBf16(toBf16(t.data)), `server ${i} ${name}`);
    }
  });

  it('fewer servers than ranks: one line before any rank starts', async () => {
    const out = join(root, 'few');
    const r = await runTrain([...ARGS, '--model', dir, '--server-url', servers[0]!.url, '--out', out, '--nproc-per-node', '2']);
    assert.notEqual(r.code, 0);
    assert.match(r.out, /config key "serverUrl" \(--server-url\): 2 ranks need at least 2 vLLM servers \(server i goes to rank i mod 2\), got 1: start more servers or use fewer ranks/);
    assert.doesNotMatch(r.out, /\[rank \d\]/);
  });
});
