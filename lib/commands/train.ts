// `murphy-native train [--config FILE] [--flags...] [--resume RUN_DIR]`: MURPHY (or GRPO)
// training. With no model and no dataset it runs the CPU demo (a tiny random model on the
// built-in code-repair task). docs/training.md lists every key.
import type { Argv, CommandModule } from 'yargs';
import { configOptions, flagsFromArgv, resolveConfig } from '../config/index.js';
import { StderrProgress } from '../train/progress.js';
import { exitCodeForSignal } from '../train/signals.js';
import { resumeConfig, runTraining } from './run-training.js';

interface TrainArgs {
  config?: string;
  resume?: string;
  overrideConfig?: boolean;
  [key: string]: unknown;
}

export const trainCommand: CommandModule<object, TrainArgs> = {
  command: 'train',
  describe: 'Train with MURPHY (or the GRPO baseline); with no model given, the CPU demo on a built-in code-repair task',
  builder: (y) =>
    y
      .option('config', { type: 'string', describe: 'YAML or JSON configuration file (keys in camelCase or snake_case); flags override it' })
      .option('resume', { type: 'string', describe: 'Continue the run in RUN_DIR from its newest checkpoint that verifies' })
      .option('override-config', { type: 'boolean', default: false, describe: 'With --resume: continue even though RUN_DIR/config.json differs from the checkpoint\'s configuration' })
      .option('verbose', { type: 'boolean', describe: 'Print every setting at the start and one line of figures per step (and the stack trace of an error)' })
      .options(configOptions())
      .epilogue(
        'Defaults: "[default: X]" applies when --model or --dataset is given. With neither, the run is the CPU demo, and the keys that ' +
          'show "demo: Y" take Y instead (a flag or config file still wins). Every key: docs/training.md.',
      )
      .example('$0 train', 'the CPU demo: tiny model, built-in repair task, MURPHY')
      .example('$0 train --algo grpo --out runs/grpo', 'the same budget with GRPO')
      .example('$0 train --model ./qwen3-0.6b --dataset mbpp.jsonl --backend vllm --server-url http://127.0.0.1:8000', 'a real model next to a vLLM server') as unknown as Argv<TrainArgs>,
  handler: async (argv) => {
    const flags = flagsFromArgv(argv);
    const cfg = argv.resume ? resumeConfig(argv.resume, flags) : resolveConfig({ file: argv.config ?? null, flags });
    const t0 = performance.now();
    const progress = new StderrProgress();
    const r = await runTraining(cfg, {
      resume: argv.resume,
      overrideConfig: argv.overrideConfig,
      progress,
      verbose: Boolean(argv.verbose),
      log: (l) => {
        progress.clear();
        process.stdout.write(l + '\n');
      },
    });
    const evals = r.evals;
    const first = evals.find((e) => e.label === 'initial');
    const last = [...evals].reverse().find((e) => e.label === 'final');
    if (first && last) {
      const fmt = (e: typeof first): string => e.result.iterations.map((p) => `Iter-${p.k} ${(100 * p.pass1).toFixed(1)}%`).join(', ');
      process.stdout.write(`\nheld-out pass@1 before training: ${fmt(first)}\nheld-out pass@1 after training:  ${fmt(last)}\n`);
    }
    process.stdout.write(`${r.summary.stoppedEarly ? 'stopped' : r.summary.earlyStop ? 'stopped early (no training signal)' : 'done'} after ${r.summary.steps} steps in ${((performance.now() - t0) / 1000).toFixed(0)} s; run directory ${r.runDir}\n`);
    if (r.reportPath) process.stdout.write(`report: ${r.reportPath}\n`);
    // Stopped by a signal: the checkpoint is written, but the command did not finish.
    if (r.summary.signal) process.exitCode = exitCodeForSignal(r.summary.signal);
  },
};
