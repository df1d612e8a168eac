// Stopping a run on SIGINT/SIGTERM: the first signal asks the run to stop at the next safe
// point (after a checkpoint, or before anything is left half-made); a second one exits at once.
// The exit status is 128 + the signal's number: 130 after SIGINT, 143 after SIGTERM. One
// StopSignal is installed for the whole `train` command, before anything is written, so a
// signal during set-up or the warm-up is handled like one during training.

import { constants } from 'node:os';

/** Exit status of a command stopped by SIGINT (128 + its number, as shells report it). */
export const INTERRUPTED_EXIT_CODE = 130;

/** 128 + the signal's number (SIGINT 130, SIGTERM 143); 130 for anything else. */
export function exitCodeForSignal(sig: string): number {
  const n = (constants.signals as Record<string, number | undefined>)[sig];
  return n !== undefined ? 128 + n : INTERRUPTED_EXIT_CODE;
}

/** Thrown when a run stops on a signal before it has anything worth keeping. */
export class InterruptedError extends Error {
  override name = 'InterruptedError';
  readonly exitCode: number;
  constructor(readonly signal: string, message: string) {
    super(message);
    this.exitCode = exitCodeForSignal(signal);
  }
}

export class StopSignal {
  /** The signal (or test trigger) that asked to stop, or null. */
  reason: string | null = null;
  private listeners: ((reason: string) => void)[] = [];
  private installed: ((sig: NodeJS.Signals) => void) | null = null;

  get requested(): boolean {
    return this.reason !== null;
  }

  /** Asks to stop (what a signal does); the listeners hear the first request only. */
  request(reason: string): void {
    if (this.reason !== null) return;
    this.reason = reason;
    for (const l of this.listeners) l(reason);
  }

  onRequest(listener: (reason: string) => void): () => void {
    this.listeners.push(listener);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    };
  }

  /** Handles SIGINT and SIGTERM in this process until uninstall(). */
  install(): this {
    if (this.installed) return this;
    this.installed = (sig: NodeJS.Signals): void => {
      if (this.reason !== null && this.reason !== 'stopAfterStep') {
        process.stderr.write(`\nsecond ${sig}: exiting without a checkpoint\n`);
        process.exit(exitCodeForSignal(sig));
      }
      this.request(sig);
    };
    process.on('SIGINT', this.installed);
    process.on('SIGTERM', this.installed);
    return this;
  }

  uninstall(): void {
    if (!this.installed) return;
    process.off('SIGINT', this.installed);
    process.off('SIGTERM', this.installed);
    this.installed = null;
  }

  /** Throws InterruptedError when a stop was requested (for phases that cannot checkpoint). */
  throwIfRequested(what: string): void {
    if (this.reason !== null) throw new InterruptedError(this.reason, `${this.reason} ${what}`);
  }
}
