// The training configurations the train tests share.
import { defaultConfig, type TrainConfig } from '../../lib/config/index.js';

/** The CPU demo cut short: 2 steps of 2 problems x 2 completions of at most 24 tokens, a checkpoint
 * every step, 2 warm-up steps and evaluations of 3 problems x 2 iterations; `over` wins. */
export const shortDemo = (over: Partial<TrainConfig>): TrainConfig => ({
  ...defaultConfig(),
  maxSteps: 2,
  saveSteps: 1,
  batchSize: 2,
  numGenerations: 2,
  maxCompletionLength: 24,
  evalProblems: 3,
  evalIterations: 2,
  sftSteps: 2,
  ...over,
});
