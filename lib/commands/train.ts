// `murphy-native train [--config FILE] [--flags...] [--resume RUN_DIR]`: MURPHY (or GRPO)
// training. With no model and no dataset it runs the CPU demo (a tiny random model on the
// built-in code-repair task). docs/training.md lists every key.
import type { Argv, CommandModule } from 'yargs';
import { configOptions, flagsFromArgv, resolveConfig } from '../config/index.js';
import { silentProgress, StderrProgress } from '../train/progress.js';
import { exitCodeForSignal } from '../train/signals.js';

/** The command line without --nproc-per-node (what each rank runs). */
export function withoutLauncherFlags(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--nproc-per-node') i++;
    else if (!a.startsWith('--nproc-per-node=')) out.push(a);
  }
  return out;
}

interface TrainArgs {
  config?: string;
  resume?: string;
  overrideConfig?: boolean;
  nprocPerNode?: number;
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
      .option('nproc-per-node', { type: 'number', describe: 'Data-parallel training: start this many rank processes on this machine (one GPU each with --device cuda; they share the CPU with --device cpu). Several machines: docs/distributed.md' })
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
    delete flags.nprocPerNode;
    // A refused flag or config value fails before the training code (~110 modules) loads.
    const fresh = argv.resume ? null : resolveConfig({ file: argv.config ?? null, flags });
    const [{ checkRanksDevice, resumeConfig, runTraining, serversOfRank }, { joinJob }, { launchLocal, nodeLayout }] = await Promise.all([
      import('./run-training.js'), import('../dist/backend.js'), import('../dist/launch.js'),
    ]);
    const cfg = fresh ?? resumeConfig(argv.resume!, flags);
    if (argv.nprocPerNode !== undefined) {
      checkRanksDevice(cfg, argv.nprocPerNode);
      // enough vLLM servers for every rank of the job, before any rank starts
      if (cfg.backend === 'vllm') serversOfRank(cfg, 0, argv.nprocPerNode * nodeLayout(process.env).nnodes);
      process.exitCode = await launchLocal({ nprocPerNode: argv.nprocPerNode, args: withoutLauncherFlags(process.argv.slice(2)), device: cfg.device });
      return;
    }
    const collective = await joinJob(cfg);
    const quiet = collective !== null && collective.rank !== 0;
    const t0 = performance.now();
    const progress = new StderrProgress();
    let r;
    try {
      r = await runTraining(cfg, {
        resume: argv.resume,
        overrideConfig: argv.overrideConfig,
        progress: quiet ? silentProgress : progress,
        verbose: Boolean(argv.verbose),
        log: quiet ? () => undefined : (l) => {
          progress.clear();
          process.stdout.write(l + '\n');
        },
        // ranks other than 0 still say when their weight sync falls back (the launcher prefixes [rank N])
        ...(quiet ? { warn: (l: string) => process.stderr.write(l + '\n') } : {}),
        dist: collective ? { collective } : undefined,
      });
    } finally {
      await collective?.close();
    }
    if (quiet) {
      if (r.summary.signal) process.exitCode = exitCodeForSignal(r.summary.signal);
      return;
    }
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
