// Types of test/test-files.mjs (a plain .mjs: `npm test` runs it with node before any TypeScript loader).

/** The slowest files, slowest first, relative to the repository. */
export const SLOWEST: string[];
/** The test files that test/groups/*.test.ts import, relative to the repository. */
export function groupedFiles(): string[];
/** The run order: the SLOWEST that exist, then the rest alphabetically; each file once; grouped files through their group. */
export function testFiles(): string[];
