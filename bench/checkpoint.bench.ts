// Checkpoint integrity cost (docs/training.md, "Checkpoint integrity and resume"):
// `node --import tsx bench/checkpoint.bench.ts [--gb 1.5] [--reps 2] [--dir DIR] [--json FILE]`
//
// A synthetic checkpoint shaped like a real one (P parameters: bf16 policy weights 2P bytes,
// written by "other code" as the native save is; fp32 master weights 4P; two fp32 AdamW
// moments 8P), written three ways into DIR (default the OS temp directory), medians of --reps:
//   write only   the files, atomically (tmp + fsync + rename), no manifest: the floor
//   sha256       before: whole-file buffers, then every file read back for SHA-256 (the old
//                writeManifest), and a resume's verification reading each file again
//   xxh64        now: ManifestWriter (master and moments hashed from memory on a worker thread
//                while they are written, the policy file read back), and manifestFault's
//                verification (every file hashed in parallel)
// Verification reads what was just written, so it reads the page cache: a cold resume adds the
// disk's read time to both. Also the in-memory hash rates (one 256 MiB buffer).
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { xxh64Buffers } from '../lib/native.js';
import { encodeSafetensorsF32, safetensorsF32Chunks, type F32Tensors } from '../lib/safetensors.js';
import { ManifestWriter, manifestFault, sha256File } from '../lib/train/manifest.js';
import { writeFileAtomic } from '../lib/train/rundir.js';
import { cliArgs, machineInfo, medianOf, writeJsonAtomic } from './common.js';

const { opt } = cliArgs();
const gb = Number(opt('--gb') ?? 1.5);
const reps = Number(opt('--reps') ?? 2);
const base = opt('--dir') ?? tmpdir();
const jsonOut = opt('--json');
if (!(gb > 0) || !(Number.isInteger(reps) && reps >= 1)) throw new Error('--gb must be > 0 and --reps an integer >= 1');

const P = Math.floor((gb * 1e9) / 14);
const log = (m: string): void => void process.stderr.write(`${m}\n`);

function filled(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) a[i] = ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32 - 0.5) * 0.02;
  return a;
}
log(`synthetic checkpoint: P = ${(P / 1e6).toFixed(1)}M parameters, ${(14 * P / 1e9).toFixed(2)} GB in ${base}`);
const master: F32Tensors = { w: { shape: [P], data: filled(P, 1) } };
const moments: F32Tensors = { 'w.exp_avg': { shape: [P], data: filled(P, 2) }, 'w.exp_avg_sq': { shape: [P], data: filled(P, 3) } };
const policyBytes = new Uint8Array(master.w!.data.buffer, 0, 2 * P); // stands in for the bf16 weights

type Variant = 'write only' | 'sha256' | 'xxh64';

interface Times {
  /** The files written (atomically, fsynced), with the hashing that overlaps the writes (xxh64). */
  write_s: number;
  /** After the writes: the manifest pass (sha256: every file read back; xxh64: finish(), the policy file read back). */
  manifest_s: number;
  /** A resume's verification of the checkpoint. */
  verify_s: number;
  /** CPU time of the process (all its threads, user + system) for the writes and the manifest: less noisy than wall time on a shared machine. */
  write_cpu_s: number;
  bytes: number;
}

const FILES = ['policy/model.safetensors', 'master.safetensors', 'optimizer.safetensors'];

async function once(v: Variant): Promise<Times> {
  const dir = mkdtempSync(join(base, 'murphy-ckpt-bench-'));
  try {
    mkdirSync(join(dir, 'policy'));
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    writeFileAtomic(join(dir, 'policy', 'model.safetensors'), policyBytes);
    let w: ManifestWriter | null = null;
    if (v === 'xxh64') {
      w = new ManifestWriter(dir);
      await w.writeFile('master.safetensors', safetensorsF32Chunks(master));
      await w.writeFile('optimizer.safetensors', safetensorsF32Chunks(moments, { step: '1' }));
    } else {
      // the code before: whole-file buffers (sha256); the write-only floor: the same chunks as xxh64
      writeFileAtomic(join(dir, 'master.safetensors'), v === 'sha256' ? encodeSafetensorsF32(master) : safetensorsF32Chunks(master));
      writeFileAtomic(join(dir, 'optimizer.safetensors'), v === 'sha256' ? encodeSafetensorsF32(moments, { step: '1' }) : safetensorsF32Chunks(moments, { step: '1' }));
    }
    const t1 = performance.now();
    if (w) await w.finish();
    else if (v === 'sha256') for (const f of FILES) sha256File(join(dir, f));
    const t2 = performance.now();
    const c1 = process.cpuUsage(c0);
    if (v === 'xxh64') {
      const fault = await manifestFault(dir);
      if (fault) throw new Error(fault);
    } else if (v === 'sha256') {
      for (const f of FILES) sha256File(join(dir, f));
    }
    const t3 = performance.now();
    const bytes = FILES.reduce((s, f) => s + statSync(join(dir, f)).size, 0);
    return { write_s: (t1 - t0) / 1000, manifest_s: (t2 - t1) / 1000, verify_s: (t3 - t2) / 1000, write_cpu_s: (c1.user + c1.system) / 1e6, bytes };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function hashRates(): Promise<{ sha256_gbps: number; xxh64_gbps: number }> {
  const buf = new Uint8Array(master.w!.data.buffer, 0, Math.min(256 << 20, 4 * P));
  let sha = Infinity, xx = Infinity;
  for (let r = 0; r < 3; r++) {
    let t = performance.now();
    createHash('sha256').update(buf).digest();
    sha = Math.min(sha, performance.now() - t);
    t = performance.now();
    await xxh64Buffers([buf]);
    xx = Math.min(xx, performance.now() - t);
  }
  return { sha256_gbps: buf.length / sha / 1e6, xxh64_gbps: buf.length / xx / 1e6 };
}

const rates = await hashRates();
log(`in-memory hash rate: SHA-256 ${rates.sha256_gbps.toFixed(2)} GB/s, XXH64 ${rates.xxh64_gbps.toFixed(2)} GB/s (one 256 MiB buffer, best of 3)`);
const rows: Record<string, unknown>[] = [];
const runs: Record<Variant, Times[]> = { 'write only': [], sha256: [], xxh64: [] };
const VARIANTS: Variant[] = ['write only', 'sha256', 'xxh64'];
for (let r = 0; r < reps; r++) {
  // the order rotates with each rep: an fsync's time depends on the writeback left by the variant before
  for (const v of VARIANTS.map((_, i) => VARIANTS[(i + r) % VARIANTS.length]!)) {
    const x = await once(v);
    log(`${v.padEnd(10)} rep ${r + 1}: write ${x.write_s.toFixed(2)} s, manifest ${x.manifest_s.toFixed(2)} s (CPU ${x.write_cpu_s.toFixed(2)} s), verify ${x.verify_s.toFixed(2)} s`);
    runs[v].push(x);
  }
}
const median = medianOf;
for (const v of VARIANTS) {
  const t = runs[v];
  const m = { write: median(t.map((x) => x.write_s)), manifest: median(t.map((x) => x.manifest_s)), verify: median(t.map((x) => x.verify_s)), cpu: median(t.map((x) => x.write_cpu_s)) };
  rows.push({
    variant: v, bytes: t[0]!.bytes, write_s: round(m.write), manifest_s: round(m.manifest), write_and_manifest_cpu_s: round(m.cpu), verify_s: round(m.verify),
    manifest_gbps: v === 'sha256' ? round(t[0]!.bytes / m.manifest / 1e9) : null, verify_gbps: v === 'write only' ? null : round(t[0]!.bytes / m.verify / 1e9),
    write_s_all: t.map((x) => round(x.write_s)),
  });
}
function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
console.table(rows);
const doc = {
  benchmark: 'checkpoint integrity (bench/checkpoint.bench.ts)',
  date: new Date().toISOString(),
  machine: machineInfo(),
  uv_threadpool_size: Number(process.env.UV_THREADPOOL_SIZE ?? 4),
  directory: base,
  parameters: P,
  reps,
  stat: 'median of reps',
  hash_rates: { sha256_gbps: round(rates.sha256_gbps), xxh64_gbps: round(rates.xxh64_gbps) },
  rows,
  note: 'Variants interleaved, the order rotating per rep. write_s: the atomic writes (fsync), with the overlapping in-memory hashing for xxh64; dominated by the disk and noisy on a shared VM (write_s_all). manifest_s: the integrity pass after the writes (sha256: every file read back and hashed, as before; xxh64: only the file written by other code, the bf16 policy, read back). write_and_manifest_cpu_s: CPU time of the process (all threads) for the writes and the manifest. verify_s: a resume\'s verification, reading the page cache (the files were just written; a cold resume adds the disk\'s read time to both).',
};
if (jsonOut) writeJsonAtomic(jsonOut, doc);
