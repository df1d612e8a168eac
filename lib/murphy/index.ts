// MURPHY core: rollout trees, credit, pruning, advantages, samples (docs/method.md).
export * from './types.js';
export {
  buildTrees,
  buildTree,
  validateTree,
  pathToNode,
  resolveTreeBuildConfig,
  DEFAULT_NO_CODE_FEEDBACK,
  NO_ROOM_FEEDBACK,
  type TreeBuildConfig,
  type TreeBuildDeps,
  type ResolvedTreeBuildConfig,
  type RewardMode,
} from './tree.js';
export { marsCredit, mersCredit, assignCredit, type CreditMethod, type CreditOptions } from './credit.js';
export {
  computeAdvantages,
  groupAdvantages,
  sampleStd,
  ZERO_VARIANCE_TOL,
  type AdvantageOptions,
  type AdvantageReport,
  type RewardScaling,
} from './advantage.js';
export {
  intraPrune,
  interPrune,
  maxVarianceSubset,
  subsetVariance,
  groupSpread,
  type IntraPOptions,
  type InterPOptions,
  type PruneReport,
} from './prune.js';
export { flattenSamples, treeStats, batchStats, type TrainingSample, type FlattenOptions, type TreeStats, type BatchStats } from './flatten.js';
export {
  serializeTree,
  deserializeTree,
  treeToJSON,
  TREE_JSON_VERSION,
  type SerializedTree,
  type SerializedNode,
  type SerializedGroup,
  type SerializeOptions,
} from './serialize.js';
export { grpoBaselineConfig, computeMatchedGroupSize, computeMatchedGrpoConfig, type GroupShape } from './baseline.js';
export { processTrees, type ProcessConfig, type ProcessOptions, type ProcessReport } from './pipeline.js';
export {
  FakeSampler,
  FakeExecutor,
  FakePromptBuilder,
  asyncSampler,
  asyncExecutor,
  FAKE_EOS_TOKEN,
  FAKE_FEEDBACK_TOKEN,
  FAKE_TASK_TOKEN,
  type FakeSamplerOptions,
} from './fake.js';
export { mulberry32, mix32, hashIds } from './rng.js';
