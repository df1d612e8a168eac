// murphy-native: the public library API.
// Each area re-exports its public surface here; see README.md for an overview.
export * from './native.js';
export * from './murphy/index.js';
export * from './prompt/index.js';
export * from './exec/index.js';
export * from './data/index.js';
export * from './rollout/index.js';
export * from './config/exports.js';
export * from './train/index.js';
export { runTraining, resumeConfig, configDifferences, RESUMABLE_KEYS, type RunTrainingOptions, type RunTrainingResult } from './commands/run-training.js';
export { encodeSafetensorsF32, safetensorsF32Chunks, decodeSafetensorsF32, readSafetensorsF32, tensorMismatch, SafetensorsError, type F32Tensors } from './safetensors.js';
export * from './eval/index.js';
export * from './report/index.js';
export * from './demo/index.js';
export * from './dist/index.js';
