// The local launcher: each rank's environment (torchrun variables, threads or GPU), the choice of
// the collective backend (lib/dist/backend.ts), and a rank that fails ends the whole job with its
// line (the other rank, waiting, is stopped).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { launchLocal, nodeLayout, rankEnv, visibleDeviceFor } from '../../lib/dist/launch.js';
import { defaultDistBackend, distBackendFor, narrowVisibleDevices } from '../../lib/dist/backend.js';
import type { NcclReport } from '../../lib/gpu/nccl.js';
import { withoutLauncherFlags } from '../../lib/commands/train.js';
import { checkRanksDevice } from '../../lib/commands/run-training.js';
import { checkFlags } from '../../lib/commands/flags.js';
import { defaultConfig } from '../../lib/config/index.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-launch-'));
after(() => rmSync(root, { recursive: true, force: true }));

describe('launcher', () => {
  it('sets torchrun variables per rank, splits CPU threads, one GPU per rank, node layout from NNODES/NODE_RANK or Slurm', () => {
    const layout = nodeLayout({ NNODES: '2', NODE_RANK: '1', MASTER_ADDR: 'head', MASTER_PORT: '29555' });
    assert.deepEqual(layout, { nnodes: 2, nodeRank: 1, masterAddr: 'head', masterPort: 29555 });
    const e = rankEnv({ SLURM_PROCID: '9' }, { nproc: 4, local: 2, layout, port: 29555, device: 'cpu', cores: 16 });
    assert.deepEqual([e.RANK, e.WORLD_SIZE, e.LOCAL_RANK, e.LOCAL_WORLD_SIZE, e.MASTER_ADDR, e.MASTER_PORT, e.MURPHY_NUM_THREADS, e.SLURM_PROCID], ['6', '8', '2', '4', 'head', '29555', '4', undefined]);
    const g = rankEnv({ CUDA_VISIBLE_DEVICES: '4,5,6,7' }, { nproc: 4, local: 1, layout, port: 1, device: 'cuda', cores: 16 });
    assert.equal(g.CUDA_VISIBLE_DEVICES, '5');
    assert.equal(rankEnv({ MURPHY_NUM_THREADS: '3' }, { nproc: 2, local: 0, layout, port: 1, device: 'cpu', cores: 16 }).MURPHY_NUM_THREADS, '3');
    assert.deepEqual(nodeLayout({ SLURM_NNODES: '3', SLURM_NODEID: '2', MASTER_ADDR: 'n0' }), { nnodes: 3, nodeRank: 2, masterAddr: 'n0', masterPort: 29500 });
    assert.throws(() => nodeLayout({ NNODES: '2', NODE_RANK: '0' }), /2 nodes: set MASTER_ADDR/);
    assert.deepEqual(withoutLauncherFlags(['train', '--nproc-per-node', '2', '--max-steps', '3', '--nproc-per-node=4']), ['train', '--max-steps', '3']);
  });

  it('refuses --nproc-per-node 0; chooses the collective backend per device (nccl for cuda, tcp otherwise), one line for a choice that cannot run', () => {
    assert.throws(() => checkFlags('train', { nprocPerNode: 0 }), /^UsageError: --nproc-per-node must be an integer >= 1, got 0$/);
    const found = (): NcclReport => ({ found: true, path: '/x/libnccl.so.2', searched: [], attempts: [] });
    const missing = (): NcclReport => ({ found: false, reason: 'NCCL not found: looked in /usr/local/cuda/lib64 (default CUDA): no such file; install the nvidia-nccl Python wheel or set MURPHY_NCCL', searched: [], attempts: [] });
    assert.equal(defaultDistBackend('cuda'), 'nccl');
    assert.equal(defaultDistBackend('emulate'), 'tcp');
    assert.equal(distBackendFor('cuda', 'auto', 2, found), 'nccl');
    assert.equal(distBackendFor('cuda', 'tcp', 2, missing), 'tcp');
    assert.equal(distBackendFor('emulate', 'auto', 4, missing), 'tcp');
    assert.equal(distBackendFor('cpu', 'auto', 8, missing), 'tcp');
    assert.equal(distBackendFor('cuda', 'auto', 1, missing), 'nccl'); // one rank: no collective to set up
    assert.throws(() => distBackendFor('cuda', 'auto', 2, missing), /^ConfigError: --device cuda with 2 ranks uses NCCL \(--dist-backend auto\): NCCL not found: looked in .*set MURPHY_NCCL; or pass --dist-backend tcp \(host copies over TCP, slow\)$/);
    assert.throws(() => distBackendFor('emulate', 'nccl', 2, found), /^ConfigError: --dist-backend nccl moves GPU memory: it needs --device cuda, not emulate; use --dist-backend tcp \(or auto\)$/);
    assert.throws(() => checkRanksDevice({ ...defaultConfig(), device: 'cpu', distBackend: 'nccl' }, 2), /needs --device cuda, not cpu/);
    checkRanksDevice({ ...defaultConfig(), device: 'cuda' }, 1);
    checkRanksDevice({ ...defaultConfig(), device: 'emulate' }, 8);
  });

  it('several ranks on a node: each sees only its local rank\'s GPU (its entry of CUDA_VISIBLE_DEVICES, else its index)', () => {
    const env: NodeJS.ProcessEnv = { CUDA_VISIBLE_DEVICES: '4, 5,6,7' };
    assert.equal(narrowVisibleDevices(env, { localRank: 2, localWorldSize: 4 }), '6');
    assert.equal(env.CUDA_VISIBLE_DEVICES, '6');
    assert.equal(narrowVisibleDevices(env, { localRank: 2, localWorldSize: 4 }), null); // one GPU listed: the launcher's choice
    const unset: NodeJS.ProcessEnv = {};
    assert.equal(narrowVisibleDevices(unset, { localRank: 1, localWorldSize: 2 }), '1');
    assert.equal(narrowVisibleDevices({}, { localRank: 0, localWorldSize: 1 }), null);
    assert.throws(() => narrowVisibleDevices({ CUDA_VISIBLE_DEVICES: '0,1' }, { localRank: 3, localWorldSize: 4 }), /^ConfigError: local rank 3 has no GPU of its own: CUDA_VISIBLE_DEVICES lists 2 \(0,1\); start at most one rank per GPU$/);
    assert.equal(visibleDeviceFor(undefined, 3), '3');
  });

  it('a rank that fails ends the job with its exit code and line; the others are stopped', async () => {
    const script = join(root, 'rank.mjs');
    writeFileSync(script, [
      "if (process.env.RANK === '1') { console.error('boom from rank ' + process.env.RANK + ' of ' + process.env.WORLD_SIZE); process.exit(3); }",
      'setInterval(() => {}, 1000); // waits (like a rank in a collective) until stopped',
    ].join('\n'));
    const lines: string[] = [];
    const code = await launchLocal({ nprocPerNode: 2, args: [], device: 'cpu', script, env: { ...process.env, MASTER_PORT: '' }, log: (l) => lines.push(l) });
    assert.equal(code, 3);
    assert.deepEqual(lines, ['murphy-native train: rank 1 failed (exit code 3): boom from rank 1 of 2; stopping the other ranks']);
  });
});
