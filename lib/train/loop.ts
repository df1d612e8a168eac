// The training loop: problems → MURPHY trees (rollouts, execution, credit, pruning,
// advantages) → micro-batches by token budget → gradient accumulation → AdamW step →
// weight sync → metrics, trees and checkpoints. Every random choice is a function of
// (seed, step, ...), so a run is reproduced by its seed and config, and a resumed run
// continues exactly where the checkpoint left it.
import { existsSync } from 'node:fs';
import { withoutSecrets } from '../config/index.js';
import type { TrainConfig } from '../config/schema.js';
import { flattenSamples, type TrainingSample } from '../murphy/flatten.js';
import { computeMatchedGroupSize } from '../murphy/baseline.js';
import { processTrees, type ProcessConfig } from '../murphy/pipeline.js';
import { mix32, mulberry32 } from '../murphy/rng.js';
import { treeToJSON } from '../murphy/serialize.js';
import { buildTrees, type TreeBuildConfig } from '../murphy/tree.js';
import { extractFromCompletion } from '../prompt/extract.js';
import type { CodeExtractor, Completion, ExecResult, Executor, PromptBuilder, RolloutTree, SampleParams, Sampler } from '../murphy/types.js';
import type { RolloutBackend, RolloutParams } from '../rollout/types.js';
import type { StepParallel } from '../dist/data-parallel.js';
import { packSamples, planMicroBatches, sampleTokens } from './batching.js';
import { resolveResume, restoreReference, saveReference, writeCheckpoint, type ResumePoint, type TrainerState } from './checkpoint.js';
import { TrainError } from './error.js';
import { formatStepLine, treeMetrics, type StepMetrics, type StepPrefill } from './metrics.js';
import type { LossOptions, Policy, TrainStats } from './policy.js';
import { BusyClock, silentProgress, type ProgressSink } from './progress.js';
import { SignalWindow } from './early-stop.js';
import { RunDir, fileSize } from './rundir.js';
import { learningRate } from './schedule.js';
import { StopSignal } from './signals.js';

export interface TrainDeps<P> {
  policy: Policy;
  backend: RolloutBackend;
  executor: Executor<P>;
  prompts: PromptBuilder<P>;
  /** Training problems (the loop cycles through seeded permutations of them). */
  problems: readonly P[];
  extractCode?: CodeExtractor<P>;
  /** Token ids that end a completion (the tokenizer's EOS ids). */
  stopTokenIds?: number[];
  /** Called before training (step 0, fresh runs only), every evalSteps, and after the last step. */
  evaluate?: (label: string, step: number) => Promise<void>;
  progress?: ProgressSink;
  /** Called with each step's metrics instead of printing the per-step line to `progress`. */
  onStep?: (m: StepMetrics) => void;
}

export interface TrainOptions {
  /** Continue from the newest checkpoint of the run directory. */
  resume?: boolean;
  /** Install SIGINT/SIGTERM handlers that checkpoint and stop. Default true. */
  handleSignals?: boolean;
  /** Resume from this checkpoint (already chosen and verified by the caller) instead of finding one. */
  resumeFrom?: ResumePoint;
  /** The run's stop signal, installed by the caller; when absent, train installs its own (handleSignals). */
  stop?: StopSignal;
  /** Tests: behave as if a signal arrived right after this step. */
  stopAfterStep?: number;
  /** Checkpoints kept (older ones are removed). Default 2. */
  keepCheckpoints?: number;
  /**
   * Data parallelism (lib/dist): this process is one rank of several; problems are split, the
   * trees gathered, micro-batches dealt out, and only the writer rank writes run files.
   */
  parallel?: StepParallel;
}

export interface TrainSummary {
  steps: number;
  /** Stopped by a signal (or stopAfterStep) before maxSteps: resumable. */
  stoppedEarly: boolean;
  /** Why training ended before maxSteps because its signal vanished (earlyStopWindow), or null. */
  earlyStop: string | null;
  /** The signal (SIGINT/SIGTERM) that stopped the run, or null. */
  signal: string | null;
  lastCheckpoint: string | null;
  metrics: StepMetrics[];
}

/** Seeded permutation of 0..n-1 (Fisher-Yates over mulberry32). */
export function permutation(n: number, seed: number): number[] {
  const p = Array.from({ length: n }, (_, i) => i);
  const rng = mulberry32(seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [p[i], p[j]] = [p[j]!, p[i]!];
  }
  return p;
}

/** Indices of the problems of the batch that starts at data position `consumed`. */
export function batchIndices(n: number, consumed: number, size: number, seed: number): number[] {
  const out: number[] = [];
  let epoch = -1;
  let perm: number[] = [];
  for (let k = consumed; k < consumed + size; k++) {
    const e = Math.floor(k / n);
    if (e !== epoch) {
      epoch = e;
      perm = permutation(n, mix32(seed, e, 0x0da7a));
    }
    out.push(perm[k % n]!);
  }
  return out;
}

/** The paged engine's prefill counters (cumulative), when the backend reports them. */
function prefillCounters(b: RolloutBackend): StepPrefill | undefined {
  const c = b.counters;
  if (c?.prefillTokens === undefined || c.prefillSaved === undefined) return undefined;
  return { computed: c.prefillTokens, saved: c.prefillSaved, preemptions: c.preemptions ?? 0 };
}

function prefillDelta(a: StepPrefill | undefined, b: StepPrefill | undefined): StepPrefill | undefined {
  if (a === undefined || b === undefined) return undefined;
  return { computed: b.computed - a.computed, saved: b.saved - a.saved, preemptions: b.preemptions - a.preemptions };
}

async function sumPrefill(par: { sum(xs: number[]): Promise<number[]> }, p: StepPrefill): Promise<StepPrefill> {
  const [computed, saved, preemptions] = await par.sum([p.computed, p.saved, p.preemptions]);
  return { computed: computed!, saved: saved!, preemptions: preemptions! };
}

/** Sampler/executor wrappers that measure busy time and count calls (for progress). */
function instrument<P>(backend: Sampler, executor: Executor<P>, progress: ProgressSink) {
  const rollClock = new BusyClock();
  const execClock = new BusyClock();
  const counts = { sampleCalls: 0, sampleDone: 0, execCalls: 0, execDone: 0 };
  let phase: 'rollout' | 'execution' | null = null;
  const show = (): void => {
    const want = counts.sampleDone < counts.sampleCalls ? 'rollout' : 'execution';
    if (want !== phase) {
      progress.end();
      phase = want;
      progress.start(want, want === 'rollout' ? counts.sampleCalls : counts.execCalls);
    }
    if (phase === 'rollout') progress.update(counts.sampleDone, `${counts.execDone} programs run`);
    else progress.update(counts.execDone, '');
  };
  const sampler: Sampler = {
    generate: async (ids: number[], n: number, params: SampleParams): Promise<Completion[]> => {
      counts.sampleCalls++;
      rollClock.begin();
      try {
        return await backend.generate(ids, n, params);
      } finally {
        rollClock.finish();
        counts.sampleDone++;
        show();
      }
    },
  };
  const exec: Executor<P> = {
    execute: async (p: P, code: string): Promise<ExecResult> => {
      counts.execCalls++;
      execClock.begin();
      try {
        return await executor.execute(p, code);
      } finally {
        execClock.finish();
        counts.execDone++;
        show();
      }
    },
  };
  return {
    sampler,
    exec,
    rollClock,
    execClock,
    done: () => {
      if (phase) progress.end();
      phase = null;
    },
  };
}

/** Builder and post-processing configuration of one step. */
export function stepBuildConfig<P>(c: TrainConfig, G: number, Gp: number, step: number, stopTokenIds: number[] | undefined): TreeBuildConfig<P> {
  const sampling: RolloutParams = {
    temperature: c.temperature,
    topP: c.topP,
    topK: c.topK,
    minP: c.minP,
    maxTokens: c.maxCompletionLength,
  };
  if (stopTokenIds && stopTokenIds.length) sampling.stopTokenIds = stopTokenIds;
  return {
    groupSize: G,
    followUpGroupSize: Gp,
    maxTurns: c.algo === 'grpo' ? 1 : c.maxTurns,
    rewardMode: c.rewardMode,
    sampling,
    seed: mix32(c.seed, step, 0x5a5a),
    samplerConcurrency: 64,
    executorConcurrency: 64,
  };
}

export function processConfig(c: TrainConfig): ProcessConfig {
  return {
    credit: c.credit,
    gamma: c.gamma,
    scaleRewards: c.scaleRewards,
    intraP: c.intraKeep !== null ? { keep: c.intraKeep } : null,
    interP: c.interKeep !== null || c.interDropZeroVariance
      ? { perProblem: c.interKeep ?? undefined, dropZeroVariance: c.interDropZeroVariance }
      : null,
  };
}

export function lossOptions(c: TrainConfig): LossOptions {
  return {
    temperature: c.temperature > 0 ? c.temperature : 1,
    epsLow: c.epsilon,
    epsHigh: c.epsilonHigh ?? c.epsilon,
    beta: c.beta,
    lossType: c.lossType,
    normLength: c.maxCompletionLength,
    keepLogitsMb: c.keepLogitsMb,
  };
}

/**
 * Runs (or resumes) training in `run`. The configuration must already be resolved; it is
 * written to RUN/config.json by the caller.
 */
export async function train<P>(config: TrainConfig, run: RunDir, deps: TrainDeps<P>, opts: TrainOptions = {}): Promise<TrainSummary> {
  const c = config;
  const progress = deps.progress ?? silentProgress;
  const policy = deps.policy;
  if (deps.problems.length === 0) throw new TrainError('no training problems');
  if (!(c.temperature > 0)) throw new TrainError('config key "temperature" (--temperature): training needs a temperature > 0');
  const par = opts.parallel;
  const writer = !par || par.writer;
  if (writer) run.create();

  // ---- signals (installed first: a signal during the initial evaluation also ends in a checkpoint)
  const stop = opts.stop ?? new StopSignal();
  const ownSignals = !opts.stop && (opts.handleSignals ?? true);
  if (ownSignals) stop.install();
  const unlisten = stop.onRequest((sig) => progress.line(`\n${sig}: finishing the current phase, writing a checkpoint, then exiting`));
  let stopAfterStep = false;
  const stopping = (): boolean => stop.requested || stopAfterStep;
  // With several ranks a stop is acted on only where every rank asks (a collective).
  let stopAgreed = false;
  const agreeStop = async (): Promise<boolean> => (stopAgreed = par ? await par.any(stopping()) : stopping());

  // ---- state: fresh or resumed
  let state: TrainerState;
  let lastCheckpoint: string | null = null;
  try {
    if (opts.resume) {
      const point = opts.resumeFrom ?? (await resolveResume(run, (l) => progress.line(l)));
      const ck = point.dir;
      state = point.state;
      const info = await policy.loadState(ck);
      if (c.beta > 0) await restoreReference(run, policy, ck);
      if (writer) run.truncateTo(state);
      lastCheckpoint = ck;
      progress.line(`resumed from ${ck} at step ${state.step}${info.optimizerState ? '' : ' (optimizer moments were not saved: not an exact resume)'}`);
    } else {
      if (existsSync(run.metricsPath) && fileSize(run.metricsPath) > 0) {
        throw new TrainError(`${run.root} already holds a run (metrics.jsonl); use --resume ${run.root} or another --out`);
      }
      let G = c.numGenerations;
      let Gp = c.numFollowUpGenerations ?? G;
      if (c.algo === 'grpo' && c.computeMatched) {
        // Measure MURPHY's average completions per problem on the first batch with the initial policy.
        const probe = batchIndices(deps.problems.length, 0, c.batchSize, c.seed).map((i) => deps.problems[i]!);
        const probeCfg = { ...stepBuildConfig<P>({ ...c, algo: 'murphy' }, G, Gp, 0, deps.stopTokenIds), seed: mix32(c.seed, 0xc0de) };
        const trees = await buildTrees(probe, { sampler: deps.backend, executor: deps.executor, prompts: deps.prompts, extractCode: deps.extractCode ?? extractFromCompletion }, probeCfg);
        G = computeMatchedGroupSize(trees);
        Gp = G;
        progress.line(`compute-matched GRPO: G = ${G} (MURPHY's average completions per problem on the first batch)`);
      }
      state = { version: 1, step: 0, problemsConsumed: 0, seed: c.seed, groupSize: G, followUpGroupSize: Gp, metricsBytes: 0, treesBytes: 0, optimizerState: false };
      if (c.beta > 0) {
        policy.makeReference();
        if (writer) saveReference(run, policy);
      }
      if (deps.evaluate) await deps.evaluate('initial', 0);
    }
  } catch (e) {
    unlisten();
    if (ownSignals) stop.uninstall();
    throw e;
  }

  const metrics: StepMetrics[] = [];
  const keep = opts.keepCheckpoints ?? 2;
  const loss = lossOptions(c);
  const lrOpts = { type: c.lrSchedulerType, peak: c.learningRate, warmupSteps: c.warmupSteps, totalSteps: c.maxSteps, minRatio: c.minLrRatio };
  const useSamplerLogprobs = c.topP === 1 && c.topK === 0 && c.minP === 0;
  let savedAt = state.step;
  // a resumed run starts with an empty window
  const signalWindow = new SignalWindow(c.earlyStopWindow, c.earlyStopMinSignal);
  let earlyStop: string | null = null;

  const checkpoint = async (): Promise<void> => {
    if (par && !par.writer) {
      await par.joinCheckpoint();
      lastCheckpoint = run.checkpointDir(state.step);
    } else lastCheckpoint = await writeCheckpoint(run, policy, state, keep, withoutSecrets(c));
    savedAt = state.step;
  };

  try {
    while (state.step < c.maxSteps && !(await agreeStop())) {
      const step = state.step + 1;
      const tStep = performance.now();
      const idx = batchIndices(deps.problems.length, state.problemsConsumed, c.batchSize, c.seed);
      const problems = idx.map((i) => deps.problems[i]!);
      const share = par ? par.share(problems.length) : { begin: 0, end: problems.length };

      // ---- rollouts + execution
      const ins = instrument(deps.backend, deps.executor, progress);
      const abortedBefore = deps.backend.counters?.aborted ?? 0;
      const prefillBefore = prefillCounters(deps.backend);
      const buildCfg = stepBuildConfig<P>(c, state.groupSize, state.followUpGroupSize, step, deps.stopTokenIds);
      let trees: RolloutTree<P>[];
      try {
        trees = await buildTrees(problems.slice(share.begin, share.end), { sampler: ins.sampler, executor: ins.exec, prompts: deps.prompts, extractCode: deps.extractCode ?? extractFromCompletion }, buildCfg);
      } finally {
        ins.done();
      }
      // the training phase follows: a colocated engine gives its KV cache's device memory back
      await deps.backend.releaseRolloutMemory?.();
      const prefill = prefillDelta(prefillBefore, prefillCounters(deps.backend));
      if (await agreeStop()) break; // the step is discarded: resume redoes it identically
      if (par) trees = await par.gatherTrees(trees, problems);
      const report = processTrees(trees, processConfig(c), { trusted: true });
      const all = flattenSamples(trees);
      // With beta = 0 a zero-advantage sample adds exactly 0 to the loss and its gradient, so it
      // is not run. lossDenominator 'all' still counts it in the denominators, as TRL does
      // (every completion of the batch); 'trained' counts only the samples run.
      const samples: TrainingSample[] = c.beta > 0 ? all : all.filter((s) => s.advantage !== 0);
      const counted = c.lossDenominator === 'all' ? all : samples;

      // ---- training
      const tTrain = performance.now();
      const plan = planMicroBatches(samples, c.microBatchTokens);
      const totalLoss = counted.reduce((a, s) => a + s.completionIds.length, 0);
      let micro: TrainStats[] = [];
      const tokensTrained = plan.reduce((a, mb) => a + mb.reduce((b, s) => b + sampleTokens(s), 0), 0);
      const mine = par ? par.trainShare(plan) : plan.map((_, k) => k);
      const mineStats: { index: number; stats: TrainStats }[] = [];
      let tokensDone = 0;
      progress.start('training', mine.length);
      for (const [j, k] of mine.entries()) {
        const mb = packSamples(plan[k]!);
        // processed sampling's log-probs are not the policy's: the loss takes its own, detached
        // (one update per batch, as TRL's num_iterations = 1), with no scoring pass; so it does
        // when the backend returned none (packSamples leaves oldLogp undefined then)
        if (!useSamplerLogprobs) mb.batch.oldLogp = undefined;
        const scale = c.lossType === 'dapo' ? mb.lossTokens / totalLoss : mb.samples.length / counted.length;
        mineStats.push({ index: k, stats: await policy.accumulate(mb.batch, loss, scale, { last: j === mine.length - 1 }) });
        tokensDone += mb.tokens;
        progress.update(j + 1, `${tokensDone} tokens`);
      }
      progress.end();
      // data parallel: every rank, also one without micro-batches, starts the gradient
      // reductions its backward did not before any other collective (lib/dist/zero.ts)
      if (plan.length > 0) await policy.reduceGradients?.();
      micro = par ? await par.gatherMicro(mineStats, plan.length) : mineStats.map((x) => x.stats);
      const lr = learningRate(step, lrOpts);
      // No trainable sample (every group zero-variance): no optimizer step, so AdamW's
      // momentum does not keep moving the weights on a zero gradient.
      const opt = plan.length > 0
        ? await policy.optimizerStep({ lr, beta1: c.adamBeta1, beta2: c.adamBeta2, weightDecay: c.weightDecay, maxGradNorm: c.maxGradNorm })
        : { gradNorm: 0, clipCoef: 1, skipped: true, step: -1 };
      const trainSec = (performance.now() - tTrain) / 1000;

      // ---- weight sync
      const tSync = performance.now();
      const synced = await deps.backend.syncWeights(policy, step);
      const syncSec = (performance.now() - tSync) / 1000;
      // servers outside this process (backend vllm): each rank's method, gathered in rank order
      const own = synced.method === 'shared' || synced.method === 'memory' ? undefined : { method: synced.method, ...(synced.fallback === undefined ? {} : { fallback: synced.fallback }) };
      const weightSync = own === undefined ? undefined : par ? await par.gatherJson(own) : [own];

      // ---- bookkeeping
      state.step = step;
      state.problemsConsumed += problems.length;
      const aborted = (deps.backend.counters?.aborted ?? 0) - abortedBefore;
      const act = micro.reduce((a, s) => a + s.nActive, 0);
      const wavg = (f: (s: TrainStats) => number): number => (act > 0 ? micro.reduce((a, s) => a + f(s) * s.nActive, 0) / act : 0);
      const tm = treeMetrics(trees);
      const total = (performance.now() - tStep) / 1000;
      const m: StepMetrics = {
        step,
        epoch: Math.floor((state.problemsConsumed - 1) / deps.problems.length),
        lr,
        ...tm,
        aborted: par ? (await par.sum([aborted]))[0]! : aborted,
        ...(prefill === undefined ? {} : { prefill: par ? await sumPrefill(par, prefill) : prefill }),
        ...(weightSync === undefined ? {} : { weightSync }),
        zeroVarianceGroups: report.advantages.zeroVarianceGroups,
        samples: all.length,
        samplesTrained: samples.length,
        microBatches: plan.length,
        tokensTrained,
        loss: wavg((s) => s.loss),
        kl: wavg((s) => s.meanKl),
        clipLowFraction: wavg((s) => s.clipLowFrac),
        clipHighFraction: wavg((s) => s.clipHighFrac),
        clipFraction: wavg((s) => s.clipLowFrac + s.clipHighFrac),
        meanRatio: wavg((s) => s.meanRatio),
        gradNorm: opt.gradNorm,
        time: {
          rollout: ins.rollClock.seconds(),
          execution: ins.execClock.seconds(),
          training: trainSec,
          sync: syncSec,
          total,
          tokensPerSecond: total > 0 ? (tm.tokensSampled + tokensTrained) / total : 0,
          trainTokensPerSecond: trainSec > 0 ? tokensTrained / trainSec : 0,
        },
      };
      earlyStop = signalWindow.push(m);
      if (earlyStop) m.earlyStop = earlyStop;
      metrics.push(m);
      if (writer) {
        if (c.logTrees) state.treesBytes = run.appendTreeLines(trees.map((t) => JSON.stringify({ step, ...treeToJSON(t, { tokenIds: false }) })));
        state.metricsBytes = run.appendMetrics([m]);
      }
      if (deps.onStep) deps.onStep(m);
      else progress.line(formatStepLine(m, c.maxSteps));

      if (earlyStop) progress.line(`early stop after step ${step} of ${c.maxSteps}: ${earlyStop}`);
      const last = step === c.maxSteps || earlyStop !== null;
      if (opts.stopAfterStep === step) stopAfterStep = true;
      if ((await agreeStop()) || step % c.saveSteps === 0 || last) await checkpoint();
      if (deps.evaluate && !stopping() && ((c.evalSteps > 0 && step % c.evalSteps === 0 && !last) || last)) {
        await deps.evaluate(last ? 'final' : `step-${step}`, step);
      }
      if (earlyStop) break;
    }
    const stopped = par ? stopAgreed : stopping();
    if (stopped && savedAt !== state.step) await checkpoint();
    if (stopped && state.step === 0 && lastCheckpoint === null) await checkpoint();
  } finally {
    unlisten();
    if (ownSignals) stop.uninstall();
  }
  const why = stop.reason ?? (stopAfterStep ? 'stopAfterStep' : null);
  if (why) progress.line(`stopped (${why}) after step ${state.step}; resume with --resume ${run.root}`);
  return { steps: state.step, stoppedEarly: why !== null, earlyStop, signal: stop.reason, lastCheckpoint, metrics };
}
