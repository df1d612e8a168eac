#!/usr/bin/env node
// The murphy-native command line. Each command lives in lib/commands/<name>.ts
// and exports a yargs CommandModule; this file only assembles them.
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { commands } from './commands/index.js';

async function main(): Promise<void> {
  let cli = yargs(hideBin(process.argv))
    .scriptName('murphy-native')
    .strict()
    .demandCommand(1, 'Name a command; --help lists them.')
    .recommendCommands()
    .help()
    .wrap(Math.min(110, process.stdout.columns ?? 100));
  for (const c of commands) cli = cli.command(c);
  await cli.parseAsync();
}

main().catch((err: unknown) => {
  const msg = err instanceof Error ? err.message : String(err);
  process.stderr.write(`murphy-native: ${msg}\n`);
  process.exitCode = 1;
});
