// docs/training.md's configuration table is a checked artifact: regenerated from the schema
// here and compared with the committed text.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { TABLE_END, TABLE_START, withConfigTable } from '../../lib/config/docs-table.js';
import { CONFIG_KEYS, kebab } from '../../lib/config/index.js';

const doc = readFileSync(fileURLToPath(new URL('../../docs/training.md', import.meta.url)), 'utf8');

describe('docs/training.md configuration table', () => {
  it('is what the schema generates', () => {
    assert.ok(
      withConfigTable(doc) === doc,
      "docs/training.md's configuration table is out of date with lib/config/schema.ts; run `npm run docs:config` and commit the result",
    );
  });
  it('lists every key once, with its flag', () => {
    const table = doc.slice(doc.indexOf(TABLE_START), doc.indexOf(TABLE_END));
    for (const k of CONFIG_KEYS) {
      const rows = table.split('\n').filter((l) => l.startsWith(`| \`${k}\` | \`--${kebab(k)}\` |`));
      assert.equal(rows.length, 1, `key ${k}`);
    }
  });
  it('a stale table is detected', () => {
    const stale = doc.replace(/^\| `evalSamples` .*\n/m, '');
    assert.notEqual(stale, doc);
    assert.notEqual(withConfigTable(stale), stale);
    assert.throws(() => withConfigTable('no markers here'), /config-table markers are missing/);
  });
});
