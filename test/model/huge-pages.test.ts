// The engine's parameter-sized buffers (weights, gradients, AdamW moments) ask the kernel for
// 2 MiB pages (native/include/murphy/model/big_buffer.h: aligned to 2 MiB and MADV_HUGEPAGE), so
// that under transparent huge pages in "madvise" mode they are backed by huge pages at first
// touch; MURPHY_HUGE_PAGES=0 leaves the advice out. Each case runs in a child process (the
// variable is read by the native code, and a process's huge-page count is its own) and reports
// AnonHugePages (/proc/self/smaps_rollup) before and after a model with 20 MiB of weights and one
// training step (gradients and moments of the same size).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { TS_LOADER } from '../helpers/cli.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const thpFile = '/sys/kernel/mm/transparent_hugepage/enabled';
const thp = existsSync(thpFile) ? /\[(\w+)\]/.exec(readFileSync(thpFile, 'utf8'))?.[1] ?? '' : '';
const smaps = existsSync('/proc/self/smaps_rollup');

const script = `
import { readFileSync } from 'node:fs';
import { PolicyModel, packSequences } from ${JSON.stringify(`${root}lib/model/index.ts`)};
const huge = () => Number(/AnonHugePages:\\s+(\\d+)/.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'))?.[1] ?? 0) * 1024;
const before = huge();
const sizes = { modelType: 'qwen3', vocabSize: 8192, hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4,
  numKvHeads: 2, headDim: 64, maxPositionEmbeddings: 256, tieWordEmbeddings: false, dtype: 'float32' };
const m = await PolicyModel.random(sizes, { seed: 1 });
await m.accumulate(packSequences([[1, 2, 3, 4, 5, 6, 7, 8]]), { crossEntropy: true });
await m.optimizerStep({ lr: 1e-4, maxGradNorm: 1 });
process.stdout.write(JSON.stringify({ before, after: huge(), weights: m.memory().weights }));
`;

function run(env: Record<string, string>): { before: number; after: number; weights: number } {
  const r = spawnSync(process.execPath, [...TS_LOADER, '--input-type=module', '-e', script], {
    cwd: root, encoding: 'utf8', timeout: 120_000, env: { ...process.env, ...env },
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

const MiB = 2 ** 20;
describe('huge pages for the engine buffers', () => {
  const why = !smaps ? 'no /proc/self/smaps_rollup here' : !thp ? `no ${thpFile} here` : thp === 'never' ? 'transparent huge pages are off here ("never")' : false;
  it(`weights, gradients and moments are on 2 MiB pages (transparent huge pages: ${thp || 'unknown'})`, { skip: why }, () => {
    const r = run({});
    assert.ok(r.weights >= 16 * MiB, `the model's weights are ${r.weights} bytes`);
    // weights + gradients + two moments: 4 x 20 MiB; the kernel may back a few 2 MiB ranges with
    // small pages when it has no free huge page at hand, so ask for half
    assert.ok(r.after - r.before >= 2 * r.weights, `AnonHugePages grew by ${(r.after - r.before) / MiB} MiB, weights ${r.weights / MiB} MiB`);
  });
  it('MURPHY_HUGE_PAGES=0 leaves them on the kernel\'s default pages', { skip: why || (thp !== 'madvise' ? `only "madvise" mode tells the two apart (here: ${thp})` : false) }, () => {
    const r = run({ MURPHY_HUGE_PAGES: '0' });
    assert.ok(r.after - r.before < 4 * MiB, `AnonHugePages grew by ${(r.after - r.before) / MiB} MiB with the advice off`);
  });
});
