// README.md's benchmark summary is the one bench/summary.ts generates from bench/results/: the
// README's numbers cannot drift from the result files.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { END, START, summaryFromResults, withSummary } from '../../bench/summary.js';

const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');

test('README.md holds the summary generated from bench/results/ (regenerate: node --import tsx bench/summary.ts --write)', () => {
  assert.equal(withSummary(readme, summaryFromResults()), readme);
});

test('the summary block is replaced between its markers, and a README without them is refused', () => {
  const text = `a\n${START}\nold\n${END}\nb\n`;
  assert.equal(withSummary(text, 'new'), `a\n${START}\nnew\n${END}\nb\n`);
  assert.throws(() => withSummary('no markers', 'x'), /README.md lacks the markers/);
});
