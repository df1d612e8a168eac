// Rollout backends (vLLM over HTTP, the embedded engine) and the OpenAI-compatible server.
export {
  RolloutError,
  type EngineInfo,
  type EngineRequest,
  type EngineSample,
  type PolicyWeights,
  type RolloutBackend,
  type RolloutCounters,
  type RolloutEngine,
  type RolloutParams,
  type TextCodec,
  type WeightSync,
  type WeightSyncReport,
} from './types.js';
export { contextBudget, DEFAULT_MAX_TOKENS, noRoomCompletions, resolveSampling, type ResolvedSampling, type SamplingDefaults } from './params.js';
export { EngineBatcher, finishSample, type BatcherOptions, type BatcherStats, type LocalSample } from './local.js';
export { NativeEngine } from './engine.js';
export { EmbeddedBackend, type EmbeddedOptions } from './embedded.js';
export { LOAD_WEIGHTS_METHOD, startServer, type RolloutServer, type ServeOptions } from './server.js';
export {
  DiskWeightSync,
  checkLoadResults,
  parseCompletionResponse,
  VllmBackend,
  type CompletionChoice,
  type DiskWeightSyncOptions,
  type FetchLike,
  type ServerCheck,
  type VllmEvent,
  type VllmOptions,
} from './vllm.js';
