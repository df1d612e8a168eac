// The CPU demo: the built-in code-repair task family and its tiny model.
export {
  allRepairSpecs,
  repairProblem,
  repairSplit,
  repairSpecOf,
  repairProgram,
  parseRepairProgram,
  repairFeedback,
  repairExtract,
  RepairExecutor,
  REPAIR_INPUTS,
  REPAIR_NAMES,
  type RepairSpec,
  type RepairOp,
} from './repair.js';
export { builtinTokenizer, demoModelSizes, createDemoModel, repairPromptBuilder, demoExtract, supervisedWarmup, warmupSamples, type SftOptions } from './setup.js';
