// Markdown tables from the results JSON, for bench/results/README.md and README.md:
// `node --import tsx bench/tables.ts [bench/results/cpu-kernels.json] [bench/results/model.json] [bench/results/gemm.json ...]`
// (every further argument: a gemm.bench.ts result, wall time or --cpu-time).
import { readFileSync } from 'node:fs';

const [kernelsPath = 'bench/results/cpu-kernels.json', modelPath = 'bench/results/model.json', ...gemmPaths] = process.argv.slice(2);
const f = (x: number | null | undefined, d = 1) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d));

interface Peer { torch_version: string; blas: string; threads: number; fair: boolean; unfair_reason: string | null; blas_libraries: { real: string }[]; openblas_core?: string | null }
/** OpenBLAS's kernels (recorded since 2026-12-01 14:30; earlier files do not say, and may have run with OPENBLAS_CORETYPE=Haswell forced). */
const coreText = (p: Peer) => (p.blas !== 'openblas' ? '' : p.openblas_core ? `, ${p.openblas_core} kernels` : ', kernels not recorded')
const peerLine = (p: Peer | null) => (p === null ? 'PyTorch: not run'
  : `PyTorch ${p.torch_version} on ${p.blas} BLAS (${p.blas_libraries.map((l) => l.real.split('/').pop()).join(', ')}${coreText(p)}), ${p.threads} threads${p.fair ? '' : ` — NOT fair: ${p.unfair_reason}`}`);
const machineLine = (m: Record<string, unknown>, date: string) => `${date.slice(0, 16).replace('T', ' ')} UTC; ${m.cpu}${m.cpu_family ? ` (family ${m.cpu_family} model ${m.cpu_model}, ${(m.cpu_simd as string[]).join(' ')})` : ''}, ${m.cores} cores, ${m.memory_gib} GiB, ${m.os}, Node ${m.node}; load average at the end of the run ${(m.load_average_1_5_15 as number[]).join(" / ")} (1/5/15 min)`;

const k = JSON.parse(readFileSync(kernelsPath, 'utf8'));
console.log(`### ${kernelsPath}\n\n${machineLine(k.machine, k.date)}; ${peerLine(k.torch_peer)}\n`);
console.log('| probe | access | threads | GB/s |\n|---|---|---|---|');
for (const p of k.floor.parts) console.log(`| ${p.kernel}${p.variant ? ` (= ${p.variant})` : ''} | ${p.access ?? '-'} | ${p.threads} | ${f(p.gbps)} |`);
const acc = k.floor.by_access;
console.log(`\nFloor: ${f(k.floor.best.gbps)} GB/s (${k.floor.best.kernel}, ${k.floor.best.threads} threads)${acc ? `; best per access pattern: read ${f(acc.read.gbps)}, copy ${f(acc.copy.gbps)}, in place ${f(acc.inplace.gbps)}` : ''}.\n`);
console.log('| kernel | shape | median ms | GB/s | of floor | of own pattern | of roofline | vs plain TS | vs PyTorch |\n|---|---|---|---|---|---|---|---|---|');
for (const r of k.cases) {
  const own = r.access_ratio === undefined ? '-' : `${(r.access_ratio * 100).toFixed(0)}% (${r.access})`;
  const roof = r.roofline_ratio === undefined ? '-' : `${(r.roofline_ratio * 100).toFixed(0)}% (${r.bound})`;
  console.log(`| ${r.name} | ${r.shape} | ${f(r.median_ms, 2)} | ${f(r.gbps)} | ${(r.floor_ratio * 100).toFixed(0)}% | ${own} | ${roof} | ${r.baseline_ratio === null ? '-' : `${f(r.baseline_ratio)}x`} | ${r.torch_ratio === null ? '-' : `${f(r.torch_ratio)}x`} |`);
}

const m = JSON.parse(readFileSync(modelPath, 'utf8'));
console.log(`\n### ${modelPath}\n\n${machineLine(m.machine, m.date)}; ${peerLine(m.torch_peer)}\n`);
console.log('| config | metric | native | PyTorch | native / PyTorch |\n|---|---|---|---|---|');
for (const r of m.rows) console.log(`| ${r.name} | ${r.metric} | ${f(r.native)} | ${f(r.torch)} | ${r.torch_ratio === null ? '-' : `${f(r.torch_ratio, 2)}x`} |`);
if (m.gemm_peer) {
  console.log('\n| GEMM (m x k x n) | torch.mm GFLOP/s | numpy GFLOP/s |\n|---|---|---|');
  for (const g of m.gemm_peer.shapes) console.log(`| ${g.name} (${g.m} x ${g.k} x ${g.n}) | ${f(g.torch_gflops)} | ${f(g.numpy_gflops)} |`);
}

for (const gp of gemmPaths) {
  const g = JSON.parse(readFileSync(gp, 'utf8'));
  console.log(`\n### ${gp}\n\n${machineLine(g.machine, g.date)} (at the start ${(g.load_average_at_start as number[]).join(' / ')}); ${peerLine(g.torch_peer)}; ${g.clock}, best of ${g.rounds} rounds; native path ${g.native_path}\n`);
  console.log('| product (m x k x n) | load | native fp32 GFLOP/s | native bf16 GFLOP/s | OpenBLAS GFLOP/s | fp32 / OpenBLAS | bf16 / fp32 |\n|---|---|---|---|---|---|---|');
  for (const r of g.rows) console.log(`| ${r.name} (${r.m} x ${r.k} x ${r.n}) | ${f(r.load_1min)} | ${f(r.native_f32_gflops)} | ${f(r.native_bf16_gflops)} | ${f(r.peer_gflops)} | ${f(r.f32_vs_openblas, 2)} | ${f(r.bf16_vs_f32, 2)} |`);
}
