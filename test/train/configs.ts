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

/** The fake loop's run (test/train/fakes.ts): 6 steps of 3 problems x 4 completions, a checkpoint
 * every 2 steps, learning rate 0.05; `over` wins. */
export const fakeLoop = (over: Partial<TrainConfig> = {}): TrainConfig => ({
  ...defaultConfig(), maxSteps: 6, saveSteps: 2, batchSize: 3, numGenerations: 4, learningRate: 0.05, ...over,
});

/** The fake loop's problem set: ten ids, p0 to p9. */
export const FAKE_PROBLEMS = Array.from({ length: 10 }, (_, i) => ({ id: `p${i}` }));
