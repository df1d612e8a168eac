// Progress output on stderr: a redrawn bar per phase on a TTY, periodic plain lines otherwise.
// No dependencies. Phases: rollout, execution, training (any names work).

export interface ProgressSink {
  /** Starts a phase with `total` units (0 = unknown). */
  start(phase: string, total: number): void;
  /** Sets the phase's completed units. */
  update(done: number, extra?: string): void;
  /** Ends the current phase. */
  end(): void;
  /** A whole line (the per-step summary), printed above any bar. */
  line(text: string): void;
}

export const silentProgress: ProgressSink = { start() {}, update() {}, end() {}, line() {} };

function fmtTime(s: number): string {
  if (!Number.isFinite(s) || s < 0) return '--:--';
  const m = Math.floor(s / 60);
  const r = Math.floor(s % 60);
  return `${String(m).padStart(2, '0')}:${String(r).padStart(2, '0')}`;
}

export class StderrProgress implements ProgressSink {
  private phase = '';
  private total = 0;
  private done = 0;
  private t0 = 0;
  private lastDraw = 0;
  private drawn = false;
  constructor(
    private readonly stream: NodeJS.WriteStream = process.stderr,
    /** Interval of plain lines when not a TTY, in ms. */
    private readonly plainEveryMs = 10_000,
    private readonly prefix = '',
  ) {}

  private get tty(): boolean {
    return this.stream.isTTY === true;
  }

  start(phase: string, total: number): void {
    this.phase = phase;
    this.total = total;
    this.done = 0;
    this.t0 = performance.now();
    this.lastDraw = 0;
    this.draw('');
  }

  update(done: number, extra = ''): void {
    this.done = done;
    this.draw(extra);
  }

  end(): void {
    if (this.tty && this.drawn) {
      this.stream.write('\r\x1b[2K');
      this.drawn = false;
    }
    this.phase = '';
  }

  line(text: string): void {
    if (this.tty && this.drawn) this.stream.write('\r\x1b[2K');
    this.stream.write(text + '\n');
    this.drawn = false;
  }

  private draw(extra: string): void {
    const now = performance.now();
    const elapsed = (now - this.t0) / 1000;
    const frac = this.total > 0 ? Math.min(1, this.done / this.total) : 0;
    const eta = frac > 0 ? (elapsed * (1 - frac)) / frac : NaN;
    if (this.tty) {
      if (now - this.lastDraw < 80 && this.done < this.total) return;
      this.lastDraw = now;
      const width = 24;
      const fill = Math.round(frac * width);
      const bar = '█'.repeat(fill) + '░'.repeat(width - fill);
      const cnt = this.total > 0 ? `${this.done}/${this.total}` : `${this.done}`;
      this.stream.write(`\r\x1b[2K${this.prefix}${this.phase.padEnd(9)} ${bar} ${cnt} ${fmtTime(elapsed)}<${fmtTime(eta)} ${extra}`.slice(0, (this.stream.columns ?? 120) + 6));
      this.drawn = true;
    } else {
      if (this.lastDraw !== 0 && now - this.lastDraw < this.plainEveryMs) return;
      if (this.lastDraw === 0) {
        this.lastDraw = now;
        return;
      }
      this.lastDraw = now;
      this.stream.write(`${this.prefix}${this.phase}: ${this.done}/${this.total} elapsed ${fmtTime(elapsed)} eta ${fmtTime(eta)} ${extra}\n`);
    }
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
