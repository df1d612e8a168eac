// Types of test/loader/cache-dirs.mjs (a plain .mjs: the loader hooks and test/test-files.mjs run it without TypeScript).

/** esbuild's output for test/loader/hooks.mjs. */
export const TS_CACHE: string;
/** The compiled C/C++ helpers of test/helpers/compile-cache.ts. */
export const CC_CACHE: string;

/**
 * Removes the entries of `dir` (files or folders) last written more than `maxAgeDays` ago, at
 * most once per `everyDays` (a `.pruned` stamp in the folder); returns how many went.
 */
export function pruneCache(dir: string, opts?: { maxAgeDays?: number; everyDays?: number; now?: number }): number;
