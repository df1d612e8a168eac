#!/usr/bin/env node
// The murphy-native command line. Each command lives in lib/commands/<name>.ts
// and exports a yargs CommandModule; this file only assembles them, checks the flags every
// command shares rules for (lib/commands/flags.ts), and prints errors in one style
// (lib/commands/errors.ts).
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { exitCodeOf, formatCommandError } from './commands/errors.js';
import { checkFlags, UsageError } from './commands/flags.js';
import { commands } from './commands/index.js';
import { skipHelpCache } from './commands/help-cache.js';

const args = hideBin(process.argv);
const names = new Set(commands.map((c) => String(c.command).split(' ')[0]));
const command = args.find((a) => !a.startsWith('-')) ?? null;
const verbose = args.includes('--verbose');

async function main(): Promise<void> {
  let cli = yargs(args)
    .scriptName('murphy-native')
    .strict()
    .option('verbose', { type: 'boolean', global: true, describe: 'Print the stack trace of an error' })
    .demandCommand(1, 'Name a command; --help lists them.')
    .recommendCommands()
    .help()
    .showHelpOnFail(false)
    .fail((msg, err) => {
      throw err ?? new UsageError(msg);
    })
    .middleware((argv) => {
      checkFlags(String(argv._[0] ?? ''), argv as Record<string, unknown>);
    })
    .wrap(Math.min(110, process.stdout.columns ?? 100));
  for (const c of commands) cli = cli.command(c);
  skipHelpCache(cli);
  await cli.parseAsync();
}

main().catch((err: unknown) => {
  process.stderr.write(formatCommandError(err, command && names.has(command) ? command : null, verbose));
  process.exitCode = exitCodeOf(err);
});
