// `murphy-native report RUN_DIR`: one self-contained HTML file with the run's metrics as
// inline SVG charts, Iter-k curves from its evaluations, and a rollout-tree viewer (vanilla
// JS over tree data embedded as JSON). Opens offline: no external scripts, styles or fonts.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { EvalResultsFile } from '../eval/iterk.js';
import { readMetrics, readTreeLines, RunDir, writeFileAtomic } from '../train/rundir.js';
import { escapeXml, lineChart, type Series } from './svg.js';

export interface ReportData {
  title: string;
  config: Record<string, unknown> | null;
  metrics: Record<string, unknown>[];
  evals: (EvalResultsFile & { file: string })[];
  trees: Record<string, unknown>[];
}

export interface ReportOptions {
  /** Most trees embedded for the viewer (evenly spread over steps). Default 4000. */
  maxTrees?: number;
}

export class ReportError extends Error {
  override name = 'ReportError';
}

/** Reads what the report shows from a run directory. */
export function readRun(dir: string, o: ReportOptions = {}): ReportData {
  const run = new RunDir(dir);
  if (!existsSync(run.root)) throw new ReportError(`run directory ${run.root} does not exist`);
  const config = existsSync(run.configPath) ? (JSON.parse(readFileSync(run.configPath, 'utf8')) as Record<string, unknown>) : null;
  const metrics = readMetrics(run.metricsPath);
  const evals: ReportData['evals'] = [];
  if (existsSync(run.evalDir)) {
    for (const f of readdirSync(run.evalDir).filter((x) => x.endsWith('.json')).sort()) {
      try {
        const e = JSON.parse(readFileSync(join(run.evalDir, f), 'utf8')) as EvalResultsFile;
        if (Array.isArray(e.iterations)) evals.push({ ...e, file: f });
      } catch {
        // not an evaluation file
      }
    }
    evals.sort((a, b) => (a.step ?? 0) - (b.step ?? 0) || a.file.localeCompare(b.file));
  }
  if (!config && metrics.length === 0 && evals.length === 0) throw new ReportError(`${run.root} holds no run (no config.json, metrics.jsonl or eval/*.json)`);
  let trees = readTreeLines(run.treesPath);
  const max = o.maxTrees ?? 4000;
  if (trees.length > max) {
    const stride = trees.length / max;
    trees = Array.from({ length: max }, (_, i) => trees[Math.floor(i * stride)]!);
  }
  return { title: basename(run.root), config, metrics, evals, trees };
}

function num(r: Record<string, unknown>, k: string): number {
  const v = r[k];
  return typeof v === 'number' ? v : NaN;
}
function sub(r: Record<string, unknown>, k: string, j: string): number {
  const v = r[k];
  if (v && typeof v === 'object' && !Array.isArray(v)) return num(v as Record<string, unknown>, j);
  return NaN;
}
function arr(r: Record<string, unknown>, k: string, i: number): number {
  const v = r[k];
  return Array.isArray(v) && typeof v[i] === 'number' ? (v[i] as number) : NaN;
}

/** Chart specs over metrics.jsonl. */
function metricCharts(m: Record<string, unknown>[]): string[] {
  const x = (r: Record<string, unknown>): number => num(r, 'step');
  const line = (name: string, f: (r: Record<string, unknown>) => number): Series => ({ name, points: m.map((r) => [x(r), f(r)]) });
  const turns = Math.max(1, ...m.map((r) => (Array.isArray(r.passAt1PerTurn) ? (r.passAt1PerTurn as unknown[]).length : 0)));
  const perTurn = (k: string, label: string): Series[] => Array.from({ length: turns }, (_, i) => line(`${label} turn ${i + 1}`, (r) => arr(r, k, i)));
  const xl = { xLabel: 'step' };
  return [
    lineChart([line('mean reward', (r) => num(r, 'reward')), ...perTurn('rewardPerTurn', 'reward')], { title: 'Reward', ...xl, yMin: 0, yMax: 1 }),
    lineChart(perTurn('passAt1PerTurn', 'pass@1'), { title: 'pass@1 per turn (training rollouts)', ...xl, yMin: 0, yMax: 1, percent: true }),
    lineChart([line('fixed by a later turn', (r) => num(r, 'fixedLaterFraction')), line('solved (any turn)', (r) => num(r, 'solvedFraction')), line('solved at turn 1', (r) => num(r, 'solvedFirstTurnFraction'))], { title: 'Failures fixed by later turns', ...xl, yMin: 0, yMax: 1, percent: true }),
    lineChart([line('nodes per tree', (r) => num(r, 'nodesPerTree')), line('groups per tree', (r) => num(r, 'groupsPerTree'))], { title: 'Tree size', ...xl }),
    lineChart([line('IntraP', (r) => num(r, 'prunedIntraFraction')), line('InterP', (r) => num(r, 'prunedInterFraction'))], { title: 'Pruned fraction of nodes', ...xl, yMin: 0, percent: true }),
    lineChart([line('sampled', (r) => num(r, 'tokensSampled')), line('trained', (r) => num(r, 'tokensTrained'))], { title: 'Tokens per step', ...xl }),
    lineChart([line('loss', (r) => num(r, 'loss'))], { title: 'Loss', ...xl }),
    lineChart([line('KL', (r) => num(r, 'kl'))], { title: 'KL to the reference', ...xl }),
    lineChart([line('clip (low)', (r) => num(r, 'clipLowFraction')), line('clip (high)', (r) => num(r, 'clipHighFraction'))], { title: 'Clip fractions', ...xl, yMin: 0, percent: true }),
    lineChart([line('grad norm', (r) => num(r, 'gradNorm'))], { title: 'Gradient norm (before clipping)', ...xl }),
    lineChart([line('learning rate', (r) => num(r, 'lr'))], { title: 'Learning rate', ...xl, yMin: 0 }),
    lineChart(
      ['rollout', 'execution', 'training', 'sync'].map((k) => line(k, (r) => sub(r, 'time', k))),
      { title: 'Time per step (s)', ...xl, yMin: 0 },
    ),
    lineChart([line('all tokens / s', (r) => sub(r, 'time', 'tokensPerSecond')), line('trained tokens / s', (r) => sub(r, 'time', 'trainTokensPerSecond'))], { title: 'Throughput', ...xl, yMin: 0 }),
  ];
}

function evalSection(evals: ReportData['evals']): string {
  if (evals.length === 0) return '<p class="muted">No evaluations in this run (eval/*.json).</p>';
  const series: Series[] = evals.map((e) => ({ name: `${e.label ?? e.file}${e.step !== undefined ? ` (step ${e.step})` : ''}`, points: e.iterations.map((p) => [p.k, p.pass1] as [number, number]) }));
  const chart = lineChart(series, { title: 'Iter-k pass@1', xLabel: 'k (attempts with feedback)', yMin: 0, yMax: 1, percent: true, width: 520, height: 280 });
  const K = Math.max(...evals.map((e) => e.iterations.length));
  const head = `<tr><th>evaluation</th><th>dataset</th><th>problems</th>${Array.from({ length: K }, (_, i) => `<th>k=${i + 1}</th>`).join('')}</tr>`;
  const rows = evals
    .map((e) => {
      const cells = Array.from({ length: K }, (_, i) => {
        const p = e.iterations[i];
        return `<td>${p ? `${(100 * p.pass1).toFixed(1)}% <span class="muted">(${p.solved})</span>` : ''}</td>`;
      }).join('');
      const groups = Object.entries(e.byGroup ?? {})
        .map(([g, v]) => `<tr class="sub"><td>&nbsp;&nbsp;${escapeXml(g)}</td><td></td><td>${v.problems}</td>${Array.from({ length: K }, (_, i) => `<td>${v.iterations[i] ? `${(100 * v.iterations[i]!.pass1).toFixed(1)}%` : ''}</td>`).join('')}</tr>`)
        .join('');
      return `<tr><td>${escapeXml(e.label ?? e.file)}${e.step !== undefined ? ` <span class="muted">step ${e.step}</span>` : ''}</td><td>${escapeXml(e.dataset)}</td><td>${e.problems}</td>${cells}</tr>${groups}`;
    })
    .join('');
  return `<div class="charts">${chart}</div><table class="evals">${head}${rows}</table>`;
}

/** JSON for a <script type="application/json"> block (no "</script" can appear). */
function embedJson(v: unknown): string {
  return JSON.stringify(v).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

const CSS = `
body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 40px;color:#222;background:#fff}
h1{font-size:20px;margin:18px 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd}
.muted{color:#888}.charts{display:flex;flex-wrap:wrap;gap:10px}
.chart{border:1px solid #eee;background:#fcfcfc}.ct{font-size:13px;font-weight:600}.tick,.leg,.lbl{font-size:10px;fill:#555}
.grid{stroke:#eee}.axis{stroke:#999}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-size:13px}
tr.sub td{color:#666;font-size:12px}
details.cfg pre{max-height:320px;overflow:auto;background:#f6f6f6;padding:8px}
#viewer{display:flex;gap:16px;align-items:flex-start}#tree{min-width:360px;max-height:640px;overflow:auto;border:1px solid #eee;padding:6px}
#node{flex:1;border:1px solid #eee;padding:8px;min-height:200px}
ul.t{list-style:none;padding-left:18px;margin:0}ul.t>li{margin:2px 0}
.n{cursor:pointer;padding:1px 5px;border-radius:3px;font-family:ui-monospace,monospace;font-size:12px}
.n.pass{background:#dff5df}.n.fail{background:#fbe3e3}.n.pruned{opacity:.45;text-decoration:line-through}.n.sel{outline:2px solid #1f77b4}
pre.code{background:#f6f6f6;padding:6px;white-space:pre-wrap;font-size:12px}
#errors{color:#b00}
`;

const VIEWER_JS = `
(function(){
  var trees = JSON.parse(document.getElementById('tree-data').textContent);
  var stepSel = document.getElementById('step'), probSel = document.getElementById('problem');
  var treeBox = document.getElementById('tree'), nodeBox = document.getElementById('node');
  var byStep = {};
  trees.forEach(function(t, i){ var s = String(t.step); (byStep[s] = byStep[s] || []).push(i); });
  var steps = Object.keys(byStep).sort(function(a,b){return a-b;});
  function el(tag, cls, text){ var e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
  function fmt(x){ return (x === null || x === undefined) ? '—' : (typeof x === 'number' ? (Math.round(x*1000)/1000).toString() : String(x)); }
  steps.forEach(function(s){ var o = el('option', null, 'step ' + s); o.value = s; stepSel.appendChild(o); });
  function fillProblems(){
    probSel.innerHTML = '';
    (byStep[stepSel.value] || []).forEach(function(i){ var o = el('option', null, trees[i].problemId); o.value = String(i); probSel.appendChild(o); });
  }
  function showNode(t, id){
    var n = t.nodes[id]; nodeBox.innerHTML = '';
    Array.prototype.forEach.call(treeBox.querySelectorAll('.n'), function(e){ e.classList.toggle('sel', e.dataset.id === String(id)); });
    nodeBox.appendChild(el('h3', null, 'node ' + n.id + ' — turn ' + n.turn + (n.passed ? ' — passed' : ' — failed') + (n.pruned ? ' — pruned (' + (n.prunedBy || '') + ')' : '')));
    var tbl = el('table'); [['reward', n.reward], ['credit', n.credit], ['advantage', n.advantage], ['pruned', n.pruned ? (n.prunedBy || 'yes') : 'no'], ['group', n.group], ['parent', n.parent], ['completion tokens', n.completionTokens], ['prompt tokens', n.promptTokens], ['finish', n.finishReason]].forEach(function(r){ var tr = el('tr'); tr.appendChild(el('th', null, r[0])); tr.appendChild(el('td', null, fmt(r[1]))); tbl.appendChild(tr); });
    nodeBox.appendChild(tbl);
    nodeBox.appendChild(el('h4', null, 'code')); nodeBox.appendChild(el('pre', 'code node-code', n.code === null ? '(no code found)' : n.code));
    nodeBox.appendChild(el('h4', null, 'feedback')); nodeBox.appendChild(el('pre', 'code node-feedback', n.feedback));
    nodeBox.appendChild(el('h4', null, 'completion text')); nodeBox.appendChild(el('pre', 'code', n.text));
  }
  function renderGroup(t, gid){
    var ul = el('ul', 't');
    t.groups[gid].nodes.forEach(function(id){
      var n = t.nodes[id], li = el('li');
      var tag = el('span', 'n ' + (n.passed ? 'pass' : 'fail') + (n.pruned ? ' pruned' : ''), '#' + n.id + ' r=' + fmt(n.reward) + ' R=' + fmt(n.credit) + ' A=' + fmt(n.advantage));
      tag.dataset.id = String(id); tag.title = n.code || '';
      tag.addEventListener('click', function(){ showNode(t, id); });
      li.appendChild(tag);
      if (n.childGroup !== null && n.childGroup !== undefined) li.appendChild(renderGroup(t, n.childGroup));
      ul.appendChild(li);
    });
    return ul;
  }
  function showTree(node){
    var t = trees[Number(probSel.value)]; treeBox.innerHTML = ''; nodeBox.innerHTML = '';
    if (!t) { treeBox.textContent = 'no trees'; return; }
    treeBox.appendChild(el('div', 'muted', t.problemId + ': ' + t.nodes.length + ' nodes, ' + t.groups.length + ' groups, S = ' + t.maxTurns));
    treeBox.appendChild(renderGroup(t, 0));
    showNode(t, node === undefined ? 0 : node);
  }
  stepSel.addEventListener('change', function(){ fillProblems(); showTree(); });
  probSel.addEventListener('change', function(){ showTree(); });
  if (steps.length === 0) { treeBox.textContent = 'No rollout trees in this run (trees.jsonl.gz).'; document.body.setAttribute('data-ready', '1'); return; }
  // #tree=STEP:PROBLEM_ID:NODE opens a given node.
  var m = /^#tree=([^:]+):(.+):(\\d+)$/.exec(decodeURIComponent(location.hash || ''));
  stepSel.value = m && byStep[m[1]] ? m[1] : steps[steps.length - 1];
  fillProblems();
  var node;
  if (m) { (byStep[stepSel.value] || []).forEach(function(i){ if (trees[i].problemId === m[2]) { probSel.value = String(i); node = Number(m[3]); } }); }
  showTree(node);
  document.body.setAttribute('data-ready', '1');
})();
`;

/** The report as one HTML string. */
export function renderReport(d: ReportData): string {
  const last = d.metrics[d.metrics.length - 1];
  const summary = last
    ? `<p>${d.metrics.length} steps. Last step: reward ${num(last, 'reward').toFixed(3)}, pass@1 per turn ${(last.passAt1PerTurn as number[] | undefined)?.map((p) => `${(100 * p).toFixed(0)}%`).join(' / ') ?? '—'}.</p>`
    : '<p class="muted">No training steps recorded (metrics.jsonl).</p>';
  const cfg = d.config ? `<details class="cfg"><summary>configuration</summary><pre>${escapeXml(JSON.stringify(d.config, null, 2))}</pre></details>` : '';
  const charts = d.metrics.length ? `<div class="charts" id="metric-charts">${metricCharts(d.metrics).join('')}</div>` : '';
  const viewerTrees = d.trees.map((t) => ({ step: t.step, problemId: t.problemId, maxTurns: t.maxTurns, groups: t.groups, nodes: t.nodes }));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>murphy-native report — ${escapeXml(d.title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>${CSS}</style></head>
<body>
<div id="errors"></div>
<script>window.addEventListener('error', function(e){ var x = document.getElementById('errors'); if (x) x.textContent += 'error: ' + e.message + '\\n'; });</script>
<h1>murphy-native run: ${escapeXml(d.title)}</h1>
${summary}${cfg}
<h2>Training metrics</h2>
${charts}
<h2>Iter-k evaluation</h2>
<div id="evals">${evalSection(d.evals)}</div>
<h2>Rollout trees</h2>
<p>Pick a step and a problem; click a node to see its code, the executor's feedback, reward r, credit R, advantage A and whether it was pruned. Green: passed; red: failed; struck through: pruned.</p>
<div><label>step <select id="step"></select></label> <label>problem <select id="problem"></select></label></div>
<div id="viewer"><div id="tree"></div><div id="node"></div></div>
<script type="application/json" id="tree-data">${embedJson(viewerTrees)}</script>
<script>${VIEWER_JS}</script>
</body></html>
`;
}

/** Writes RUN/report.html (or `out`) atomically; returns its path. */
export function writeReport(runDir: string, out?: string, o: ReportOptions = {}): string {
  const d = readRun(runDir, o);
  const path = out ?? new RunDir(runDir).reportPath;
  writeFileAtomic(path, renderReport(d));
  return path;
}
