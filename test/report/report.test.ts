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
import { gzipSync } from 'node:zlib';
import { readRun, renderReport, writeReport } from '../../lib/report/html.js';
import { lineChart, movingAverage, smoothingWindow } from '../../lib/report/svg.js';
import { sampleTrees, treeFlags, viewerTree } from '../../lib/report/trees.js';
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
    assert.equal(html.match(/<figure class="card/g)?.length, 14, 'one card per metric chart (or a note in its place)');
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

  it('line charts: the legend has its own band above the plot area; integer x ticks on request', () => {
    const names = ['mean reward', 'reward turn 1', 'reward turn 2', 'a much longer series name here', 'and one more'];
    const svg = lineChart(names.map((name, i) => ({ name, points: [[1, i / 5], [2, 1 - i / 5]] })), { title: 't', width: 420 });
    const plotTop = Number(/class="plot-area" x="[\d.]+" y="([\d.]+)"/.exec(svg)![1]);
    const legendYs = [...svg.slice(svg.indexOf('<g class="legend">')).matchAll(/<text x="[\d.]+" y="([\d.]+)"/g)].map((m) => Number(m[1]));
    assert.equal(legendYs.length, names.length);
    assert.ok(Math.max(...legendYs) + 3 <= plotTop, `legend text (baselines ${legendYs}) above the plot top ${plotTop}`);
    const ticks = (o: { integerX?: boolean }): string[] => [...lineChart([{ name: 'k', points: [[1, 0.2], [2, 0.4], [3, 0.5]] }], { title: 'k', ...o }).matchAll(/y="\d+(?:\.\d+)?" text-anchor="middle" class="tick">([^<]+)</g)].map((m) => m[1]!);
    assert.ok(ticks({}).some((t) => t.includes('.')), `without integerX the ticks are fractional: ${ticks({})}`);
    assert.deepEqual(ticks({ integerX: true }), ['1', '2', '3']);
  });

  it('per-step series: a centred moving average drawn over the faint raw series', () => {
    assert.equal(smoothingWindow(30), 1);
    assert.equal(smoothingWindow(500), 21);
    assert.deepEqual(movingAverage([[1, 0], [2, 3], [3, NaN], [4, 6]], 3).map((p) => p[1]), [1.5, 1.5, NaN, 6]);
    const pts: [number, number][] = Array.from({ length: 200 }, (_, i) => [i + 1, i % 2]);
    const svg = lineChart([{ name: 'r', points: pts }], { title: 'r', smooth: true });
    assert.match(svg, /class="raw"[^>]*|stroke-opacity="0.22" class="raw"/);
    assert.match(svg, /class="series smoothed" data-name="r" data-window="9"/);
    assert.equal(lineChart([{ name: 'r', points: pts.slice(0, 20) }], { title: 'r', smooth: true }).includes('smoothed'), false, 'few points: drawn as they are');
  });

  it('features that are off get a note instead of a flat chart; tokens per step is explained', () => {
    const d = readRun(runDir);
    const html = renderReport({ ...d, config: { ...d.config, beta: 0, intraKeep: null, interKeep: null } });
    assert.match(html, /<figure class="card off"><div class="ct">KL to the reference<\/div><p>The KL penalty is off in this run \(beta = 0/);
    assert.match(html, /<figure class="card off"><div class="ct">Pruned fraction of nodes<\/div><p>Pruning is off/);
    assert.match(html, /Trained: tokens through the training pass/);
    const on = renderReport({ ...d, config: { ...d.config, beta: 0.1, intraKeep: 2 } });
    assert.doesNotMatch(on, /The KL penalty is off/);
    assert.doesNotMatch(on, /Pruning is off/);
  });

  it('tree flags: expanded, repaired (a failed attempt with a passing follow-up), still failing', () => {
    const n = (turn: number, parent: number | null, passed: boolean, childGroup: number | null) => ({ turn, parent, passed, childGroup });
    const groups = [{ nodes: [0, 1] }, { nodes: [2, 3] }];
    assert.deepEqual(treeFlags([n(1, null, true, null), n(1, null, false, 1), n(2, 1, false, null), n(2, 1, true, null)], groups), { expanded: true, repaired: true, failing: true });
    assert.deepEqual(treeFlags([n(1, null, true, null), n(1, null, true, null)], [{ nodes: [0, 1] }]), { expanded: false, repaired: false, failing: false });
    assert.deepEqual(treeFlags([n(1, null, false, null)], [{ nodes: [0] }]), { expanded: false, repaired: false, failing: true });
  });

  it('a demo-sized run (500 steps x 8 trees, 16 MB of tree JSON) gives a report under 3 MB that says what it sampled', () => {
    const big = join(work, 'big');
    mkdirSync(big);
    const base = readTreeLines(join(runDir, 'trees.jsonl.gz'));
    const metrics = readRun(runDir).metrics;
    const pad = 'x'.repeat(400);
    const lines: string[] = [];
    for (let step = 1; step <= 500; step++) {
      for (let j = 0; j < 8; j++) {
        const t = structuredClone(base[(step * 8 + j) % base.length]!) as Record<string, unknown> & { nodes: Record<string, unknown>[] };
        t.step = step;
        t.problemId = `prob-${j}`;
        for (const nd of t.nodes) nd.feedback = `${String(nd.feedback)} ${pad}`;
        lines.push(JSON.stringify(t));
      }
    }
    assert.ok(lines.join('\n').length > 15e6, 'as large as the demo\'s trees');
    writeFileSync(join(big, 'trees.jsonl.gz'), gzipSync(lines.join('\n') + '\n'));
    writeFileSync(join(big, 'metrics.jsonl'), Array.from({ length: 500 }, (_, i) => JSON.stringify({ ...metrics[i % metrics.length], step: i + 1 })).join('\n') + '\n');
    const d = readRun(big);
    assert.equal(d.sampling.totalTrees, 4000);
    assert.ok(d.sampling.trees < 4000 && d.sampling.steps < 500);
    assert.deepEqual([d.trees[0]!.step, d.trees.at(-1)!.step], [1, 500], 'first and last steps kept');
    const html = renderReport(d);
    assert.ok(Buffer.byteLength(html) < 3e6, `report is ${Buffer.byteLength(html)} bytes`);
    assert.match(html, new RegExp(`Embedded: the trees of ${d.sampling.steps} of the 500 logged steps.*${d.sampling.trees} of 4000 trees`));
    const all = sampleTrees(base.map(viewerTree), { maxTrees: 4000, maxBytes: 2e6 });
    assert.equal(all.trees.length, base.length);
    assert.match(all.sampling.note, /^All \d+ trees/);
  });

  const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
  const noChromium = chromium ? false : 'chromium not installed (apt-get install chromium): browser check NOT run';
  /**
   * The page's DOM after its scripts ran, and Chromium's stderr. One process (--single-process:
   * the renderer in the browser's process; console messages and uncaught errors still reach
   * stderr): ~0.7 s of CPU a page instead of ~0.95 with its helper processes.
   */
  function dumpDom(url: string): { dom: string; stderr: string } {
    const profile = mkdtempSync(join(work, 'chrome-'));
    const r = spawnSync(chromium!, [
      '--headless', '--single-process', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', `--user-data-dir=${profile}`,
      '--enable-logging=stderr', '--v=0', '--virtual-time-budget=3000', '--dump-dom', url,
    ], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `chromium exited ${r.status}: ${r.stderr?.slice(-2000)}`);
    return { dom: r.stdout, stderr: r.stderr ?? '' };
  }

  it('in Chromium: no legend overlaps its plot area, and the viewer opens on a tree with more than one turn', { skip: noChromium }, () => {
    const html = renderReport(readRun(runDir));
    // Measure the laid-out charts: each legend's box against its plot area and the chart's width.
    const probe = `<script>(function(){ var bad = [];
      document.querySelectorAll('svg.chart').forEach(function(svg){
        var g = svg.querySelector('g.legend'), p = svg.querySelector('rect.plot-area'); if (!g || !p) return;
        var a = g.getBBox(), b = p.getBBox(), w = Number(svg.getAttribute('width'));
        var overlap = a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
        if (overlap || a.x + a.width > w) bad.push(svg.getAttribute('aria-label'));
      });
      document.body.setAttribute('data-legend-checked', String(document.querySelectorAll('g.legend').length));
      document.body.setAttribute('data-legend-bad', bad.join('|'));
      // The viewer's first tree, then the filters and the search at work.
      var tree = document.getElementById('tree');
      document.body.setAttribute('data-first-tree', tree.firstChild ? tree.firstChild.textContent : '');
      var r = document.querySelector('input[name=tree-filter][value=failing]'); r.checked = true; r.dispatchEvent(new Event('change'));
      document.body.setAttribute('data-failing-tree', tree.firstChild ? tree.firstChild.textContent : '');
      document.body.setAttribute('data-failing-count', document.getElementById('match-count').textContent);
      var q = document.getElementById('search'); q.value = 'prob-1'; q.dispatchEvent(new Event('input'));
      document.body.setAttribute('data-search-tree', tree.firstChild ? tree.firstChild.textContent : '');
    })();</script></body>`;
    const page = join(work, 'probe.html');
    writeFileSync(page, html.replace('</body>', probe));
    const { dom, stderr } = dumpDom(pathToFileURL(page).href);
    assert.match(dom, /<body[^>]*data-ready="1"/);
    assert.ok(Number(/data-legend-checked="(\d+)"/.exec(dom)?.[1]) >= 8, 'legends were measured');
    assert.match(dom, /data-legend-bad=""/, 'charts whose legend overlaps the plot or overflows');
    const turns = Number(/<div id="tree" data-turns="(\d+)"/.exec(dom)?.[1]);
    assert.ok(turns > 1, `the first tree shown has ${turns} turn(s)`);
    assert.match(dom, /data-first-tree="[^"]*\(expanded, repaired/, 'it is a repaired tree');
    assert.match(dom, /data-failing-tree="prob-\d at step \d+: [^"]*still failing\)"/, 'the filter shows a still-failing tree');
    const [, shown, all] = /data-failing-count="(\d+) of (\d+) trees match/.exec(dom) ?? [];
    assert.ok(Number(shown) > 0 && Number(shown) < Number(all), `the filter narrows the trees (${shown} of ${all})`);
    assert.match(dom, /data-search-tree="prob-1 at step/, 'the search finds the problem');
    assert.match(dom, /<h3>node \d+ — turn 2 — passed/, 'the repairing attempt is open');
    assert.deepEqual(stderr.split('\n').filter((l) => /Uncaught|SyntaxError|TypeError|ReferenceError/.test(l)), []);
  });

  it('renders in headless Chromium: plots, and the viewer opens a tree node, with no console errors', { skip: noChromium }, () => {
    const path = writeReport(runDir);
    const trees = readTreeLines(join(runDir, 'trees.jsonl.gz'));
    const t = trees.find((x) => x.step === 3)!;
    const nodes = t.nodes as { id: number; code: string | null; feedback: string; pruned: boolean }[];
    const pick = nodes.find((n) => n.pruned) ?? nodes[nodes.length - 1]!;
    const url = `${pathToFileURL(path).href}#tree=3:${encodeURIComponent(String(t.problemId))}:${pick.id}`;
    const { dom, stderr } = dumpDom(url);
    assert.match(dom, /<body[^>]*data-ready="1"/, 'the viewer script ran to the end');
    assert.ok((dom.match(/<svg/g)?.length ?? 0) >= 10, 'plots are in the rendered page');
    assert.match(dom, /id="step-label">step 3</);
    // the chosen node is open: its heading, code and feedback are shown
    assert.match(dom, new RegExp(`<h3>node ${pick.id} — turn`));
    assert.ok(dom.includes('class="code node-feedback"'));
    const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
    assert.ok(dom.includes(esc(pick.feedback)), 'feedback text shown');
    assert.match(dom, /<div id="errors"><\/div>/, 'no page errors');
    const consoleErrors = stderr.split('\n').filter((l) => /CONSOLE|Uncaught|SyntaxError|TypeError|ReferenceError/.test(l) && !/DevTools|dbus|Fontconfig/i.test(l));
    assert.deepEqual(consoleErrors, []);
  });
});
