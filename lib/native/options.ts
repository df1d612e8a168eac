// The options of every native call family (GRPO loss, training step, AdamW, generation,
// log-probs), each with one default and one range, resolved and validated here before any
// native code runs. Where an option is a run-configuration key (lib/config/schema.ts) its
// default and range come from the schema, so `--epsilon 1` is refused when the config is
// resolved, and the kernel API refuses `epsLow: 1` with the same range and names the key.
// The addon reads every field of the resolved structs as required: it fills in nothing.
import { SCHEMA, describeRange, inRange, kebab, type ConfigKey, type Range } from '../config/schema.js';
import { MurphyNativeError } from './errors.js';

/** One option: its range, its default (absent: required), and the config key it mirrors. */
export interface OptionDef extends Range {
  default?: number | string | boolean;
  /** The run-configuration key whose default and range this option takes. */
  configKey?: ConfigKey;
  /** 0 also accepted, meaning "off" (dualClip). */
  zeroOff?: boolean;
  /** When absent: the value of this other option of the family (epsHigh: epsLow). */
  defaultFrom?: string;
}

function fromConfig(key: ConfigKey): OptionDef {
  const d = SCHEMA[key];
  const def: OptionDef = { type: d.type, configKey: key, min: d.min, max: d.max, gt: d.gt, lt: d.lt, values: d.values };
  if (d.default !== null) def.default = d.default;
  return def;
}

const seedRange: OptionDef = { type: 'int', min: 0, max: 2 ** 53 - 1, default: 0 };

/** The clipped GRPO surrogate (kernel grpoLoss and the model's accumulate). */
export const GRPO_LOSS_OPTIONS = {
  /** Lower clip: ratio >= 1 - epsLow. */
  epsLow: fromConfig('epsilon'),
  /** Upper clip: ratio <= 1 + epsHigh; default: epsLow. */
  epsHigh: { ...fromConfig('epsilonHigh'), defaultFrom: 'epsLow' },
  /** Dual-clip constant c > 1 for negative advantages; 0 = off. */
  dualClip: { type: 'number', gt: 1, zeroOff: true, default: 0 },
  /** KL weight (k3 estimator). */
  beta: fromConfig('beta'),
  /** Aggregation (TRL loss_type). */
  lossType: fromConfig('lossType'),
  /** 'dr_grpo' only: the constant length L (the loop passes maxCompletionLength). */
  normLength: { type: 'number', min: 0, default: 0 },
} satisfies Record<string, OptionDef>;

/** The model's training step besides the loss (accumulate). */
export const TRAIN_OPTIONS = {
  /** Supervised cross-entropy (mean over the mask) instead of the GRPO loss. */
  crossEntropy: { type: 'boolean', default: false },
  /** Temperature of the log-probs in the loss (the loop passes the rollout temperature, 1 for greedy). */
  temperature: { type: 'number', gt: 0, default: 1 },
  /** Rows of logits computed at once (bounded further so a chunk stays under 64 MiB). */
  chunkTokens: { type: 'int', min: 1, max: 2 ** 31 - 1, default: 256 },
  /** MiB of logits the CPU engine keeps between the loss's two passes (the run configuration's keepLogitsMb: its doc, default and range). */
  keepLogitsMb: fromConfig('keepLogitsMb'),
} satisfies Record<string, OptionDef>;

/** AdamW hyper-parameters: one set of defaults for the kernel API and the model API. */
export const ADAMW_OPTIONS = {
  lr: { type: 'number', min: 0 },
  beta1: fromConfig('adamBeta1'),
  beta2: fromConfig('adamBeta2'),
  eps: { type: 'number', gt: 0, default: 1e-8 },
  weightDecay: fromConfig('weightDecay'),
  maxGradNorm: fromConfig('maxGradNorm'),
} satisfies Record<string, OptionDef>;

/** The AdamW kernel's extra options (the model keeps its own step count). */
export const ADAMW_KERNEL_OPTIONS = {
  ...ADAMW_OPTIONS,
  /** The 1-based number of the step being taken (bias correction). */
  step: { type: 'int', min: 1, max: 2 ** 50 },
  stochasticRounding: { type: 'boolean', default: false },
  seed: seedRange,
} satisfies Record<string, OptionDef>;

/** Sampling (the model's generate). */
export const GENERATE_OPTIONS = {
  maxNewTokens: { type: 'int', min: 1, max: 2 ** 24 },
  temperature: fromConfig('temperature'),
  topP: fromConfig('topP'),
  topK: fromConfig('topK'),
  minP: fromConfig('minP'),
  n: { type: 'int', min: 1, max: 2 ** 16, default: 1 },
  seed: seedRange,
  /** Alternatives reported per sampled token (serving). */
  topLogprobs: { type: 'int', min: 0, max: 2 ** 20, default: 0 },
  /**
   * Return the memory the call freed to the system before it resolves (malloc_trim). Off by
   * default: a loop that generates again (training, eval) reuses it, while each page given back
   * costs a page fault at its next use (~11 us a page on some VMs: 23 of the demo's 71 CPU-s when
   * every call trimmed). `murphy-native serve` turns it on (docs/rollout.md).
   */
  releaseHeap: { type: 'boolean', default: false },
  /**
   * false: the caller reads no log-probs (evaluations): Generation.logprobs is all NaN, and
   * greedy draws skip the softmax over the vocabulary that only their log-prob needs (a third of
   * a CPU evaluation's time at Qwen3's vocabulary). Not with topLogprobs.
   */
  logprobs: { type: 'boolean', default: true },
} satisfies Record<string, OptionDef>;

/** Log-prob gathering. */
export const LOGPROB_OPTIONS = {
  temperature: { type: 'number', gt: 0, default: 1 },
} satisfies Record<string, OptionDef>;

type LossType = 'dapo' | 'grpo' | 'dr_grpo';

export interface ResolvedGrpoLossOptions {
  epsLow: number;
  epsHigh: number;
  dualClip: number;
  beta: number;
  lossType: LossType;
  normLength: number;
}
export interface ResolvedTrainOptions extends ResolvedGrpoLossOptions {
  crossEntropy: boolean;
  temperature: number;
  chunkTokens: number;
  keepLogitsMb: number;
  gradScale: number;
}
export interface ResolvedAdamWOptions {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  maxGradNorm: number;
}
export interface ResolvedAdamWKernelOptions extends ResolvedAdamWOptions {
  step: number;
  stochasticRounding: boolean;
  seed: number;
}
export interface ResolvedGenerateOptions {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  n: number;
  seed: number;
  /** One seed per prompt, or null: prompt p samples with seed + p. */
  seeds: number[] | null;
  stopIds: number[];
  topLogprobs: number;
  releaseHeap: boolean;
  logprobs: boolean;
  /** One stop flag per sample (prompts x n) on a SharedArrayBuffer, or null. */
  cancel: Int32Array | null;
  /** Called with each decode step's tokens, or null. */
  onStep: ((step: unknown) => void) | null;
}
export interface ResolvedLogprobOptions {
  temperature: number;
}

/** "'epsLow' (config key "epsilon", --epsilon)": how an error names an option. */
export function optionName(name: string, d: OptionDef): string {
  return d.configKey ? `'${name}' (config key "${d.configKey}", --${kebab(d.configKey)})` : `'${name}'`;
}

function bad(family: string, name: string, d: OptionDef, v: unknown): never {
  const allowed = describeRange(d) + (d.zeroOff ? ', or 0 (off)' : '');
  throw new MurphyNativeError(`${family}: ${optionName(name, d)} must be ${allowed}; got ${typeof v === 'number' ? String(v) : JSON.stringify(v) ?? String(v)}`, 'EINVAL');
}

/** Checks one value against its definition; returns it. */
export function checkOption(family: string, name: string, d: OptionDef, v: unknown): number | string | boolean {
  switch (d.type) {
    case 'boolean':
      if (typeof v !== 'boolean') bad(family, name, d, v);
      return v;
    case 'enum':
      if (typeof v !== 'string' || !d.values!.includes(v)) bad(family, name, d, v);
      return v;
    default:
      if (typeof v !== 'number' || !(inRange(d, v) || (d.zeroOff === true && v === 0))) bad(family, name, d, v);
      return v;
  }
}

/**
 * Resolves `input` against `defs`: unknown keys are refused (naming the known ones), an
 * absent (undefined) option takes its default, a required one without a default is an
 * error, and every value is checked against its range. `extra` lists keys the caller
 * resolves itself.
 */
export function resolveOptions<R>(
  family: string, defs: Record<string, OptionDef>, input: object | undefined, extra: readonly string[] = [],
): R {
  if (input !== undefined && (input === null || typeof input !== 'object' || Array.isArray(input))) {
    throw new MurphyNativeError(`${family}: options must be an object`, 'EINVAL');
  }
  const given = (input ?? {}) as Record<string, unknown>;
  for (const k of Object.keys(given)) {
    if (!(k in defs) && !extra.includes(k)) {
      throw new MurphyNativeError(`${family}: unknown option '${k}' (known: ${[...Object.keys(defs), ...extra].join(', ')})`, 'EINVAL');
    }
  }
  const out: Record<string, unknown> = {};
  for (const [k, d] of Object.entries(defs)) {
    const v = given[k];
    if (v !== undefined) out[k] = checkOption(family, k, d, v);
    else if (d.default !== undefined) out[k] = d.default;
    else if (d.defaultFrom === undefined) {
      throw new MurphyNativeError(`${family}: ${optionName(k, d)} is required: ${describeRange(d)}`, 'EINVAL');
    }
  }
  for (const [k, d] of Object.entries(defs)) if (out[k] === undefined && d.defaultFrom !== undefined) out[k] = out[d.defaultFrom];
  return out as R;
}

/** The GRPO loss options, for the kernel and the model alike (epsHigh defaults to epsLow). */
export function resolveGrpoLossOptions(family: string, input: object | undefined, extra: readonly string[] = []): ResolvedGrpoLossOptions {
  const o = resolveOptions<ResolvedGrpoLossOptions>(family, GRPO_LOSS_OPTIONS, input, extra);
  if (o.lossType === 'dr_grpo' && !(o.normLength > 0)) {
    throw new MurphyNativeError(`${family}: lossType 'dr_grpo' needs normLength > 0 (the max completion length); got ${o.normLength}`, 'EINVAL');
  }
  return o;
}

/** The model's training-step options (loss + step), with the micro-batch's gradient scale. */
export function resolveTrainOptions(input: object | undefined, gradScale: number): ResolvedTrainOptions {
  const family = 'accumulate';
  const loss = resolveGrpoLossOptions(family, input, Object.keys(TRAIN_OPTIONS));
  const rest = resolveOptions<Omit<ResolvedTrainOptions, keyof ResolvedGrpoLossOptions | 'gradScale'>>(family, TRAIN_OPTIONS, input, Object.keys(GRPO_LOSS_OPTIONS));
  checkOption(family, 'gradScale', { type: 'number', min: 0 }, gradScale);
  return { ...rest, ...loss, gradScale };
}

/** Sampling options: per-prompt seeds (one per prompt) and stop ids are checked here too. */
export function resolveGenerateOptions(input: object | undefined, nPrompts: number): ResolvedGenerateOptions {
  const family = 'generate';
  const o = resolveOptions<Omit<ResolvedGenerateOptions, 'seeds' | 'stopIds' | 'cancel' | 'onStep'>>(family, GENERATE_OPTIONS, input, ['seeds', 'stopIds', 'cancel', 'onStep']);
  const given = (input ?? {}) as { seeds?: unknown; stopIds?: unknown; cancel?: unknown; onStep?: unknown };
  if (!o.logprobs && o.topLogprobs > 0) {
    throw new MurphyNativeError(`${family}: 'topLogprobs' (${o.topLogprobs}) needs the log-probs; drop 'logprobs: false' or set topLogprobs to 0`, 'EINVAL');
  }
  let seeds: number[] | null = null;
  if (given.seeds !== undefined && given.seeds !== null) {
    if (!Array.isArray(given.seeds)) throw new MurphyNativeError(`${family}: 'seeds' must be an array of integers, one per prompt`, 'EINVAL');
    if (given.seeds.length !== nPrompts) {
      throw new MurphyNativeError(`${family}: 'seeds' has ${given.seeds.length} entries but there are ${nPrompts} prompts (one seed per prompt)`, 'EINVAL');
    }
    seeds = given.seeds.map((s, i) => checkOption(family, `seeds[${i}]`, seedRange, s) as number);
  }
  const stopIds: number[] = [];
  if (given.stopIds !== undefined && given.stopIds !== null) {
    if (!Array.isArray(given.stopIds)) throw new MurphyNativeError(`${family}: 'stopIds' must be an array of token ids`, 'EINVAL');
    given.stopIds.forEach((s, i) => stopIds.push(checkOption(family, `stopIds[${i}]`, { type: 'int', min: -(2 ** 31), max: 2 ** 31 - 1 }, s) as number));
  }
  let cancel: Int32Array | null = null;
  if (given.cancel !== undefined && given.cancel !== null) {
    // the native loop reads the flags while it runs: memory that cannot be detached or moved
    if (!(given.cancel instanceof Int32Array) || !(given.cancel.buffer instanceof SharedArrayBuffer)) {
      throw new MurphyNativeError(`${family}: 'cancel' must be an Int32Array over a SharedArrayBuffer`, 'EINVAL');
    }
    if (given.cancel.length !== nPrompts * o.n) {
      throw new MurphyNativeError(`${family}: 'cancel' has ${given.cancel.length} flags but there are ${nPrompts * o.n} samples (prompts x n)`, 'EINVAL');
    }
    cancel = given.cancel;
  }
  let onStep: ((step: unknown) => void) | null = null;
  if (given.onStep !== undefined && given.onStep !== null) {
    if (typeof given.onStep !== 'function') throw new MurphyNativeError(`${family}: 'onStep' must be a function`, 'EINVAL');
    onStep = given.onStep as (step: unknown) => void;
  }
  return { ...o, seeds, stopIds, cancel, onStep };
}

/** AdamW as the model runs it (it counts its own steps). */
export function resolveAdamWOptions(family: string, input: object | undefined): ResolvedAdamWOptions {
  return resolveOptions<ResolvedAdamWOptions>(family, ADAMW_OPTIONS, input);
}

/** AdamW as the kernel runs it (the caller gives the step and may round stochastically). */
export function resolveAdamWKernelOptions(input: object | undefined): ResolvedAdamWKernelOptions {
  return resolveOptions<ResolvedAdamWKernelOptions>('adamw', ADAMW_KERNEL_OPTIONS, input);
}

/** Log-prob gathering's options. */
export function resolveLogprobOptions(family: string, input: object | undefined, extra: readonly string[]): ResolvedLogprobOptions {
  return resolveOptions<ResolvedLogprobOptions>(family, LOGPROB_OPTIONS, input, extra);
}
