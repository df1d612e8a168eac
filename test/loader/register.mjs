// `node --import ./test/loader/register.mjs`: runs the tests' TypeScript (test/**/*.ts and the
// lib/**/*.ts they import) with about 0.2 s less CPU a process than `--import tsx`, which
// `npm test` pays once per test file (see test/loader/hooks.mjs). Stack traces point into the
// .ts sources. Child processes the tests start use it too (TS_LOADER in test/helpers/cli.ts; the CLI
// runs from dist/ when that is fresh), except where a test is about tsx itself.
//
// MURPHY_TEST_SOURCE_MAPS=reporter (set by `npm test`) leaves Node's source maps off: with them on,
// each process decodes and indexes its bundle's whole source map when the bundle loads, ~60 ms
// of CPU a test process. Stack traces then point into the bundle, and test/skip-summary-reporter.mjs
// maps the frames of a failed test's error back to the .ts sources (only when one fails).
import { register } from 'node:module';

const SOURCE_MAPS = process.env.MURPHY_TEST_SOURCE_MAPS ?? 'node';
if (SOURCE_MAPS !== 'node' && SOURCE_MAPS !== 'reporter') {
  throw new Error(`MURPHY_TEST_SOURCE_MAPS must be "node" (the default: Node maps every stack trace) or "reporter" (the test reporter maps failures' stacks); got ${JSON.stringify(SOURCE_MAPS)}`);
}
if (SOURCE_MAPS === 'node') process.setSourceMapsEnabled(true);
register('./hooks.mjs', import.meta.url);
