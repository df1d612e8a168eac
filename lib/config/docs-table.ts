// docs/training.md's configuration table is generated from the schema: the text between the
// two markers below is configTableMarkdown()'s output. `npm run docs:config` rewrites it;
// test/train/config-docs.test.ts fails when it is out of date.
import { configTableMarkdown } from './index.js';

export const TABLE_START = '<!-- config-table: generated from lib/config/schema.ts by `npm run docs:config`; do not edit by hand -->';
export const TABLE_END = '<!-- config-table: end -->';

/** `doc` with the text between the markers replaced by the current table. */
export function withConfigTable(doc: string, where = 'docs/training.md'): string {
  const a = doc.indexOf(TABLE_START);
  const b = doc.indexOf(TABLE_END);
  if (a < 0 || b < a) throw new Error(`${where}: the config-table markers are missing; put ${TABLE_START} and ${TABLE_END} around the table`);
  return `${doc.slice(0, a + TABLE_START.length)}\n${configTableMarkdown()}\n${doc.slice(b)}`;
}
