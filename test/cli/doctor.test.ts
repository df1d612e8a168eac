// `murphy-native doctor` runs as a user would run it and reports the binary, CPU and CUDA.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { cli } from '../helpers/cli.js';

const run = (...args: string[]) => spawnSync(process.execPath, cli(...args), { encoding: 'utf8' });

describe('murphy-native doctor', () => {
  it('prints the binary, CPU and CUDA status', () => {
    const r = run('doctor');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /native addon\s+(CPU-only|CUDA-enabled), (local build|prebuilt binary|local CUDA build|MURPHY_NATIVE_BINARY): \S+\.node/);
    assert.match(r.stdout, /\n\s+why: (a local (CPU|CUDA) build|no local build|MURPHY_NATIVE_BINARY is set)/, 'doctor says why this binary');
    assert.match(r.stdout, /cpu\s+\d+ kernel threads .* SIMD: (avx512|avx2|baseline)/);
    assert.match(r.stdout, /cuda\s+(no CUDA device: .+|runtime \d+)/);
    assert.match(r.stdout, /sandbox\s+(bubblewrap|no bubblewrap \(weaker isolation\)), mode \S+/);
    assert.match(r.stdout, /network\s+\S+/);
  });
  it('--json gives the same as data', () => {
    const r = run('doctor', '--json');
    assert.equal(r.status, 0, r.stderr);
    const j = JSON.parse(r.stdout) as { binary: { cuda: boolean }; cpu: { threads: number }; cuda: { available: boolean; reason: string } };
    assert.ok(j.cpu.threads >= 1);
    if (!j.cuda.available) assert.match(j.cuda.reason, /^no CUDA device: /);
  });
  it('an unknown command is a clear error', () => {
    const r = run('trian');
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /Unknown argument|Did you mean/);
  });
});
