// The HTML report: content from a real (fake-policy) run, and in headless Chromium: it
// renders, shows the plots, and the tree viewer opens a node without console errors.
// Chromium comes from Debian's `chromium` package; without it the browser test is skipped
// (with a message saying so), never passed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { defaultConfig } from '../../lib/config/index.js';
import type { EvalResultsFile } from '../../lib/eval/iterk.js';
import { FakeExecutor, FakePromptBuilder } from '../../lib/murphy/index.js';
import { readRun, renderReport, writeReport } from '../../lib/report/html.js';
import { lineChart } from '../../lib/report/svg.js';
import { train } from '../../lib/train/loop.js';
import { readTreeLines, RunDir } from '../../lib/train/rundir.js';
import { FakeBackend, FakePolicy } from '../train/fakes.js';

const work = mkdtempSync(join(tmpdir(), 'murphy-report-'));
const runDir = join(work, 'run');
after(() => rmSync(work, { recursive: true, force: true }));

before(async () => {
  const c = { ...defaultConfig(), maxSteps: 4, saveSteps: 10, batchSize: 3, numGenerations: 3, learningRate: 0.05, intraKeep: 2 };
  const policy = new FakePolicy();
  const problems = Array.from({ length: 6 }, (_, i) => ({ id: `prob-${i}` }));
  await train(c, new RunDir(runDir), { policy, backend: new FakeBackend(policy), executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems }, { handleSignals: false });
  writeFileSync(join(runDir, 'config.json'), JSON.stringify(c));
  mkdirSync(join(runDir, 'eval'), { recursive: true });
  for (const [label, step, p] of [['initial', 0, [0.1, 0.2, 0.25]], ['final', 4, [0.3, 0.5, 0.6]]] as const) {
    const e: EvalResultsFile = {
      version: 1, label, step, dataset: 'toy', model: 'fake', settings: { k: 3, n: 1, temperature: 0, seed: 0, backend: 'fake', feedback: 'visible tests' },
      problems: 10, iterations: p.map((x, i) => ({ k: i + 1, pass1: x, solved: x * 10 })), perProblem: [], seconds: 0, createdAt: new Date(0).toISOString(),
    };
    writeFileSync(join(runDir, 'eval', `${label}.json`), JSON.stringify(e));
  }
});

describe('report', () => {
  it('line charts are plain SVG with one path per series', () => {
    const svg = lineChart([{ name: 'a', points: [[1, 0.5], [2, NaN], [3, 1]] }, { name: 'b<&>', points: [] }], { title: 'T & t' });
    assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.equal(svg.match(/<path /g)?.length, 1);
    assert.match(svg, /T &amp; t/);
    assert.match(svg, /b&lt;&amp;&gt;/);
  });

  it('embeds metrics plots, Iter-k curves and every tree, self-contained', () => {
    const d = readRun(runDir);
    assert.equal(d.metrics.length, 4);
    assert.equal(d.evals.length, 2);
    assert.equal(d.trees.length, readTreeLines(join(runDir, 'trees.jsonl.gz')).length);
    const html = renderReport(d);
    assert.ok((html.match(/<svg/g)?.length ?? 0) >= 13);
    assert.match(html, /Iter-k pass@1/);
    assert.match(html, /60\.0%/);
    assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!www\.w3\.org)/);
    const path = writeReport(runDir);
    assert.equal(path, join(runDir, 'report.html'));
    assert.ok(readFileSync(path, 'utf8').includes('id="tree-data"'));
  });

  it('errors clearly on a directory without a run', () => {
    mkdirSync(join(work, 'empty'));
    assert.throws(() => readRun(join(work, 'empty')), /holds no run/);
    assert.throws(() => readRun(join(work, 'missing')), /does not exist/);
  });

  const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
  it('renders in headless Chromium: plots, and the viewer opens a tree node, with no console errors', { skip: chromium ? false : 'chromium not installed (apt-get install chromium): browser check NOT run' }, () => {
    const path = writeReport(runDir);
    const trees = readTreeLines(join(runDir, 'trees.jsonl.gz'));
    const t = trees.find((x) => x.step === 3)!;
    const nodes = t.nodes as { id: number; code: string | null; feedback: string; pruned: boolean }[];
    const pick = nodes.find((n) => n.pruned) ?? nodes[nodes.length - 1]!;
    const url = `${pathToFileURL(path).href}#tree=3:${encodeURIComponent(String(t.problemId))}:${pick.id}`;
    const profile = mkdtempSync(join(work, 'chrome-'));
    const r = spawnSync(chromium!, [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', `--user-data-dir=${profile}`,
      '--enable-logging=stderr', '--v=0', '--virtual-time-budget=3000', '--dump-dom', url,
    ], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `chromium exited ${r.status}: ${r.stderr?.slice(-2000)}`);
    const dom = r.stdout;
    assert.match(dom, /<body[^>]*data-ready="1"/, 'the viewer script ran to the end');
    assert.ok((dom.match(/<svg/g)?.length ?? 0) >= 13, 'plots are in the rendered page');
    assert.match(dom, /<select id="step">[\s\S]*<option value="3"/);
    // the chosen node is open: its heading, code and feedback are shown
    assert.match(dom, new RegExp(`<h3>node ${pick.id} — turn`));
    assert.ok(dom.includes('class="code node-feedback"'));
    const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
    assert.ok(dom.includes(esc(pick.feedback)), 'feedback text shown');
    assert.match(dom, /<div id="errors"><\/div>/, 'no page errors');
    const consoleErrors = (r.stderr ?? '').split('\n').filter((l) => /CONSOLE|Uncaught|SyntaxError|TypeError|ReferenceError/.test(l) && !/DevTools|dbus|Fontconfig/i.test(l));
    assert.deepEqual(consoleErrors, []);
  });
});
