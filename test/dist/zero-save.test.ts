// DistributedPolicy's checkpoints hash every file as it is written, as a single process's save
// does (lib/train/policy.ts NativePolicy.saveState): rank 0's Hugging Face weights (the native
// save's hashes), master.safetensors and its shard through the checkpoint's manifest writer,
// the other ranks' shards hashed by the rank that writes them and recorded in rank 0's manifest
// (nothing read back). The manifest verifies; a shard corrupted afterwards makes the checkpoint
// fail verification on resume (set aside, naming the file). Two ranks of the CPU backend, CPU
// engines (the host path).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DistributedPolicy } from '../../lib/dist/zero.js';
import { PolicyModel } from '../../lib/model/index.js';
import { setNumThreads, xxh64File } from '../../lib/native.js';
import { findResumeCheckpoint, writeCheckpoint, type TrainerState } from '../../lib/train/checkpoint.js';
import { ManifestWriter } from '../../lib/train/manifest.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { RunDir } from '../../lib/train/rundir.js';
import { Rng, testSeed } from '../helpers/random.js';
import { closeWorlds, localWorld } from './helpers.js';

const seed = testSeed('dist/zero-save');
setNumThreads(1);
const root = mkdtempSync(join(tmpdir(), 'murphy-zero-save-'));
after(async () => {
  await closeWorlds();
  rmSync(root, { recursive: true, force: true });
});

/** A manifest writer that notes which files came through writeFile and which through record. */
class SpyWriter extends ManifestWriter {
  readonly written: string[] = [];
  readonly recorded = new Map<string, { bytes: number; xxh64: string }>();
  override async writeFile(rel: string, data: string | Uint8Array | readonly Uint8Array[]): Promise<void> {
    this.written.push(rel);
    await super.writeFile(rel, data);
  }
  override record(rel: string, entry: { bytes: number; xxh64: string }): void {
    this.recorded.set(rel, entry);
    super.record(rel, entry);
  }
}

async function twoRanks(): Promise<DistributedPolicy[]> {
  const world = await localWorld(2);
  const models = await Promise.all(world.map((_, r) => PolicyModel.random('tiny', { seed: 5 + r })));
  return Promise.all(world.map((c, r) => DistributedPolicy.create(c, new NativePolicy(models[r]!), models[r]!, { bucketBytes: 8192 })));
}

describe('DistributedPolicy checkpoints: hashed as written', () => {
  it('every file hashed while written (other ranks\' shards by their writer), the manifest verifies, a corrupted shard is refused on resume', async () => {
    const rng = new Rng(seed);
    const dps = await twoRanks();
    const dir = join(root, 'ck');
    const files = new SpyWriter(dir);
    await Promise.all([dps[0]!.saveState(dir, files), dps[1]!.joinSave()]);
    await files.finish();
    assert.deepEqual(files.written.sort(), ['master.safetensors', 'optimizer-shard-00000-of-00002.safetensors']);
    const other = 'optimizer-shard-00001-of-00002.safetensors';
    assert.deepEqual(files.recorded.get(other), await xxh64File(join(dir, other)), 'rank 1 hashed its shard as it wrote it');
    assert.ok([...files.recorded.keys()].some((f) => f.startsWith('policy/') && f.endsWith('.safetensors')), 'the Hugging Face weights: the native save\'s hashes');

    // through writeCheckpoint (rank 0) and joinSave (rank 1), then resume's verification
    const run = new RunDir(join(root, 'run'));
    const state: TrainerState = { version: 1, step: 1, problemsConsumed: 4, seed: 0, groupSize: 4, followUpGroupSize: 4, metricsBytes: 0, treesBytes: 0, optimizerState: true };
    const [ck] = await Promise.all([writeCheckpoint(run, dps[0]!, state, 2), dps[1]!.joinSave()]);
    assert.equal((await findResumeCheckpoint(run)).dir, ck);
    const shard = join(ck, other);
    assert.ok(existsSync(shard));
    const bytes = readFileSync(shard);
    const at = bytes.length - 1 - rng.int(Math.min(1024, bytes.length - 64)); // a byte of the tensors
    const fd = openSync(shard, 'r+');
    writeSync(fd, Buffer.from([bytes[at]! ^ 0x40]), 0, 1, at);
    closeSync(fd);
    await assert.rejects(findResumeCheckpoint(run), new RegExp(`no checkpoint verifies \\(step-000001: .*${other.replace(/\./g, '\\.')}`));
    await closeWorlds();
  });
});
