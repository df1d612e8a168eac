// A small inline-SVG line chart: no dependencies, so the report opens offline.

export interface Series {
  name: string;
  /** [x, y] points; non-finite y values are skipped. */
  points: [number, number][];
}

export interface ChartOptions {
  title: string;
  xLabel?: string;
  yLabel?: string;
  width?: number;
  height?: number;
  /** Fixed y range (default: from the data). */
  yMin?: number;
  yMax?: number;
  /** Format of y tick labels. */
  percent?: boolean;
  /** x ticks on whole numbers only (e.g. k = 1, 2, 3). */
  integerX?: boolean;
  /**
   * Per-step series: each drawn raw (faint) with its centred moving average over
   * `smoothingWindow(points)` points on top. Series with few points are drawn as they are.
   */
  smooth?: boolean;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function niceTicks(lo: number, hi: number, n = 5, minStep = 0): number[] {
  if (!(hi > lo)) return [lo];
  const span = hi - lo;
  const step0 = span / n;
  const mag = 10 ** Math.floor(Math.log10(step0));
  const step = Math.max(minStep, [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => span / s <= n) ?? 10 * mag);
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) out.push(Math.abs(v) < 1e-12 * span ? 0 : v);
  return out;
}

function fmt(v: number, percent: boolean): string {
  if (percent) return `${(v * 100).toFixed(0)}%`;
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}

/** Points of the moving average: about 1/25 of the series, odd, at least 1 (1 = no smoothing). */
export function smoothingWindow(n: number): number {
  const w = Math.round(n / 25);
  return w < 3 ? 1 : w % 2 ? w : w + 1;
}

/** Centred moving average over `w` points (fewer at the ends); non-finite values are skipped. */
export function movingAverage(points: readonly [number, number][], w: number): [number, number][] {
  const h = Math.floor(w / 2);
  return points.map((p, i) => {
    let sum = 0;
    let n = 0;
    for (let j = Math.max(0, i - h); j <= Math.min(points.length - 1, i + h); j++) {
      const y = points[j]![1];
      if (Number.isFinite(y)) {
        sum += y;
        n++;
      }
    }
    return [p[0], n && Number.isFinite(p[1]) ? sum / n : NaN];
  });
}

/** Approximate width of legend text at 10 px (the report's legend font). */
function textWidth(s: string): number {
  return s.length * 5.6;
}

interface LegendEntry { x: number; row: number; name: string; color: string }

/** Legend entries laid out left to right in rows under the title (one per name, in the series' colours), and the plot area's top below them. */
function legendLayout(names: readonly string[], W: number, L: number, R: number): { entries: LegendEntry[]; top: number } {
  const entries: LegendEntry[] = [];
  let x = L;
  let row = 0;
  names.forEach((name, i) => {
    const w = 16 + textWidth(name) + 12;
    if (x + w > W - R && x > L) {
      x = L;
      row++;
    }
    entries.push({ x, row, name, color: COLORS[i % COLORS.length]! });
    x += w;
  });
  const rows = entries.length ? entries[entries.length - 1]!.row + 1 : 0;
  return { entries, top: 26 + rows * 13 + (rows ? 4 : 0) };
}

/** The legend's `g.legend` (nothing without entries); `swatch` draws an entry's colour mark at its row's y. */
function legendSvg(entries: readonly LegendEntry[], swatch: (e: LegendEntry, y: number) => string): string {
  if (!entries.length) return '';
  return `<g class="legend">${entries.map((e) => {
    const y = 24 + e.row * 13;
    return `${swatch(e, y)}<text x="${e.x + 14}" y="${y + 6}" class="leg">${escapeXml(e.name)}</text>`;
  }).join('')}</g>`;
}

/**
 * An SVG line chart (with point markers when a series has few points). The legend sits in its
 * own band between the title and the plot area, never over the data; the plot area is marked
 * by a `rect.plot-area` and the legend by `g.legend`.
 */
export function lineChart(series: readonly Series[], o: ChartOptions): string {
  const W = o.width ?? 420;
  const H = o.height ?? 240;
  const L = 52;
  const R = 10;
  const B = 38;
  const named = series.length > 1 || Boolean(series[0]?.name);
  const { entries: legend, top: T } = legendLayout(named ? series.map((s) => s.name) : [], W, L, R);
  const clean = series.map((s) => s.points.filter((p) => Number.isFinite(p[1]) && Number.isFinite(p[0])));
  const pts = clean.flat();
  const xs = pts.map((p) => p[0]);
  const ys = pts.map((p) => p[1]);
  let x0 = xs.length ? Math.min(...xs) : 0;
  let x1 = xs.length ? Math.max(...xs) : 1;
  let y0 = o.yMin ?? (ys.length ? Math.min(...ys) : 0);
  let y1 = o.yMax ?? (ys.length ? Math.max(...ys) : 1);
  if (x1 === x0) {
    x0 -= 1;
    x1 += 1;
  }
  if (y1 === y0) {
    const d = Math.abs(y0) > 0 ? Math.abs(y0) * 0.1 : 1;
    if (o.yMin !== undefined) y1 = y0 + (o.percent ? 1 : d);
    else {
      y0 -= d;
      y1 += d;
    }
  }
  const sx = (x: number): number => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y: number): number => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  const path = (p: readonly [number, number][]): string => p.filter((q) => Number.isFinite(q[1])).map((q, j) => `${j ? 'L' : 'M'}${sx(q[0]).toFixed(1)},${sy(q[1]).toFixed(1)}`).join('');
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeXml(o.title)}">`);
  parts.push(`<text x="${W / 2}" y="16" text-anchor="middle" class="ct">${escapeXml(o.title)}</text>`);
  parts.push(`<rect class="plot-area" x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="none"/>`);
  for (const t of niceTicks(y0, y1)) {
    const y = sy(t).toFixed(1);
    parts.push(`<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" class="grid"/><text x="${L - 4}" y="${y}" dy="3" text-anchor="end" class="tick">${fmt(t, o.percent ?? false)}</text>`);
  }
  for (const t of niceTicks(x0, x1, 6, o.integerX ? 1 : 0)) {
    const x = sx(t).toFixed(1);
    parts.push(`<line x1="${x}" x2="${x}" y1="${H - B}" y2="${H - B + 4}" class="axis"/><text x="${x}" y="${H - B + 15}" text-anchor="middle" class="tick">${fmt(t, false)}</text>`);
  }
  parts.push(`<line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" class="axis"/><line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" class="axis"/>`);
  if (o.xLabel) parts.push(`<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle" class="lbl">${escapeXml(o.xLabel)}</text>`);
  if (o.yLabel) parts.push(`<text transform="translate(12 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle" class="lbl">${escapeXml(o.yLabel)}</text>`);
  series.forEach((s, i) => {
    const c = COLORS[i % COLORS.length]!;
    const p = clean[i]!;
    if (p.length === 0) return;
    const w = o.smooth ? smoothingWindow(p.length) : 1;
    if (w > 1) {
      parts.push(`<path d="${path(p)}" fill="none" stroke="${c}" stroke-width="1" stroke-opacity="0.22" class="raw" data-name="${escapeXml(s.name)}"/>`);
      parts.push(`<path d="${path(movingAverage(p, w))}" fill="none" stroke="${c}" stroke-width="1.8" class="series smoothed" data-name="${escapeXml(s.name)}" data-window="${w}"/>`);
      return;
    }
    parts.push(`<path d="${path(p)}" fill="none" stroke="${c}" stroke-width="1.8" class="series" data-name="${escapeXml(s.name)}"/>`);
    if (p.length <= 30) for (const q of p) parts.push(`<circle cx="${sx(q[0]).toFixed(1)}" cy="${sy(q[1]).toFixed(1)}" r="2.5" fill="${c}"><title>${escapeXml(`${s.name}: ${fmt(q[1], o.percent ?? false)} at ${q[0]}`)}</title></circle>`);
  });
  parts.push(legendSvg(legend, (e, y) => `<rect x="${e.x}" y="${y + 2}" width="10" height="3" fill="${e.color}"/>`));
  parts.push('</svg>');
  return parts.join('');
}

/** The chart styles of the report's page (lib/report/html.ts), for an SVG file that stands alone. */
export const CHART_STYLE = '.chart{background:#fcfcfc;font-family:sans-serif}.ct{font-size:13px;font-weight:600}.tick,.leg,.lbl{font-size:10px;fill:#555}.grid{stroke:#eee}.axis{stroke:#999}.ref{stroke:#444;stroke-dasharray:4 3}';

export interface BarChartOptions {
  title: string;
  yLabel?: string;
  width?: number;
  height?: number;
  /** A dashed horizontal line at y (a goal), labelled at its right end. */
  ref?: { y: number; label: string };
  /** Embed CHART_STYLE, for an SVG written to its own file. */
  standalone?: boolean;
}

/**
 * An SVG bar chart of grouped bars: one group per category (its label written below it,
 * rotated), one bar per series in each group; a NaN value leaves its bar out. The y axis starts
 * at 0. Bars are `rect.bar` with a `<title>` giving the series, category and value.
 */
export function barChart(categories: readonly string[], series: readonly { name: string; values: readonly number[] }[], o: BarChartOptions): string {
  const W = o.width ?? 760;
  const H = o.height ?? 360;
  const L = 52;
  const R = 10;
  const labelBand = Math.min(160, 12 + 5.6 * Math.max(0, ...categories.map((c) => c.length)) * 0.72);
  const B = 14 + labelBand;
  const { entries: legend, top: T } = legendLayout(series.map((s) => s.name), W, L, R);
  const ys = series.flatMap((s) => s.values.filter((v) => Number.isFinite(v)));
  const y1 = Math.max(o.ref?.y ?? 0, ...ys, 1e-9) * 1.05;
  const sy = (y: number): number => T + (1 - y / y1) * (H - T - B);
  const gw = (W - L - R) / Math.max(1, categories.length);
  const bw = (gw * 0.8) / Math.max(1, series.length);
  const fmtv = (v: number) => fmt(v, false);
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeXml(o.title)}">`);
  if (o.standalone) parts.push(`<style>${CHART_STYLE}</style><rect width="${W}" height="${H}" fill="#fcfcfc"/>`);
  parts.push(`<text x="${W / 2}" y="16" text-anchor="middle" class="ct">${escapeXml(o.title)}</text>`);
  parts.push(`<rect class="plot-area" x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="none"/>`);
  for (const t of niceTicks(0, y1)) {
    const y = sy(t).toFixed(1);
    parts.push(`<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" class="grid"/><text x="${L - 4}" y="${y}" dy="3" text-anchor="end" class="tick">${fmtv(t)}</text>`);
  }
  categories.forEach((c, i) => {
    series.forEach((s, j) => {
      const v = s.values[i] ?? NaN;
      if (!Number.isFinite(v)) return;
      const x = L + i * gw + gw * 0.1 + j * bw;
      parts.push(`<rect class="bar" x="${x.toFixed(1)}" y="${sy(v).toFixed(1)}" width="${bw.toFixed(1)}" height="${(sy(0) - sy(v)).toFixed(1)}" fill="${COLORS[j % COLORS.length]}"><title>${escapeXml(`${s.name}, ${c}: ${fmtv(v)}`)}</title></rect>`);
    });
    const cx = (L + (i + 0.5) * gw).toFixed(1);
    parts.push(`<text transform="translate(${cx} ${H - B + 8}) rotate(-55)" text-anchor="end" class="tick">${escapeXml(c)}</text>`);
  });
  parts.push(`<line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" class="axis"/><line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" class="axis"/>`);
  if (o.ref) {
    const y = sy(o.ref.y).toFixed(1);
    parts.push(`<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" class="ref"/><text x="${W - R - 2}" y="${y}" dy="-3" text-anchor="end" class="lbl">${escapeXml(o.ref.label)}</text>`);
  }
  if (o.yLabel) parts.push(`<text transform="translate(12 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle" class="lbl">${escapeXml(o.yLabel)}</text>`);
  parts.push(legendSvg(legend, (e, y) => `<rect x="${e.x}" y="${y}" width="10" height="7" fill="${e.color}"/>`));
  parts.push('</svg>');
  return parts.join('');
}
