// The training loop, run directory, checkpoints, batching and progress output (docs/training.md).
export {
  train,
  batchIndices,
  permutation,
  latestCheckpoint,
  readTrainerState,
  treeMetrics,
  stepBuildConfig,
  processConfig,
  lossOptions,
  formatStepLine,
  TrainError,
  type TrainDeps,
  type TrainOptions,
  type TrainerState,
  type StepMetrics,
  type TrainSummary,
} from './loop.js';
export { NativePolicy, encodeSafetensorsF32, decodeSafetensorsF32, type Policy, type PolicyStateInfo } from './policy.js';
export { planMicroBatches, packSamples, sampleTokens, learningRate, type PackedMicroBatch, type ScheduleOptions } from './batching.js';
export { StderrProgress, BusyClock, silentProgress, type ProgressSink } from './progress.js';
export { RunDir, writeFileAtomic, appendDurable, readMetrics, readTreeLines } from './rundir.js';
export { runTraining, resumeConfig, loadTrainingProblems, hasTests, RESUMABLE_KEYS, type RunTrainingOptions, type RunTrainingResult } from './run.js';
