// `murphy-native train` as a library call: pre-flight checks (nothing is written before they
// pass), the run directory, model/tokenizer/backend/executor/prompt set-up, the demo's
// supervised warm-up, Iter-k evaluations before and after, the loop, and the report.
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkConfig, ConfigError, formatConfig, validatePartial, withoutSecrets } from '../config/index.js';
import type { TrainConfig } from '../config/schema.js';
import { loadTrainingProblems } from '../data/check.js';
import { problemPrompt, type Problem } from '../data/index.js';
import { builtinTokenizer, createDemoModel, demoExtract, repairPromptBuilder, supervisedWarmup } from '../demo/setup.js';
import { repairSplit, RepairExecutor } from '../demo/repair.js';
import { evaluateIterK, formatIterKTable, type EvalResultsFile } from '../eval/iterk.js';
import { createExecutor } from '../exec/create.js';
import { timeoutLimits } from '../exec/types.js';
import { builtinTokenizerFiles, PolicyModel, type EngineOptions } from '../model/index.js';
import { mix32 } from '../murphy/rng.js';
import type { CodeExtractor, Executor, PromptBuilder } from '../murphy/types.js';
import { ChatPromptBuilder } from '../prompt/chat.js';
import { loadChatTokenizer, type HfChatTokenizer } from '../prompt/tokenizer.js';
import { EmbeddedBackend } from '../rollout/embedded.js';
import type { RolloutBackend } from '../rollout/types.js';
import { VllmBackend } from '../rollout/vllm.js';
import { weightSyncFor } from '../rollout/weight-sync-channel.js';
import { embeddedEngine } from './rollout-engine.js';
import { writeReport } from '../report/html.js';
import { engineWithStorage, policyEngine, selectTrainingDevice } from '../gpu/device.js';
import { checkpointDirs, readCheckpointConfig, readJsonFile, resolveResume, type ResumePoint } from '../train/checkpoint.js';
import { TrainError } from '../train/error.js';
import { filledKeysNote, withSchemaDefaults } from '../train/resume.js';
import { permutation, train, type TrainSummary } from '../train/loop.js';
import { NativePolicy, type PolicyEngineInfo } from '../train/policy.js';
import { formatRunHeader, RecentSteps, silentProgress, type ProgressSink } from '../train/progress.js';
import { formatStepLine, type StepMetrics } from '../train/metrics.js';
import { RunLock } from '../train/lock.js';
import { checkOutputDir, fileSize, RunDir, writeFileAtomic } from '../train/rundir.js';
import { StopSignal } from '../train/signals.js';
import { broadcastJson, type Collective } from '../dist/collective.js';
import { DataParallel } from '../dist/data-parallel.js';
import { distBackendFor } from '../dist/backend.js';
import { checkpointShards, DistributedPolicy } from '../dist/zero.js';

export interface RunTrainingOptions {
  /** Continue the run in this directory (its config.json is used; see RESUMABLE_KEYS). */
  resume?: string;
  progress?: ProgressSink;
  /** Human-readable lines (config, evaluation tables, where things are). */
  log?: (line: string) => void;
  /** Lines every rank reports, also where `log` is silent (ranks other than 0): weight-sync set-up and fallbacks. Default: `log`. */
  warn?: (line: string) => void;
  handleSignals?: boolean;
  /** Tests: stop as if interrupted after this step. */
  stopAfterStep?: number;
  /** Write report.html at the end. Default true. */
  report?: boolean;
  /** Resume even when RUN/config.json differs from the checkpoint's configuration (RUN/config.json wins). */
  overrideConfig?: boolean;
  /** Log the full configuration and one line per step (default: a short header and a bar per phase). */
  verbose?: boolean;
  /** Tests: the policy's engine instead of the one --device selects (e.g. the GPU engine emulated on the CPU). */
  engine?: EngineOptions;
  /**
   * This process is one rank of a data-parallel job (lib/dist, docs/distributed.md): ZeRO-1 over
   * the collective; rank 0 alone holds the lock and writes the run directory.
   */
  dist?: { collective: Collective };
}

export interface RunTrainingResult {
  runDir: string;
  summary: TrainSummary;
  evals: { label: string; file: string; result: EvalResultsFile }[];
  reportPath: string | null;
}

/**
 * Keys a resume may change; every other key must equal the run's. (A key a saved configuration
 * lacks, added since the run began, is its schema default: lib/train/resume.ts, for every key.)
 * distBackend changes how the collectives move bytes, not what is trained; keepLogitsMb, how
 * much memory the CPU engine's loss holds (the same bits either way: docs/model.md).
 */
export const RESUMABLE_KEYS = ['maxSteps', 'saveSteps', 'evalSteps', 'logTrees', 'vllmApiKey', 'earlyStopWindow', 'earlyStopMinSignal', 'weightSync', 'weightSyncBucketMb', 'weightSyncTimeoutS', 'distBackend', 'keepLogitsMb'] as const;

/**
 * Keys a resume may also change although they belong to the run: they change where and how the
 * same computation runs, not what is trained. gradientCheckpointing recomputes the same
 * activations (bit-identical); another device rounds floats differently, so a continuation on
 * it is not bit-exact. Keys that change the math (the storage dtype among them) stay refused.
 */
export const RESUME_ENGINE_KEYS = ['device', 'gradientCheckpointing'] as const;

/** Keys (other than RESUMABLE_KEYS, RESUME_ENGINE_KEYS and out) whose values differ between two configurations, sorted. */
export function configDifferences(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const skip = new Set<string>([...RESUMABLE_KEYS, ...RESUME_ENGINE_KEYS, 'out']);
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].filter((k) => !skip.has(k) && JSON.stringify(a[k] ?? null) !== JSON.stringify(b[k] ?? null)).sort();
}

/**
 * The line a resume logs when RESUME_ENGINE_KEYS differ between the run (`now`) and the
 * checkpoint it continues (`saved`), or null when none does.
 */
export function engineChangeNote(now: Record<string, unknown>, saved: Record<string, unknown>): string | null {
  const changed = RESUME_ENGINE_KEYS.filter((k) => JSON.stringify(now[k] ?? null) !== JSON.stringify(saved[k] ?? null));
  if (changed.length === 0) return null;
  const what = changed.map((k) => `"${k}" ${JSON.stringify(saved[k] ?? null)} -> ${JSON.stringify(now[k] ?? null)}`).join(', ');
  return `resuming with ${what} (checkpoint -> now): the same training continues` +
    (changed.includes('device') ? ', but not bit-exact: another device rounds floats differently' : ' (gradient checkpointing recomputes bit-identical activations)');
}

/**
 * The line a resume logs when the engine the checkpoint was trained on (its state.json) is
 * another than the one the run now built, or null (same engine, or a checkpoint that predates
 * the record).
 */
export function engineRunNote(saved: PolicyEngineInfo | undefined, now: PolicyEngineInfo): string | null {
  if (!saved || saved.device === now.device) return null;
  return `the checkpoint was trained on the ${saved.device} engine, this run uses the ${now.device} engine: the same training continues, but not bit-exact: another device rounds floats differently`;
}

function defaultOut(c: TrainConfig): string {
  const d = new Date();
  const p = (n: number): string => String(n).padStart(2, '0');
  return join('runs', `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}-${c.algo}`);
}

/** Reads the configuration of an existing run and applies the allowed overrides. */
export function resumeConfig(dir: string, flags: Record<string, unknown>): TrainConfig {
  const run = new RunDir(dir);
  if (!existsSync(run.configPath)) throw new TrainError(`cannot resume ${run.root}: no config.json there`);
  // keys the file lacks (added since the run began) take their schema defaults: lib/train/resume.ts
  const saved = checkConfig(withSchemaDefaults(validatePartial(readJsonFile(run.configPath, 'run configuration'), run.configPath)).config as unknown as TrainConfig);
  const given = validatePartial(flags, 'command-line flags') as Record<string, unknown>;
  for (const [k, v] of Object.entries(given)) {
    if (k === 'out') continue;
    if ((RESUMABLE_KEYS as readonly string[]).includes(k) || (RESUME_ENGINE_KEYS as readonly string[]).includes(k)) (saved as unknown as Record<string, unknown>)[k] = v;
    else if (JSON.stringify(v) !== JSON.stringify((saved as unknown as Record<string, unknown>)[k])) {
      throw new ConfigError(`config key "${k}" cannot change on resume (run has ${JSON.stringify((saved as unknown as Record<string, unknown>)[k])}, got ${JSON.stringify(v)}); only ${[...RESUMABLE_KEYS, ...RESUME_ENGINE_KEYS].join(', ')} can`);
    }
  }
  saved.out = run.root;
  return saved;
}

interface Parts {
  problems: Problem[];
  evalProblems: Problem[];
  datasetName: string;
  demo: boolean;
}

/** Pre-flight: everything that can fail on user input, before anything is written. */
async function preflight(c: TrainConfig): Promise<Parts> {
  if (!(c.temperature > 0)) throw new ConfigError(`config key "temperature" (--temperature) is ${c.temperature}: training samples, so it needs a temperature > 0`);
  checkOutputDir(c.out!, 'run directory (config key "out", --out)');
  if (c.model && !existsSync(join(c.model, 'config.json'))) throw new ConfigError(`model directory ${c.model} has no config.json (config key "model", --model)`);
  if (c.dataset === null) {
    const { train: tr, test } = repairSplit(c.seed);
    return { problems: tr, evalProblems: test.slice(0, c.evalProblems), datasetName: `builtin:${c.task}`, demo: true };
  }
  const all = await loadTrainingProblems(c.dataset, c.datasetFormat, c.datasetLimit);
  // Held-out evaluation problems: a seeded quarter (at most evalProblems) never trained on.
  const perm = permutation(all.length, mix32(c.seed, 0xe7a1));
  const nEval = all.length >= 4 ? Math.min(c.evalProblems, Math.floor(all.length / 4)) : 0;
  const evalSet = new Set(perm.slice(0, nEval));
  return {
    problems: all.filter((_, i) => !evalSet.has(i)),
    evalProblems: all.filter((_, i) => evalSet.has(i)),
    datasetName: c.dataset,
    demo: false,
  };
}

/**
 * Removes what a fresh run wrote when it stops before it has anything to resume (no checkpoint
 * and no completed step): the entries that were not in the directory before, and the
 * directory itself when the run created it. Returns whether anything was removed.
 */
function removeHalfMadeRun(run: RunDir, existed: boolean, before: ReadonlySet<string>): boolean {
  if (!existsSync(run.root) || checkpointDirs(run).length > 0 || fileSize(run.metricsPath) > 0) return false;
  if (!existed) {
    rmSync(run.root, { recursive: true, force: true });
    return true;
  }
  for (const n of readdirSync(run.root)) if (!before.has(n)) rmSync(join(run.root, n), { recursive: true, force: true });
  return true;
}

/** Several ranks: the collective backend must be able to run on the device (lib/dist/backend.ts); auto is checked by each rank. */
export function checkRanksDevice(c: TrainConfig, worldSize: number): void {
  if (worldSize > 1 && c.device !== 'auto') distBackendFor(c.device, c.distBackend, worldSize);
}

/**
 * Several ranks with backend vllm: rank r of N talks to (and syncs weights to) the servers at
 * positions r, r + N, r + 2N, ... of the --server-url list; N ranks need at least N servers
 * (checked by the launcher before any rank starts, and by each rank).
 */
export function serversOfRank(c: Pick<TrainConfig, 'serverUrl'>, rank: number, worldSize: number): string[] {
  const servers = (c.serverUrl ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (worldSize > 1 && servers.length < worldSize) {
    throw new ConfigError(`config key "serverUrl" (--server-url): ${worldSize} ranks need at least ${worldSize} vLLM servers (server i goes to rank i mod ${worldSize}), got ${servers.length}: start more servers or use fewer ranks`);
  }
  return servers.filter((_, i) => i % worldSize === rank);
}

/**
 * The policy for a run (on `engine`): the checkpoint's weights when resuming (`checkpointPolicy`),
 * else config key "model", else the demo's random model; with the config's bf16 keys applied
 * (docs/model.md, "bf16 weights").
 */
export async function loadPolicyModel(c: Pick<TrainConfig, 'model' | 'seed' | 'modelPreset' | 'bf16Generate' | 'bf16Forward'>, checkpointPolicy: string | null,
  engine: EngineOptions = {}): Promise<PolicyModel> {
  const dir = checkpointPolicy ?? c.model;
  const model = dir ? await PolicyModel.load(dir, engine) : await createDemoModel(c.seed, c.modelPreset, engine);
  // (the device engine refuses bf16Forward with one line: it computes in its storage dtype)
  if (c.bf16Generate || c.bf16Forward) model.setBf16({ generate: c.bf16Generate, forward: c.bf16Forward });
  return model;
}

export async function runTraining(config: TrainConfig, o: RunTrainingOptions = {}): Promise<RunTrainingResult> {
  const log = o.log ?? (() => undefined);
  // A configuration from code is checked as a file would be: a run started with a value the
  // schema refuses could not be resumed (its config.json would be refused then).
  checkConfig(validatePartial(config, 'the configuration of runTraining') as TrainConfig);
  const c: TrainConfig = o.resume ? config : { ...config, out: config.out ?? defaultOut(config) };
  const stopSignal = new StopSignal();
  if (o.handleSignals ?? true) stopSignal.install();
  try {
    // Where the policy trains: fails at once (before any rollout or file) when --device cuda cannot run.
    // Its lines (a memory plan, the choice) are printed with the run header, or at once on failure.
    const deviceLines: string[] = [];
    let engine: EngineOptions;
    try {
      const sel = selectTrainingDevice(c, (l) => deviceLines.push(l));
      engine = o.engine ? engineWithStorage(o.engine, c.storage) : policyEngine(sel, c.storage);
    } catch (e) {
      for (const l of deviceLines) log(l);
      throw e;
    }
    const parts = await preflight(c);
    stopSignal.throwIfRequested('before the run started; nothing was written');
    const run = new RunDir(c.out!);
    const existed = existsSync(run.root);
    if (o.resume && !existed) throw new TrainError(`cannot resume ${run.root}: no such directory`);
    const before = new Set(existed ? readdirSync(run.root) : []);
    // The lock comes first: nothing else is written to the directory before it is held.
    const writer = !o.dist || o.dist.collective.rank === 0;
    const lock = writer ? RunLock.acquire(run.root, log) : null;
    try {
      return await runLocked(c, o, parts, run, stopSignal, deviceLines, engine);
    } catch (e) {
      if (writer && !o.resume && removeHalfMadeRun(run, existed, before)) {
        log(`${run.root}: stopped before the first checkpoint; removed what this run wrote, so the directory can be used again`);
      }
      throw e;
    } finally {
      lock?.release();
    }
  } finally {
    stopSignal.uninstall();
  }
}

async function runLocked(c: TrainConfig, o: RunTrainingOptions, parts: Parts, run: RunDir, stopSignal: StopSignal, deviceLines: string[], engine: EngineOptions): Promise<RunTrainingResult> {
  const log = o.log ?? (() => undefined);
  const progress = o.progress ?? silentProgress;
  const coll = o.dist?.collective;
  const writer = !coll || coll.rank === 0;
  let point: ResumePoint | null = null;
  let deviceNoted = false;
  if (o.resume) {
    // Rank 0 chooses (and may set damaged checkpoints aside); the others take its choice.
    point = coll ? await broadcastJson(coll, writer ? await resolveResume(run, log) : undefined) : await resolveResume(run, log);
    if (!coll && checkpointShards(point.dir)) {
      throw new TrainError(`checkpoint ${point.dir} holds the optimizer shards of a ${checkpointShards(point.dir)!.worldSize}-rank run; resume it with --nproc-per-node N (any N: the shards are re-sharded)`);
    }
    // A configuration saved before a key existed ran as the key's default (lib/train/resume.ts):
    // resumeConfig filled RUN/config.json's gaps, the checkpoint's are filled here; one line says which.
    const savedRaw = readCheckpointConfig(point.dir);
    const completed = savedRaw ? withSchemaDefaults(savedRaw) : null;
    const runFilled = existsSync(run.configPath) ? withSchemaDefaults(validatePartial(readJsonFile(run.configPath, 'run configuration'), run.configPath)).filled : [];
    const filledNote = filledKeysNote([...(completed?.filled ?? []), ...runFilled]);
    if (filledNote) log(filledNote);
    if (completed) {
      const saved = completed.config;
      const diff = configDifferences(c as unknown as Record<string, unknown>, saved);
      if (diff.length && !o.overrideConfig) {
        throw new ConfigError(
          `${run.configPath} differs from the configuration saved with checkpoint ${point.dir} in ${diff.map((k) => `"${k}" (${JSON.stringify((c as unknown as Record<string, unknown>)[k] ?? null)} vs ${JSON.stringify(saved[k] ?? null)})`).join(', ')}; ` +
            'restore the file, or pass --override-config to continue with the file\'s values',
        );
      }
      if (diff.length) log(`--override-config: continuing with ${run.configPath}, which differs from the checkpoint's configuration in ${diff.join(', ')}`);
      const engineNote = engineChangeNote(c as unknown as Record<string, unknown>, saved);
      if (engineNote) log(engineNote);
      deviceNoted = engineNote?.includes('"device"') ?? false;
    }
  } else if (writer && (fileSize(run.metricsPath) > 0 || checkpointDirs(run).length > 0)) {
    throw new TrainError(`${run.root} already holds a run; use --resume ${run.root} or another --out`);
  }

  // ---- tokenizer and model (read-only so far)
  let tok: HfChatTokenizer;
  let tokenizerDir: string | undefined;
  if (c.model) {
    tok = loadChatTokenizer(c.model);
    tokenizerDir = resolve(c.model);
  } else {
    tok = builtinTokenizer();
  }
  let backend: RolloutBackend | null = null;
  const model = await loadPolicyModel(c, point ? join(point.dir, 'policy') : null, engine);
  // the same configured device can mean another engine (auto on another machine, a test's engine)
  const engineNote = point && !deviceNoted ? engineRunNote(point.state.engine, model.engine) : null;
  if (engineNote) log(engineNote);
  const stop = tok.eosTokenIds.length ? [...tok.eosTokenIds] : undefined;
  if (c.backend === 'vllm') {
    // Each rank talks to its own share of the servers (and syncs weights to them).
    const servers = serversOfRank(c, coll?.rank ?? 0, coll?.worldSize ?? 1);
    backend = await VllmBackend.connect({
      servers,
      model: c.servedModelName ?? undefined,
      apiKey: c.vllmApiKey ?? undefined,
      tokenizer: tok,
      syncDir: join(resolve(run.root), coll && coll.worldSize > 1 ? `sync-rank${coll.rank}` : 'sync'),
      weightSync: weightSyncFor(c.weightSync, { bucketBytes: c.weightSyncBucketMb * 2 ** 20, timeoutMs: c.weightSyncTimeoutS * 1000, log: o.warn ?? log }),
      maxRetries: 2,
    });
  }
  stopSignal.throwIfRequested('before training started');

  // ---- from here on the run directory is written
  if (!o.resume && writer) writeFileAtomic(run.configPath, JSON.stringify(withoutSecrets(c), null, 2) + '\n');
  log(
    formatRunHeader({
      demo: parts.demo,
      resume: Boolean(o.resume),
      model: c.model ?? `random ${c.modelPreset} Qwen3-shaped model (seed ${c.seed}), built-in byte-level tokenizer`,
      task: parts.demo ? 'built-in code repair' : parts.datasetName,
      trainProblems: parts.problems.length,
      evalProblems: parts.evalProblems.length,
      algo: c.algo,
      maxTurns: c.maxTurns,
      credit: c.credit,
      batchSize: c.batchSize,
      numGenerations: c.numGenerations,
      numFollowUpGenerations: c.numFollowUpGenerations ?? c.numGenerations,
      maxSteps: c.maxSteps,
      sftSteps: c.sftSteps,
      device: (deviceLines.at(-1) ?? '').replace(/^device: /, ''),
      runDir: run.root,
      verbose: Boolean(o.verbose),
    }) + deviceLines.slice(0, -1).map((l) => `\n${l}`).join('') + (o.verbose ? `\n${formatConfig(c)}` : ''),
  );
  const bf16 = [c.bf16Generate && (c.backend === 'vllm' ? 'generation (unused: vLLM generates)' : 'generation'), c.bf16Forward && 'training forward'].filter(Boolean);
  if (bf16.length) log(`bf16 weights: ${bf16.join(', ')}; docs/model.md, "bf16 weights"`);
  if (!tokenizerDir) {
    tokenizerDir = join(run.root, 'tokenizer');
    if (writer && !existsSync(join(tokenizerDir, 'tokenizer.json'))) {
      mkdirSync(tokenizerDir, { recursive: true });
      for (const [f, text] of Object.entries(builtinTokenizerFiles())) writeFileSync(join(tokenizerDir, f), text);
    }
  }
  const policy = new NativePolicy(model, { tokenizerDir });
  backend ??= new EmbeddedBackend({ engine: embeddedEngine(model, c, log), tokenizer: tok, maxTokens: c.maxCompletionLength });

  let executor: Executor<Problem>;
  let evalExecutor: Executor<Problem>;
  let closeExec = async (): Promise<void> => undefined;
  let prompts: PromptBuilder<Problem>;
  let extract: CodeExtractor<Problem> | undefined;
  if (parts.demo) {
    executor = new RepairExecutor();
    evalExecutor = executor;
    prompts = repairPromptBuilder(tok, c.history);
    extract = demoExtract;
  } else {
    const limits = timeoutLimits(c.timeoutMode, c.testTimeout);
    const where = { kind: c.executor, sandboxUrl: c.sandboxUrl, workers: c.executorWorkers ?? undefined, limits };
    const px = createExecutor(where);
    const pe = createExecutor({ ...where, feedback: { scope: 'visible' } });
    executor = px;
    evalExecutor = pe;
    closeExec = async () => {
      await Promise.all([px.close(), pe.close()]);
    };
    // Start the sandbox now: its one-line warning (weaker isolation) comes at the start of the run.
    await Promise.all([px.start(), pe.start()]).catch(async (e: unknown) => {
      await closeExec();
      throw e;
    });
    prompts = new ChatPromptBuilder<Problem>(tok, { task: (p) => problemPrompt(p, 'instruction'), history: c.history });
  }

  // Progress: the warm-up, each evaluation and the training steps are phases with a bar each;
  // a step's rollout/execution/training, and an evaluation between steps, show inside the
  // training bar, which carries the recent figures that move.
  const inner = progress.nested?.() ?? progress;
  const recent = new RecentSteps();
  let trainBar = false;
  const ensureTrainBar = (from: number): void => {
    if (trainBar) return;
    trainBar = true;
    progress.start('train', c.maxSteps, from);
  };
  const endTrainBar = (): void => {
    if (trainBar) progress.end();
    trainBar = false;
  };
  let firstStep = 0;
  const loopProgress: ProgressSink = {
    start: (phase, total) => {
      ensureTrainBar(firstStep);
      inner.start(phase, total);
    },
    update: (d, e) => inner.update(d, e),
    end: () => inner.end(),
    line: (t) => progress.line(t),
  };
  const onStep = (m: StepMetrics): void => {
    ensureTrainBar(m.step - 1);
    recent.push(m);
    progress.update(m.step, recent.format());
    if (o.verbose) progress.line(formatStepLine(m, c.maxSteps));
    if (m.step >= c.maxSteps || m.earlyStop) endTrainBar();
  };

  const evals: RunTrainingResult['evals'] = [];
  const evaluate = async (label: string, step: number): Promise<void> => {
    if (parts.evalProblems.length === 0) return;
    const bar = trainBar ? inner : progress;
    const what = `${label === 'initial' ? 'eval (before)' : label === 'final' ? 'eval (after)' : `eval (${label})`}`;
    bar.start(what, 0);
    const r = await evaluateIterK(parts.evalProblems, { sampler: backend!, executor: evalExecutor, prompts, extractCode: extract }, {
      k: c.evalIterations,
      temperature: c.evalTemperature,
      n: c.evalSamples,
      maxTokens: c.maxCompletionLength,
      stopTokenIds: stop,
      seed: mix32(c.seed, 0xe7a1),
      groupBy: (p) => p.difficulty,
      onProgress: (d) => bar.update(d, `(calls to the model; ${parts.evalProblems.length} problems x ${c.evalTemperature === 0 ? 1 : c.evalSamples} samples, up to ${c.evalIterations} attempts each)`),
    });
    bar.end();
    const file: EvalResultsFile = {
      version: 1,
      label,
      dataset: parts.demo ? `${parts.datasetName} (held-out)` : `${parts.datasetName} (held-out)`,
      model: c.model ?? `random ${c.modelPreset} (seed ${c.seed})`,
      step,
      settings: { k: c.evalIterations, n: c.evalTemperature === 0 ? 1 : c.evalSamples, temperature: c.evalTemperature, maxTokens: c.maxCompletionLength, seed: mix32(c.seed, 0xe7a1), backend: c.backend, feedback: parts.demo ? 'all tests' : 'visible tests' },
      problems: r.problems,
      iterations: r.iterations,
      byGroup: r.byGroup,
      perProblem: r.perProblem,
      noRoom: r.noRoom,
      seconds: r.seconds,
      createdAt: new Date().toISOString(),
    };
    const path = join(run.evalDir, `${String(step).padStart(6, '0')}-${label}.json`);
    writeFileAtomic(path, JSON.stringify(file, null, 1) + '\n');
    evals.push({ label, file: path, result: file });
    await backend!.releaseRolloutMemory?.(); // training (or the warm-up) may follow: the paged KV pool goes back
    log(`evaluation '${label}' (step ${step}), ${r.problems} held-out problems, ${c.evalTemperature === 0 ? 'greedy' : `${c.evalSamples} samples each at temperature ${c.evalTemperature}`}:\n${formatIterKTable({ ...file, dataset: file.dataset, model: file.model })}`);
  };

  let summary: TrainSummary;
  try {
    // With several ranks only rank 0 warms up: its weights and AdamW state are broadcast below.
    const warmUp = parts.demo && !o.resume && c.sftSteps > 0;
    if (warmUp && writer) {
      progress.start('warm-up', c.sftSteps);
      const losses = await supervisedWarmup(policy, parts.problems, prompts as ChatPromptBuilder<Problem>, tok, {
        steps: c.sftSteps,
        batchSize: 32,
        lr: c.sftLearningRate,
        seed: c.seed,
        onStep: (s, l) => {
          progress.update(s, `loss ${l.toFixed(3)}`);
          stopSignal.throwIfRequested('during the supervised warm-up (no checkpoint yet)');
        },
      });
      progress.update(c.sftSteps, `loss ${losses[0]?.toFixed(3)} -> ${losses[losses.length - 1]?.toFixed(3)}`);
      progress.end();
      if (o.verbose) log(`supervised warm-up: ${c.sftSteps} steps, loss ${losses[0]?.toFixed(3)} -> ${losses[losses.length - 1]?.toFixed(3)}`);
    }
    firstStep = point ? point.state.step : 0;
    // Data parallel: ZeRO-1 around the policy (rank 0's weights broadcast to all); only rank 0 evaluates.
    const dp = coll ? await DistributedPolicy.create(coll, policy, model, { bucketBytes: Math.round(c.reduceBucketMb * 2 ** 20), overlap: c.reduceOverlap }) : null;
    // The servers generate with the policy from the first step on: the warmed-up weights, or on
    // resume the checkpoint's (servers started from --model, or holding a step after the
    // checkpoint, would serve others). Every rank syncs its own servers, after the broadcast.
    if (warmUp || point) await backend.syncWeights(dp ?? policy, firstStep);
    summary = await train(c, run, { policy: dp ?? policy, backend, executor, prompts, problems: parts.problems, extractCode: extract, stopTokenIds: stop, evaluate: writer ? evaluate : undefined, progress: loopProgress, onStep }, {
      resume: Boolean(o.resume),
      resumeFrom: point ?? undefined,
      stop: stopSignal,
      stopAfterStep: o.stopAfterStep,
      parallel: dp ? new DataParallel(coll!, dp) : undefined,
    });
  } finally {
    endTrainBar();
    await closeExec();
    await backend.close();
  }
  let reportPath: string | null = null;
  if ((o.report ?? true) && writer) {
    reportPath = writeReport(run.root);
  }
  return { runDir: run.root, summary, evals, reportPath };
}
