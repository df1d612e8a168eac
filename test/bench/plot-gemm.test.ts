// bench/plot-gemm.ts and the bar chart under it (lib/report/svg.ts): one bar per result file and
// product, NaN left out, the goal lines, labels escaped; on the session's two Xeon result files.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gemmPlot, type GemmResult } from '../../bench/plot-gemm.js';
import { barChart } from '../../lib/report/svg.js';

const results = ['xeon-2026-12-07-2102-gemm.json', 'xeon-2026-12-07-2115-gemm.json']
  .map((f) => JSON.parse(readFileSync(fileURLToPath(new URL(`../../bench/results/${f}`, import.meta.url)), 'utf8')) as GemmResult);
const bars = (svg: string) => [...svg.matchAll(/<rect class="bar"[^>]*><title>([^<]*)<\/title>/g)].map((m) => m[1]!);

describe('bench/plot-gemm.ts', () => {
  it('bar charts: one bar per finite value, the reference line, escaped labels, a standalone style on request', () => {
    const svg = barChart(['a<b', 'c'], [{ name: 'x&y', values: [1, NaN] }, { name: 'z', values: [2, 0.5] }], { title: 't', ref: { y: 1.6, label: 'goal' }, standalone: true });
    assert.deepEqual(bars(svg), ['x&amp;y, a&lt;b: 1', 'z, a&lt;b: 2', 'z, c: 0.5']);
    assert.match(svg, /class="ref"\/><text[^>]*>goal</);
    assert.match(svg, /<style>.*\.ref\{/);
    assert.doesNotMatch(barChart(['c'], [{ name: 'z', values: [1] }], { title: 't' }), /<style>|class="ref"/);
    // taller bars for bigger values, all standing on the same baseline
    const r = [...svg.matchAll(/<rect class="bar" x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)"/g)].map((m) => [Number(m[1]), Number(m[2])]);
    assert.ok(r[1]![1] > r[0]![1] && r[0]![1] > r[2]![1]);
    assert.ok(r.every(([y, h]) => Math.abs(y! + h! - (r[0]![0]! + r[0]![1]!)) < 0.2));
  });

  it('plots the bf16 products (20) and all products (28) for each file, labelled with its path and time', () => {
    const svg = gemmPlot(results);
    const b = bars(svg);
    const bf16 = results.map((r) => r.rows.filter((row) => row.bf16_vs_f32 !== null).length);
    assert.deepEqual(bf16, [20, 20]);
    assert.equal(b.length, 2 * 20 + 2 * 28);
    assert.ok(b.includes(`amx-bf16, 21:16 UTC, qwen3-0.6b-2layers gate/up fwd: ${Number(results[1]!.rows.find((r) => r.name === 'qwen3-0.6b-2layers gate/up fwd')!.bf16_vs_f32!.toPrecision(3))}`), b.slice(0, 3).join('; '));
    assert.ok(b.some((t) => t.startsWith('avx512-bf16, 21:04 UTC, small q fwd: ')));
    assert.match(svg, /goal 1\.6x/);
    assert.match(svg, /goal 0\.9x/);
    assert.throws(() => gemmPlot([]), /no result files/);
  });
});
