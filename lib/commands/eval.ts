// `murphy-native eval --dataset FILE (--model DIR | --server-url URL --tokenizer DIR)`:
// Iter-k pass@1 with execution feedback (docs/evaluation.md).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Argv, CommandModule } from 'yargs';
import { checkConfig, ConfigError, configKeyOptions, defaultConfig, kebab, validatePartial, type TrainConfig } from '../config/index.js';
import { DATASET_FORMATS, type Problem } from '../data/types.js';
import type { EvalResultsFile } from '../eval/iterk.js';
import { EXECUTOR_KINDS, timeoutLimits, type ExecutorKind, type TimeoutMode } from '../exec/types.js';
import type { RolloutBackend } from '../rollout/types.js';
import { checkOutputFile, writeFileAtomic } from '../train/rundir.js';

/** The keys of train's configuration that choose eval's embedded engine (the same flags, choices and checks). */
export const EVAL_ENGINE_KEYS = ['device', 'storage', 'kvCacheFraction', 'kvCacheBlocks'] as const;
type EngineKeys = Pick<TrainConfig, (typeof EVAL_ENGINE_KEYS)[number]>;

export interface EvalArgs {
  dataset: string;
  format: string;
  split?: string;
  limit?: number;
  model?: string;
  serverUrl?: string;
  servedModelName?: string;
  vllmApiKey?: string;
  tokenizer?: string;
  k: number;
  n: number;
  temperature: number;
  topP: number;
  maxTokens: number;
  seed: number;
  out?: string;
  workers?: number;
  testTimeout: number;
  /** 'program': --test-timeout for the whole program, as the official harnesses (default 'test': per test). */
  timeoutMode?: TimeoutMode;
  /** Where programs run (default local); sandboxfusion needs sandboxUrl. */
  executor?: ExecutorKind;
  sandboxUrl?: string;
  feedback: 'visible' | 'all';
  /** Embedded engine: generate on a bf16 copy of the weights (docs/model.md, "bf16 weights"). */
  bf16Generate?: boolean;
  /** Embedded engine: where it generates, as train's config keys (unset: their defaults; device auto). */
  device?: TrainConfig['device'];
  storage?: TrainConfig['storage'];
  kvCacheFraction?: number;
  kvCacheBlocks?: number;
}

/**
 * The engine keys given (checked as train checks them: ranges, --storage f32 with --device cpu)
 * over their defaults; refused with --server-url, where the server decides.
 */
export function evalEngineKeys(a: EvalArgs): EngineKeys {
  const given: Record<string, unknown> = {};
  for (const k of EVAL_ENGINE_KEYS) if (a[k] !== undefined) given[k] = a[k];
  const names = Object.keys(given);
  if (a.serverUrl && names.length) {
    throw new ConfigError(`--${names.map(kebab).join(', --')} chooses the embedded engine (--model); with --server-url the server generates: drop it`);
  }
  return checkConfig({ ...defaultConfig(), ...validatePartial(given, 'eval\'s flags') });
}

/** Runs the evaluation and returns the results file's content (written to args.out when given). */
export async function runEval(a: EvalArgs, log: (s: string) => void = () => undefined): Promise<EvalResultsFile> {
  if (!a.model && !a.serverUrl) throw new ConfigError('give --model DIR (embedded engine) or --server-url URL (vLLM)');
  if (a.model && !existsSync(join(a.model, 'config.json'))) throw new ConfigError(`model directory ${a.model} has no config.json`);
  const tokDir = a.tokenizer ?? a.model;
  if (!tokDir) throw new ConfigError('with --server-url, give --tokenizer DIR (the served model\'s tokenizer files) or --model');
  if (!existsSync(join(tokDir, 'tokenizer.json'))) throw new ConfigError(`no tokenizer.json in ${tokDir}`);
  if (!Number.isInteger(a.k) || a.k < 1) throw new ConfigError(`--k must be an integer >= 1, got ${a.k}`);
  if (!Number.isInteger(a.n) || a.n < 1) throw new ConfigError(`--n must be an integer >= 1, got ${a.n}`);
  const eng = evalEngineKeys(a);
  if (a.out) checkOutputFile(a.out, '--out');
  // loaded once the arguments are checked: the CLI's other commands, and refused flags, do not pay for them
  const [{ loadTrainingProblems }, { problemPrompt }, { evaluateIterK }, { createExecutor }, { ChatPromptBuilder }, { loadChatTokenizer }, { EmbeddedBackend }, { VllmBackend }, { machineProbe, selectDevice }, { loadRolloutEngine }] = await Promise.all([
    import('../data/check.js'), import('../data/index.js'), import('../eval/iterk.js'), import('../exec/create.js'), import('../prompt/chat.js'),
    import('../prompt/tokenizer.js'), import('../rollout/embedded.js'), import('../rollout/vllm.js'), import('../gpu/device.js'), import('./rollout-engine.js'),
  ]);
  // Datasets with splits (MBPP) are scored on one split, the test split unless --split says otherwise.
  const problems: Problem[] = await loadTrainingProblems(a.dataset, a.format, a.limit ?? null, { split: a.split, defaultSplit: 'test' });
  const split = [...new Set(problems.map((p) => p.split).filter((x): x is string => x !== undefined))].join(',');
  const tok = loadChatTokenizer(tokDir);
  let device: 'cpu' | 'cuda' | 'emulate' | undefined;
  let backend: RolloutBackend;
  if (a.serverUrl) {
    backend = await VllmBackend.connect({ servers: a.serverUrl.split(','), model: a.servedModelName, apiKey: a.vllmApiKey, tokenizer: tok, maxRetries: 2 });
  } else {
    // as train chooses: auto takes cuda when the binary, a device and cuBLASLt are there, else cpu
    const sel = selectDevice(eng.device, machineProbe());
    log(sel.line);
    device = sel.device;
    const { engine } = await loadRolloutEngine(a.model!, { device, storage: eng.storage, bf16Generate: a.bf16Generate, kvCacheFraction: eng.kvCacheFraction, kvCacheBlocks: eng.kvCacheBlocks }, log);
    backend = new EmbeddedBackend({ engine, tokenizer: tok });
  }
  const executor = createExecutor({
    kind: a.executor, sandboxUrl: a.sandboxUrl, workers: a.workers, limits: timeoutLimits(a.timeoutMode ?? 'test', a.testTimeout), feedback: { scope: a.feedback },
  });
  const prompts = new ChatPromptBuilder<Problem>(tok, { task: (p) => problemPrompt(p, 'instruction') });
  try {
    await executor.start(); // the sandbox's one-line warning (weaker isolation) comes first
    const r = await evaluateIterK(problems, { sampler: backend, executor, prompts }, {
      k: a.k,
      n: a.n,
      temperature: a.temperature,
      topP: a.topP,
      maxTokens: a.maxTokens,
      stopTokenIds: [...tok.eosTokenIds],
      seed: a.seed,
      groupBy: (p) => p.difficulty,
      onProgress: (d) => {
        if (d % 50 === 0) log(`  ${d} generations`);
      },
    });
    const file: EvalResultsFile = {
      version: 1,
      dataset: resolve(a.dataset),
      model: a.model ? resolve(a.model) : `${a.serverUrl} (${backend instanceof VllmBackend ? backend.model ?? '' : ''})`,
      settings: { k: a.k, n: a.temperature === 0 ? 1 : a.n, temperature: a.temperature, topP: a.topP, maxTokens: a.maxTokens, seed: a.seed, backend: a.serverUrl ? 'vllm' : 'embedded', ...(device ? { device, ...(device === 'cpu' ? {} : { storage: eng.storage }) } : {}), feedback: `${a.feedback} tests`, ...(split ? { split } : {}) },
      problems: r.problems,
      iterations: r.iterations,
      byGroup: r.byGroup,
      perProblem: r.perProblem,
      noRoom: r.noRoom,
      unfit: r.unfit,
      seconds: r.seconds,
      createdAt: new Date().toISOString(),
    };
    if (a.out) writeFileAtomic(a.out, JSON.stringify(file, null, 1) + '\n');
    return file;
  } finally {
    await executor.close();
    await backend.close();
  }
}

export const evalCommand: CommandModule<object, EvalArgs> = {
  command: 'eval',
  describe: 'Iter-k pass@1: attempt, run against the visible tests, feed back, retry (HumanEval, MBPP, LiveCodeBench, KodCode, JSONL)',
  builder: (y) =>
    y
      .option('dataset', { type: 'string', demandOption: true, describe: 'Problems file (HumanEval/MBPP/KodCode/LiveCodeBench/JSONL)' })
      .option('format', { type: 'string', choices: DATASET_FORMATS as string[], default: 'auto', describe: 'Dataset format' })
      .option('split', { type: 'string', describe: 'Split(s) to score, comma-separated, for datasets that have them (MBPP: prompt, test, validation, train); default test' })
      .option('limit', { type: 'number', describe: 'Evaluate the first N problems (of the split)' })
      .option('model', { type: 'string', describe: 'Model directory: generate with the embedded native engine (and its tokenizer)' })
      .option('server-url', { type: 'string', describe: 'vLLM (or murphy-native serve) base URL(s), comma-separated' })
      .option('bf16-generate', { type: 'boolean', default: false, describe: 'With --model: generate on a bf16 copy of the weights; docs/model.md, "bf16 weights"' })
      .option('served-model-name', { type: 'string', describe: 'Model name on the server' })
      .option('vllm-api-key', { type: 'string', describe: 'API key of the server (its --api-key), sent as Authorization: Bearer; default: env MURPHY_API_KEY' })
      .option('tokenizer', { type: 'string', describe: 'Tokenizer directory (default: --model)' })
      .option('k', { type: 'number', default: 5, describe: 'Iterations (attempts with feedback)' })
      .option('n', { type: 'number', default: 1, describe: 'Conversations per problem (sampled; greedy uses 1)' })
      .option('temperature', { type: 'number', default: 0, describe: '0 = greedy' })
      .option('top-p', { type: 'number', default: 1 })
      .option('max-tokens', { type: 'number', default: 1024, describe: 'Maximum completion tokens per attempt' })
      .option('seed', { type: 'number', default: 0 })
      .option('feedback', { type: 'string', choices: ['visible', 'all'], default: 'visible', describe: 'Which tests the feedback describes (solved always means all tests pass)' })
      .option('workers', { type: 'number', describe: 'Executor processes (default: one per core)' })
      .option('test-timeout', { type: 'number', default: 3, describe: 'Seconds per test (per program with --timeout-mode program)' })
      .option('executor', { type: 'string', choices: EXECUTOR_KINDS as unknown as string[], default: 'local', describe: 'Where programs run: local (sandboxed on this machine) or sandboxfusion (a SandboxFusion service)' })
      .option('sandbox-url', { type: 'string', describe: 'SandboxFusion base URL (with --executor sandboxfusion), e.g. http://127.0.0.1:8080' })
      .option('timeout-mode', { type: 'string', choices: ['test', 'program'], default: 'test', describe: 'program: the whole program gets --test-timeout seconds, as the official HumanEval/MBPP harnesses (for comparing with published numbers)' })
      .option('out', { type: 'string', describe: 'Write the results JSON here' })
      .options(configKeyOptions(EVAL_ENGINE_KEYS, 'Embedded engine (with --model; the same keys as train\'s):', {
        device: 'Where --model generates: cpu (the CPU engine), cuda (the device engine with the paged KV cache; not yet run on hardware), auto (cuda when usable, else cpu), emulate (the device engine on the CPU harness: tests, slow, tiny models). docs/gpu.md',
        storage: 'Device engine: the dtype of its weights and activations (f32: precision/debug mode; refused with --device cpu)',
        kvCacheFraction: 'Device engine: share of the free device memory the paged KV cache takes',
        kvCacheBlocks: 'Device engine: the paged KV cache\'s size in blocks of 16 tokens, instead of --kv-cache-fraction',
      })) as unknown as Argv<EvalArgs>,
  handler: async (argv) => {
    const log = (s: string): void => {
      process.stderr.write(s + '\n');
    };
    const r = await runEval(argv, log);
    const { formatIterKTable } = await import('../eval/iterk.js');
    process.stdout.write(formatIterKTable(r) + '\n');
    if (argv.out) process.stdout.write(`results: ${resolve(argv.out)}\n`);
  },
};
