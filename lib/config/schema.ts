// The run configuration of `murphy-native train`: every key with its type, default, allowed
// values and one line of documentation. Keys are camelCase in files and code and kebab-case
// on the command line (--num-generations for numGenerations); names follow TRL's GRPOConfig
// where the concept exists there (num_generations, beta, epsilon, loss_type, scale_rewards,
// learning_rate, warmup_steps, max_completion_length, ...). docs/training.md lists them.
import { REDUCE_BUCKET_MB } from '../dist/buckets.js';

export type KeyType = 'int' | 'number' | 'string' | 'boolean' | 'enum';

export interface KeyDef {
  type: KeyType;
  /** Default value; null means "unset" (documented per key). */
  default: number | string | boolean | null;
  /** Allowed values (type 'enum'). */
  values?: readonly string[];
  /** Inclusive bounds for numbers. */
  min?: number;
  max?: number;
  /** Exclusive lower bound for numbers. */
  gt?: number;
  /** Exclusive upper bound for numbers. */
  lt?: number;
  /** null allowed (keys whose default is null always allow it). */
  nullable?: boolean;
  /** Help text. */
  doc: string;
  /** Section for the help and the docs. */
  group: 'run' | 'model' | 'data' | 'rollout' | 'method' | 'loss' | 'optim' | 'eval' | 'demo';
}

export const ALGOS = ['murphy', 'grpo'] as const;
export const BACKENDS = ['embedded', 'vllm'] as const;
export const LOSS_TYPES = ['dapo', 'grpo', 'dr_grpo'] as const;
export const LOSS_DENOMINATORS = ['trained', 'all'] as const;
export const SCALE_REWARDS = ['group', 'batch', 'none'] as const;
export const CREDITS = ['mars', 'mers'] as const;
export const REWARD_MODES = ['fraction', 'binary'] as const;
export const LR_SCHEDULERS = ['constant', 'cosine', 'linear'] as const;
export const DATASET_FORMAT_VALUES = ['auto', 'humaneval', 'mbpp', 'kodcode', 'livecodebench', 'jsonl'] as const;
export const TASKS = ['repair'] as const;
export const HISTORY_MODES = ['full', 'latest'] as const;
export const TIMEOUT_MODES = ['test', 'program'] as const;
export const EXECUTORS = ['local', 'sandboxfusion'] as const;
export const DEVICES = ['auto', 'cpu', 'cuda', 'emulate'] as const;
export const DIST_BACKENDS = ['auto', 'nccl', 'tcp'] as const;
/** Storage dtype of the device engine's compute weights and activations (config key storage); the first is the default. */
export const STORAGE_DTYPES = ['bf16', 'f32'] as const;
export type StorageDType = (typeof STORAGE_DTYPES)[number];

/** The resolved configuration: every key present. */
export interface TrainConfig {
  // run
  out: string | null;
  seed: number;
  maxSteps: number;
  saveSteps: number;
  logTrees: boolean;
  device: (typeof DEVICES)[number];
  distBackend: (typeof DIST_BACKENDS)[number];
  reduceBucketMb: number;
  reduceOverlap: boolean;
  storage: StorageDType;
  earlyStopWindow: number;
  earlyStopMinSignal: number;
  // model
  model: string | null;
  modelPreset: 'tiny' | 'small';
  bf16Generate: boolean;
  bf16Forward: boolean;
  keepLogitsMb: number;
  // data
  dataset: string | null;
  datasetFormat: (typeof DATASET_FORMAT_VALUES)[number];
  datasetLimit: number | null;
  task: (typeof TASKS)[number];
  // rollout
  backend: (typeof BACKENDS)[number];
  serverUrl: string | null;
  servedModelName: string | null;
  vllmApiKey: string | null;
  weightSync: 'auto' | 'nccl' | 'disk';
  kvCacheFraction: number;
  kvCacheBlocks: number | null;
  weightSyncBucketMb: number;
  weightSyncTimeoutS: number;
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  maxCompletionLength: number;
  executorWorkers: number | null;
  testTimeout: number;
  timeoutMode: (typeof TIMEOUT_MODES)[number];
  executor: (typeof EXECUTORS)[number];
  sandboxUrl: string | null;
  // method
  algo: (typeof ALGOS)[number];
  computeMatched: boolean;
  batchSize: number;
  numGenerations: number;
  numFollowUpGenerations: number | null;
  maxTurns: number;
  credit: (typeof CREDITS)[number];
  gamma: number;
  scaleRewards: (typeof SCALE_REWARDS)[number];
  rewardMode: (typeof REWARD_MODES)[number];
  intraKeep: number | null;
  interKeep: number | null;
  interDropZeroVariance: boolean;
  history: (typeof HISTORY_MODES)[number];
  // loss
  lossType: (typeof LOSS_TYPES)[number];
  lossDenominator: (typeof LOSS_DENOMINATORS)[number];
  beta: number;
  epsilon: number;
  epsilonHigh: number | null;
  // optimisation
  learningRate: number;
  lrSchedulerType: (typeof LR_SCHEDULERS)[number];
  warmupSteps: number;
  minLrRatio: number;
  weightDecay: number;
  maxGradNorm: number;
  adamBeta1: number;
  adamBeta2: number;
  microBatchTokens: number;
  gradientCheckpointing: boolean | null;
  // evaluation
  evalIterations: number;
  evalProblems: number;
  evalSteps: number;
  evalTemperature: number;
  evalSamples: number;
  // demo
  sftSteps: number;
  sftLearningRate: number;
}

export type ConfigKey = keyof TrainConfig;

export const SCHEMA: { readonly [K in ConfigKey]: KeyDef } = {
  out: { type: 'string', default: null, group: 'run', doc: 'Run directory (default: runs/<date>-<algo>); config, metrics, trees and checkpoints go here.' },
  seed: { type: 'int', default: 0, min: 0, group: 'run', doc: 'Seed of everything (model init, problem order, sampling); the same seed and config reproduce the same run.' },
  maxSteps: { type: 'int', default: 40, min: 1, group: 'run', doc: 'Training steps (one optimizer step each).' },
  saveSteps: { type: 'int', default: 20, min: 1, group: 'run', doc: 'Write a checkpoint every N steps (and at the end, and on SIGINT/SIGTERM).' },
  logTrees: { type: 'boolean', default: true, group: 'run', doc: 'Append every rollout tree to trees.jsonl.gz (for the report\'s tree viewer).' },
  device: { type: 'enum', values: DEVICES, default: 'auto', group: 'run', doc: 'Where the policy trains: cpu (the CPU engine), cuda (the device engine, in the dtype of storage; fails at start naming the cause when it cannot run; not yet run on hardware), auto (cuda when usable, else cpu), emulate (the device engine on the CPU harness: tests and debugging, slow, tiny models). May change on resume (not bit-exact across devices). docs/gpu.md.' },
  distBackend: { type: 'enum', values: DIST_BACKENDS, default: 'auto', group: 'run', doc: 'Collectives of data-parallel training (several ranks): nccl (GPU memory; needs --device cuda and NCCL), tcp (host copies over loopback or LAN TCP: --device cpu and emulate; works with cuda too, slowly), auto (nccl with --device cuda, else tcp). docs/distributed.md.' },
  reduceBucketMb: { type: 'number', default: REDUCE_BUCKET_MB.default, gt: 0, max: REDUCE_BUCKET_MB.max, group: 'run', doc: 'Data-parallel training (several ranks): size of the buckets in which the fp32 gradients are reduce-scattered (and the updated weights gathered), MiB (DeepSpeed reduce_bucket_size, DDP bucket_cap_mb). Smaller buckets start the first reduction earlier in the backward pass; larger ones make fewer, more efficient calls. docs/distributed.md, "Overlap".' },
  reduceOverlap: { type: 'boolean', default: true, group: 'run', doc: 'Data-parallel training with a device engine over NCCL: start each bucket\'s gradient reduction during the last micro-batch\'s backward pass, as soon as its gradients are final (false: all after the backward pass; the same numbers). docs/distributed.md, "Overlap".' },
  storage: { type: 'enum', values: STORAGE_DTYPES, default: STORAGE_DTYPES[0], group: 'run', doc: 'Device engine (--device cuda or emulate, or auto when it picks cuda): the dtype of the compute weights, activations and KL reference. bf16 (production); f32 is a precision/debug mode (the master weights are the compute weights; about 2x the weight, activation and reference memory, in the memory plan). The CPU engine computes in f32 already: --storage f32 with --device cpu is refused. Cannot change on resume. docs/gpu.md.' },
  earlyStopWindow: { type: 'int', default: 0, min: 0, group: 'run', doc: 'Stop training early once the last N steps together had at most earlyStopMinSignal of their groups with a learning signal (reward variance); 0 = never. The stop and its reason go to the log and metrics.jsonl; the final evaluation and checkpoint follow as at maxSteps.' },
  earlyStopMinSignal: { type: 'number', default: 0.02, min: 0, lt: 1, group: 'run', doc: 'Share of groups with a learning signal over the earlyStopWindow steps at or below which training stops.' },

  model: { type: 'string', default: null, group: 'model', doc: 'Hugging Face model directory (config.json + safetensors). Unset: a tiny random model (the CPU demo).' },
  modelPreset: { type: 'enum', values: ['tiny', 'small'], default: 'tiny', group: 'model', doc: 'Size of the random model created when no model is given.' },
  bf16Generate: { type: 'boolean', default: false, group: 'model', doc: 'CPU engine: generate (rollouts, evaluations) on a bf16 copy of the weights (vdpbf16ps where the CPU has AVX512_BF16). Off by default: generation\'s log-probs are the loss\'s old log-probs, so every PPO ratio would start away from 1 by the bf16 error. docs/model.md, "bf16 weights".' },
  bf16Forward: { type: 'boolean', default: false, group: 'model', doc: 'CPU engine: run the layers\' projections of the training forward pass (and scoring) on the bf16 copy; the backward products and the loss\'s LM head stay fp32. Off by default: the gradient is then no longer the fp32 policy\'s. docs/model.md, "bf16 weights".' },
  keepLogitsMb: { type: 'int', default: 1024, min: 0, max: 2 ** 30, group: 'model', doc: 'MiB of LM-head logits kept from the loss\'s first pass (log-probs) to its second (gradients), so that the head\'s product is not computed again for them (one of its four products; on the CPU engine a 2-layer Qwen3-shaped model\'s step took 3.8 s instead of 5.2); the result is the same bits either way. 0 keeps one chunk (at most 64 MiB). On a GPU (--device cuda) they take device memory, which the memory plan counts. May change on resume (bit-identical). docs/model.md.' },

  dataset: { type: 'string', default: null, group: 'data', doc: 'Training problems (HumanEval/MBPP/KodCode/LiveCodeBench/JSONL file). Unset: the built-in synthetic task.' },
  datasetFormat: { type: 'enum', values: DATASET_FORMAT_VALUES, default: 'auto', group: 'data', doc: 'Format of --dataset (auto: detected from the records).' },
  datasetLimit: { type: 'int', default: null, min: 1, group: 'data', doc: 'Use at most this many problems of the dataset.' },
  task: { type: 'enum', values: TASKS, default: 'repair', group: 'data', doc: 'Built-in synthetic task family used when no dataset is given.' },

  backend: { type: 'enum', values: BACKENDS, default: 'embedded', group: 'rollout', doc: 'Rollout backend: the native engine in this process, or a vLLM (OpenAI-compatible) server.' },
  serverUrl: { type: 'string', default: null, group: 'rollout', doc: 'Base URL of the vLLM server (backend vllm), e.g. http://127.0.0.1:8000.' },
  servedModelName: { type: 'string', default: null, group: 'rollout', doc: 'Model name the server serves (default: the server\'s first model).' },
  vllmApiKey: { type: 'string', default: null, group: 'rollout', doc: 'API key sent to the vLLM server(s) as Authorization: Bearer (their --api-key); unset: the environment variable MURPHY_API_KEY. Never written to the run directory or the log.' },
  weightSync: { type: 'enum', values: ['auto', 'nccl', 'disk'], default: 'auto', group: 'rollout', doc: 'How trained weights reach the vLLM servers (backend vllm): nccl (broadcast over NCCL from a GPU of the trainer process; against murphy-native serve on this machine, its loopback fake; fails at the first sync when the checks refuse), disk (a checkpoint in the run directory, loaded by each server), auto (nccl where it can be set up, else disk). A failed NCCL sync falls back to disk for that step. docs/distributed.md.' },
  weightSyncBucketMb: { type: 'int', default: 512, min: 256, max: 1024, group: 'rollout', doc: 'Size of the bf16 buckets of an NCCL weight sync, MiB.' },
  weightSyncTimeoutS: { type: 'int', default: 300, min: 1, group: 'rollout', doc: 'Deadline of an NCCL weight sync (and of forming its group), seconds; past it the group is aborted and the step syncs through the disk.' },
  kvCacheFraction: { type: 'number', default: 0.9, gt: 0, max: 1, group: 'rollout', doc: 'Colocated rollouts (backend embedded on --device cuda|emulate): share of the device memory free at the start of each rollout phase that the paged KV cache takes (released again for the training phase). docs/rollout.md, "Colocated mode".' },
  kvCacheBlocks: { type: 'int', default: null, min: 1, group: 'rollout', doc: 'Colocated rollouts: the paged KV cache\'s size in blocks of 16 tokens, instead of kvCacheFraction of the free memory.' },
  temperature: { type: 'number', default: 1, min: 0, group: 'rollout', doc: 'Sampling temperature of rollouts.' },
  topP: { type: 'number', default: 1, gt: 0, max: 1, group: 'rollout', doc: 'Nucleus sampling of rollouts. Below 1 (or with topK or minP set) the sampler\'s log-probs are not the policy\'s, so the loss takes its own, detached, as the old ones: every ratio 1, no clipping (TRL with one update per batch).' },
  topK: { type: 'int', default: 0, min: 0, group: 'rollout', doc: 'Top-k sampling of rollouts (0 = off).' },
  minP: { type: 'number', default: 0, min: 0, max: 1, group: 'rollout', doc: 'Min-p sampling of rollouts: keep the tokens whose probability is at least minP times the most likely one\'s (0 = off).' },
  maxCompletionLength: { type: 'int', default: 48, min: 1, group: 'rollout', doc: 'Maximum tokens per completion (TRL max_completion_length).' },
  executorWorkers: { type: 'int', default: null, min: 1, group: 'rollout', doc: 'Python executor processes (default: one per core). Not used by the built-in task.' },
  testTimeout: { type: 'number', default: 3, gt: 0, group: 'rollout', doc: 'Seconds per test in the Python executor.' },
  timeoutMode: { type: 'enum', values: TIMEOUT_MODES, default: 'test', group: 'rollout', doc: 'test: --test-timeout per test (and 10 s per program); program: --test-timeout for the whole program, as the official HumanEval/MBPP harnesses.' },
  executor: { type: 'enum', values: EXECUTORS, default: 'local', group: 'rollout', doc: 'Where programs run: local (the sandboxed executor on this machine) or sandboxfusion (a SandboxFusion service at --sandbox-url).' },
  sandboxUrl: { type: 'string', default: null, group: 'rollout', doc: 'Base URL of the SandboxFusion service (executor sandboxfusion), e.g. http://127.0.0.1:8080.' },

  algo: { type: 'enum', values: ALGOS, default: 'murphy', group: 'method', doc: 'murphy: multi-turn trees with feedback; grpo: the single-turn baseline (S = 1).' },
  computeMatched: { type: 'boolean', default: false, group: 'method', doc: 'With --algo grpo: G = MURPHY\'s average completions per problem (measured over the first step\'s MURPHY trees).' },
  batchSize: { type: 'int', default: 8, min: 1, group: 'method', doc: 'Problems per training step.' },
  numGenerations: { type: 'int', default: 4, min: 1, group: 'method', doc: 'G: completions per turn-1 prompt (TRL num_generations).' },
  numFollowUpGenerations: { type: 'int', default: null, min: 1, group: 'method', doc: 'G\': completions per feedback prompt (default: G).' },
  maxTurns: { type: 'int', default: 2, min: 1, max: 8, group: 'method', doc: 'S: maximum turns of a MURPHY tree (grpo forces 1).' },
  credit: { type: 'enum', values: CREDITS, default: 'mars', group: 'method', doc: 'Reward propagation up the tree: MaRS (max) or MeRS (mean).' },
  gamma: { type: 'number', default: 1, min: 0, max: 1, group: 'method', doc: 'Discount of children\'s credit.' },
  scaleRewards: { type: 'enum', values: SCALE_REWARDS, default: 'group', group: 'method', doc: 'Advantage std scaling (TRL scale_rewards).' },
  rewardMode: { type: 'enum', values: REWARD_MODES, default: 'fraction', group: 'method', doc: 'Reward = fraction of tests passed, or 1/0.' },
  intraKeep: { type: 'int', default: null, min: 2, group: 'method', doc: 'IntraP: keep m samples per group, chosen for maximum reward variance (unset: off). At least 2: a group of one has advantage 0, so m = 1 would train on nothing.' },
  interKeep: { type: 'int', default: null, min: 0, group: 'method', doc: 'InterP: keep at most b expanded groups per tree, by reward spread (unset: no limit).' },
  interDropZeroVariance: { type: 'boolean', default: false, group: 'method', doc: 'InterP: also drop every expanded group whose rewards (credit) are all equal, whatever interKeep says.' },
  history: { type: 'enum', values: HISTORY_MODES, default: 'full', group: 'method', doc: 'Feedback prompts carry every earlier attempt (full) or only the latest.' },

  lossType: { type: 'enum', values: LOSS_TYPES, default: 'dapo', group: 'loss', doc: 'Loss aggregation (TRL loss_type): token mean (dapo), per-sequence mean (grpo), constant normaliser (dr_grpo).' },
  lossDenominator: { type: 'enum', values: LOSS_DENOMINATORS, default: 'trained', group: 'loss', doc: 'With beta = 0, zero-advantage samples are not run (they add 0 to the loss); trained: the loss denominators (tokens for dapo, samples for grpo/dr_grpo) count only the samples run; all: every completion of the batch, as TRL.' },
  beta: { type: 'number', default: 0, min: 0, group: 'loss', doc: 'KL coefficient to the initial policy (k3 estimator); 0 = no reference model.' },
  epsilon: { type: 'number', default: 0.2, gt: 0, lt: 1, group: 'loss', doc: 'Lower clip range of the ratio (TRL epsilon).' },
  epsilonHigh: { type: 'number', default: null, gt: 0, group: 'loss', doc: 'Upper clip range (TRL epsilon_high; default: epsilon).' },

  learningRate: { type: 'number', default: 2e-3, gt: 0, group: 'optim', doc: 'Peak AdamW learning rate.' },
  lrSchedulerType: { type: 'enum', values: LR_SCHEDULERS, default: 'constant', group: 'optim', doc: 'Learning-rate schedule after warm-up.' },
  warmupSteps: { type: 'int', default: 0, min: 0, group: 'optim', doc: 'Linear warm-up steps from 0 to the peak rate.' },
  minLrRatio: { type: 'number', default: 0, min: 0, max: 1, group: 'optim', doc: 'Floor of cosine/linear decay as a fraction of the peak.' },
  weightDecay: { type: 'number', default: 0, min: 0, group: 'optim', doc: 'AdamW decoupled weight decay.' },
  maxGradNorm: { type: 'number', default: 1, min: 0, group: 'optim', doc: 'Global gradient-norm clipping (0 = off).' },
  adamBeta1: { type: 'number', default: 0.9, min: 0, lt: 1, group: 'optim', doc: 'AdamW beta1.' },
  adamBeta2: { type: 'number', default: 0.999, min: 0, lt: 1, group: 'optim', doc: 'AdamW beta2.' },
  microBatchTokens: { type: 'int', default: 8192, min: 16, group: 'optim', doc: 'Token budget of one micro-batch (prompt + completion tokens); gradients accumulate over micro-batches.' },
  gradientCheckpointing: { type: 'boolean', default: null, group: 'optim', doc: 'GPU engine: recompute each decoder layer in the backward pass instead of keeping its activations (unset: on for models of 1e9 parameters and more). Used by the memory plan; the CPU engine ignores it. May change on resume (bit-identical).' },

  evalIterations: { type: 'int', default: 2, min: 1, max: 10, group: 'eval', doc: 'k of the Iter-k pass@1 evaluation run before and after training.' },
  evalProblems: { type: 'int', default: 64, min: 0, group: 'eval', doc: 'Held-out problems evaluated before and after training (never trained on); 0 = no evaluation.' },
  evalSteps: { type: 'int', default: 0, min: 0, group: 'eval', doc: 'Also evaluate every N steps (0 = only before and after).' },
  evalTemperature: { type: 'number', default: 0, min: 0, group: 'eval', doc: 'Sampling temperature of the evaluations (0 = greedy).' },
  evalSamples: { type: 'int', default: 1, min: 1, group: 'eval', doc: 'Conversations per problem in the evaluations (with evalTemperature > 0).' },

  sftSteps: { type: 'int', default: 30, min: 0, group: 'demo', doc: 'Supervised warm-up steps on the built-in task before RL (built-in task only).' },
  sftLearningRate: { type: 'number', default: 3e-3, gt: 0, group: 'demo', doc: 'Learning rate of the supervised warm-up.' },
};

export const CONFIG_KEYS = Object.keys(SCHEMA) as ConfigKey[];

/**
 * Defaults of the CPU demo (no model and no dataset given), applied to keys that neither the
 * file nor the flags set: sized to finish in a few minutes on 2 cores.
 */
export const DEMO_DEFAULTS: Partial<TrainConfig> = {
  maxSteps: 300,
  earlyStopWindow: 20,
  saveSteps: 100,
  batchSize: 8,
  numGenerations: 4,
  numFollowUpGenerations: 4,
  rewardMode: 'binary',
  maxCompletionLength: 8,
  learningRate: 3e-3,
  sftSteps: 30,
  sftLearningRate: 1e-2,
  evalProblems: 24,
  evalIterations: 2,
  evalTemperature: 1,
  evalSamples: 8,
};

// ---------------------------------------------------------------------------------------
// Ranges: the one mechanism that says which values a key (or a native option that maps to a
// key, lib/native/options.ts) accepts, and how to say so in an error.

/** The range part of a key definition. */
export type Range = Pick<KeyDef, 'type' | 'min' | 'max' | 'gt' | 'lt' | 'values'>;

/** True when the number n lies in the range (type 'int' also needs an integer). */
export function inRange(d: Range, n: number): boolean {
  if (!Number.isFinite(n)) return false;
  if (d.type === 'int' && !Number.isInteger(n)) return false;
  if (d.min !== undefined && n < d.min) return false;
  if (d.max !== undefined && n > d.max) return false;
  if (d.gt !== undefined && !(n > d.gt)) return false;
  if (d.lt !== undefined && !(n < d.lt)) return false;
  return true;
}

/** "an integer >= 1", "a number > 0 and < 1", "one of a, b": what the range accepts. */
export function describeRange(d: Range): string {
  switch (d.type) {
    case 'enum':
      return `one of ${d.values!.join(', ')}`;
    case 'boolean':
      return 'true or false';
    case 'string':
      return 'a string';
    default: {
      const parts: string[] = [];
      if (d.gt !== undefined) parts.push(`> ${d.gt}`);
      if (d.min !== undefined) parts.push(`>= ${d.min}`);
      if (d.lt !== undefined) parts.push(`< ${d.lt}`);
      if (d.max !== undefined) parts.push(`<= ${d.max}`);
      return [d.type === 'int' ? 'an integer' : 'a number', parts.join(' and ')].filter(Boolean).join(' ');
    }
  }
}

/** camelCase -> kebab-case (numGenerations -> num-generations). */
export function kebab(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** snake_case or kebab-case -> camelCase. */
export function camel(key: string): string {
  return key.replace(/[_-]([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}
