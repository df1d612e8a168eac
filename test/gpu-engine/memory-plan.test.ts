// The CUDA engine's memory plan against sizes computed by hand, for the published configs of
// Qwen3-0.6B/1.7B/4B/8B and OLMo-2-1B/7B. The config.json values below are transcribed from
// the models' published config.json files; the parameter counts they give match the totals
// and non-embedding counts on the model cards (Qwen3: 0.6B/0.44B, 1.7B/1.4B, 4.0B/3.6B,
// 8.2B/6.95B; OLMo-2: 1.5B, 7.3B).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  formatMemoryPlan, keptLogitsBytes, lossChunkRows, memoryPlan, modelShapeFromHfConfig, parameterCount, planProblem, type ModelShape,
} from '../../lib/gpu/memory-plan.js';
import { cli } from '../helpers/cli.js';

const qwen3 = (o: Record<string, unknown>) => ({
  architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', vocab_size: 151936, head_dim: 128, hidden_act: 'silu',
  max_position_embeddings: 40960, rope_theta: 1000000, rms_norm_eps: 1e-6, torch_dtype: 'bfloat16', ...o,
});
const olmo2 = (o: Record<string, unknown>) => ({
  architectures: ['Olmo2ForCausalLM'], model_type: 'olmo2', vocab_size: 100352, hidden_act: 'silu',
  max_position_embeddings: 4096, rope_theta: 500000, rms_norm_eps: 1e-6, tie_word_embeddings: false, torch_dtype: 'float32', ...o,
});
const CONFIGS: Record<string, Record<string, unknown>> = {
  'Qwen3-0.6B': qwen3({ hidden_size: 1024, intermediate_size: 3072, num_hidden_layers: 28, num_attention_heads: 16, num_key_value_heads: 8, tie_word_embeddings: true }),
  'Qwen3-1.7B': qwen3({ hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 28, num_attention_heads: 16, num_key_value_heads: 8, tie_word_embeddings: true }),
  'Qwen3-4B': qwen3({ hidden_size: 2560, intermediate_size: 9728, num_hidden_layers: 36, num_attention_heads: 32, num_key_value_heads: 8, tie_word_embeddings: true }),
  'Qwen3-8B': qwen3({ hidden_size: 4096, intermediate_size: 12288, num_hidden_layers: 36, num_attention_heads: 32, num_key_value_heads: 8, tie_word_embeddings: false }),
  // OLMo-2 gives no head_dim: hidden_size / num_attention_heads = 128.
  'OLMo-2-1B': olmo2({ hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16, num_attention_heads: 16, num_key_value_heads: 16 }),
  'OLMo-2-7B': olmo2({ hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 32 }),
};
const shape = (name: string): ModelShape => modelShapeFromHfConfig(CONFIGS[name]!, name);

// By hand: per layer q (H x 16*128) + k, v (H x 8*128 each) + o + gate, up, down (3 H I) +
// norms; plus the embedding (and lm_head when untied) and the final norm.
//   Qwen3-1.7B layer: 2048*2048 + 2*2048*1024 + 2048*2048 + 3*2048*6144 + (2*2048 + 2*128)
//                   = 4194304 + 4194304 + 4194304 + 37748736 + 4352 = 50336000
//   total = 151936*2048 + 28*50336000 + 2048 = 311164928 + 1409408000 + 2048 = 1720574976
const PARAMS: Record<string, { total: number; nonEmbedding: number }> = {
  'Qwen3-0.6B': { total: 596049920, nonEmbedding: 440467456 },
  'Qwen3-1.7B': { total: 1720574976, nonEmbedding: 1409410048 },
  'Qwen3-4B': { total: 4022468096, nonEmbedding: 3633511936 },
  'Qwen3-8B': { total: 8190735360, nonEmbedding: 6946075648 },
  'OLMo-2-1B': { total: 1484916736, nonEmbedding: 1073874944 },
  'OLMo-2-7B': { total: 7298617344, nonEmbedding: 6476533760 },
};
// One layer's saved activations per token, by hand: 2 bytes x (4H + 3*q_dim + 3*kv_dim + 3I)
// + 4 bytes x (Qwen3: 2 + 2*heads + kv_heads; OLMo-2: 4 + heads).
//   Qwen3-1.7B: 2*(8192 + 6144 + 3072 + 18432) + 4*(2 + 32 + 8) = 71680 + 168 = 71848
//   OLMo-2-7B:  2*(16384 + 12288 + 12288 + 33024) + 4*(4 + 32) = 147968 + 144 = 148112
const LAYER_ACT: Record<string, number> = {
  'Qwen3-0.6B': 45224, 'Qwen3-1.7B': 71848, 'Qwen3-4B': 109864, 'Qwen3-8B': 137512, 'OLMo-2-1B': 90192, 'OLMo-2-7B': 148112,
};

const GiB = 2 ** 30;

describe('memory plan', () => {
  it('reads the shapes from config.json (OLMo-2 head_dim derived, tie default false)', () => {
    assert.deepEqual(shape('Qwen3-8B'), { modelType: 'qwen3', vocab: 151936, hidden: 4096, intermediate: 12288, layers: 36, heads: 32, kvHeads: 8, headDim: 128, tied: false });
    assert.equal(shape('OLMo-2-7B').headDim, 128);
    const { tie_word_embeddings: _, ...untold } = CONFIGS['Qwen3-1.7B']!;
    assert.equal(modelShapeFromHfConfig(untold).tied, false);
  });
  it('bad configs name the field', () => {
    assert.throws(() => modelShapeFromHfConfig({ ...CONFIGS['Qwen3-1.7B'], model_type: 'llama' }, 'm/config.json'), /^ModelShapeError: m\/config.json: model_type "llama" is not supported/);
    assert.throws(() => modelShapeFromHfConfig({ ...CONFIGS['Qwen3-1.7B'], hidden_size: 0 }), /"hidden_size" must be a positive integer/);
    assert.throws(() => modelShapeFromHfConfig({ ...CONFIGS['Qwen3-1.7B'], num_key_value_heads: 5 }), /not a multiple of num_key_value_heads 5/);
  });
  for (const name of Object.keys(CONFIGS)) {
    it(`${name}: parameters and per-layer activations match the hand count`, () => {
      const s = shape(name);
      const c = parameterCount(s);
      assert.equal(c.total, PARAMS[name]!.total);
      assert.equal(c.total - c.embedding - c.lmHead, PARAMS[name]!.nonEmbedding);
      const p = memoryPlan(s, { microBatchTokens: 1024, gradientCheckpointing: false, beta: 0 });
      assert.equal(p.perToken.layer, LAYER_ACT[name]);
      assert.equal(p.perToken.stored, s.layers * LAYER_ACT[name]!);
      assert.equal(p.computeWeights + p.masterF32 + p.adamMoments + p.gradientsF32, 18 * PARAMS[name]!.total);
    });
  }

  it('Qwen3-1.7B on an 80 GiB device, by hand', () => {
    const P = 1720574976;
    const p = memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 16384, gradientCheckpointing: null, beta: 0, deviceFreeBytes: 80 * GiB });
    assert.equal(p.gradientCheckpointing, true); // auto: on at >= 1e9 parameters
    assert.deepEqual([p.computeWeights, p.masterF32, p.adamMoments, p.gradientsF32, p.reference], [2 * P, 4 * P, 8 * P, 4 * P, 0]);
    assert.equal(p.stateTotal, 30970349568);
    // per token: stored 28 layer inputs 28*2*2048 = 114688; one layer recomputed 71848;
    // backward: 71848 + 2*4*2048 = 88232; final norm + batch vectors 4*2048 + 4 + 32 = 8228.
    assert.deepEqual(p.perToken, { layer: 71848, stored: 114688, recompute: 71848, backward: 88232, other: 8228, total: 282996 });
    // workspace: 32 MiB + 512 tokens * 151936 * (4 + 2) bytes = 33554432 + 466747392
    assert.equal(p.workspace.total, 500301824);
    // kept logits (keepLogitsMb 1024, the default): chunks of 110 rows (64 MiB / (151936 x 4)
    // bytes), 66851840 bytes each; 1024 MiB holds 16 of the micro-batch's 149
    assert.deepEqual(p.keptLogits, { keepLogitsMb: 1024, bytes: 16 * 66851840 });
    assert.equal(p.totalForMicroBatch, 30970349568 + 500301824 + 1069629440 + 16384 * 282996);
    // usable: 80 GiB - 5% = 81604378624; left = 81604378624 - 30970349568 - 500301824 = 50133727232
    // (50133727232 - 1069629440) / 282996 = 173374.7 -> 173360 (multiple of 16); without
    // checkpointing / (28*71848 + 88232 + 8228 = 2108204) = 23273.0 -> 23264.
    assert.deepEqual(p.device, {
      freeBytes: 80 * GiB, headroom: 4294967296, usable: 81604378624, maxMicroBatchTokens: 173360, maxMicroBatchTokensOtherCheckpointing: 23264, fits: true,
    });
    assert.equal(planProblem(p), null);
  });

  it('Qwen3-1.7B with --storage f32 on an 80 GiB device, by hand: no bf16 copy, every stored value twice the bytes', () => {
    const P = 1720574976;
    const p = memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 16384, gradientCheckpointing: null, beta: 0, storage: 'f32', deviceFreeBytes: 80 * GiB });
    assert.equal(p.storage, 'f32');
    // the master weights are the compute weights: 4P + 8P + 4P
    assert.deepEqual([p.computeWeights, p.masterF32, p.adamMoments, p.gradientsF32, p.reference], [0, 4 * P, 8 * P, 4 * P, 0]);
    assert.equal(p.stateTotal, 27529199616);
    // one layer: 4 bytes x (4H + 3q + 3kv + 3I = 35840 values) + 4 x 42 fp32 values = 143528; stored:
    // 28 layer inputs of 4*2048 = 229376; backward 143528 + 2*4*2048 = 159912; other 2*4*2048 + 4 + 32 = 16420
    assert.deepEqual(p.perToken, { layer: 143528, stored: 229376, recompute: 143528, backward: 159912, other: 16420, total: 549236 });
    // workspace: 32 MiB + 512 tokens * 151936 * (4 + 4) bytes
    assert.equal(p.workspace.total, 655884288);
    // (81604378624 - 27529199616 - 655884288 - 1069629440 kept logits) / 549236 = 95313.7 -> 95312;
    // without checkpointing / 4195116 -> 12464
    assert.equal(p.device!.maxMicroBatchTokens, 95312);
    assert.equal(p.device!.maxMicroBatchTokensOtherCheckpointing, 12464);
    // with beta > 0 the reference is fp32 too; bf16 storage is the default
    assert.equal(memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 1, gradientCheckpointing: null, beta: 0.1, storage: 'f32' }).reference, 4 * P);
    assert.equal(memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 1, gradientCheckpointing: null, beta: 0 }).storage, 'bf16');
    assert.match(planProblem(memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 131072, gradientCheckpointing: null, beta: 0, storage: 'f32', deviceFreeBytes: 80 * GiB }))!,
      /lower --micro-batch-tokens to 95312 or less or use --storage bf16/);
    assert.match(formatMemoryPlan(p), /storage f32: fp32 master = compute weights 6\.41 GiB, fp32 moments 12\.82 GiB, fp32 gradients 6\.41 GiB: 25\.64 GiB/);
  });

  it('too many tokens without checkpointing: names --micro-batch-tokens and --gradient-checkpointing', () => {
    const p = memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 32768, gradientCheckpointing: false, beta: 0, deviceFreeBytes: 80 * GiB });
    assert.equal(p.device!.fits, false);
    assert.equal(p.device!.maxMicroBatchTokens, 23264);
    assert.equal(planProblem(p), `--micro-batch-tokens 32768 needs ${((30970349568 + 500301824 + 1069629440 + 32768 * 2108204) / GiB).toFixed(2)} GiB but 76.00 GiB of the device is usable: lower --micro-batch-tokens to 23264 or less or turn on --gradient-checkpointing (then 173360 fit) or lower --keep-logits-mb (its kept logits take 1.00 GiB)`);
  });

  it('Qwen3-8B does not fit one 141 GB device: state 18 bytes per parameter (+2 for the KL reference)', () => {
    const P = 8190735360;
    const h200 = 150754820096; // 140.4 GiB, an H200's total memory
    const p = memoryPlan(shape('Qwen3-8B'), { microBatchTokens: 8192, gradientCheckpointing: null, beta: 0.04, deviceFreeBytes: h200 });
    assert.equal(p.reference, 2 * P);
    assert.equal(p.stateTotal, 20 * P);
    assert.equal(p.device!.maxMicroBatchTokens, 0);
    assert.match(planProblem(p)!, /^the model state needs 153\.03 GiB .* but only 133\.38 GiB of the device is usable: use a smaller model or --beta 0/);
    const p0 = memoryPlan(shape('Qwen3-8B'), { microBatchTokens: 8192, gradientCheckpointing: null, beta: 0, deviceFreeBytes: h200 });
    assert.equal(p0.stateTotal, 18 * P); // 137.3 GiB: still more than 133.4 usable
    assert.equal(p0.device!.fits, false);
    assert.doesNotMatch(planProblem(p0)!, /--beta/);
  });

  it('checkpointing auto is off below 1e9 parameters; beta > 0 adds the reference', () => {
    const p = memoryPlan(shape('Qwen3-0.6B'), { microBatchTokens: 4096, gradientCheckpointing: null, beta: 0.1 });
    assert.equal(p.gradientCheckpointing, false);
    assert.equal(p.reference, 2 * 596049920);
    assert.equal(p.device, undefined);
  });

  it('prints the plan in a few lines', () => {
    const text = formatMemoryPlan(memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 16384, gradientCheckpointing: null, beta: 0, deviceFreeBytes: 80 * GiB }));
    assert.match(text, /^memory plan: qwen3, 1\.721B parameters \(28 layers, hidden 2048, 16\/8 heads x 128, intermediate 6144, vocab 151936, tied\)\n/);
    assert.match(text, /storage bf16: bf16 weights 3\.20 GiB, fp32 master 6\.41 GiB, fp32 moments 12\.82 GiB, fp32 gradients 6\.41 GiB: 28\.84 GiB/);
    assert.match(text, /activations 276\.4 KiB per token \(gradient checkpointing on; one layer 70\.2 KiB\)/);
    assert.match(text, /, kept logits 1\.00 GiB \(--keep-logits-mb 1024\)\n/);
    assert.match(text, /up to 173360 tokens per micro-batch fit/);
  });

  it('kept logits (keepLogitsMb): whole chunks of the engines\' size, within the budget and the micro-batch; 0 keeps none', () => {
    // the engines' chunk rows: 256 (the native chunkTokens default), at most 64 MiB of logits
    assert.deepEqual([lossChunkRows(151936), lossChunkRows(4096), lossChunkRows(2 ** 20)], [110, 256, 16]);
    assert.equal(keptLogitsBytes(151936, 500, 1024), 5 * 66851840); // 500 tokens: 5 chunks of 110 rows
    assert.equal(keptLogitsBytes(151936, 1e6, 1024), 16 * 66851840); // many tokens: what 1024 MiB holds
    assert.equal(keptLogitsBytes(151936, 1e6, 63), 0); // less than one chunk
    assert.equal(keptLogitsBytes(151936, 16384, 0), 0);
    // keepLogitsMb 0: the plan of before the device engines kept logits (one chunk, in the workspace)
    const p0 = memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 16384, gradientCheckpointing: null, beta: 0, keepLogitsMb: 0, deviceFreeBytes: 80 * GiB });
    assert.deepEqual(p0.keptLogits, { keepLogitsMb: 0, bytes: 0 });
    assert.equal(p0.totalForMicroBatch, 30970349568 + 500301824 + 16384 * 282996);
    // 50133727232 / 282996 = 177153.9 -> 177152; without checkpointing / 2108204 = 23780.1 -> 23776
    assert.deepEqual([p0.device!.maxMicroBatchTokens, p0.device!.maxMicroBatchTokensOtherCheckpointing], [177152, 23776]);
    assert.doesNotMatch(formatMemoryPlan(p0), /kept logits/);
    // a budget that the micro-batch does not fill: its own tokens' chunks (the largest multiple of 16 that fits counts them)
    const big = memoryPlan(shape('Qwen3-1.7B'), { microBatchTokens: 512, gradientCheckpointing: null, beta: 0, keepLogitsMb: 2 ** 20, deviceFreeBytes: 80 * GiB });
    assert.equal(big.keptLogits.bytes, 5 * 66851840);
    const t = big.device!.maxMicroBatchTokens, left = 50133727232;
    assert.ok(t * 282996 + keptLogitsBytes(151936, t, 2 ** 20) <= left && (t + 16) * 282996 + keptLogitsBytes(151936, t + 16, 2 ** 20) > left, `${t} tokens`);
  });

  it('`murphy-native memory-plan --model DIR` prints the same plan and says what does not fit', () => {
    const dir = mkdtempSync(join(tmpdir(), 'murphy-plan-'));
    try {
      writeFileSync(join(dir, 'config.json'), JSON.stringify(CONFIGS['Qwen3-1.7B']));
      const r = spawnSync(process.execPath, cli('memory-plan', '--model', dir, '--micro-batch-tokens', '32768', '--no-gradient-checkpointing', '--device-memory', '80'), { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^memory plan: qwen3, 1\.721B parameters/);
      assert.match(r.stdout, /up to 23264 tokens per micro-batch fit\n  does not fit: --micro-batch-tokens 32768 needs 94\.64 GiB .* \(then 173360 fit\) or lower --keep-logits-mb \(its kept logits take 1\.00 GiB\)\n$/);
      const none = spawnSync(process.execPath, cli('memory-plan', '--model', dir, '--micro-batch-tokens', '32768', '--no-gradient-checkpointing', '--device-memory', '80', '--keep-logits-mb', '0'), { encoding: 'utf8' });
      assert.equal(none.status, 0, none.stderr);
      assert.match(none.stdout, /up to 23776 tokens per micro-batch fit\n  does not fit: --micro-batch-tokens 32768 needs 93\.65 GiB .* \(then 177152 fit\)\n$/);
      const f32 = spawnSync(process.execPath, cli('memory-plan', '--model', dir, '--storage', 'f32', '--device-memory', '80'), { encoding: 'utf8' });
      assert.equal(f32.status, 0, f32.stderr);
      assert.match(f32.stdout, /\n  storage f32: fp32 master = compute weights .*up to 95312 tokens per micro-batch fit\n$/s);
      const badKeep = spawnSync(process.execPath, cli('memory-plan', '--model', dir, '--keep-logits-mb', '-1'), { encoding: 'utf8' });
      assert.equal(badKeep.status, 1);
      assert.match(badKeep.stderr, /^murphy-native memory-plan: config key "keepLogitsMb" \(--keep-logits-mb\) in memory-plan's flags: must be an integer >= 0 and <= 1073741824; got -1\n$/);
      const bad = spawnSync(process.execPath, cli('memory-plan', '--model', join(dir, 'absent')), { encoding: 'utf8' });
      assert.equal(bad.status, 1);
      assert.match(bad.stderr, /^murphy-native memory-plan: cannot read .*absent\/config\.json: ENOENT[^\n]*\n$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
