// yargs's help cache, skipped (lib/cli.ts calls skipHelpCache on the assembled command line).
import type { Argv } from 'yargs';

/**
 * Before yargs runs a command's handler, it renders that command's whole --help text and keeps
 * it, in case the handler calls showHelp() (yargs's usage.cacheHelpMessage, on every run: its
 * command module always has a handler). For `train`'s ~100 options that is 100-150 ms of CPU,
 * mostly string-width's grapheme segmentation, on every run, a refused flag included. No
 * handler here asks yargs for help (errors go through .fail and formatCommandError), so the
 * cache is skipped. --help itself renders as before. test/cli/help-cache.test.ts fails if a
 * yargs release renames the method, so that this does not silently stop working.
 */
export function skipHelpCache(cli: Argv): void {
  const usage = (cli as unknown as YargsInternals).getInternalMethods?.()?.getUsageInstance?.();
  if (typeof usage?.cacheHelpMessage === 'function') usage.cacheHelpMessage = () => {};
}

/** The part of yargs's undocumented internals that skipHelpCache touches. */
export interface YargsInternals {
  getInternalMethods?: () => { getUsageInstance?: () => { cacheHelpMessage?: () => void } | undefined } | undefined;
}
