// lib/commands/help-cache.ts: yargs renders a command's whole --help text before running its
// handler (100-150 ms of CPU for `train`); the CLI skips that. These tests fail when a yargs
// release changes the internals the skip relies on, instead of letting it stop working unseen.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import yargs, { type Argv } from 'yargs';
import { skipHelpCache, type YargsInternals } from '../../lib/commands/help-cache.js';

/** A command line like lib/cli.ts's, one command with many options, that never exits the process. */
function commandLine(ran: string[]): Argv {
  return yargs(['work', '--n', '3'])
    .scriptName('murphy-native')
    .strict()
    .exitProcess(false)
    .help()
    .command({
      command: 'work',
      describe: 'a command',
      builder: (y) => {
        for (let i = 0; i < 40; i++) y = y.option(`option-${i}`, { type: 'string', describe: `option ${i}, described at some length so that the help text wraps` });
        return y.option('n', { type: 'number' });
      },
      handler: (a) => {
        ran.push(`work ${a.n}`);
      },
    });
}

const usageOf = (cli: Argv) => (cli as unknown as YargsInternals).getInternalMethods!()!.getUsageInstance!() as { cacheHelpMessage: () => void; hasCachedHelpMessage: () => boolean };

describe('yargs help cache', () => {
  it('yargs still has the method skipHelpCache replaces, and still calls it before a handler', async () => {
    const ran: string[] = [];
    const cli = commandLine(ran);
    const usage = usageOf(cli);
    assert.equal(typeof usage.cacheHelpMessage, 'function');
    assert.equal(typeof usage.hasCachedHelpMessage, 'function');
    await cli.parseAsync();
    assert.deepEqual(ran, ['work 3']);
    assert.equal(usage.hasCachedHelpMessage(), true, 'yargs no longer renders the help before the handler: skipHelpCache can go');
  });

  it('after skipHelpCache the handler runs with its arguments and no help text is rendered', async () => {
    const ran: string[] = [];
    const cli = commandLine(ran);
    skipHelpCache(cli);
    const usage = usageOf(cli);
    await cli.parseAsync();
    assert.deepEqual(ran, ['work 3']);
    assert.equal(usage.hasCachedHelpMessage(), false);
  });

  it('--help still prints the command\'s options', async () => {
    const out: string[] = [];
    const cli = commandLine([]);
    skipHelpCache(cli);
    const argv = await cli.parseAsync(['work', '--help'], {}, (_err, _argv, output) => {
      out.push(output);
    });
    assert.ok(argv.help);
    assert.match(out.join(''), /--option-39 +option 39/);
  });
});
