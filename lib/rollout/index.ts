// Rollout backends (vLLM over HTTP, the embedded engine) and the OpenAI-compatible server.
export {
  RolloutError,
  type EngineInfo,
  type EngineRequest,
  type EngineSample,
  type StreamedToken,
  type TokenAlternatives,
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
export { AbortedError, EngineBatcher, QueueFullError, requestWork, type BatcherOptions, type BatcherStats } from './batcher.js';
export { finishSample, type FinishedSample } from './finish.js';
export { copyParams, NativeEngine, sameWeights } from './engine.js';
export { PagedEngine, type PagedEngineMetrics, type PagedEngineOptions } from './paged-engine.js';
export { EmbeddedBackend, type EmbeddedOptions } from './embedded.js';
export { isLoopback, LOAD_WEIGHTS_METHOD, SERVE_DEFAULTS, startServer, type RolloutServer, type ServeOptions } from './server.js';
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
export { bucketPlan, DEFAULT_BUCKET_BYTES, packBucket, unpackBucket, type SyncBucket, type SyncMeta } from './weight-sync-plan.js';
export { groupLayout, NcclChannel, NcclWeightSync, WeightSyncRefused, WEIGHT_SYNC_MODES, type NcclWeightSyncOptions, type SyncChannel, type WeightSyncMode } from './weight-sync.js';
export { LoopbackChannel } from './weight-sync-loopback.js';
