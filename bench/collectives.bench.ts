// Collective benchmark of the CPU backend (lib/dist/tcp.ts, loopback TCP between processes):
// `node --import tsx bench/collectives.bench.ts [--ranks N] [--quick] [--json FILE] [--nccl [--staged] [--dry-run]]`.
// --nccl: the device half, NCCL between one process per GPU (bench/nccl-bench.ts; --ranks
// defaults to the GPU count, 1 on one GPU); without a CUDA device or NCCL it says why and exits 0.
// --staged: through lib/dist's interface (host arrays staged through device buffers, as training
// does today) instead of on device buffers. --dry-run: world size 1 on the tests' fake NCCL
// (host memory, no GPU): runs the code, measures nothing, writes no file.
// With one rank a reduce-scatter, all-gather or all-reduce crosses no link (busbw is 0 by
// nccl-tests' definition): the table shows algbw, and the estimates use the broadcast figure,
// a local copy, as a bound that a real link cannot beat, not a link speed.
//
// For each bucket size, every op (all-reduce, reduce-scatter, all-gather, broadcast) runs on N
// rank processes of this script; the time is the median over 5-30 iterations after 2 untimed
// ones (a barrier before each), as rank 0 sees it. Bandwidths follow nccl-tests: algbw = bytes / time with bytes the full
// buffer; busbw = algbw x 2(N-1)/N for all-reduce, x (N-1)/N for reduce-scatter and all-gather,
// x 1 for broadcast. From the largest bucket's figures: the estimated time to move 1.7B and 7B
// bf16 weights (a broadcast, as a weight sync does) and a ZeRO-1 step's traffic (fp32
// reduce-scatter of the gradients + fp32 all-gather of the weights, as the CPU engine does).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cliArgs, machineInfo, writeJsonAtomic } from './common.js';
import { TcpCollective } from '../lib/dist/tcp.js';
import { ncclBenchId, ncclBenchRank, ncclBenchSkip } from './nccl-bench.js';

type Op = 'allReduce' | 'reduceScatter' | 'allGather' | 'broadcast';
const OPS: Op[] = ['allReduce', 'reduceScatter', 'allGather', 'broadcast'];

interface Row {
  op: Op;
  bytes: number;
  median_ms: number;
  algbw_gbps: number;
  busbw_gbps: number;
}

const { flag, opt } = cliArgs();
const quick = flag('--quick');
const nccl = flag('--nccl');
const mode = { staged: flag('--staged'), dryRun: flag('--dry-run') };
const SIZES = quick ? [1 << 16, 1 << 20, 1 << 23] : [1 << 16, 1 << 20, 1 << 23, 1 << 25, 1 << 27];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function rankMain(): Promise<void> {
  const rank = Number(process.env.RANK), world = Number(process.env.WORLD_SIZE);
  const c = nccl
    ? await ncclBenchRank(rank, world, process.env.MURPHY_NCCL_ID!, mode)
    : await TcpCollective.create({ rank, worldSize: world, masterAddr: '127.0.0.1', masterPort: Number(process.env.MASTER_PORT), timeoutMs: 600_000 });
  const rows: Row[] = [];
  for (const bytes of SIZES) {
    const n = bytes / 4;
    const buf = new Float32Array(n).fill(rank + 1);
    const part = new Float32Array(n / world);
    const iters = Math.max(5, Math.min(30, Math.floor((quick ? 2 ** 26 : 2 ** 28) / bytes)));
    const warm = 2;
    for (const op of OPS) {
      const times: number[] = [];
      for (let i = 0; i < warm + iters; i++) {
        await c.barrier();
        const t0 = performance.now();
        if (op === 'allReduce') await c.allReduce(buf);
        else if (op === 'reduceScatter') await c.reduceScatter(buf, part);
        else if (op === 'allGather') await c.allGather(part, buf);
        else await c.broadcast(buf, 0);
        if (i >= warm) times.push(performance.now() - t0); // the first runs warm up
        if (op === 'allReduce') buf.fill(rank + 1); // keep the sums finite
      }
      const ms = median(times);
      const alg = bytes / (ms / 1000) / 1e9;
      const f = op === 'allReduce' ? (2 * (world - 1)) / world : op === 'broadcast' ? 1 : (world - 1) / world;
      rows.push({ op, bytes, median_ms: +ms.toFixed(3), algbw_gbps: +alg.toFixed(3), busbw_gbps: +(alg * f).toFixed(3) });
    }
  }
  await c.close();
  if (rank === 0) process.stdout.write(JSON.stringify(rows) + '\n');
}

async function main(): Promise<void> {
  let ncclId = '';
  let devices = 0;
  if (nccl) {
    const s = ncclBenchSkip(mode);
    if (s.skip) {
      console.log(`collectives --nccl: skipped: ${s.skip}`);
      return;
    }
    devices = s.devices;
    ncclId = ncclBenchId();
  }
  if (!nccl && (mode.staged || mode.dryRun)) throw new Error('--staged and --dry-run go with --nccl');
  const world = Number(opt('--ranks') ?? (nccl ? devices : 2));
  if (mode.dryRun && world !== 1) throw new Error('--dry-run runs world size 1 (the fake library joins ranks of one process only)');
  if (mode.dryRun && opt('--json')) throw new Error('--dry-run measures nothing: no --json');
  const visible = process.env.CUDA_VISIBLE_DEVICES?.split(',').filter((x) => x.trim() !== '');
  const port = 20000 + Math.floor(Math.random() * 20000);
  const script = fileURLToPath(import.meta.url);
  let out = '';
  const codes = await Promise.all(Array.from({ length: world }, (_, r) => new Promise<number>((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, script, ...process.argv.slice(2)], {
      env: {
        ...process.env, RANK: String(r), WORLD_SIZE: String(world), MASTER_PORT: String(port), MURPHY_BENCH_RANK: '1',
        ...(nccl ? { MURPHY_NCCL_ID: ncclId, CUDA_VISIBLE_DEVICES: visible ? visible[r % visible.length] : String(r % devices) } : {}),
      },
      stdio: ['ignore', r === 0 ? 'pipe' : 'ignore', 'inherit'],
    });
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => resolve(code ?? 1));
  })));
  if (codes.some((c) => c !== 0)) throw new Error(`a rank failed (exit codes ${codes.join(', ')})`);
  const rows = JSON.parse(out) as Row[];
  const largest = Math.max(...rows.map((r) => r.bytes));
  const bw = (op: Op): number => rows.find((r) => r.op === op && r.bytes === largest)!.busbw_gbps;
  const estimate = (params: number) => ({
    params,
    weight_sync_bf16_s: +((params * 2) / (bw('broadcast') * 1e9)).toFixed(2),
    zero1_step_fp32_s: world === 1 ? 0 : +((params * 4 * (world - 1)) / world / (bw('reduceScatter') * 1e9) + (params * 4 * (world - 1)) / world / (bw('allGather') * 1e9)).toFixed(2),
  });
  const doc = {
    benchmark: nccl ? `collectives (NCCL, one process per GPU, ${mode.staged ? 'host arrays staged through device buffers (lib/dist NcclCollective)' : 'device buffers'})` : 'collectives (CPU backend, loopback TCP)',
    date: new Date().toISOString(),
    machine: machineInfo(),
    ranks: world,
    rows,
    estimates_from_largest_bucket: { bucket_bytes: largest, models: [estimate(1.7e9), estimate(7e9)] },
    note: nccl
      ? 'Rank processes on one machine, one GPU each, NCCL on device buffers; bus bandwidth as nccl-tests defines it.'
      : 'Rank processes on one machine over loopback TCP; bus bandwidth as nccl-tests defines it. The device half: --nccl.',
  };
  if (mode.dryRun) console.log('DRY RUN: the fake NCCL on host memory; these figures measure nothing about NCCL or a GPU');
  if (world === 1) console.log('one rank: no link is crossed; busbw is 0 by definition, the estimates below come from the broadcast (a local copy) and bound what a link can do');
  console.log(`ranks ${world}`);
  console.log('op             bytes        median ms   algbw GB/s  busbw GB/s');
  for (const r of rows) console.log(`${r.op.padEnd(14)} ${String(r.bytes).padStart(11)}  ${r.median_ms.toFixed(3).padStart(10)}  ${r.algbw_gbps.toFixed(3).padStart(10)}  ${r.busbw_gbps.toFixed(3).padStart(10)}`);
  for (const m of doc.estimates_from_largest_bucket.models) console.log(`${(m.params / 1e9).toFixed(1)}B: bf16 weight sync ~${m.weight_sync_bf16_s} s, ZeRO-1 step traffic ~${m.zero1_step_fp32_s} s`);
  const file = opt('--json');
  if (file) writeJsonAtomic(file, doc);
}

if (process.env.MURPHY_BENCH_RANK) await rankMain();
else await main();
