// Plots of gemm.bench.ts results, as one SVG file:
//   node --import tsx bench/plot-gemm.ts FILE [FILE ...] --out OUT.svg
// Two bar charts over the model's matrix products, one bar per FILE and product: bf16 weights /
// native fp32 (issue 16's goal, 1.6x, drawn as a line), and native fp32 / OpenBLAS (goal 0.9x).
// Each file is labelled with its native path and time (e.g. "amx-bf16, 21:16 UTC"); products
// are matched by name, and one a file lacks is left out of its series.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { barChart, CHART_STYLE } from '../lib/report/svg.js';
import { writeFileAtomic } from '../lib/train/rundir.js';
import { cliArgs } from './common.js';

export interface GemmRow { name: string; bf16_vs_f32: number | null; f32_vs_openblas: number | null }
export interface GemmResult { date: string; native_path?: string; machine: { cpu: string }; rows: GemmRow[] }

const WIDTH = 900;
const HEIGHT = 380;

/** The two charts of `results` (gemm.bench.ts JSON documents, in the order given), one above the other, as an SVG file's text. */
export function gemmPlot(results: readonly GemmResult[]): string {
  if (results.length === 0) throw new Error('plot-gemm: no result files');
  const label = (r: GemmResult) => `${r.native_path ?? 'native'}, ${r.date.slice(11, 16)} UTC`;
  const names = [...new Set(results.flatMap((r) => r.rows.map((row) => row.name)))];
  const value = (r: GemmResult, n: string, key: 'bf16_vs_f32' | 'f32_vs_openblas') => r.rows.find((row) => row.name === n)?.[key] ?? NaN;
  const bf16Names = names.filter((n) => results.some((r) => Number.isFinite(value(r, n, 'bf16_vs_f32'))));
  const bf16 = barChart(bf16Names, results.map((r) => ({ name: label(r), values: bf16Names.map((n) => value(r, n, 'bf16_vs_f32')) })),
    { title: `bf16 weights / native fp32 (${results[0]!.machine.cpu})`, yLabel: 'x native fp32', width: WIDTH, height: HEIGHT, ref: { y: 1.6, label: 'goal 1.6x' } });
  const f32 = barChart(names, results.map((r) => ({ name: label(r), values: names.map((n) => value(r, n, 'f32_vs_openblas')) })),
    { title: 'native fp32 / OpenBLAS', yLabel: 'x OpenBLAS', width: WIDTH, height: HEIGHT, ref: { y: 0.9, label: 'goal 0.9x' } });
  const inner = (svg: string) => svg.replace(/^<svg[^>]*>/, '').replace(/<\/svg>$/, '');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${2 * HEIGHT}" viewBox="0 0 ${WIDTH} ${2 * HEIGHT}">`
    + `<style>${CHART_STYLE}</style><rect width="${WIDTH}" height="${2 * HEIGHT}" fill="#fcfcfc"/>`
    + `<svg y="0" class="chart">${inner(bf16)}</svg><svg y="${HEIGHT}" class="chart">${inner(f32)}</svg></svg>\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { argv, opt } = cliArgs();
  const out = opt('--out');
  const files = argv.filter((a, i) => !a.startsWith('--') && argv[i - 1] !== '--out');
  if (!out || files.length === 0) {
    console.error('usage: node --import tsx bench/plot-gemm.ts FILE [FILE ...] --out OUT.svg (FILE: a gemm.bench.ts --json result)');
    process.exit(2);
  }
  writeFileAtomic(out, gemmPlot(files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as GemmResult)));
  console.log(`plot-gemm: wrote ${out} from ${files.length} file(s)`);
}
