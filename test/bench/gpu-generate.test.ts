// bench/gpu-generate.bench.ts's device part without a GPU: the bandwidth bound against hand
// counts, and the whole script in --dry-run (device 'emulate', tiny shape) so that its code path
// runs in npm test. No timing is asserted: only that every figure it prints was measured.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { boundFraction, decodeStepBytes } from '../../bench/generate-bound.js';
import type { ModelSizes } from '../../lib/model/index.js';
import { TS_LOADER } from '../helpers/cli.js';

const QWEN3_06B: ModelSizes = {
  modelType: 'qwen3', vocabSize: 151936, hiddenSize: 1024, intermediateSize: 3072, numLayers: 28, numHeads: 16,
  numKvHeads: 8, headDim: 128, maxPositionEmbeddings: 40960, tieWordEmbeddings: true, ropeTheta: 1000000,
};

test('decode step bytes: Qwen3-0.6B bf16 by hand (weights once, each sequence\'s KV once)', () => {
  // per layer: q 1024x2048, k and v 1024x1024 each, o 2048x1024, gate/up/down 3 x 1024x3072,
  // norms 2 x 1024 + q/k norms 2 x 128 = 15,730,944; x 28 = 440,466,432; + final norm 1,024
  // + the tied head 151,936 x 1,024 = 155,582,464 -> 596,049,920 parameters read, 2 bytes each
  const one = decodeStepBytes(QWEN3_06B, 2, [1025]);
  assert.equal(one.weights, 2 * (596_049_920 + 1024)); // + the one embedding row gathered
  // KV per token: 2 (K, V) x 8 heads x 128 x 28 layers x 2 bytes = 114,688
  assert.equal(one.kv, 1025 * 114_688);
  const b = decodeStepBytes(QWEN3_06B, 2, [1025, 1030, 7]);
  assert.equal(b.weights, 2 * (596_049_920 + 3 * 1024));
  assert.equal(b.kv, (1025 + 1030 + 7) * 114_688);
  assert.equal(b.total, b.weights + b.kv);
  // untied: the head is read, the embedding only at the gathered rows
  const untied = decodeStepBytes({ ...QWEN3_06B, tieWordEmbeddings: false }, 2, [1025]);
  assert.equal(untied.weights, one.weights);
  // f32 storage doubles both
  const f32 = decodeStepBytes(QWEN3_06B, 4, [1025]);
  assert.equal(f32.total, 2 * one.total);
  // 4.8 GB/s-worth of bytes in one second at 4.8 GB/s copy bandwidth: the bound exactly
  assert.equal(boundFraction(4.8e9, 1, 4.8), 1);
  assert.equal(boundFraction(4.8e9, 2, 4.8), 0.5);
});

test('gpu-generate.bench.ts --device --dry-run (emulated engine, tiny shape): every section runs and every figure is measured', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpu-generate-'));
  try {
    const json = join(dir, 'out.json');
    const script = fileURLToPath(new URL('../../bench/gpu-generate.bench.ts', import.meta.url));
    const r = spawnSync(process.execPath, [...TS_LOADER, script, '--device', '--dry-run', '--no-torch', '--json', json], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr}`);
    const doc = JSON.parse(readFileSync(json, 'utf8'));
    assert.match(doc.device, /dry-run/);
    assert.ok(doc.copy.gbps > 0);
    assert.deepEqual(doc.decode.map((x: { batch: number }) => x.batch), [1, 4]);
    for (const row of doc.decode) {
      assert.equal(row.decode_tokens, row.batch * row.decode_steps, 'every timed decode step decodes the whole batch');
      assert.ok(row.decode_steps >= 1 && row.decode_tokens_per_s > 0 && row.bound_tokens_per_s > 0 && row.bound_fraction > 0, JSON.stringify(row));
      assert.ok(row.prefill_tokens >= row.batch * row.prompt_tokens, 'every prompt was prefilled');
    }
    const peer = doc.decode.find((x: { batch: number }) => x.batch === 4);
    assert.equal(peer.torch_ratio, null);
    assert.match(peer.note, /not run \(--no-torch\)/);
    const t = doc.tree;
    assert.ok(t.sharing.prefill_tokens < t.no_sharing.prefill_tokens && t.prefill_saved_fraction > 0, JSON.stringify(t));
    assert.equal(t.sharing.generated_tokens, t.no_sharing.generated_tokens);
    assert.equal(t.sharing.generated_tokens, 1 * 8 * (1 + 4) * 4);
    assert.equal(doc.goals.prefill_saved.value, t.prefill_saved_fraction);
    assert.equal(doc.goals.torch_ratio_batch32.rows[0].value, null);
    assert.equal(doc.goals.torch_ratio_batch32.rows[0].met, null, 'a goal with nothing measured is null, not false or true');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
