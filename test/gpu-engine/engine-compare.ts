// The device engine (PolicyModel with device 'emulate' or 'cuda') against the CPU engine, its
// spec, on one batch: logits, per-token log-probs (also at temperature 0.7 and under the KL
// reference), the loss, every parameter gradient, the weights after AdamW steps. Shared by
// test/gpu-engine/engine-emulate.test.ts (npm test, HostBackend) and test/gpu/engine.test.ts
// (the same on the GPU). Tolerances: per tensor, max |device - cpu| / max |cpu| (relError),
// documented in docs/gpu.md ("Tolerances of the device engine").
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel, type AdamWHyper, type LossOptions, type TrainBatch } from '../../lib/model/index.js';
import { readSafetensorsF32, relError } from '../model/helpers.js';

export interface Tolerance {
  logits: number;
  logp: number;
  /** relative to max(1e-3, |loss|) */
  loss: number;
  grad: number;
  /** the smallest cosine similarity of a parameter's gradient with the CPU engine's */
  gradCos: number;
  /** weights after the AdamW steps (Infinity: not compared) */
  weights: number;
}

/**
 * f32 storage: the same math as the CPU engine, other summation orders only. Weights after
 * AdamW: Adam divides by sqrt(v), so an element whose gradient is at rounding-noise level
 * moves by up to lr either way; 2e-3 of the largest weight bounds that at lr 1e-3.
 */
export const F32_TOL: Tolerance = { logits: 2e-5, logp: 2e-5, loss: 2e-5, grad: 1e-4, gradCos: 0.999999, weights: 2e-3 };
/** bf16 storage on well-conditioned models (normal(0, 0.02) weights): weights, activations and activation
 * gradients rounded to bf16; weights after AdamW within 2 lr / max|w| per step (the sign argument above).
 * GRPO batches are on-policy (see compareEngines), so rounding does not move tokens across a clip bound. */
export const BF16_TOL: Tolerance = { logits: 2.5e-2, logp: 2.5e-2, loss: 1e-2, grad: 6e-2, gradCos: 0.999, weights: 0.1 };
/**
 * bf16 storage on the PyTorch fixtures, cross-entropy loss: their large random weights make the
 * gradients ill-conditioned (rounding only the weights to bf16 moves the CPU engine's own
 * gradients by up to 66% of a tensor's largest element), so gradients are compared by direction.
 */
export const BF16_FIXTURE_TOL: Tolerance = { logits: 5e-2, logp: 5e-2, loss: 1e-2, grad: Infinity, gradCos: 0.95, weights: Infinity };

export const ADAM: AdamWHyper = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1.0 };

export interface Report {
  logits: number;
  logp: number;
  loss: number;
  grad: number;
  worstGrad: string;
  gradCos: number;
  /** |device - cpu| / cpu of the reported gradient norms, worst step */
  gradNormRel: number;
  weights: number;
}

/**
 * Runs the same calls on both models and asserts the tolerances; returns the measured errors.
 * `steps` AdamW steps on the batch follow the first gradient check.
 */
export async function compareEngines(cpu: PolicyModel, dev: PolicyModel, batch: TrainBatch, loss: LossOptions, tol: Tolerance, steps = 1, what = ''): Promise<Report> {
  // on-policy when the batch has no behaviour log-probs (pass oldLogp: undefined): ratios start at 1, far from the clip
  // bounds (a token crossing one under rounding switches its gradient on or off)
  if (!loss.crossEntropy && batch.oldLogp === undefined) batch = { ...batch, oldLogp: await cpu.score(batch) };
  const r: Report = { logits: 0, logp: 0, loss: 0, grad: 0, worstGrad: '', gradCos: 1, gradNormRel: 0, weights: 0 };
  const at = what ? `${what}: ` : '';
  r.logits = relError(await dev.logits(batch), await cpu.logits(batch));
  assert.ok(r.logits <= tol.logits, `${at}logits rel err ${r.logits} > ${tol.logits}`);
  for (const temperature of [1, 0.7]) {
    const e = relError(await dev.score(batch, { temperature }), await cpu.score(batch, { temperature }));
    r.logp = Math.max(r.logp, e);
    assert.ok(e <= tol.logp, `${at}log-probs (T=${temperature}) rel err ${e} > ${tol.logp}`);
  }
  if ((loss.beta ?? 0) > 0 && batch.refLogp === undefined) {
    cpu.makeReference();
    dev.makeReference();
    const e = relError(await dev.score(batch, { reference: true }), await cpu.score(batch, { reference: true }));
    assert.ok(e <= tol.logp, `${at}reference log-probs rel err ${e}`);
  }
  const sc = await cpu.accumulate(batch, loss), sd = await dev.accumulate(batch, loss);
  r.loss = Math.abs(sc.loss - sd.loss) / Math.max(1e-3, Math.abs(sc.loss));
  assert.ok(r.loss <= tol.loss, `${at}loss ${sd.loss} vs cpu ${sc.loss}`);
  assert.equal(sd.nActive, sc.nActive);
  for (let s = 0; s < steps; s++) {
    if (s > 0) {
      // Later steps start from the device's weights on both engines: after an update the two
      // trajectories differ by the rounding of that update (AdamW moves a noise-level gradient's
      // element by up to lr either way on each engine), which compounds chaotically and says
      // nothing about the next step. From one point, each step's gradients meet the first
      // step's tolerances, and the final weights check below still covers every update.
      for (const p of cpu.params()) cpu.setParam(p.name, dev.getParam(p.name));
      await cpu.accumulate(batch, loss);
      await dev.accumulate(batch, loss);
    }
    // Each engine's reported norm must be the norm of the gradients it holds, so the two norms
    // differ by at most ||g_dev - g_cpu|| (the triangle inequality).
    let nc = 0, nd = 0, diff = 0;
    for (const p of cpu.params()) {
      const gd = dev.getGrad(p.name), gc = cpu.getGrad(p.name);
      const e = relError(gd, gc), c = cosine(gd, gc);
      const step = s > 0 ? ` (step ${s + 1})` : '';
      if (e > r.grad) r.grad = e, r.worstGrad = `${p.name}${step}`;
      r.gradCos = Math.min(r.gradCos, c);
      assert.ok(e <= tol.grad, `${at}gradient of ${p.name}${step}: rel err ${e} > ${tol.grad}`);
      assert.ok(c >= tol.gradCos, `${at}gradient of ${p.name}${step}: cosine with the CPU engine's ${c} < ${tol.gradCos}`);
      for (let i = 0; i < gc.length; i++) nc += gc[i] * gc[i], nd += gd[i] * gd[i], diff += (gd[i] - gc[i]) ** 2;
    }
    nc = Math.sqrt(nc), nd = Math.sqrt(nd), diff = Math.sqrt(diff);
    const oc = await cpu.optimizerStep(ADAM), od = await dev.optimizerStep(ADAM);
    assert.equal(od.skipped, oc.skipped);
    assert.equal(od.step, oc.step);
    // fp32 sums of squares: relative rounding well under 1e-5
    assert.ok(Math.abs(oc.gradNorm - nc) <= 1e-5 * nc + 1e-12, `${at}cpu grad norm ${oc.gradNorm} vs its gradients' ${nc}`);
    assert.ok(Math.abs(od.gradNorm - nd) <= 1e-5 * nd + 1e-12, `${at}device grad norm ${od.gradNorm} vs its gradients' ${nd}`);
    assert.ok(Math.abs(od.gradNorm - oc.gradNorm) <= diff + 1e-5 * (nc + nd) + 1e-12, `${at}grad norm ${od.gradNorm} vs ${oc.gradNorm}: more apart than the gradients (${diff})`);
    r.gradNormRel = Math.max(r.gradNormRel, Math.abs(od.gradNorm - oc.gradNorm) / Math.max(1e-12, oc.gradNorm));
  }
  for (const p of cpu.params()) {
    const wd = dev.getParam(p.name), wc = cpu.getParam(p.name);
    const e = relError(wd, wc);
    r.weights = Math.max(r.weights, e);
    if (e <= tol.weights) continue;
    // Adam divides by sqrt(v): an element whose gradient is at rounding-noise level may step by
    // up to lr either way on each engine. Such elements (|difference| <= 2 lr per step) may pass
    // the relative bound, if they are rare (<= 0.1% of the tensor); anything else fails.
    let maxW = 0;
    for (let i = 0; i < wc.length; i++) maxW = Math.max(maxW, Math.abs(wc[i]));
    const flip = 2 * ADAM.lr * steps * (1 + 1e-3);
    let noise = 0;
    for (let i = 0; i < wc.length; i++) {
      const d = Math.abs(wd[i] - wc[i]);
      if (d <= tol.weights * maxW) continue;
      assert.ok(d <= flip, `${at}weights of ${p.name}[${i}] after AdamW: ${wd[i]} vs ${wc[i]}, more than 2 lr per step apart (rel err ${e} > ${tol.weights})`);
      noise++;
    }
    assert.ok(noise <= Math.max(1, wc.length * 1e-3), `${at}weights of ${p.name} after AdamW: ${noise} of ${wc.length} elements beyond rel err ${tol.weights} (an Adam step on a noise-level gradient explains a few, not this many)`);
  }
  return r;
}

/** a . b / (|a| |b|); 1 when both are zero. */
export function cosine(a: Float32Array, b: Float32Array): number {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return aa === 0 && bb === 0 ? 1 : ab / Math.sqrt(aa * bb);
}

/** A GRPO batch for a random model: packed sequences, a mask past each prompt, seeded advantages, oldLogp -log(vocab). */
export function randomBatch(vocab: number, lengths: number[], seed: number): TrainBatch {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  const offs = new Int32Array(lengths.length + 1);
  lengths.forEach((n, i) => { offs[i + 1] = offs[i] + n; });
  const T = offs[lengths.length];
  const tokens = new Int32Array(T), positions = new Int32Array(T), mask = new Uint8Array(T);
  const advantages = new Float32Array(T), oldLogp = new Float32Array(T).fill(-Math.log(vocab));
  for (let q = 0; q < lengths.length; q++) {
    const adv = rnd() * 2 - 1;
    for (let t = offs[q]; t < offs[q + 1]; t++) {
      tokens[t] = Math.floor(rnd() * vocab);
      positions[t] = t - offs[q];
      mask[t] = t - offs[q] >= 2 ? 1 : 0;
      advantages[t] = adv;
    }
  }
  return { tokens, positions, seqOffsets: offs, mask, advantages, oldLogp };
}

/** The committed PyTorch model fixtures (test/fixtures/model/), by directory name. */
export const fixtureRoot = new URL('../fixtures/model/', import.meta.url).pathname;
export const fixtures = readdirSync(fixtureRoot).filter((d) => statSync(join(fixtureRoot, d)).isDirectory()).sort();

/** A fixture's model directory, its packed batch and its loss options. */
export function fixtureCase(name: string): { dir: string; batch: TrainBatch; loss: LossOptions } {
  const dir = join(fixtureRoot, name);
  const meta = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8')) as {
    case: { loss: { kind: 'grpo' | 'ce'; lossType?: 'dapo' | 'grpo'; beta?: number; epsLow?: number; epsHigh?: number } };
    tokens: number[]; positions: number[]; seq_offsets: number[]; mask: number[];
  };
  const exp = readSafetensorsF32(join(dir, 'expected.safetensors'));
  const l = meta.case.loss;
  return {
    dir,
    batch: {
      tokens: Int32Array.from(meta.tokens), positions: Int32Array.from(meta.positions), seqOffsets: Int32Array.from(meta.seq_offsets),
      mask: Uint8Array.from(meta.mask), advantages: exp.get('advantages'), oldLogp: exp.get('old_logp'), refLogp: exp.get('ref_logp'),
    },
    loss: l.kind === 'ce' ? { crossEntropy: true } : { lossType: l.lossType, beta: l.beta, epsLow: l.epsLow, epsHigh: l.epsHigh },
  };
}

export const bitsEqual = (a: Float32Array, b: Float32Array) => Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;

/**
 * The kept-logits budgets on one model, in turn (its buffers kept and resized between the calls):
 * accumulate `batch` once per keepLogitsMb in `budgets`, asserts that every call gives the first
 * one's loss and gradients bit for bit, and returns each call's activations peak.
 */
export async function assertKeptLogitsBitsEqual(m: PolicyModel, batch: TrainBatch, chunkTokens: number, budgets: number[]): Promise<number[]> {
  const runs: { loss: number; grads: Float32Array[]; peak: number }[] = [];
  for (const keepLogitsMb of budgets) {
    m.zeroGrad();
    const st = await m.accumulate(batch, { chunkTokens, keepLogitsMb });
    runs.push({ loss: st.loss, grads: m.params().map((p) => m.getGrad(p.name)), peak: m.memory().activationsPeak });
  }
  const names = m.params().map((p) => p.name);
  for (const [i, r] of runs.entries()) {
    assert.equal(r.loss, runs[0]!.loss, `keepLogitsMb ${budgets[i]}: loss`);
    r.grads.forEach((g, j) => assert.ok(bitsEqual(g, runs[0]!.grads[j]!), `keepLogitsMb ${budgets[i]}: gradient of ${names[j]} differs`));
  }
  return runs.map((r) => r.peak);
}
