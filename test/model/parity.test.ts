// The native policy model against an independent PyTorch implementation (fixtures made by
// test/fixtures/model/make_model_fixtures.py with torch 1.13): four tiny random models covering
// Qwen3 and OLMo-2, tied and untied heads, head_dim != hidden / heads, GQA (4 query heads on
// 2 kv heads), packed sequences, weights on disk in f32, bf16 and f16 (one sharded); three loss
// kinds (GRPO token-mean with KL, GRPO sequence-mean, cross-entropy).
//
// Tolerance: per tensor, max |native - torch| / max |torch| <= 1e-4 (fp32 on both sides; the
// orders of summation differ). Both the fast paths and the plain reference loops are checked.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { PolicyModel, setReferenceOps, type LossOptions, type TrainBatch } from '../../lib/model/index.js';
import { readSafetensorsF32, relError } from './helpers.js';

const root = new URL('../fixtures/model/', import.meta.url).pathname;
const cases = readdirSync(root).filter((d) => statSync(join(root, d)).isDirectory()).sort();
const TOL = 1e-4;

interface Meta {
  torch_version: string;
  case: { name: string; loss: { kind: 'grpo' | 'ce'; lossType?: 'dapo' | 'grpo'; beta?: number; epsLow?: number; epsHigh?: number } };
  tokens: number[];
  positions: number[];
  seq_offsets: number[];
  mask: number[];
  loss: number;
  step_losses: number[];
  adam: { lr: number; betas: [number, number]; eps: number; weight_decay: number; max_grad_norm: number; steps: number };
  generation: { prompt: number[]; tokens: number[]; gaps: number[] }[];
}

for (const reference of [false, true]) {
  describe(`policy model vs PyTorch (${reference ? 'reference loops' : 'fast paths'})`, () => {
    for (const name of cases) {
      const dir = join(root, name);
      const meta = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8')) as Meta;
      const exp = readSafetensorsF32(join(dir, 'expected.safetensors'));
      const batch: TrainBatch = {
        tokens: Int32Array.from(meta.tokens),
        positions: Int32Array.from(meta.positions),
        seqOffsets: Int32Array.from(meta.seq_offsets),
        mask: Uint8Array.from(meta.mask),
        advantages: exp.get('advantages'),
        oldLogp: exp.get('old_logp'),
        refLogp: exp.get('ref_logp'),
      };
      const l = meta.case.loss;
      const loss: LossOptions = l.kind === 'ce'
        ? { crossEntropy: true }
        : { lossType: l.lossType, beta: l.beta, epsLow: l.epsLow, epsHigh: l.epsHigh };

      it(`${name}: logits, log-probs, loss, every gradient, weights after ${meta.adam.steps} AdamW steps`, async () => {
        setReferenceOps(reference);
        try {
          const m = await PolicyModel.load(dir);
          const logits = await m.logits(batch);
          assert.ok(relError(logits, exp.get('logits')!) <= TOL, `logits rel err ${relError(logits, exp.get('logits')!)}`);
          const lp = await m.score(batch);
          assert.ok(relError(lp, exp.get('logp')!) <= TOL, `logp rel err ${relError(lp, exp.get('logp')!)}`);
          const lp7 = await m.score(batch, { temperature: 0.7 });
          assert.ok(relError(lp7, exp.get('logp_t07')!) <= TOL, `logp T=0.7 rel err ${relError(lp7, exp.get('logp_t07')!)}`);

          const st = await m.accumulate(batch, loss);
          assert.ok(Math.abs(st.loss - meta.loss) <= TOL * Math.max(1e-3, Math.abs(meta.loss)), `loss ${st.loss} vs torch ${meta.loss}`);
          let worst = 0;
          for (const p of m.params()) {
            const e = relError(m.getGrad(p.name), exp.get('grad.' + p.name)!);
            worst = Math.max(worst, e);
            assert.ok(e <= TOL, `grad ${p.name}: rel err ${e}`);
          }
          console.log(`# ${name}${reference ? ' (reference)' : ''}: worst gradient rel err ${worst.toExponential(2)}`);

          m.zeroGrad();
          const a = meta.adam;
          for (let s = 0; s < a.steps; s++) {
            const r = await m.accumulate(batch, loss);
            assert.ok(Math.abs(r.loss - meta.step_losses[s]) <= TOL * Math.max(1e-3, Math.abs(meta.step_losses[s])), `step ${s} loss ${r.loss} vs ${meta.step_losses[s]}`);
            const o = await m.optimizerStep({ lr: a.lr, beta1: a.betas[0], beta2: a.betas[1], eps: a.eps, weightDecay: a.weight_decay, maxGradNorm: a.max_grad_norm });
            assert.equal(o.skipped, false);
          }
          for (const p of m.params()) {
            const e = relError(m.getParam(p.name), exp.get('after.' + p.name)!);
            assert.ok(e <= TOL, `weights after AdamW ${p.name}: rel err ${e}`);
          }
        } finally {
          setReferenceOps(false);
        }
      });

      if (!reference) {
        it(`${name}: greedy generation matches PyTorch token for token`, async () => {
          const m = await PolicyModel.load(dir);
          const gens = await m.generate(meta.generation.map((g) => g.prompt), { maxNewTokens: 8, temperature: 0 });
          meta.generation.forEach((g, i) => {
            for (let t = 0; t < g.tokens.length; t++) {
              if (g.gaps[t] < 1e-3) break; // a near tie: the argmax may legitimately differ from here on
              assert.equal(gens[i].tokens[t], g.tokens[t], `prompt ${i} token ${t}`);
            }
          });
        });
      }
    }
  });
}
