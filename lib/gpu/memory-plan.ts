// The device memory plan of the CUDA policy engine (issue 13, docs/gpu.md): a pure function
// from a model's Hugging Face config.json and the training settings to bytes, and the
// micro-batch token budget that fits a given device. Printed at the start of a `--device
// cuda` run; a run that cannot fit fails before any rollout, naming the knob to turn.
//
// This is the engine's allocation plan written down before the engine exists: the sizes
// follow from the shapes and the dtypes below, not from a measurement on a GPU.
//
// Persistent state, P parameters (storage bf16, the default; config key storage):
//   bf16 compute weights      2P   what the GEMMs read
//   fp32 master weights       4P   what AdamW updates (bf16 cannot hold lr * update)
//   fp32 AdamW moments        8P   exp_avg + exp_avg_sq
//   fp32 gradients            4P   accumulated over micro-batches: cuBLASLt writes weight
//                                  gradients straight into them (bf16 A/B, fp32 C = D, beta 1)
//                                  and AdamW reads them. A bf16 accumulator would drop every
//                                  micro-batch contribution below 2^-8 of the running sum.
//   bf16 KL reference         2P   only when beta > 0
// Storage f32 (the precision mode): the fp32 master weights are the compute weights (0 bytes
// more), the KL reference is fp32 (4P), and every value below marked bf16 is fp32 (twice the
// bytes); fp32 values stay as they are.
// Activations, per token (bf16 unless marked f32), what the backward pass reads:
//   Qwen3 layer:  x, norm1(x), q and k before their norms, q and k after norm + RoPE, v,
//                 attention output o, h = x + o_proj(o), norm2(h), gate, up, silu(gate)*up;
//                 f32: 2 RMSNorm rstd, one rstd per q head and per k head, one log-sum-exp
//                 per q head (flash-style attention keeps no T x T scores).
//   OLMo-2 layer: x, q and k before their norms, q and k after norm + RoPE, v, o,
//                 a = o_proj(o), h = x + norm(a), gate, up, silu(gate)*up, m = down(.);
//                 f32: 4 rstd (q, k, a, m; full-width norms), one log-sum-exp per q head.
//   Both: 4H + 3(q_dim) + 3(kv_dim) + 3I bf16 values.
//   With gradient checkpointing a layer keeps only its input x (H bf16) and is recomputed
//   during the backward pass: one layer's full set is alive at a time.
//   The backward pass of one layer holds gradients of the same shapes (one more layer set)
//   plus the fp32 residual-stream gradient in and out (2 x 4H).
//   Outside the layers: final norm input and output (2H bf16, 1 f32 rstd), and the batch
//   vectors (token ids, positions, mask, advantages, old/ref/new log-probs, lse: 32 bytes).
// Workspace: the cuBLASLt workspace (32 MiB), and one lm-head chunk of LM_HEAD_CHUNK_TOKENS
// tokens: fp32 logits (the fused log-prob/GRPO kernels read them) and their bf16 gradient
// (the GEMMs read it) — the full tokens x vocab logits never exist.
// Kept logits (config keepLogitsMb): the loss keeps the fp32 logits of as many chunks as fit
// in keepLogitsMb from its first pass to its second, instead of computing them again (the
// engine's chunks: chunk_rows(256, vocab) rows, at most 64 MiB): at most keepLogitsMb, and
// at most the micro-batch's tokens x vocab x 4 bytes, rounded up to whole chunks.
// Headroom: 5% of the device's total memory is left free for allocator fragmentation.

import { SCHEMA, STORAGE_DTYPES, type StorageDType } from '../config/schema.js';
import { TRAIN_OPTIONS } from '../native/options.js';

export type ModelFamily = 'qwen3' | 'olmo2';

/** The shape fields of config.json that the plan needs. */
export interface ModelShape {
  modelType: ModelFamily;
  vocab: number;
  hidden: number;
  intermediate: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  tied: boolean;
}

export interface PlanSettings {
  /** Token budget of one micro-batch (config microBatchTokens). */
  microBatchTokens: number;
  /** Per-layer activation checkpointing; null: on for models of 1e9 parameters and more. */
  gradientCheckpointing: boolean | null;
  /** KL coefficient; > 0 keeps a reference copy of the weights (in the storage dtype). */
  beta: number;
  /** The device engine's storage dtype (config storage); default bf16. */
  storage?: StorageDType;
  /** MiB of lm-head logits the loss keeps between its two passes (config keepLogitsMb); default the config's. */
  keepLogitsMb?: number;
  /** Device memory available to the engine (free memory at start); omit for a plan without a fit. */
  deviceFreeBytes?: number;
  /** The device's total memory (the headroom is a fraction of it); default deviceFreeBytes. */
  deviceTotalBytes?: number;
}

export const LM_HEAD_CHUNK_TOKENS = 512;
/** The rows of one chunk of the loss's logits in the engines (native/model/model.cc chunk_rows, with the native chunkTokens default). */
export function lossChunkRows(vocab: number, chunkTokens = TRAIN_OPTIONS.chunkTokens.default): number {
  return Math.max(1, Math.min(chunkTokens, Math.max(1, Math.floor((16 * 2 ** 20) / vocab))));
}
/** Bytes of fp32 logits the loss keeps for a micro-batch of `tokens`: whole chunks, within keepLogitsMb. */
export function keptLogitsBytes(vocab: number, tokens: number, keepLogitsMb: number): number {
  const rows = lossChunkRows(vocab), chunkBytes = rows * vocab * 4;
  const chunks = Math.min(Math.ceil(tokens / rows), Math.floor((keepLogitsMb * 2 ** 20) / chunkBytes));
  return Math.max(0, chunks) * chunkBytes;
}
export const CUBLASLT_WORKSPACE_BYTES = 32 * 2 ** 20;
export const HEADROOM_FRACTION = 0.05;
export const BATCH_VECTOR_BYTES_PER_TOKEN = 32;
/** gradientCheckpointing null turns it on from this many parameters. */
export const CHECKPOINTING_AUTO_PARAMS = 1e9;

export class ModelShapeError extends Error {
  override name = 'ModelShapeError';
}

function posInt(cfg: Record<string, unknown>, key: string, where: string, fallback?: number): number {
  const v = cfg[key] ?? fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
    throw new ModelShapeError(`${where}: "${key}" must be a positive integer (got ${JSON.stringify(cfg[key])})`);
  }
  return v;
}

/** Reads the shape from a parsed config.json (Qwen3ForCausalLM or Olmo2ForCausalLM). */
export function modelShapeFromHfConfig(cfg: Record<string, unknown>, where = 'config.json'): ModelShape {
  const mt = cfg.model_type;
  if (mt !== 'qwen3' && mt !== 'olmo2') {
    throw new ModelShapeError(`${where}: model_type ${JSON.stringify(mt)} is not supported (qwen3 or olmo2)`);
  }
  const hidden = posInt(cfg, 'hidden_size', where);
  const heads = posInt(cfg, 'num_attention_heads', where);
  const kvHeads = posInt(cfg, 'num_key_value_heads', where, heads);
  if (heads % kvHeads !== 0) throw new ModelShapeError(`${where}: num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kvHeads}`);
  const headDim = posInt(cfg, 'head_dim', where, hidden % heads === 0 ? hidden / heads : undefined);
  const tie = cfg.tie_word_embeddings;
  if (tie !== undefined && typeof tie !== 'boolean') throw new ModelShapeError(`${where}: "tie_word_embeddings" must be true or false`);
  return {
    modelType: mt,
    vocab: posInt(cfg, 'vocab_size', where),
    hidden,
    intermediate: posInt(cfg, 'intermediate_size', where),
    layers: posInt(cfg, 'num_hidden_layers', where),
    heads,
    kvHeads,
    headDim,
    tied: tie === true, // transformers' Qwen3Config and Olmo2Config default to untied
  };
}

/** Parameters, counted the way native/model/weights.cc lays them out. */
export function parameterCount(s: ModelShape): { total: number; embedding: number; lmHead: number; perLayer: number } {
  const H = s.hidden, qd = s.heads * s.headDim, kd = s.kvHeads * s.headDim, I = s.intermediate;
  const proj = H * qd + 2 * H * kd + qd * H + 3 * H * I;
  const norms = s.modelType === 'qwen3' ? 2 * H + 2 * s.headDim : 2 * H + qd + kd;
  const perLayer = proj + norms;
  const embedding = s.vocab * H;
  const lmHead = s.tied ? 0 : s.vocab * H;
  return { total: embedding + lmHead + s.layers * perLayer + H, embedding, lmHead, perLayer };
}

export interface MemoryPlan {
  shape: ModelShape;
  params: number;
  gradientCheckpointing: boolean;
  /** Storage dtype of the compute weights, activations and reference. */
  storage: StorageDType;
  /** Persistent state in bytes. */
  /** Compute weights in the storage dtype (2P in bf16; 0 in f32, where the master weights are read). */
  computeWeights: number;
  masterF32: number;
  adamMoments: number;
  gradientsF32: number;
  /** KL reference in the storage dtype (beta > 0), else 0. */
  reference: number;
  stateTotal: number;
  /** Bytes per token. */
  perToken: {
    /** One layer's saved activations. */
    layer: number;
    /** Kept for the backward pass over all layers (all activations, or only layer inputs when checkpointing). */
    stored: number;
    /** One layer recomputed during the backward pass (checkpointing only). */
    recompute: number;
    /** Gradients in flight during one layer's backward pass. */
    backward: number;
    /** Final norm and batch vectors. */
    other: number;
    total: number;
  };
  workspace: { cublasLt: number; lmHeadChunk: number; total: number };
  /** keepLogitsMb, and the fp32 logits it keeps for this micro-batch (keptLogitsBytes). */
  keptLogits: { keepLogitsMb: number; bytes: number };
  microBatchTokens: number;
  /** stateTotal + workspace + keptLogits.bytes + microBatchTokens * perToken.total */
  totalForMicroBatch: number;
  device?: {
    freeBytes: number;
    headroom: number;
    usable: number;
    /** Largest micro-batch token budget that fits (multiple of 16; 0 when the state alone does not fit). */
    maxMicroBatchTokens: number;
    /** The same with the other checkpointing setting, for the error message. */
    maxMicroBatchTokensOtherCheckpointing: number;
    fits: boolean;
  };
}

/** Bytes of one value in the storage dtype. */
export function storageBytes(storage: StorageDType): number {
  return storage === 'f32' ? 4 : 2;
}

function perTokenBytes(s: ModelShape, checkpointing: boolean, storage: StorageDType): MemoryPlan['perToken'] {
  const H = s.hidden, qd = s.heads * s.headDim, kd = s.kvHeads * s.headDim, I = s.intermediate;
  const sb = storageBytes(storage);
  const storedValues = 4 * H + 3 * qd + 3 * kd + 3 * I;
  const f32Values = s.modelType === 'qwen3' ? 2 + s.heads + s.kvHeads + s.heads : 4 + s.heads;
  const layer = sb * storedValues + 4 * f32Values;
  const stored = checkpointing ? s.layers * sb * H : s.layers * layer;
  const recompute = checkpointing ? layer : 0;
  const backward = layer + 2 * 4 * H;
  const other = 2 * sb * H + 4 + BATCH_VECTOR_BYTES_PER_TOKEN;
  return { layer, stored, recompute, backward, other, total: stored + recompute + backward + other };
}

/** The plan (pure). */
export function memoryPlan(s: ModelShape, st: PlanSettings): MemoryPlan {
  const P = parameterCount(s).total;
  const checkpointing = st.gradientCheckpointing ?? P >= CHECKPOINTING_AUTO_PARAMS;
  const storage = st.storage ?? STORAGE_DTYPES[0];
  const sb = storageBytes(storage);
  const computeWeights = storage === 'f32' ? 0 : sb * P, masterF32 = 4 * P, adamMoments = 8 * P, gradientsF32 = 4 * P;
  const reference = st.beta > 0 ? sb * P : 0;
  const stateTotal = computeWeights + masterF32 + adamMoments + gradientsF32 + reference;
  const perToken = perTokenBytes(s, checkpointing, storage);
  // fp32 logits of one chunk and their gradient in the storage dtype
  const lmHeadChunk = LM_HEAD_CHUNK_TOKENS * s.vocab * (4 + sb);
  const workspace = { cublasLt: CUBLASLT_WORKSPACE_BYTES, lmHeadChunk, total: CUBLASLT_WORKSPACE_BYTES + lmHeadChunk };
  const keepLogitsMb = st.keepLogitsMb ?? (SCHEMA.keepLogitsMb.default as number);
  const kept = (tokens: number): number => keptLogitsBytes(s.vocab, tokens, keepLogitsMb);
  const keptLogits = { keepLogitsMb, bytes: kept(st.microBatchTokens) };
  const plan: MemoryPlan = {
    shape: s, params: P, gradientCheckpointing: checkpointing, storage,
    computeWeights, masterF32, adamMoments, gradientsF32, reference, stateTotal,
    perToken, workspace, keptLogits,
    microBatchTokens: st.microBatchTokens,
    totalForMicroBatch: stateTotal + workspace.total + keptLogits.bytes + st.microBatchTokens * perToken.total,
  };
  if (st.deviceFreeBytes !== undefined) {
    const headroom = Math.ceil(HEADROOM_FRACTION * (st.deviceTotalBytes ?? st.deviceFreeBytes));
    const usable = Math.max(0, st.deviceFreeBytes - headroom);
    // the largest multiple of 16 tokens whose activations and kept logits fit (both grow with the tokens)
    const budget = (perTok: number): number => {
      const left = usable - stateTotal - workspace.total;
      if (left <= 0) return 0;
      const fits = (t: number): boolean => t * perTok + kept(t) <= left;
      let lo = 0, hi = Math.floor(left / perTok / 16);  // in units of 16 tokens; kept logits only lower it
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        if (fits(mid * 16)) lo = mid;
        else hi = mid - 1;
      }
      return lo * 16;
    };
    const maxMicroBatchTokens = budget(perToken.total);
    plan.device = {
      freeBytes: st.deviceFreeBytes, headroom, usable, maxMicroBatchTokens,
      maxMicroBatchTokensOtherCheckpointing: budget(perTokenBytes(s, !checkpointing, storage).total),
      fits: maxMicroBatchTokens > 0 && st.microBatchTokens <= maxMicroBatchTokens,
    };
  }
  return plan;
}

const GiB = 2 ** 30;
const gib = (b: number): string => `${(b / GiB).toFixed(2)} GiB`;

/** The plan as printed at the start of a run. */
export function formatMemoryPlan(p: MemoryPlan): string {
  const s = p.shape;
  const lines = [
    `memory plan: ${s.modelType}, ${p.params >= 1e9 ? `${(p.params / 1e9).toFixed(3)}B` : `${(p.params / 1e6).toFixed(1)}M`} parameters (${s.layers} layers, hidden ${s.hidden}, ` +
      `${s.heads}/${s.kvHeads} heads x ${s.headDim}, intermediate ${s.intermediate}, vocab ${s.vocab}${s.tied ? ', tied' : ''})`,
    `  storage ${p.storage}: ${p.storage === 'f32' ? 'fp32 master = compute weights' : `bf16 weights ${gib(p.computeWeights)}, fp32 master`} ${gib(p.masterF32)}, fp32 moments ${gib(p.adamMoments)}, ` +
      `fp32 gradients ${gib(p.gradientsF32)}${p.reference ? `, ${p.storage} KL reference ${gib(p.reference)}` : ''}: ${gib(p.stateTotal)}`,
    `  activations ${(p.perToken.total / 1024).toFixed(1)} KiB per token (gradient checkpointing ${p.gradientCheckpointing ? 'on' : 'off'}; ` +
      `one layer ${(p.perToken.layer / 1024).toFixed(1)} KiB), workspace ${gib(p.workspace.total)} ` +
      `(cuBLASLt ${p.workspace.cublasLt / 2 ** 20} MiB, lm-head chunk of ${LM_HEAD_CHUNK_TOKENS} tokens ${gib(p.workspace.lmHeadChunk)})` +
      (p.keptLogits.bytes > 0 ? `, kept logits ${gib(p.keptLogits.bytes)} (--keep-logits-mb ${p.keptLogits.keepLogitsMb})` : ''),
    `  micro-batch of ${p.microBatchTokens} tokens: ${gib(p.totalForMicroBatch)} in all`,
  ];
  if (p.device) {
    lines.push(`  device: ${gib(p.device.freeBytes)} free, ${gib(p.device.headroom)} kept as headroom; ` +
      (p.device.maxMicroBatchTokens > 0 ? `up to ${p.device.maxMicroBatchTokens} tokens per micro-batch fit` : 'the model state alone does not fit'));
  }
  return lines.join('\n');
}

/** null when the plan fits; otherwise one line naming what does not fit and the knob to turn. */
export function planProblem(p: MemoryPlan): string | null {
  const d = p.device;
  if (!d || d.fits) return null;
  if (d.maxMicroBatchTokens === 0) {
    return `the model state needs ${gib(p.stateTotal + p.workspace.total)} (weights, master, moments, gradients` +
      `${p.reference ? ', KL reference' : ''}, workspace) but only ${gib(d.usable)} of the device is usable: ` +
      `use a smaller model${p.reference ? ' or --beta 0 (drops the reference copy)' : ''}${p.storage === 'f32' ? ' or --storage bf16' : ''} (the engine keeps the whole state on one GPU; no sharding or offload yet)`;
  }
  const other = !p.gradientCheckpointing && d.maxMicroBatchTokensOtherCheckpointing > d.maxMicroBatchTokens
    ? ` or turn on --gradient-checkpointing (then ${d.maxMicroBatchTokensOtherCheckpointing} fit)` : '';
  const bf16 = p.storage === 'f32' ? ' or use --storage bf16 (half the activation bytes)' : '';
  const keep = p.keptLogits.bytes > 0 ? ` or lower --keep-logits-mb (its kept logits take ${gib(p.keptLogits.bytes)})` : '';
  return `--micro-batch-tokens ${p.microBatchTokens} needs ${gib(p.totalForMicroBatch)} but ${gib(d.usable)} of the device is usable: ` +
    `lower --micro-batch-tokens to ${d.maxMicroBatchTokens} or less${other}${bf16}${keep}`;
}
