// Types of test/loader/runnable.mjs for the TypeScript tests that import it.
/** Where the runnable bundle of the entry `file` (an absolute X.ts) goes: X.bundle.mjs beside it. */
export function runnablePath(file: string): string;
/** The entry whose runnable bundle is at `path`; undefined for any other file. */
export function entryOf(path: unknown): string | undefined;
/** Bundles `files` (absolute .ts paths) and writes each one's runnable copy; returns their paths, in order. */
export function writeRunnable(files: string[]): Promise<string[]>;
/** Removes the runnable bundles under `dir` whose test file is gone; returns their paths. */
export function removeOrphans(dir: string): string[];
