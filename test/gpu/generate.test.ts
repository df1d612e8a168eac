// Generation on the device (issue 14): the paged rollout engine (lib/rollout/paged-engine.ts,
// PagedEngine.onPolicy: the scheduler, DeviceExecutor, PolicyModel.pagedStep over the KV pool)
// against the CPU engine (PolicyModel on device 'cpu': generate(), score(), logits()) on the same
// weights. Skipped without a device (saying why); MURPHY_GPU_DRYRUN=1 runs the same logic with
// the device engine emulated on the CPU (device 'emulate': every kernel through the harness).
// Written without a GPU: it has run emulated only.
//
// What is required (tolerances in docs/gpu.md, "Generation on the device: tests and benchmark"):
//  - greedy, float32 storage: the same token ids as the CPU engine's generate() for 64 tokens
//    (tiny: three prompts of different lengths in one running batch; small: two; the
//    fixtures up to their 64-token context, which ends the sequences with 'length'). A
//    near-tie (the two candidates' CPU logits within F32_TOL.logits x the row's largest |logit|)
//    may end the comparison of one sequence early; it is printed. bf16 storage: every greedy
//    token is the CPU's argmax given the same prefix or within BF16_TOL.logits of it
//    (teacher-forced through the CPU engine's logits), since bf16 margins are too thin for ids;
//  - sampled log-probs: each sampled token's log-prob equals the CPU engine's score of the same
//    token under the processed distribution (temperature 1 and 0.7 through score(); top-k from
//    the CPU logits), within LOGP_TOL;
//  - sampled tokens (T 0.9, top-p 0.9, top-k 40, n = 3) equal the CPU engine's generate() with the
//    same seeds, log-probs within 1e-4 (f32): one seed draws the same random numbers on both;
//  - the sampling distribution through the whole engine: 1,000 first tokens of one prompt
//    (4 requests x n = 250, fixed seeds, so the outcome is deterministic and cannot flake) on
//    an 8-token vocabulary, chi-square against the processed distribution at significance 0.001;
//  - prefix sharing on and off give the same tokens on a tree-shaped workload (G first attempts,
//    G' repairs of each), and sharing saves prefill;
//  - a KV pool too small for the batch preempts and resumes: the same tokens as a roomy pool.
import './binary.js'; // first: selects the CUDA build
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { join } from 'node:path';
import { PolicyModel, packSequences, type ModelSizes } from '../../lib/model/index.js';
import { PagedEngine } from '../../lib/rollout/paged-engine.js';
import { TreeWorkload, type PagedRequest, type SampleResult } from '../../lib/rollout/paged/index.js';
import type { EngineRequest, EngineSample } from '../../lib/rollout/types.js';
import { BF16_TOL, F32_TOL, fixtureRoot, fixtures } from '../gpu-engine/engine-compare.js';
import { Rng } from '../helpers/random.js';
import { assertChiSquare, processedDistribution } from '../helpers/sampling-reference.js';
import { announceSeed, dryRun, gpuOnly } from './common.js';

const seed = announceSeed('gpu/generate');
const device = dryRun ? 'emulate' : 'cuda';
const rng = new Rng(seed);
/** MURPHY_GPU_SMALL=1 (compute-sanitizer in scripts/gpu-check.sh): the small preset's case and three of the chi-square's four option sets are left out. */
const small = process.env.MURPHY_GPU_SMALL === '1';

/** |device log-prob - CPU score| <= atol + rtol |CPU| per token, by storage. */
const LOGP_TOL = { f32: { atol: 1e-4, rtol: 1e-4 }, bf16: { atol: 0.1, rtol: 0.05 } };

function req(promptIds: number[], o: Partial<EngineRequest> = {}): EngineRequest {
  return { promptIds, n: 1, maxTokens: 64, temperature: 0, topP: 1, topK: 0, minP: 0, seed: 0, stopTokenIds: [], ...o };
}

/** The paged engine on the model's own weights (colocated), with its pool and scheduler options. */
function engineOn(m: PolicyModel, o: { kvCacheBlocks?: number; blockSize?: number; prefixSharing?: boolean; tokenBudget?: number } = {}): PagedEngine {
  return PagedEngine.onPolicy(m, { blockSize: 16, tokenBudget: 256, ...o });
}

/** Blocks for every sample's whole sequence at once (and at least one full-context sequence): no preemption. */
function roomyBlocks(m: PolicyModel, reqs: EngineRequest[], blockSize: number): number {
  const need = reqs.reduce((a, r) => a + r.n * Math.ceil((r.promptIds.length + r.maxTokens) / blockSize), 0);
  return Math.max(need, Math.ceil(m.info.maxPositionEmbeddings / blockSize)) + 4;
}

async function run(m: PolicyModel, reqs: EngineRequest[], o: Parameters<typeof engineOn>[1] = {}): Promise<{ out: EngineSample[][]; metrics: PagedEngine['metrics'] }> {
  const e = engineOn(m, { kvCacheBlocks: roomyBlocks(m, reqs, o.blockSize ?? 16), ...o });
  try {
    const out = await e.generate(reqs);
    return { out, metrics: { ...e.metrics } };
  } finally {
    await e.close();
  }
}

const randomPrompt = (n: number, vocab: number) => Array.from({ length: n }, () => rng.int(vocab));

/** Each row's logits of a sequence's positions (CPU engine): rows t predict token t + 1. */
async function cpuLogits(cpu: PolicyModel, seq: number[]): Promise<Float32Array> {
  return cpu.logits(packSequences([seq]));
}

/**
 * Greedy tokens of the device vs the CPU engine: exact ids up to the first near-tie (f32), and
 * every device token the CPU argmax or within `tol` x max|logit| of it given the device's own
 * prefix. Returns the tokens compared exactly.
 */
async function checkGreedy(cpu: PolicyModel, prompt: number[], dev: number[], ref: number[], tol: number, exact: boolean, what: string): Promise<number> {
  const V = cpu.info.vocabSize;
  const z = await cpuLogits(cpu, [...prompt, ...dev]);
  let matched = dev.length;
  for (let i = 0; i < dev.length; i++) {
    const row = z.subarray((prompt.length - 1 + i) * V, (prompt.length + i) * V);
    let best = 0, scale = 0;
    for (let v = 0; v < V; v++) {
      if (row[v]! > row[best]!) best = v;
      scale = Math.max(scale, Math.abs(row[v]!));
    }
    const gap = row[best]! - row[dev[i]!]!;
    assert.ok(gap <= tol * scale, `${what}: token ${i} = ${dev[i]} is not the CPU's argmax ${best} (gap ${gap.toExponential(2)} > ${tol} x ${scale.toFixed(3)}, seed ${seed})`);
    if (exact && matched === dev.length && dev[i] !== ref[i]) {
      matched = i;
      console.log(`# ${what}: near-tie at token ${i} (gap ${gap.toExponential(2)}): ids compared up to it`);
    }
  }
  if (exact) assert.deepEqual(dev.slice(0, matched), ref.slice(0, matched), `${what}: greedy ids (seed ${seed})`);
  return matched;
}

const TINY_CTX: ModelSizes = {
  modelType: 'qwen3', vocabSize: 512, hiddenSize: 64, intermediateSize: 192, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32,
  maxPositionEmbeddings: 256, tieWordEmbeddings: true,
};

describe(`generation on the device (${device}) vs the CPU engine`, () => {
  for (const preset of small ? ['tiny'] as const : ['tiny', 'small'] as const) {
    it(`greedy, f32 storage: the CPU engine's token ids for 64 tokens, prompts of different lengths in one batch (${preset})`, gpuOnly, async () => {
      const s = rng.int(1e6);
      const cpu = await PolicyModel.random(preset, { seed: s });
      const dev = await PolicyModel.random(preset, { seed: s, device, storage: 'f32' });
      const V = cpu.info.vocabSize;
      const prompts = (preset === 'tiny' ? [3, 20, 45] : [3, 45]).map((n) => randomPrompt(n, V));
      const { out } = await run(dev, prompts.map((p) => req(p, { maxTokens: 64 })));
      const refs = await cpu.generate(prompts, { maxNewTokens: 64, temperature: 0 });
      let compared = 0;
      for (const [k, p] of prompts.entries()) {
        const got = out[k]![0]!;
        assert.equal(got.tokenIds.length, 64);
        assert.equal(got.finishReason, 'length');
        compared += await checkGreedy(cpu, p, got.tokenIds, Array.from(refs[k]!.tokens), F32_TOL.logits, true, `${preset} prompt ${k}`);
      }
      assert.ok(compared >= 64, `only ${compared} tokens compared exactly`);
    });
  }

  it('greedy, bf16 storage: every token the CPU argmax given the same prefix, or within the bf16 logits tolerance (tiny)', gpuOnly, async () => {
    const s = rng.int(1e6);
    const cpu = await PolicyModel.random('tiny', { seed: s });
    const dev = await PolicyModel.random('tiny', { seed: s, device, storage: 'bf16' });
    const prompts = [5, 30].map((n) => randomPrompt(n, cpu.info.vocabSize));
    const { out } = await run(dev, prompts.map((p) => req(p, { maxTokens: 64 })));
    for (const [k, p] of prompts.entries()) {
      const [ref] = await cpu.generate([p], { maxNewTokens: 64, temperature: 0 });
      const got = out[k]![0]!.tokenIds;
      await checkGreedy(cpu, p, got, Array.from(ref!.tokens), BF16_TOL.logits, false, `tiny bf16 prompt ${k}`);
      let same = 0;
      while (same < got.length && got[same] === ref!.tokens[same]) same++;
      console.log(`# tiny bf16 prompt ${k}: ${same} of 64 greedy ids equal to the CPU engine's before the first difference`);
    }
  });

  for (const name of fixtures) {
    it(`greedy, f32 storage, fixture ${name}: the CPU engine's ids up to the 64-token context, which ends them with 'length'`, gpuOnly, async () => {
      const dir = join(fixtureRoot, name);
      const cpu = await PolicyModel.load(dir);
      const dev = await PolicyModel.load(dir, { device, storage: 'f32' });
      const ctx = cpu.info.maxPositionEmbeddings;
      const prompts = [randomPrompt(3, cpu.info.vocabSize), randomPrompt(11, cpu.info.vocabSize)];
      const { out } = await run(dev, prompts.map((p) => req(p, { maxTokens: 100 })), { blockSize: 8 });
      for (const [k, p] of prompts.entries()) {
        const [ref] = await cpu.generate([p], { maxNewTokens: 100, temperature: 0 });
        const got = out[k]![0]!;
        assert.equal(got.tokenIds.length, ctx - p.length, 'max tokens clipped to the context');
        assert.equal(got.finishReason, 'length');
        await checkGreedy(cpu, p, got.tokenIds, Array.from(ref!.tokens), F32_TOL.logits, true, `${name} prompt ${k}`);
      }
    });
  }

  for (const storage of ['f32', 'bf16'] as const) {
    it(`sampled log-probs equal the CPU engine's score of the same tokens (T = 1, T = 0.7${storage === 'f32' ? ', top-k 20' : ''}; ${storage} storage, tolerance ${JSON.stringify(LOGP_TOL[storage])})`, gpuOnly, async () => {
      const s = rng.int(1e6);
      const cpu = await PolicyModel.random('tiny', { seed: s, initStd: 0.1 });
      const dev = await PolicyModel.random('tiny', { seed: s, initStd: 0.1, device, storage });
      const V = cpu.info.vocabSize;
      const prompt = randomPrompt(12, V);
      const tol = LOGP_TOL[storage];
      let worst = 0;
      // top-k only in f32: in bf16 the device's top-k set may differ from the CPU's at its boundary (rounding reorders near-equal logits)
      const cases = [{ temperature: 1, topK: 0 }, { temperature: 0.7, topK: 0 }, ...(storage === 'f32' ? [{ temperature: 0.8, topK: 20 }] : [])];
      for (const o of cases) {
        const { out } = await run(dev, [req(prompt, { n: 4, maxTokens: 24, seed: rng.int(2 ** 31), ...o })]);
        for (const sample of out[0]!) {
          const seq = [...prompt, ...sample.tokenIds];
          let ref: number[];
          if (o.topK === 0) {
            const lp = await cpu.score(packSequences([seq]), { temperature: o.temperature });
            ref = sample.tokenIds.map((_, i) => lp[prompt.length + i]!);
          } else {
            // the processed distribution: z / T over the top-k tokens (ties: lowest id first), renormalised
            const z = await cpuLogits(cpu, seq);
            ref = sample.tokenIds.map((tok, i) => {
              const row = Array.from(z.subarray((prompt.length - 1 + i) * V, (prompt.length + i) * V), (x) => x / o.temperature);
              const kept = [...row.keys()].sort((a, b) => row[b]! - row[a]! || a - b).slice(0, o.topK);
              assert.ok(kept.includes(tok), `token ${tok} is outside the top-${o.topK} of the CPU logits (seed ${seed})`);
              const mx = row[kept[0]!]!;
              return row[tok]! - mx - Math.log(kept.reduce((a, v) => a + Math.exp(row[v]! - mx), 0));
            });
          }
          sample.logprobs.forEach((lp, i) => {
            const err = Math.abs(lp - ref[i]!);
            worst = Math.max(worst, err);
            assert.ok(err <= tol.atol + tol.rtol * Math.abs(ref[i]!), `${storage} ${JSON.stringify(o)} token ${i}: device log-prob ${lp} vs CPU ${ref[i]} (seed ${seed})`);
          });
        }
      }
      console.log(`# sampled log-probs, ${storage}: worst |device - CPU| ${worst.toExponential(2)}`);
    });
  }

  it('sampled tokens through the engine equal the CPU engine\'s generate() with the same seeds (T 0.9, top-p 0.9, top-k 40; n = 3; f32)', gpuOnly, async () => {
    // docs/kernels.md, "Random numbers": the same seed gives the same u for the same step on the CPU and on the device; the
    // CPU engine's step is the index of the token in the completion (0 for the first sampled token)
    const s = rng.int(1e6);
    const cpu = await PolicyModel.random('tiny', { seed: s, initStd: 0.1 });
    const dev = await PolicyModel.random('tiny', { seed: s, initStd: 0.1, device, storage: 'f32' });
    const prompts = [4, 19].map((n) => randomPrompt(n, cpu.info.vocabSize));
    const seeds = prompts.map(() => rng.int(2 ** 31));
    const o = { temperature: 0.9, topP: 0.9, topK: 40 };
    const { out } = await run(dev, prompts.map((p, k) => req(p, { ...o, n: 3, maxTokens: 24, seed: seeds[k] })));
    const refs = await cpu.generate(prompts, { ...o, maxNewTokens: 24, n: 3, seeds });
    prompts.forEach((_, k) => {
      for (let j = 0; j < 3; j++) {
        const got = out[k]![j]!, ref = refs[k * 3 + j]!;
        assert.deepEqual(got.tokenIds, Array.from(ref.tokens), `prompt ${k} sample ${j} (seed ${seed})`);
        got.logprobs.forEach((lp, i) => assert.ok(Math.abs(lp - ref.logprobs[i]!) <= 1e-4, `prompt ${k} sample ${j} token ${i}: log-prob ${lp} vs CPU ${ref.logprobs[i]}`));
      }
    });
  });

  it('the sampling distribution through the engine: 1,000 first tokens (4 seeds x n = 250) on an 8-token vocabulary, chi-square at 0.001 (fixed seeds)', gpuOnly, async () => {
    const sizes: ModelSizes = {
      modelType: 'qwen3', vocabSize: 8, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8,
      maxPositionEmbeddings: 64, tieWordEmbeddings: false,
    };
    // fixed weights and seeds: deterministic, so a statistical test that cannot flake
    const cpu = await PolicyModel.random(sizes, { seed: 7, initStd: 0.2 });
    const dev = await PolicyModel.random(sizes, { seed: 7, initStd: 0.2, device, storage: 'f32' });
    const prompt = [1, 5, 2, 7, 3];
    const V = sizes.vocabSize;
    const z = Array.from((await cpuLogits(cpu, prompt)).subarray((prompt.length - 1) * V, prompt.length * V));
    const REQS = 4, N_PER = 250, N = REQS * N_PER; // 4 seeds x 250 sample streams (seed, j) each; the rarest token expects ~10 draws
    const options = [{ temperature: 1, topK: 0, topP: 1, minP: 0 }, { temperature: 0.7, topK: 5, topP: 1, minP: 0 }, { temperature: 1.3, topK: 0, topP: 0.8, minP: 0 }, { temperature: 1, topK: 0, topP: 1, minP: 0.2 }];
    for (const o of small ? options.slice(0, 1) : options) {
      const { out } = await run(dev, Array.from({ length: REQS }, (_, r) => req(prompt, { ...o, n: N_PER, maxTokens: 1, seed: 1000 + r })), { blockSize: 4 });
      const d = processedDistribution(z, o);
      const counts = new Array<number>(V).fill(0);
      for (const samples of out) for (const x of samples) {
        const tok = x.tokenIds[0]!;
        counts[tok]!++;
        const rank = d.order.indexOf(tok);
        const lp = d.x[tok]! - d.logS;
        assert.ok(rank < d.keep, `token ${tok} is outside the kept set but was drawn (options ${JSON.stringify(o)})`);
        assert.ok(Math.abs(x.logprobs[0]! - lp) <= 1e-4, `token ${tok}: log-prob ${x.logprobs[0]} vs processed ${lp} (options ${JSON.stringify(o)})`);
      }
      assert.equal(counts.reduce((a, b) => a + b, 0), N);
      assertChiSquare(counts, d, `options ${JSON.stringify(o)}`);
    }
  });

  /** A tree-shaped workload (G first attempts, G' repairs of each from the conversation so far), sampled, through the engine. */
  async function treeRun(m: PolicyModel, w: TreeWorkload, o: Parameters<typeof engineOn>[1]): Promise<{ tokens: number[][]; metrics: PagedEngine['metrics'] }> {
    const e = engineOn(m, o);
    const toEngine = (r: PagedRequest): EngineRequest => req([...r.promptIds], { n: r.n ?? 1, maxTokens: r.maxTokens, seed: r.seed, temperature: 1 });
    try {
      const firstReqs = w.firstTurn();
      const first = await e.generate(firstReqs.map(toEngine));
      const repairReqs = w.repairTurn({ requests: firstReqs, ids: [], samples: first as SampleResult[][] });
      const repair = await e.generate(repairReqs.map(toEngine));
      return { tokens: [...first, ...repair].flat().map((x) => x.tokenIds), metrics: { ...e.metrics } };
    } finally {
      await e.close();
    }
  }

  it('prefix sharing gives the same tokens as no sharing on a tree-shaped workload, and saves prefill', gpuOnly, async () => {
    const s = rng.int(1e6);
    const dev = await PolicyModel.random(TINY_CTX, { seed: s, device, storage: 'f32' });
    const w = new TreeWorkload({ problems: 2, groupSize: 4, repairs: 2, promptTokens: 40, completionTokens: 12, feedbackTokens: [5, 15], vocab: TINY_CTX.vocabSize, seed: s });
    const on = await treeRun(dev, w, { prefixSharing: true, blockSize: 8, kvCacheBlocks: 400 });
    const off = await treeRun(dev, w, { prefixSharing: false, blockSize: 8, kvCacheBlocks: 400 });
    assert.equal(on.tokens.length, 2 * 4 * (1 + 2));
    assert.deepEqual(on.tokens, off.tokens, `tokens with and without prefix sharing (seed ${seed})`);
    assert.ok(on.metrics.prefillSaved > 0 && off.metrics.prefillSaved === 0, `prefill saved: ${on.metrics.prefillSaved} with sharing, ${off.metrics.prefillSaved} without`);
    assert.ok(on.metrics.prefillTokens < off.metrics.prefillTokens);
  });

  it('a KV pool too small for the batch preempts and resumes: the same tokens as a roomy pool', gpuOnly, async () => {
    const s = rng.int(1e6);
    const dev = await PolicyModel.random(TINY_CTX, { seed: s, device, storage: 'f32' });
    const reqs = Array.from({ length: 8 }, (_, k) => req(randomPrompt(20 + rng.int(40), TINY_CTX.vocabSize), { n: 1 + (k % 2), maxTokens: 48, temperature: 1, seed: rng.int(2 ** 31) }));
    // 8 blocks of 32: one sequence of the whole context (256 tokens) fits, the batch (~1,100 tokens) does not
    const tight = await run(dev, reqs, { kvCacheBlocks: 8, blockSize: 32 });
    const big = await run(dev, reqs, { kvCacheBlocks: 64, blockSize: 32 });
    assert.ok(tight.metrics.preemptions > 0, 'the small pool preempted nothing: the test does not test preemption');
    assert.equal(big.metrics.preemptions, 0);
    assert.deepEqual(tight.out.map((r) => r.map((x) => x.tokenIds)), big.out.map((r) => r.map((x) => x.tokenIds)), `tokens (seed ${seed})`);
    for (const r of tight.out) for (const x of r) assert.equal(x.tokenIds.length, 48);
  });
});
