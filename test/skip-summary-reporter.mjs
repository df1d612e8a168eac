// Node's spec reporter, plus two things: before the closing summary ("ℹ tests N" ... "ℹ duration_ms")
// it lists every skipped test or suite with the file it is in and the reason it gave, so that a
// skip (no Chromium, no C++ compiler, no torch, ...) is visible at the end of `npm test` rather than
// buried in thousands of lines; and last of all, after the failing tests' list, the random seeds
// that each process with a failed test drew (test/helpers/random.ts testSeed's "# NAME: seed N"
// lines), so that a failure that depends on the draw can be replayed from a log cut to its end. Used
// by the "test" scripts in package.json. npm test runs each test file from its bundle
// (node_modules/.cache/murphy-test/, test/loader/runnable.mjs): the reporter names the .ts file instead, and
// maps a test's location (its file and line, printed with a failure and in the skip list) back
// through the bundle (a group's test shows its own file, not the group's), as it does when the
// runner runs the .ts files under test/loader; and so are the stack frames of a failed test's
// error that point into a bundle (Node maps none of them: npm test runs without Node's source
// maps, test/loader/register.mjs).
import { spec } from 'node:test/reporters';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { originalLocation } from './loader/hooks.mjs';
import { entryOf } from './loader/runnable.mjs';

/** Whether the runner gives its test files test/loader (its own --import, which it passes on to them). */
const UNDER_LOADER = process.execArgv.some((a, i, all) => (a.startsWith('--import=') || all[i - 1] === '--import') && /(^|[/=])test\/loader\/register\.mjs$/.test(a));

/** The entry (.ts) whose bundle `file` ran, for a runnable bundle or (under the loader) the .ts itself; else undefined. */
const bundledEntry = (file) => entryOf(file) ?? (UNDER_LOADER && typeof file === 'string' && /\.[cm]?ts$/.test(file) ? file : undefined);

/** A stack frame's position in a module: a bundle's (a runnable bundle, or an entry's .ts URL under the loader) is unmapped. */
const BUNDLE_FRAME = /(file:\/\/[^\s()]+?\.(?:[cm]?ts|mjs)):(\d+):(\d+)/g;

/** `stack` with each bundle position of a frame replaced by its place in the sources (as Node's source maps print it). */
export function mapStack(stack) {
  return stack.replace(BUNDLE_FRAME, (frame, url, line, column) => {
    const entry = bundledEntry(fileURLToPath(url));
    const at = entry && originalLocation(entry, Number(line), Number(column));
    return at ? `${at.file}:${at.line}:${at.column}` : frame;
  });
}

// `spec` is a factory; its instances' class is the one to extend.
const SpecReporter = Object.getPrototypeOf(new spec()).constructor;

/** Maps the stacks of `error` and of its causes, in place. */
function mapErrorStacks(error, depth = 0) {
  if (error === null || typeof error !== 'object' || depth > 8) return;
  if (typeof error.stack === 'string') {
    try {
      error.stack = mapStack(error.stack);
    } catch {
      // a read-only stack: printed as it is
    }
  }
  mapErrorStacks(error.cause, depth + 1);
}

const SEED_LINE = /^# (.+): seed (\d+) \(replay with MURPHY_SEED=\d+\)$/;

export default class SkipSummaryReporter extends SpecReporter {
  #skips = [];
  #listed = false;
  /** test process file -> the seed lines it printed ("NAME seed N") */
  #seeds = new Map();
  /** original file of a failed test -> the test process file it ran in */
  #failed = new Map();

  _transform(event, encoding, callback) {
    const { type, data } = event;
    // the test process's file: the .ts, not the bundle it ran from
    const entry = bundledEntry(data?.file);
    if (entry !== undefined) data.file = entry;
    const proc = data?.file;
    if (type === 'test:stdout' && proc) {
      for (const line of String(data.message).split('\n')) {
        const m = SEED_LINE.exec(line);
        if (m) this.#seeds.set(proc, [...(this.#seeds.get(proc) ?? []), `${m[1]} seed ${m[2]}`]);
      }
    }
    // (1:1 is the test of the file itself: its own file and line)
    if (entry !== undefined && data.line !== undefined && data.column !== undefined && !(data.line === 1 && data.column === 1)) {
      const at = originalLocation(entry, data.line, data.column);
      if (at) Object.assign(data, at);
    }
    if (type === 'test:fail') mapErrorStacks(data?.details?.error);
    if (type === 'test:fail' && proc && !(data.skip !== undefined && data.skip !== false)) this.#failed.set(data.file, proc);
    // A skipped test or suite reports as passed, with `skip` set to its reason (or true).
    if ((type === 'test:pass' || type === 'test:fail') && data.skip !== undefined && data.skip !== false) {
      const file = data.file ? relative(process.cwd(), data.file) : '?';
      const reason = typeof data.skip === 'string' && data.skip ? data.skip : 'no reason given';
      this.#skips.push(`${file} › ${data.name}: ${reason}`);
    }
    // The closing summary is the run's first top-level diagnostic "tests N".
    if (type === 'test:diagnostic' && data.nesting === 0 && /^tests \d+$/.test(data.message) && !this.#listed) {
      this.#listed = true;
      this.push(this.#list());
    }
    super._transform(event, encoding, callback);
  }

  _flush(callback) {
    super._flush((err, text) => callback(err, (text ?? '') + this.#failedSeeds()));
  }

  /** The seeds of the processes with a failed test, each under the failed test's own file. */
  #failedSeeds() {
    const lines = [];
    for (const [file, proc] of this.#failed) {
      const seeds = this.#seeds.get(proc);
      if (!seeds) continue;
      const where = relative(process.cwd(), file), group = relative(process.cwd(), proc);
      lines.push(`ℹ   ${where}${group === where ? '' : ` (run in ${group})`}: ${seeds.join(', ')}`);
    }
    if (lines.length === 0) return '';
    return [
      '',
      'ℹ seeds drawn by the test processes with failures (replay one: MURPHY_SEED=N node --import ./test/loader/register.mjs --test FILE):',
      ...lines,
    ].join('\n') + '\n';
  }

  #list() {
    if (this.#skips.length === 0) return 'ℹ skipped: none\n';
    const lines = [`ℹ skipped ${this.#skips.length} (test or suite, and why):`, ...this.#skips.map((s) => `ℹ   ${s}`)];
    return lines.join('\n') + '\n';
  }
}
