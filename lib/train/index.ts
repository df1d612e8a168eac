// The training loop, run directory, checkpoints, batching, schedule, metrics and progress output (docs/training.md).
export {
  train,
  batchIndices,
  permutation,
  stepBuildConfig,
  processConfig,
  lossOptions,
  type TrainDeps,
  type TrainOptions,
  type TrainSummary,
} from './loop.js';
export { TrainError } from './error.js';
export { latestCheckpoint, readTrainerState, findResumeCheckpoint, checkpointFault, type TrainerState, type ResumePoint } from './checkpoint.js';
export { writeManifest, readManifest, manifestFault, manifestSizeFault, ManifestWriter, type Manifest, type ManifestEntry } from './manifest.js';
export { RunLock, RunLockedError, type LockInfo } from './lock.js';
export { StopSignal, InterruptedError, INTERRUPTED_EXIT_CODE } from './signals.js';
export { treeMetrics, formatStepLine, type StepMetrics } from './metrics.js';
export { NativePolicy, type Policy, type PolicyStateInfo } from './policy.js';
export { planMicroBatches, packSamples, sampleTokens, type PackedMicroBatch } from './batching.js';
export { learningRate, type ScheduleOptions } from './schedule.js';
export { StderrProgress, BusyClock, silentProgress, type ProgressSink } from './progress.js';
export { RunDir, writeFileAtomic, appendDurable, readMetrics, readTreeLines, checkOutputFile, checkOutputDir, OutputError } from './rundir.js';
