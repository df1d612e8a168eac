// The self-contained HTML report of a run.
export { readRun, renderReport, writeReport, ReportError, type ReportData, type ReportOptions } from './html.js';
export { lineChart, type Series as ChartSeries, type ChartOptions } from './svg.js';
