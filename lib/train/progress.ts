// Progress output on stderr. On a terminal: one bar per phase (warm-up, evaluation, training),
// redrawn in place with elapsed time and ETA, left behind as one finished line when the phase
// ends. Otherwise (a log file, CI): a plain line every so many units of the phase, and one when
// it ends. Sub-phases inside a phase (a step's rollout, execution, training) show after the bar
// on a terminal and nowhere else. No dependencies.

export interface ProgressSink {
  /** Starts a phase with `total` units (0 = unknown), `from` of them already done (a resumed run). */
  start(phase: string, total: number, from?: number): void;
  /** Sets the phase's completed units; `extra` is shown after the counts. */
  update(done: number, extra?: string): void;
  /** Ends the current phase. */
  end(): void;
  /** A whole line, printed above any bar. */
  line(text: string): void;
  /** A sink for sub-phases within the current phase (default: this sink). */
  nested?(): ProgressSink;
}

export const silentProgress: ProgressSink = { start() {}, update() {}, end() {}, line() {} };

export function fmtTime(s: number): string {
  if (!Number.isFinite(s) || s < 0) return '--:--';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = Math.floor(s % 60);
  const mm = `${String(m).padStart(2, '0')}:${String(r).padStart(2, '0')}`;
  return h > 0 ? `${h}:${mm}` : mm;
}

export interface StderrProgressOptions {
  /** Plain lines per phase when not a terminal (one every total/plainLines units). Default 10. */
  plainLines?: number;
  /** Seconds between plain lines of a phase whose total is unknown. Default 10. */
  plainEverySeconds?: number;
  /** Clock in ms (tests). Default performance.now. */
  now?: () => number;
}

interface Phase {
  name: string;
  total: number;
  done: number;
  /** Units done before this phase started (the ETA counts only the units done since). */
  from: number;
  extra: string;
  t0: number;
}

const BAR = 24;

export class StderrProgress implements ProgressSink {
  private cur: Phase | null = null;
  private sub: Phase | null = null;
  private lastDraw = -Infinity;
  private nextPlain = 0;
  private drawn = false;
  private readonly now: () => number;
  private readonly plainLines: number;
  private readonly plainEveryMs: number;

  constructor(
    private readonly stream: Pick<NodeJS.WriteStream, 'write'> & { isTTY?: boolean; columns?: number } = process.stderr,
    o: StderrProgressOptions = {},
  ) {
    this.now = o.now ?? (() => performance.now());
    this.plainLines = Math.max(1, o.plainLines ?? 10);
    this.plainEveryMs = (o.plainEverySeconds ?? 10) * 1000;
  }

  private get tty(): boolean {
    return this.stream.isTTY === true;
  }

  start(phase: string, total: number, from = 0): void {
    if (this.cur) this.end();
    this.cur = { name: phase, total, done: from, from, extra: '', t0: this.now() };
    this.sub = null;
    this.lastDraw = -Infinity;
    this.nextPlain = from + this.plainStride();
    if (this.tty) this.draw(true);
  }

  update(done: number, extra?: string): void {
    const c = this.cur;
    if (!c) return;
    c.done = done;
    if (extra !== undefined) c.extra = extra;
    if (this.tty) {
      this.draw(c.total > 0 && done >= c.total); // at most 10 redraws a second, and the last
      return;
    }
    if (c.total > 0) {
      if (done >= this.nextPlain && done < c.total) {
        this.stream.write(this.plain(c) + '\n');
        while (this.nextPlain <= done) this.nextPlain += this.plainStride();
      }
    } else if (this.now() - Math.max(c.t0, this.lastDraw) >= this.plainEveryMs) {
      this.lastDraw = this.now();
      this.stream.write(this.plain(c) + '\n');
    }
  }

  end(): void {
    const c = this.cur;
    if (!c) return;
    const text = this.tty ? this.barText(c, false) : this.plain(c, true);
    if (this.tty) this.stream.write('\r\x1b[2K');
    this.stream.write(text + '\n');
    this.drawn = false;
    this.cur = null;
    this.sub = null;
  }

  line(text: string): void {
    if (this.tty && this.drawn) this.stream.write('\r\x1b[2K');
    this.stream.write(text + '\n');
    this.drawn = false;
    if (this.tty && this.cur) this.draw(true);
  }

  /** Clears a drawn bar so that another stream can write a line (the bar is redrawn on the next update). */
  clear(): void {
    if (this.tty && this.drawn) this.stream.write('\r\x1b[2K');
    this.drawn = false;
  }

  nested(): ProgressSink {
    return {
      start: (phase, total) => {
        this.sub = { name: phase, total, done: 0, from: 0, extra: '', t0: this.now() };
        if (this.tty) this.draw(false);
      },
      update: (done, extra) => {
        if (!this.sub) return;
        this.sub.done = done;
        if (extra !== undefined) this.sub.extra = extra;
        if (this.tty) this.draw(false);
      },
      end: () => {
        this.sub = null;
      },
      line: (text) => this.line(text),
    };
  }

  private plainStride(): number {
    const t = this.cur?.total ?? 0;
    return t > 0 ? Math.max(1, Math.ceil(t / this.plainLines)) : Infinity;
  }

  private times(c: Phase): { elapsed: number; eta: number } {
    const elapsed = (this.now() - c.t0) / 1000;
    const rate = c.done > c.from ? elapsed / (c.done - c.from) : NaN;
    return { elapsed, eta: c.total > 0 ? Math.max(0, c.total - c.done) * rate : NaN };
  }

  private count(c: Phase): string {
    return c.total > 0 ? `${String(c.done).padStart(String(c.total).length)}/${c.total}` : `${c.done}`;
  }

  /** The bar line (live: with ETA and the sub-phase; finished: elapsed only). */
  private barText(c: Phase, live: boolean): string {
    const { elapsed, eta } = this.times(c);
    const frac = c.total > 0 ? Math.min(1, c.done / c.total) : 0;
    const fill = Math.round(frac * BAR);
    const bar = c.total > 0 ? '█'.repeat(fill) + '░'.repeat(BAR - fill) : '';
    const time = live ? `${fmtTime(elapsed)} elapsed, ${c.total > 0 ? `${fmtTime(eta)} left` : 'total unknown'}` : `${fmtTime(elapsed)}`;
    const s = this.sub && live ? `  [${this.sub.name}${this.sub.total > 0 ? ` ${this.sub.done}/${this.sub.total}` : ''}${this.sub.extra ? ` ${this.sub.extra}` : ''}]` : '';
    return `${c.name.padEnd(8)} ${bar ? `${bar} ` : ''}${this.count(c)}  ${time}${c.extra ? `  ${c.extra}` : ''}${s}`;
  }

  private plain(c: Phase, finished = false): string {
    const { elapsed, eta } = this.times(c);
    const time = finished ? `done in ${fmtTime(elapsed)}` : `${fmtTime(elapsed)} elapsed${c.total > 0 ? `, ${fmtTime(eta)} left` : ''}`;
    return `${c.name} ${this.count(c)}  ${time}${c.extra ? `  ${c.extra}` : ''}`;
  }

  private draw(force: boolean): void {
    const c = this.cur;
    if (!c) return;
    const now = this.now();
    if (!force && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const cols = this.stream.columns || 120;
    this.stream.write(`\r\x1b[2K${this.barText(c, true).slice(0, Math.max(20, cols - 1))}`);
    this.drawn = true;
  }
}

/** The per-step figures that move, for a progress bar or a plain line. */
export interface StepFigures {
  rewardPerTurn: number[];
  passAt1PerTurn: number[];
  tokensTrained: number;
  zeroVarianceGroups: number;
  groupsPerTree: number;
  problems: number;
}

/** Mean of the figures of recent steps (the bar shows these rather than one noisy step). */
export class RecentSteps {
  private readonly rows: StepFigures[] = [];
  constructor(private readonly window = 20) {}
  push(m: StepFigures): void {
    this.rows.push(m);
    if (this.rows.length > this.window) this.rows.shift();
  }
  /** "reward t1 0.52 t2 0.61 · pass@1 t1 50% t2 62% · 7.5k tokens trained/step · signal in 63% of groups (last 20 steps)". */
  format(): string {
    const rs = this.rows;
    if (rs.length === 0) return '';
    const mean = (f: (m: StepFigures) => number): number => rs.reduce((a, m) => a + f(m), 0) / rs.length;
    const T = Math.max(...rs.map((m) => m.passAt1PerTurn.length));
    const perTurn = (f: (m: StepFigures, i: number) => number | undefined, show: (x: number) => string): string =>
      Array.from({ length: T }, (_, i) => {
        const xs = rs.map((m) => f(m, i)).filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
        return `t${i + 1} ${xs.length ? show(xs.reduce((a, x) => a + x, 0) / xs.length) : '-'}`;
      }).join(' ');
    const groups = (m: StepFigures): number => m.groupsPerTree * m.problems;
    const signal = mean((m) => (groups(m) > 0 ? 1 - m.zeroVarianceGroups / groups(m) : 0));
    const tok = mean((m) => m.tokensTrained);
    const kTok = tok >= 1000 ? `${(tok / 1000).toFixed(1)}k` : tok.toFixed(0);
    return (
      `reward ${perTurn((m, i) => m.rewardPerTurn[i], (x) => x.toFixed(2))} · pass@1 ${perTurn((m, i) => m.passAt1PerTurn[i], (x) => `${(100 * x).toFixed(0)}%`)}` +
      ` · ${kTok} tokens trained/step · signal in ${(100 * signal).toFixed(0)}% of groups` +
      (rs.length > 1 ? ` (mean of last ${rs.length} steps)` : '')
    );
  }
}

/** Union of busy intervals of overlapping async calls: seconds during which at least one was running. */
export class BusyClock {
  private active = 0;
  private since = 0;
  private acc = 0;
  begin(): void {
    if (this.active++ === 0) this.since = performance.now();
  }
  finish(): void {
    if (--this.active === 0) this.acc += performance.now() - this.since;
  }
  /** Busy seconds so far (including a running interval). */
  seconds(): number {
    return (this.acc + (this.active > 0 ? performance.now() - this.since : 0)) / 1000;
  }
  reset(): void {
    this.acc = 0;
    if (this.active > 0) this.since = performance.now();
  }
}

/** What the run header says (lib/commands/run-training.ts fills it in). */
export interface RunHeaderInfo {
  demo: boolean;
  resume: boolean;
  model: string;
  task: string;
  trainProblems: number;
  evalProblems: number;
  algo: string;
  maxTurns: number;
  credit: string;
  batchSize: number;
  numGenerations: number;
  numFollowUpGenerations: number;
  maxSteps: number;
  sftSteps: number;
  /** Where the policy trains and why (empty: not shown). */
  device?: string;
  runDir: string;
  verbose: boolean;
}

/** A few lines saying what is about to run and where it goes. */
export function formatRunHeader(h: RunHeaderInfo): string {
  const murphy = h.algo === 'murphy';
  const algo = murphy
    ? `MURPHY: up to ${h.maxTurns} turns, ${({ mars: 'MaRS', mers: 'MeRS' } as Record<string, string>)[h.credit] ?? h.credit} credit; per step ${h.batchSize} problems x ${h.numGenerations} attempts, ${h.numFollowUpGenerations} follow-ups per failed attempt`
    : `GRPO (single turn); per step ${h.batchSize} problems x ${h.numGenerations} attempts`;
  const rows: [string, string][] = [
    ['model', h.model],
    ['task', `${h.task}: ${h.trainProblems} training problems, ${h.evalProblems} held-out for evaluation`],
    ['algorithm', algo],
    ['steps', `${h.maxSteps}${h.demo && h.sftSteps > 0 && !h.resume ? ` (after ${h.sftSteps} supervised warm-up steps that teach the answer format)` : ''}`],
    ...(h.device ? ([['device', h.device]] as [string, string][]) : []),
    ['run dir', `${h.runDir}${h.verbose ? '' : '  (every setting: config.json there, or --verbose)'}`],
  ];
  const title = `murphy-native train${h.resume ? ' (resuming)' : ''}${h.demo ? ': the CPU demo (no --model, no --dataset)' : ''}`;
  return [title, ...rows.map(([k, v]) => `  ${k.padEnd(10)} ${v}`)].join('\n');
}
