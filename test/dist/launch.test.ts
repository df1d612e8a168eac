// The local launcher: each rank's environment (torchrun variables, threads or GPU), and a rank
// that fails ends the whole job with its line (the other rank, waiting, is stopped).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { launchLocal, nodeLayout, rankEnv } from '../../lib/dist/launch.js';
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

  it('refuses --nproc-per-node 0 and several ranks on --device cuda (no NCCL yet) with one line', () => {
    assert.throws(() => checkFlags('train', { nprocPerNode: 0 }), /^UsageError: --nproc-per-node must be an integer >= 1, got 0$/);
    assert.throws(() => checkRanksDevice({ ...defaultConfig(), device: 'cuda' }, 2), /--device cuda with 2 ranks needs the NCCL backend, which this build does not have yet; use --device cpu/);
    checkRanksDevice({ ...defaultConfig(), device: 'cuda' }, 1);
    checkRanksDevice({ ...defaultConfig(), device: 'cpu' }, 8);
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
