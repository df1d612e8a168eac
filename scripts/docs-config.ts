// npm run docs:config: regenerates docs/training.md's configuration table from the schema.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { withConfigTable } from '../lib/config/docs-table.js';

const path = fileURLToPath(new URL('../docs/training.md', import.meta.url));
const before = readFileSync(path, 'utf8');
const after = withConfigTable(before);
if (after === before) {
  console.log('docs/training.md: the configuration table is up to date');
} else {
  writeFileSync(`${path}.tmp`, after);
  renameSync(`${path}.tmp`, path);
  console.log('docs/training.md: the configuration table was regenerated');
}
