// Types of scripts/quiet-install.mjs (a plain .mjs: the package's install script runs it with node).

/**
 * Runs `cmd args`; with `verbose` the output streams through, otherwise it is collected and
 * written to `err` only if the command fails. Resolves to { code, output }.
 */
export function runQuietly(
  cmd: string,
  args: string[],
  opts?: { verbose?: boolean; err?: { write(s: string): unknown }; cwd?: string; env?: NodeJS.ProcessEnv },
): Promise<{ code: number; output: string }>;
