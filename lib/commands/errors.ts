// One error style for every command: `murphy-native <command>: <what and where>` on one line,
// exit status 1 (130 after SIGINT), no help text, and the stack trace only with --verbose.
import { UsageError } from './flags.js';

const PREFIX = /^(murphy-native(\s+[\w-]+)?:\s*)+/;

/** The message without the "murphy-native ...:" prefixes inner layers put on it. */
export function bareMessage(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.replace(PREFIX, '').trim();
}

/** The lines printed for an error of `command` (null when unknown). */
export function formatCommandError(err: unknown, command: string | null, verbose: boolean): string {
  const head = `murphy-native${command ? ` ${command}` : ''}: ${bareMessage(err)}`;
  const hint = err instanceof UsageError ? ` (see murphy-native${command ? ` ${command}` : ''} --help)` : '';
  const stack = verbose && err instanceof Error && err.stack ? `\n${err.stack}` : '';
  return head + hint + stack + '\n';
}

/** Exit status for an error: its own exitCode (e.g. 130 for an interrupted run), else 1. */
export function exitCodeOf(err: unknown): number {
  const c = (err as { exitCode?: unknown } | null)?.exitCode;
  return typeof c === 'number' && Number.isInteger(c) && c > 0 ? c : 1;
}
