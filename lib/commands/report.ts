// `murphy-native report RUN_DIR`: one self-contained HTML file (plots, Iter-k curves, tree viewer).
import type { Argv, CommandModule } from 'yargs';

interface ReportArgs {
  run: string;
  out?: string;
  maxTrees: number;
  maxTreeBytes: number;
}

export const reportCommand: CommandModule<object, ReportArgs> = {
  command: 'report <run>',
  describe: 'Write RUN/report.html: metric plots, Iter-k curves and a rollout-tree viewer, in one file that opens offline',
  builder: (y) =>
    y
      .positional('run', { type: 'string', demandOption: true, describe: 'Run directory (of murphy-native train)' })
      .option('out', { type: 'string', describe: 'Output file (default: RUN/report.html)' })
      .option('max-trees', { type: 'number', default: 4000, describe: 'Most rollout trees embedded for the viewer (whole steps, spread over the run)' })
      .option('max-tree-bytes', { type: 'number', default: 2_000_000, describe: 'Most bytes of tree data embedded (keeps the file small; all trees stay in trees.jsonl.gz)' }) as unknown as Argv<ReportArgs>,
  handler: async (argv) => {
    const { writeReport } = await import('../report/html.js');
    const path = writeReport(argv.run, argv.out, { maxTrees: argv.maxTrees, maxTreeBytes: argv.maxTreeBytes });
    process.stdout.write(`report: ${path}\n`);
  },
};
