// Executor throughput: HumanEval canonical solutions per second at full concurrency, beside
// the rate of bare `python -c pass` launches (the cost floor of a fresh interpreter) and of
// `bwrap ... python -c pass` (a fresh sandboxed interpreter per program), measured in the same run.
//
//   node --import tsx bench/exec.bench.ts [--json FILE] [--rounds N] [--workers N] [--python CMD]
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadDataset, loadSample, type Problem } from '../lib/data/index.js';
import { checkBubblewrap, probePython, PythonExecutor } from '../lib/exec/index.js';

const argv = process.argv.slice(2);
function arg(name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}
const jsonOut = arg('json');
const rounds = Number(arg('rounds') ?? 3);
const workers = Number(arg('workers') ?? availableParallelism());
const python = arg('python') ?? process.env.MURPHY_PYTHON ?? 'python3';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const HE = join(REPO, '..', 'shared', 'data', 'HumanEval.jsonl.gz');

function launch(cmd: string, args: string[]): Promise<void> {
  return new Promise((res, rej) => {
    const p = spawn(cmd, args, { stdio: 'ignore' });
    p.on('error', rej);
    p.on('exit', (code) => (code === 0 ? res() : rej(new Error(`${cmd} exited ${code}`))));
  });
}

/** Launches per second with `conc` launches in flight, over at least `seconds`. */
async function launchRate(cmd: string, args: string[], conc: number, seconds = 3): Promise<number> {
  const t0 = performance.now();
  let n = 0;
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (performance.now() < deadline) {
        await launch(cmd, args);
        n++;
      }
    }),
  );
  return (n / (performance.now() - t0)) * 1000;
}

async function executorRate(problems: Problem[], useBubblewrap: boolean): Promise<{ rate: number; passed: number; total: number; perRound: number[] }> {
  const ex = new PythonExecutor({ python, workers, useBubblewrap, maxQueue: 4096, warn: () => {} });
  await ex.start();
  // Warm-up round (not timed).
  await Promise.all(problems.slice(0, workers * 4).map((p) => ex.run(p, p.referenceSolution as string)));
  const perRound: number[] = [];
  let passed = 0;
  let total = 0;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    const res = await Promise.all(problems.map((p) => ex.run(p, p.referenceSolution as string)));
    perRound.push((problems.length / (performance.now() - t0)) * 1000);
    passed += res.filter((x) => x.passed).length;
    total += res.length;
  }
  await ex.close();
  const sorted = [...perRound].sort((a, b) => a - b);
  return { rate: sorted[Math.floor(sorted.length / 2)], passed, total, perRound };
}

async function main(): Promise<void> {
  const py = await probePython(python);
  let problems: Problem[];
  let source: string;
  if (existsSync(HE)) {
    problems = await loadDataset(HE);
    source = 'HumanEval (164)';
  } else {
    const s = await loadSample('humaneval');
    problems = Array.from({ length: 164 }, (_, i) => s[i % s.length]);
    source = `shipped HumanEval sample x${Math.ceil(164 / s.length)} (../shared/data absent)`;
  }
  const bw = await checkBubblewrap();
  const results: Record<string, unknown> = {
    machine: { cpus: cpus().length, model: cpus()[0]?.model, workers },
    python: `${py.executable} ${py.version}`,
    source,
    rounds,
  };
  const floor = await launchRate(py.executable, ['-c', 'pass'], workers);
  results.pythonCPassPerSec = floor;
  let bwrapFloor: number | null = null;
  if (bw.ok && bw.path) {
    const ro = (p: string) => ['--ro-bind', p, p];
    const bwArgs = ['--unshare-all', '--die-with-parent', ...ro('/usr'), '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/bin', '/bin', ...ro(py.basePrefix), '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', py.executable, '-c', 'pass'];
    try {
      bwrapFloor = await launchRate(bw.path, bwArgs, workers);
    } catch {
      bwrapFloor = null;
    }
  }
  results.bwrapPythonCPassPerSec = bwrapFloor;
  const modes: [string, boolean][] = bw.ok ? [['bubblewrap', true], ['process', false]] : [['process', false]];
  const execRates: Record<string, unknown> = {};
  for (const [name, use] of modes) execRates[name] = await executorRate(problems, use);
  results.executor = execRates;

  const line = (k: string, v: number | null, extra = ''): string => `${k.padEnd(48)} ${v === null ? '   n/a' : v.toFixed(1).padStart(7)} /s ${extra}`;
  const out: string[] = [];
  out.push(`executor benchmark: ${source}, ${workers} workers on ${cpus().length} CPUs, ${py.executable} ${py.version}`);
  out.push(line('bare `python -c pass` launches (floor)', floor));
  out.push(line('`bwrap ... python -c pass` launches', bwrapFloor));
  for (const [name] of modes) {
    const r = execRates[name] as { rate: number; passed: number; total: number; perRound: number[] };
    out.push(line(`HumanEval canonical, executor (${name})`, r.rate, `x${(r.rate / floor).toFixed(2)} of the floor; ${r.passed}/${r.total} passed; rounds ${r.perRound.map((x) => x.toFixed(0)).join(', ')}`));
  }
  process.stdout.write(out.join('\n') + '\n');
  if (jsonOut) await writeFile(jsonOut, JSON.stringify(results, null, 2) + '\n');
}

await main();
