// Node's spec reporter, plus one thing: before the closing summary ("ℹ tests N" ... "ℹ duration_ms"),
// it lists every skipped test or suite with the file it is in and the reason it gave, so that a
// skip (no Chromium, no C++ compiler, no torch, ...) is visible at the end of `npm test` rather than
// buried in thousands of lines. Used by the "test" scripts in package.json. When the runner runs
// under test/loader (npm test; not test:gpu's tsx), a test's location (its file and line, printed
// with a failure and in the skip list) is mapped back through the loader's bundle of the file it
// ran in (a group's test shows its own file, not the group's).
import { spec } from 'node:test/reporters';
import { relative } from 'node:path';
import { originalLocation } from './loader/hooks.mjs';

/** Whether the runner gives its test files test/loader (its own --import, which it passes on to them). */
const UNDER_LOADER = process.execArgv.some((a, i, all) => (a.startsWith('--import=') || all[i - 1] === '--import') && /(^|[/=])test\/loader\/register\.mjs$/.test(a));

// `spec` is a factory; its instances' class is the one to extend.
const SpecReporter = Object.getPrototypeOf(new spec()).constructor;

export default class SkipSummaryReporter extends SpecReporter {
  #skips = [];
  #listed = false;

  _transform(event, encoding, callback) {
    const { type, data } = event;
    // (1:1 is the test of the file itself: its own file and line)
    if (UNDER_LOADER && data?.file && data.line !== undefined && data.column !== undefined && !(data.line === 1 && data.column === 1)) {
      const at = originalLocation(data.file, data.line, data.column);
      if (at) Object.assign(data, at);
    }
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

  #list() {
    if (this.#skips.length === 0) return 'ℹ skipped: none\n';
    const lines = [`ℹ skipped ${this.#skips.length} (test or suite, and why):`, ...this.#skips.map((s) => `ℹ   ${s}`)];
    return lines.join('\n') + '\n';
  }
}
