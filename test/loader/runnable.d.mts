// Types of test/loader/runnable.mjs for the TypeScript tests that import it.
/** Where the runnable bundles go: node_modules/.cache/murphy-test in the repository. */
export const RUNNABLE_DIR: string;
/** Where the runnable bundle of the entry `file` (an absolute .ts path under `root`) goes, in `dir`. */
export function runnablePath(file: string, dir?: string, root?: string): string;
/** The entry whose runnable bundle is at `path`; undefined for any other file. */
export function entryOf(path: unknown, dir?: string, root?: string): string | undefined;
/** Bundles `files` (absolute .ts paths) and writes each one's runnable copy; returns their paths, in order. */
export function writeRunnable(files: string[], dir?: string, root?: string): Promise<string[]>;
/** Removes the runnable bundles in `dir` whose test file is gone; returns their paths. */
export function removeOrphans(dir?: string, root?: string): string[];
