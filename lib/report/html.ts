// `murphy-native report RUN_DIR`: one self-contained HTML file with the run's metrics as
// inline SVG charts, Iter-k curves from its evaluations, and a rollout-tree viewer (vanilla
// JS over tree data embedded as JSON). Opens offline: no external scripts, styles or fonts.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { EvalResultsFile } from '../eval/iterk.js';
import { readMetrics, readTreeLines, RunDir, writeFileAtomic } from '../train/rundir.js';
import { escapeXml, lineChart, smoothingWindow, type Series } from './svg.js';
import { sampleTrees, viewerTree, type TreeSampling, type ViewerTree } from './trees.js';

export interface ReportData {
  title: string;
  config: Record<string, unknown> | null;
  metrics: Record<string, unknown>[];
  evals: (EvalResultsFile & { file: string })[];
  /** The trees embedded for the viewer (a sample of the run's, see `sampling`). */
  trees: ViewerTree[];
  sampling: TreeSampling;
}

export interface ReportOptions {
  /** Most trees embedded for the viewer. Default 4000. */
  maxTrees?: number;
  /** Most bytes of tree JSON embedded (whole steps, evenly spread, are kept). Default 2,000,000. */
  maxTreeBytes?: number;
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
  const { trees, sampling } = sampleTrees(readTreeLines(run.treesPath).map(viewerTree), { maxTrees: o.maxTrees ?? 4000, maxBytes: o.maxTreeBytes ?? 2_000_000 });
  return { title: basename(run.root), config, metrics, evals, trees, sampling };
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

/** One chart with its caption, or a note in its place when the feature it plots is off. */
function card(chart: string, caption = ''): string {
  return `<figure class="card">${chart}${caption ? `<figcaption>${caption}</figcaption>` : ''}</figure>`;
}
function offCard(title: string, why: string): string {
  return `<figure class="card off"><div class="ct">${escapeXml(title)}</div><p>${why}</p></figure>`;
}

/** True when every finite value of every series is 0 (or there is none). */
function allZero(series: readonly Series[]): boolean {
  return series.every((s) => s.points.every((p) => !Number.isFinite(p[1]) || p[1] === 0));
}

/** Charts over metrics.jsonl: per-step series smoothed (raw faint behind); notes for features that are off. */
function metricCharts(m: Record<string, unknown>[], config: Record<string, unknown> | null): string[] {
  const x = (r: Record<string, unknown>): number => num(r, 'step');
  const line = (name: string, f: (r: Record<string, unknown>) => number): Series => ({ name, points: m.map((r) => [x(r), f(r)]) });
  const turns = Math.max(1, ...m.map((r) => (Array.isArray(r.passAt1PerTurn) ? (r.passAt1PerTurn as unknown[]).length : 0)));
  const perTurn = (k: string, label: string): Series[] => Array.from({ length: turns }, (_, i) => line(`${label} turn ${i + 1}`, (r) => arr(r, k, i)));
  const o = { xLabel: 'step', smooth: true };
  const cfg = (k: string): unknown => config?.[k];
  const chart = (title: string, series: Series[], extra: Record<string, unknown>, caption = '', off: string | null = null): string => {
    if (off !== null) return offCard(title, off);
    if (allZero(series)) return offCard(title, `Always 0 in this run${caption ? `. ${caption}` : '.'}`);
    return card(lineChart(series, { title, ...o, ...extra }), caption);
  };
  const pruningOff = config !== null && cfg('intraKeep') == null && cfg('interKeep') == null;
  const klOff = config !== null && cfg('beta') === 0;
  const groups = (r: Record<string, unknown>): number => num(r, 'groupsPerTree') * num(r, 'problems');
  return [
    chart('Reward', [line('mean reward', (r) => num(r, 'reward')), ...perTurn('rewardPerTurn', 'reward')], { yMin: 0, yMax: 1 }),
    chart('pass@1 per turn (training rollouts)', perTurn('passAt1PerTurn', 'pass@1'), { yMin: 0, yMax: 1, percent: true }),
    chart('Failures fixed by later turns', [line('fixed by a later turn', (r) => num(r, 'fixedLaterFraction')), line('solved (any turn)', (r) => num(r, 'solvedFraction')), line('solved at turn 1', (r) => num(r, 'solvedFirstTurnFraction'))], { yMin: 0, yMax: 1, percent: true },
      'Fixed: of the failed attempts that got feedback, the share a later turn passed.', turns < 2 ? 'Single-turn run (maxTurns 1 or --algo grpo): no failure gets a second turn.' : null),
    chart('Groups with a learning signal', [line('groups whose credit differs', (r) => 1 - num(r, 'zeroVarianceGroups') / groups(r))], { yMin: 0, yMax: 1, percent: true },
      'Share of the step\'s groups whose attempts got different credit; a group with equal credit has zero advantages and trains nothing.'),
    chart('Tree size', [line('nodes per tree', (r) => num(r, 'nodesPerTree')), line('groups per tree', (r) => num(r, 'groupsPerTree'))], {}),
    chart('Pruned fraction of nodes', [line('IntraP', (r) => num(r, 'prunedIntraFraction')), line('InterP', (r) => num(r, 'prunedInterFraction'))], { yMin: 0, percent: true }, '',
      pruningOff ? 'Pruning is off in this run (intraKeep and interKeep unset; --intra-keep, --inter-keep turn it on).' : null),
    chart('Tokens per step', [line('sampled', (r) => num(r, 'tokensSampled')), line('trained', (r) => num(r, 'tokensTrained'))], {},
      'Sampled: completion tokens generated in the step. Trained: tokens through the training pass, i.e. each trained sample\'s whole prompt (task, earlier turns, feedback) plus its completion, so it is much larger.'),
    chart('Loss', [line('loss', (r) => num(r, 'loss'))], {}, 'Near 0 by design: advantages are centred within each group, so the policy-gradient loss averages out; its gradient (below) is what moves the weights.'),
    chart('KL to the reference', [line('KL', (r) => num(r, 'kl'))], {}, '', klOff ? 'The KL penalty is off in this run (beta = 0; --beta turns it on).' : null),
    chart('Clip fractions', [line('clip (low)', (r) => num(r, 'clipLowFraction')), line('clip (high)', (r) => num(r, 'clipHighFraction'))], { yMin: 0, percent: true },
      'Each batch of rollouts gets one optimizer step, so the ratio to the sampling policy stays near 1 and the ε-clip rarely acts.'),
    chart('Gradient norm (before clipping)', [line('grad norm', (r) => num(r, 'gradNorm'))], {}),
    chart('Learning rate', [line('learning rate', (r) => num(r, 'lr'))], { yMin: 0, smooth: false }),
    chart('Time per step (s)', ['rollout', 'execution', 'training', 'sync'].map((k) => line(k, (r) => sub(r, 'time', k))), { yMin: 0 }),
    chart('Throughput', [line('all tokens / s', (r) => sub(r, 'time', 'tokensPerSecond')), line('trained tokens / s', (r) => sub(r, 'time', 'trainTokensPerSecond'))], { yMin: 0 }),
  ];
}

function evalSection(evals: ReportData['evals']): string {
  if (evals.length === 0) return '<p class="muted">No evaluations in this run (eval/*.json).</p>';
  const series: Series[] = evals.map((e) => ({ name: `${e.label ?? e.file}${e.step !== undefined ? ` (step ${e.step})` : ''}`, points: e.iterations.map((p) => [p.k, p.pass1] as [number, number]) }));
  const chart = lineChart(series, { title: 'Iter-k pass@1', xLabel: 'k (attempts with feedback)', yMin: 0, yMax: 1, percent: true, integerX: true, width: 520, height: 280 });
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
figure.card{margin:0;width:420px}figure.card figcaption{font-size:11px;color:#666;padding:2px 4px 0}
figure.card.off{border:1px dashed #ccc;background:#fafafa;height:120px;box-sizing:border-box;padding:8px 10px}
figure.card.off .ct{font-size:13px;font-weight:600}figure.card.off p{font-size:12px;color:#666;margin:8px 0 0}
.chart{border:1px solid #eee;background:#fcfcfc}.ct{font-size:13px;font-weight:600}.tick,.leg,.lbl{font-size:10px;fill:#555}
.grid{stroke:#eee}.axis{stroke:#999}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-size:13px}
tr.sub td{color:#666;font-size:12px}
details.cfg pre{max-height:320px;overflow:auto;background:#f6f6f6;padding:8px}
.controls{display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center;margin:6px 0 10px;font-size:13px}
.controls input[type=range]{width:260px;vertical-align:middle}
#viewer{display:flex;gap:16px;align-items:flex-start}#tree{min-width:360px;max-height:640px;overflow:auto;border:1px solid #eee;padding:6px}
#node{flex:1;border:1px solid #eee;padding:8px;min-height:200px}
ul.t{list-style:none;padding-left:18px;margin:0}ul.t>li{margin:2px 0}
.n{cursor:pointer;padding:1px 5px;border-radius:3px;font-family:ui-monospace,monospace;font-size:12px}
.n.pass{background:#dff5df}.n.fail{background:#fbe3e3}.n.pruned{opacity:.45;text-decoration:line-through}.n.sel{outline:2px solid #1f77b4}
.turn{color:#888;font-size:11px;margin-right:4px}
pre.code{background:#f6f6f6;padding:6px;white-space:pre-wrap;font-size:12px}
#errors{color:#b00}
`;

// The tree viewer: a filter (all / expanded / repaired / still failing), a problem-id search,
// a step slider over the steps that have matching trees, and the trees of that step.
// Opens on #tree=STEP:PROBLEM_ID:NODE when given, else on the latest tree where a failed
// attempt was repaired by a later turn (else the latest expanded tree, else the latest).
const VIEWER_JS = `
(function(){
  var trees = JSON.parse(document.getElementById('tree-data').textContent);
  var slider = document.getElementById('step'), stepLabel = document.getElementById('step-label'), probSel = document.getElementById('problem');
  var search = document.getElementById('search'), count = document.getElementById('match-count');
  var treeBox = document.getElementById('tree'), nodeBox = document.getElementById('node');
  var filter = 'all', matching = [], steps = [], byStep = {};
  function el(tag, cls, text){ var e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
  function fmt(x){ return (x === null || x === undefined) ? '—' : (typeof x === 'number' ? (Math.round(x*1000)/1000).toString() : String(x)); }
  function matches(t){
    if (filter !== 'all' && !t.flags[filter]) return false;
    var q = search.value.trim().toLowerCase();
    return !q || t.problemId.toLowerCase().indexOf(q) >= 0;
  }
  function recompute(){
    matching = []; byStep = {};
    trees.forEach(function(t, i){ if (matches(t)) { matching.push(i); var s = String(t.step); (byStep[s] = byStep[s] || []).push(i); } });
    steps = Object.keys(byStep).map(Number).sort(function(a,b){return a-b;});
    slider.max = String(Math.max(0, steps.length - 1)); slider.disabled = steps.length < 2;
    count.textContent = matching.length + ' of ' + trees.length + ' trees match, at ' + steps.length + ' steps';
  }
  function fillProblems(keep){
    var s = steps[Number(slider.value)]; probSel.innerHTML = '';
    stepLabel.textContent = s === undefined ? 'no step' : 'step ' + s;
    (byStep[String(s)] || []).forEach(function(i){ var t = trees[i]; var o = el('option', null, t.problemId + (t.flags.repaired ? '  (repaired)' : t.flags.expanded ? '  (expanded)' : '')); o.value = String(i); probSel.appendChild(o); });
    if (keep !== undefined) probSel.value = String(keep);
  }
  function showNode(t, id){
    var n = t.nodes[id]; if (!n) return; nodeBox.innerHTML = '';
    Array.prototype.forEach.call(treeBox.querySelectorAll('.n'), function(e){ e.classList.toggle('sel', e.dataset.id === String(id)); });
    var link = '#tree=' + t.step + ':' + encodeURIComponent(t.problemId) + ':' + n.id;
    if (history.replaceState) history.replaceState(null, '', link);
    nodeBox.appendChild(el('h3', null, 'node ' + n.id + ' — turn ' + n.turn + (n.passed ? ' — passed' : ' — failed') + (n.pruned ? ' — pruned (' + (n.prunedBy || '') + ')' : '')));
    var a = el('a', 'muted', 'link to this node'); a.href = link; nodeBox.appendChild(a);
    var tbl = el('table'); [['reward', n.reward], ['credit', n.credit], ['advantage', n.advantage], ['pruned', n.pruned ? (n.prunedBy || 'yes') : 'no'], ['group', n.group], ['parent', n.parent], ['completion tokens', n.completionTokens], ['prompt tokens', n.promptTokens], ['finish', n.finishReason]].forEach(function(r){ var tr = el('tr'); tr.appendChild(el('th', null, r[0])); tr.appendChild(el('td', null, fmt(r[1]))); tbl.appendChild(tr); });
    nodeBox.appendChild(tbl);
    nodeBox.appendChild(el('h4', null, 'code')); nodeBox.appendChild(el('pre', 'code node-code', n.code === null ? '(no code found)' : n.code));
    nodeBox.appendChild(el('h4', null, 'feedback')); nodeBox.appendChild(el('pre', 'code node-feedback', n.feedback));
    if (n.text !== undefined) { nodeBox.appendChild(el('h4', null, 'completion text')); nodeBox.appendChild(el('pre', 'code', n.text)); }
  }
  function renderGroup(t, gid){
    var ul = el('ul', 't');
    t.groups[gid].nodes.forEach(function(id){
      var n = t.nodes[id], li = el('li');
      li.appendChild(el('span', 'turn', 't' + n.turn));
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
    if (!t) { treeBox.textContent = 'no tree matches'; treeBox.removeAttribute('data-turns'); return; }
    treeBox.setAttribute('data-turns', String(t.turns));
    var f = []; if (t.flags.expanded) f.push('expanded'); if (t.flags.repaired) f.push('repaired'); if (t.flags.failing) f.push('still failing');
    treeBox.appendChild(el('div', 'muted', t.problemId + ' at step ' + t.step + ': ' + t.nodes.length + ' nodes, ' + t.groups.length + ' groups, ' + t.turns + ' of ' + t.maxTurns + ' turns' + (f.length ? ' (' + f.join(', ') + ')' : '')));
    treeBox.appendChild(renderGroup(t, 0));
    if (node === undefined) {
      // a repairing attempt when there is one, else the root's first node
      node = 0;
      t.nodes.forEach(function(n){ if (node === 0 && n.passed && n.parent !== null && !t.nodes[n.parent].passed) node = n.id; });
    }
    showNode(t, node);
  }
  function goTo(i, node){
    var s = steps.indexOf(trees[i].step); if (s < 0) return;
    slider.value = String(s); fillProblems(i); showTree(node);
  }
  function refresh(){
    var cur = Number(probSel.value); recompute();
    if (matching.indexOf(cur) >= 0) goTo(cur); else if (matching.length) goTo(matching[matching.length - 1]); else { fillProblems(); showTree(); }
  }
  Array.prototype.forEach.call(document.querySelectorAll('input[name=tree-filter]'), function(r){ r.addEventListener('change', function(){ filter = r.value; refresh(); }); });
  search.addEventListener('input', refresh);
  slider.addEventListener('input', function(){ fillProblems(); showTree(); });
  document.getElementById('prev-step').addEventListener('click', function(){ slider.value = String(Math.max(0, Number(slider.value) - 1)); fillProblems(); showTree(); });
  document.getElementById('next-step').addEventListener('click', function(){ slider.value = String(Math.min(steps.length - 1, Number(slider.value) + 1)); fillProblems(); showTree(); });
  probSel.addEventListener('change', function(){ showTree(); });
  recompute();
  if (trees.length === 0) { treeBox.textContent = 'No rollout trees in this run (trees.jsonl.gz).'; document.body.setAttribute('data-ready', '1'); return; }
  var m = /^#tree=([^:]+):(.+):(\\d+)$/.exec(decodeURIComponent(location.hash || ''));
  var start = -1, node;
  if (m) trees.forEach(function(t, i){ if (String(t.step) === m[1] && t.problemId === m[2]) { start = i; node = Number(m[3]); } });
  if (start < 0) { node = undefined; ['repaired', 'expanded'].forEach(function(k){ if (start < 0) for (var i = trees.length - 1; i >= 0; i--) if (trees[i].flags[k]) { start = i; break; } }); }
  if (start < 0) start = trees.length - 1;
  goTo(start, node);
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
  const w = smoothingWindow(d.metrics.length);
  const smoothNote = w > 1 ? `<p class="muted">Per-step series: faint, each step; solid, the mean over ${w} steps centred on it.</p>` : '';
  const charts = d.metrics.length ? `${smoothNote}<div class="charts" id="metric-charts">${metricCharts(d.metrics, d.config).join('')}</div>` : '';
  const filters = [['all', 'all'], ['expanded', 'expanded (a second turn)'], ['repaired', 'repaired (a failure fixed by a later turn)'], ['failing', 'still failing (a line of attempts ends failed)']]
    .map(([v, label]) => `<label><input type="radio" name="tree-filter" value="${v}"${v === 'all' ? ' checked' : ''}> ${label}</label>`)
    .join(' ');
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
<p>It opens on a tree where a failed attempt was repaired by a later turn. Filter the trees, search a problem id, move through the steps with the slider; click a node to see its code, the executor's feedback, reward r, credit R, advantage A and whether it was pruned. Green: passed; red: failed; struck through: pruned; t1, t2: the turn. The address <code>#tree=STEP:PROBLEM_ID:NODE</code> opens a given node (the page's address follows the node you click, so it can be shared).</p>
<p class="muted" id="tree-sampling">${escapeXml(d.sampling.note)}</p>
<div class="controls">
<span>${filters}</span>
<label>problem id <input type="search" id="search" placeholder="part of an id" size="18"></label>
<span><button id="prev-step" type="button">◀</button> <input type="range" id="step" min="0" max="0" value="0"> <button id="next-step" type="button">▶</button> <span id="step-label"></span></span>
<label>problem <select id="problem"></select></label>
<span class="muted" id="match-count"></span>
</div>
<div id="viewer"><div id="tree"></div><div id="node"></div></div>
<script type="application/json" id="tree-data">${embedJson(d.trees)}</script>
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
