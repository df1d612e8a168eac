// scripts/quiet-install.mjs: `npm install` keeps node-gyp's output back unless the build fails.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runQuietly } from '../../scripts/quiet-install.mjs';

function sink(): { write(s: string): boolean; text: string } {
  return { text: '', write(s: string) { this.text += s; return true; } };
}

describe('quiet install', () => {
  it('a successful build prints nothing (its output is kept for the caller)', async () => {
    const err = sink();
    const r = await runQuietly(process.execPath, ['-e', 'for (let i = 0; i < 96; i++) console.log("gyp info line " + i); console.error("warning: x"); console.log("gyp info ok")'], { err });
    assert.equal(r.code, 0);
    assert.equal(err.text, '');
    assert.match(r.output, /gyp info line 95/);
    assert.match(r.output, /gyp info ok/);
  });
  it('a failed build shows everything it printed, and its exit status', async () => {
    const err = sink();
    const r = await runQuietly(process.execPath, ['-e', 'console.log("gyp info spawn make"); console.error("grpo_loss.cc:1: error: expected ;"); process.exit(2)'], { err });
    assert.equal(r.code, 2);
    assert.match(err.text, /gyp info spawn make/);
    assert.match(err.text, /grpo_loss\.cc:1: error: expected ;/);
  });
  it('a command that cannot start is a failure with its reason', async () => {
    const err = sink();
    const r = await runQuietly('/nonexistent/node-gyp', [], { err });
    assert.notEqual(r.code, 0);
    assert.match(err.text, /ENOENT/);
  });
});
