// Paged KV cache, prefix sharing and continuous batching: the host-side units that decide
// what the device computes each step (docs/rollout.md, "Paged KV and prefix sharing").
export { kvBlockBytes, kvBlocksForMemory, kvBytesPerToken, kvShapeOf, type KvBudget, type KvBudgetOptions, type KvShape } from './memory.js';
export { BlockAllocator } from './block-allocator.js';
export { blocksFor, slotMapping, slotOf, type BlockCopy } from './block-table.js';
export { PrefixCache, type CacheEntry } from './prefix-cache.js';
export { DEFAULT_BLOCK_SIZE, KvPool, type KvPoolOptions, type ReleasedMemory } from './kv-pool.js';
export {
  Scheduler, SCHEDULER_DEFAULTS,
  type FinishReason, type PagedRequest, type PlannedSeq, type SampleResult, type SchedulerMetrics, type SchedulerOptions, type StepCounts, type StepOutput, type StepPlan,
} from './scheduler.js';
export { drain, type StepExecutor } from './drive.js';
export { ReferenceModel, referenceLogprob, referenceToken, rollKv, runAlone, type ReferenceModelOptions } from './reference-model.js';
export { TREE_WORKLOAD_DEFAULTS, TreeWorkload, runTreeWorkload, runTurn, type TreeRun, type TreeWorkloadOptions, type TurnResult } from './tree-workload.js';
export { planArrays, type PlanArrays } from './plan-arrays.js';
export { DeviceExecutor, deviceSeed, samplingArrays, splitRows, type KvInfo, type PagedDevice, type PagedSampling, type PagedStepResult } from './device-executor.js';
export { deviceKv, fixedKv, KV_CACHE_DEFAULTS, type KvCacheOptions, type KvGrant, type KvLease } from './device-kv.js';
