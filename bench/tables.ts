// Markdown tables from the results JSON, for bench/results/README.md and README.md:
// `node --import tsx bench/tables.ts [bench/results/cpu-kernels.json] [bench/results/model.json]`.
import { readFileSync } from 'node:fs';

const [kernelsPath = 'bench/results/cpu-kernels.json', modelPath = 'bench/results/model.json'] = process.argv.slice(2);
const f = (x: number | null | undefined, d = 1) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d));

interface Peer { torch_version: string; blas: string; threads: number; fair: boolean; unfair_reason: string | null; blas_libraries: { real: string }[] }
const peerLine = (p: Peer | null) => (p === null ? 'PyTorch: not run'
  : `PyTorch ${p.torch_version} on ${p.blas} BLAS (${p.blas_libraries.map((l) => l.real.split('/').pop()).join(', ')}), ${p.threads} threads${p.fair ? '' : ` — NOT fair: ${p.unfair_reason}`}`);
const machineLine = (m: Record<string, unknown>, date: string) => `${date.slice(0, 16).replace('T', ' ')} UTC; ${m.cpu}, ${m.cores} cores, ${m.memory_gib} GiB, ${m.os}, Node ${m.node}; load average at the end of the run ${(m.load_average_1_5_15 as number[]).join(" / ")} (1/5/15 min)`;

const k = JSON.parse(readFileSync(kernelsPath, 'utf8'));
console.log(`### ${kernelsPath}\n\n${machineLine(k.machine, k.date)}; ${peerLine(k.torch_peer)}\n`);
console.log('| probe | threads | GB/s |\n|---|---|---|');
for (const p of k.floor.parts) console.log(`| ${p.kernel} | ${p.threads} | ${f(p.gbps)} |`);
console.log(`\nFloor: ${f(k.floor.best.gbps)} GB/s (${k.floor.best.kernel}, ${k.floor.best.threads} threads).\n`);
console.log('| kernel | shape | median ms | GB/s | of floor | vs plain TS | vs PyTorch |\n|---|---|---|---|---|---|---|');
for (const r of k.cases) {
  console.log(`| ${r.name} | ${r.shape} | ${f(r.median_ms, 2)} | ${f(r.gbps)} | ${(r.floor_ratio * 100).toFixed(0)}% | ${r.baseline_ratio === null ? '-' : `${f(r.baseline_ratio)}x`} | ${r.torch_ratio === null ? '-' : `${f(r.torch_ratio)}x`} |`);
}

const m = JSON.parse(readFileSync(modelPath, 'utf8'));
console.log(`\n### ${modelPath}\n\n${machineLine(m.machine, m.date)}; ${peerLine(m.torch_peer)}\n`);
console.log('| config | metric | native | PyTorch | native / PyTorch |\n|---|---|---|---|---|');
for (const r of m.rows) console.log(`| ${r.name} | ${r.metric} | ${f(r.native)} | ${f(r.torch)} | ${r.torch_ratio === null ? '-' : `${f(r.torch_ratio, 2)}x`} |`);
if (m.gemm_peer) {
  console.log('\n| GEMM (m x k x n) | torch.mm GFLOP/s | numpy GFLOP/s |\n|---|---|---|');
  for (const g of m.gemm_peer.shapes) console.log(`| ${g.name} (${g.m} x ${g.k} x ${g.n}) | ${f(g.torch_gflops)} | ${f(g.numpy_gflops)} |`);
}
