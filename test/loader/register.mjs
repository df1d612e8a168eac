// `node --import ./test/loader/register.mjs`: runs the tests' TypeScript (test/**/*.ts and the
// lib/**/*.ts they import) with about 0.2 s less CPU a process than `--import tsx`, which
// `npm test` pays once per test file (see test/loader/hooks.mjs). Stack traces point into the
// .ts sources. Child processes the tests start use it too (TS_LOADER in test/helpers/cli.ts; the CLI
// runs from dist/ when that is fresh), except where a test is about tsx itself.
import { register } from 'node:module';

process.setSourceMapsEnabled(true);
register('./hooks.mjs', import.meta.url);
