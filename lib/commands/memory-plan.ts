// `murphy-native memory-plan --model DIR`: the GPU engine's device memory plan for a model
// (docs/gpu.md) — the same plan `train --device cuda` prints at start — without a GPU.
import type { Argv, CommandModule } from 'yargs';
import { defaultConfig, validatePartial } from '../config/index.js';
import { STORAGE_DTYPES, type StorageDType } from '../config/schema.js';

interface MemoryPlanArgs {
  model?: string;
  microBatchTokens: number;
  gradientCheckpointing?: boolean;
  storage: StorageDType;
  beta: number;
  keepLogitsMb: number;
  deviceMemory?: number;
  json: boolean;
}

const GiB = 2 ** 30;

export const memoryPlanCommand: CommandModule<object, MemoryPlanArgs> = {
  command: 'memory-plan',
  describe: 'Print the GPU engine\'s device memory plan for a model (weights, optimizer state, activations, the micro-batch budget that fits)',
  builder: (y) =>
    y
      .option('model', { type: 'string', describe: 'Hugging Face model directory (its config.json); default: the demo\'s tiny model' })
      .option('micro-batch-tokens', { type: 'number', default: defaultConfig().microBatchTokens, describe: 'Token budget of one micro-batch' })
      .option('gradient-checkpointing', { type: 'boolean', describe: 'Per-layer activation checkpointing (default: on from 1e9 parameters)' })
      .option('storage', { type: 'string', choices: [...STORAGE_DTYPES], default: STORAGE_DTYPES[0], describe: 'Storage dtype of the compute weights and activations (f32: the precision mode, about 2x their memory)' })
      .option('beta', { type: 'number', default: 0, describe: 'KL coefficient (> 0 adds a bf16 reference copy)' })
      .option('keep-logits-mb', { type: 'number', default: defaultConfig().keepLogitsMb, describe: 'MiB of lm-head logits the loss keeps between its two passes (train\'s key)' })
      .option('device-memory', { type: 'number', describe: 'Free device memory in GiB (default: device 0\'s, when there is one)' })
      .option('json', { type: 'boolean', default: false, describe: 'Print the plan as JSON' }) as unknown as Argv<MemoryPlanArgs>,
  handler: async (a) => {
    try {
      if (!(Number.isInteger(a.microBatchTokens) && a.microBatchTokens > 0)) throw new Error(`--micro-batch-tokens must be a positive integer (got ${a.microBatchTokens})`);
      if (!(a.beta >= 0)) throw new Error(`--beta must be >= 0 (got ${a.beta})`);
      validatePartial({ keepLogitsMb: a.keepLogitsMb }, 'memory-plan\'s flags'); // train's key: its range, one source
      if (a.deviceMemory !== undefined && !(a.deviceMemory > 0)) throw new Error(`--device-memory must be a positive number of GiB (got ${a.deviceMemory})`);
      // loaded here, not with the CLI's command list
      const [{ runModelShape }, { formatMemoryPlan, memoryPlan, planProblem }, { cuda }] = await Promise.all([
        import('../gpu/device.js'), import('../gpu/memory-plan.js'), import('../native.js'),
      ]);
      const shape = runModelShape({ model: a.model ?? null, modelPreset: 'tiny' });
      const dev = cuda.status().devices[0];
      const free = a.deviceMemory !== undefined ? Math.floor(a.deviceMemory * GiB) : dev?.freeMemory;
      const total = a.deviceMemory !== undefined ? free : dev?.totalMemory;
      const plan = memoryPlan(shape, {
        microBatchTokens: a.microBatchTokens, gradientCheckpointing: a.gradientCheckpointing ?? null, beta: a.beta, storage: a.storage, keepLogitsMb: a.keepLogitsMb,
        ...(free !== undefined ? { deviceFreeBytes: free, deviceTotalBytes: total } : {}),
      });
      const problem = planProblem(plan);
      if (a.json) process.stdout.write(`${JSON.stringify({ ...plan, problem }, null, 2)}\n`);
      else process.stdout.write(`${formatMemoryPlan(plan)}\n${free === undefined ? '  (no device here and no --device-memory: no fit computed)\n' : problem ? `  does not fit: ${problem}\n` : ''}`);
    } catch (e) {
      process.stderr.write(`murphy-native memory-plan: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    }
  },
};
