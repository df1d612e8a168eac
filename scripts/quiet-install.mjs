#!/usr/bin/env node
// The package's "install" script: node-gyp-build (load a prebuilt addon, else compile the CPU
// addon with node-gyp), with its ~100 lines of output kept back unless something fails.
// On success it prints one line when it compiled, nothing when a prebuild was used. On failure
// it prints everything node-gyp and the compiler said, then one line on what to do.
// MURPHY_VERBOSE_BUILD=1 (or `npm install --loglevel verbose`) shows the output as it comes.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * Runs `cmd args`; with `verbose` the output streams through, otherwise it is collected and
 * written to `err` only if the command fails. Resolves to { code, output }.
 */
export function runQuietly(cmd, args, { verbose = false, err = process.stderr, cwd = process.cwd(), env = process.env } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env, stdio: verbose ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
    const chunks = [];
    child.stdout?.on('data', (c) => chunks.push(c));
    child.stderr?.on('data', (c) => chunks.push(c));
    child.on('error', (e) => chunks.push(Buffer.from(`${cmd}: ${e.message}\n`)));
    child.on('close', (code, signal) => {
      const output = Buffer.concat(chunks).toString('utf8');
      const status = code ?? (signal ? 1 : 0);
      if (status !== 0 && !verbose) err.write(output);
      resolve({ code: status, output });
    });
  });
}

async function main() {
  const require = createRequire(import.meta.url);
  const bin = require.resolve('node-gyp-build/bin.js');
  const verbose = process.env.MURPHY_VERBOSE_BUILD === '1' || ['verbose', 'silly'].includes(process.env.npm_config_loglevel ?? '');
  const { code, output } = await runQuietly(process.execPath, [bin], { verbose });
  if (code !== 0) {
    process.stderr.write(
      `murphy-native: building the native addon failed (output above). It needs python3, make and a C++17 compiler ` +
        `(Debian/Ubuntu: apt-get install python3 make g++); MURPHY_VERBOSE_BUILD=1 npm install shows the build as it runs.\n`,
    );
    process.exit(code);
  }
  if (/gyp info ok/.test(output)) process.stdout.write('murphy-native: compiled the CPU addon (build/Release/murphy_native.node)\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
