// The checkpoint manifest's hash (XXH64, native/cpu/xxh64.cc) and its writer: the hash matches
// the reference implementation's outputs, a file hashed from memory while it is written gets
// the hash of its bytes on disk, a flipped byte / truncated / missing file is found, and
// version-1 manifests (SHA-256, written before XXH64) still verify.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { xxh64Buffers, xxh64File } from '../../lib/native.js';
import { MANIFEST_FILE, ManifestWriter, manifestFault, manifestSizeFault, readManifest, sha256File } from '../../lib/train/manifest.js';
import { PolicyModel } from '../../lib/model/index.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { Rng, testSeed } from '../helpers/random.js';
import { writeTinyModel } from '../helpers/tiny-model.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-manifest-'));
after(() => rmSync(root, { recursive: true, force: true }));
const rng = new Rng(testSeed('checkpoint manifest'));

const pattern = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + 7) & 255));
const randomBytes = (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => rng.int(256)));

// From xxhsum 0.8.1 (`xxhsum -H1`, Debian's xxhash package): the empty input, "a", "abc",
// and pattern(n) around every branch of the algorithm (tail words of 8, 4 and 1 bytes, the
// 32-byte stripe boundary, a long input).
const VECTORS: [Buffer, string][] = [
  [Buffer.alloc(0), 'ef46db3751d8e999'],
  [Buffer.from('a'), 'd24ec4f1a98c6e5b'],
  [Buffer.from('abc'), '44bc2cf5ad770999'],
  [pattern(3), '56e6957632a487f9'],
  [pattern(4), 'c60d15b1e3ff8f04'],
  [pattern(5), '808815858624dd4e'],
  [pattern(8), '3da5c7aa269683e0'],
  [pattern(31), '4a74f3a1a39ad4a1'],
  [pattern(32), '8d57d6a4671cc43d'],
  [pattern(33), '62c9fd21ed857664'],
  [pattern(63), '5c320a0d2707057f'],
  [pattern(64), '7bbabbc45729d17e'],
  [pattern(100), 'efa0ad2d3e70c151'],
  [pattern(1000003), '857fbf0ff5d9fcfc'],
];

/** Splits buf into random pieces (some empty), views of the same memory. */
function randomChunks(buf: Buffer): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < buf.length) {
    const n = rng.next() < 0.1 ? 0 : 1 + rng.int(Math.min(buf.length - at, rng.next() < 0.5 ? 40 : 100_000));
    out.push(buf.subarray(at, at + n));
    at += n;
  }
  return out;
}

describe('XXH64', () => {
  it('matches xxhsum on every branch, in one piece, in random pieces, and from a file', async () => {
    for (const [i, [buf, want]] of VECTORS.entries()) {
      assert.equal(await xxh64Buffers([buf]), want, `vector ${i} (${buf.length} bytes)`);
      assert.equal(await xxh64Buffers(randomChunks(buf)), want, `vector ${i} in pieces`);
      const p = join(root, `vector-${i}`);
      writeFileSync(p, buf);
      assert.deepEqual(await xxh64File(p), { bytes: buf.length, xxh64: want });
    }
  });

  it('a missing file is one line naming it', async () => {
    await assert.rejects(xxh64File(join(root, 'nope')), (e: Error) => e.message.includes(join(root, 'nope')) && /cannot open/.test(e.message));
  });
});

describe('ManifestWriter', () => {
  it('files hashed while written and files hashed afterwards verify; a flipped byte, a cut and a missing file are named', async () => {
    const dir = join(root, 'ck');
    mkdirSync(join(dir, 'policy'), { recursive: true });
    const w = new ManifestWriter(dir);
    const big = randomBytes(200_000 + rng.int(100_000));
    await w.writeFile('master.safetensors', randomChunks(big));
    await w.writeFile('state.json', '{"version": 1}\n');
    writeFileSync(join(dir, 'policy', 'model.safetensors'), randomBytes(5000)); // written by other code
    const m = await w.finish();
    assert.deepEqual(Object.keys(m.files), ['master.safetensors', 'policy/model.safetensors', 'state.json']);
    assert.deepEqual(readFileSync(join(dir, 'master.safetensors')), big);
    for (const [f, e] of Object.entries(m.files)) assert.deepEqual(await xxh64File(join(dir, f)), { bytes: e.bytes, xxh64: e.xxh64 }, f);
    assert.equal(await manifestFault(dir), null);

    const files = Object.keys(m.files);
    const f = files[rng.int(files.length)]!;
    const p = join(dir, f);
    const orig = readFileSync(p);
    const bad = Buffer.from(orig);
    const at = rng.int(bad.length);
    bad[at] = bad[at]! ^ (1 << rng.int(8));
    writeFileSync(p, bad);
    assert.equal(manifestSizeFault(dir), null, 'same size');
    assert.equal(await manifestFault(dir), `${p} does not match its XXH64 hash in the manifest (corrupted)`);
    truncateSync(p, orig.length - 1);
    assert.equal(await manifestFault(dir), `${p} has ${orig.length - 1} bytes, the manifest says ${orig.length} (truncated or replaced)`);
    unlinkSync(p);
    assert.equal(await manifestFault(dir), `${p} is missing (listed in the manifest)`);
    writeFileSync(p, orig);
    assert.equal(await manifestFault(dir), null);
  });

  it('a version-1 manifest (SHA-256) still verifies, and still catches a flipped byte', async () => {
    const dir = join(root, 'version-1');
    mkdirSync(dir, { recursive: true });
    const files: Record<string, { bytes: number; sha256: string }> = {};
    for (const f of ['a.bin', 'b.bin']) {
      writeFileSync(join(dir, f), randomBytes(1 + rng.int(3000)));
      files[f] = { bytes: readFileSync(join(dir, f)).length, sha256: sha256File(join(dir, f)) };
    }
    writeFileSync(join(dir, MANIFEST_FILE), JSON.stringify({ version: 1, files }));
    assert.equal(readManifest(dir)!.version, 1);
    assert.equal(await manifestFault(dir), null);
    const p = join(dir, 'b.bin');
    const buf = readFileSync(p);
    const at = rng.int(buf.length);
    buf[at] = buf[at]! ^ 0x01;
    writeFileSync(p, buf);
    assert.equal(await manifestFault(dir), `${p} does not match its SHA-256 in the manifest (corrupted)`);
  });

  it('the native Hugging Face save hashes each file as it writes it (bf16 and f32, one file and shards); the manifest takes those hashes, no read-back', async () => {
    const src = await writeTinyModel(join(root, 'hf-src'), rng.int(1 << 30));
    const m = await PolicyModel.load(src);
    const weightBytes = statSync(join(src, 'model.safetensors')).size;
    for (const dtype of ['bfloat16', 'float32'] as const) {
      for (const maxShardBytes of [0, Math.floor(weightBytes / 5)]) {
        const out = join(root, `hf-${dtype}-${maxShardBytes}`);
        const files = await m.saveHashed(out, { dtype, maxShardBytes });
        const onDisk = readdirSync(out).filter((f) => f.endsWith('.safetensors') || f.endsWith('.index.json')).sort();
        assert.deepEqual(files.map((f) => f.file).sort(), onDisk, `${dtype} ${maxShardBytes}`);
        if (maxShardBytes > 0) assert.ok(onDisk.length > 2, onDisk.join(' '));
        for (const f of files) assert.deepEqual({ bytes: f.bytes, xxh64: f.xxh64 }, await xxh64File(join(out, f.file)), `${dtype} ${maxShardBytes} ${f.file}`);
      }
    }
    // a checkpoint: the policy's weight file is recorded with the save's hash, and the checkpoint verifies
    const ck = join(root, 'hf-ckpt');
    mkdirSync(ck, { recursive: true });
    const w = new ManifestWriter(ck);
    const recorded: string[] = [];
    const record = w.record.bind(w);
    w.record = (rel, e) => {
      recorded.push(rel);
      record(rel, e);
    };
    await new NativePolicy(m, { tokenizerDir: src }).saveState(ck, w);
    assert.deepEqual(recorded, ['policy/model.safetensors']);
    const man = await w.finish();
    assert.deepEqual(man.files['policy/model.safetensors'], await xxh64File(join(ck, 'policy', 'model.safetensors')));
    assert.equal(await manifestFault(ck), null);
    // what is recorded is taken as is (no read-back): a wrong hash goes into the manifest, and the verification on read finds it
    const odd = join(root, 'recorded');
    mkdirSync(odd, { recursive: true });
    writeFileSync(join(odd, 'w.safetensors'), 'weights');
    const ow = new ManifestWriter(odd);
    ow.record('w.safetensors', { bytes: 7, xxh64: '0123456789abcdef' });
    assert.equal((await ow.finish()).files['w.safetensors']!.xxh64, '0123456789abcdef');
    assert.match((await manifestFault(odd))!, /w\.safetensors/);
  });

  it('a manifest entry without its hash is refused as damaged', async () => {
    const dir = join(root, 'no-hash');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'x'), 'x');
    writeFileSync(join(dir, MANIFEST_FILE), JSON.stringify({ version: 2, hash: 'xxh64', files: { x: { bytes: 1 } } }));
    assert.match((await manifestFault(dir))!, /the entry of x is not \{"bytes", "xxh64"\}; the manifest is damaged/);
  });
});
