// Executor throughput: HumanEval canonical solutions per second at full concurrency, and the CPU
// time each program costs (every process of the run: Node, the sandboxes, the servers and the
// programs), beside the rate of bare `python -c pass` launches (the cost floor of a fresh
// interpreter) and of `bwrap ... python -c pass` (a fresh sandboxed interpreter per program),
// measured in the same run. --samples G runs each problem G times in a row (a rollout's group of
// samples of one problem); --problems N takes the first N problems; --modes bubblewrap,process
// picks the sandbox modes.
//
//   node --import tsx bench/exec.bench.ts [--json FILE] [--rounds N] [--workers N] [--samples G] [--problems N] [--modes M] [--python CMD]
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg } from 'node:os';
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
const samples = Number(arg('samples') ?? 1);
const maxProblems = arg('problems') === undefined ? Infinity : Number(arg('problems'));
const modeNames = (arg('modes') ?? 'bubblewrap,process').split(',');

/** CPU seconds of this process and every live descendant, each with its reaped children (Linux /proc; 10 ms ticks). */
function treeCpuSeconds(): number {
  const stats = new Map<number, { ppid: number; ticks: number }>();
  for (const n of readdirSync('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const st = readFileSync(`/proc/${n}/stat`, 'latin1');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      // fields 4 (ppid) and 14-17 (utime, stime, cutime, cstime), counted from the state (3)
      stats.set(Number(n), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) });
    } catch {
      /* exited meanwhile */
    }
  }
  let ticks = 0;
  for (const [pid, s] of stats) {
    let cur: number | undefined = pid;
    for (let i = 0; cur !== undefined && i < 1000; i++) {
      if (cur === process.pid) {
        ticks += s.ticks;
        break;
      }
      cur = stats.get(cur)?.ppid;
    }
  }
  return ticks / 100;
}

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

async function executorRate(problems: Problem[], useBubblewrap: boolean): Promise<{ rate: number; cpuMsPerProgram: number; passed: number; total: number; perRound: number[]; cpuMsPerRound: number[] }> {
  const ex = new PythonExecutor({ python, workers, useBubblewrap, maxQueue: 4096, warn: () => {} });
  await ex.start();
  // Warm-up round (not timed).
  await Promise.all(problems.slice(0, workers * 4).map((p) => ex.run(p, p.referenceSolution as string)));
  const perRound: number[] = [];
  const cpuMsPerRound: number[] = [];
  let passed = 0;
  let total = 0;
  // Each problem `samples` times in a row (the queue hands them to the workers in this order).
  const programs = problems.flatMap((p) => Array.from({ length: samples }, () => p));
  for (let r = 0; r < rounds; r++) {
    const c0 = treeCpuSeconds();
    const t0 = performance.now();
    const res = await Promise.all(programs.map((p) => ex.run(p, p.referenceSolution as string)));
    perRound.push((programs.length / (performance.now() - t0)) * 1000);
    cpuMsPerRound.push(((treeCpuSeconds() - c0) * 1000) / programs.length);
    passed += res.filter((x) => x.passed).length;
    total += res.length;
  }
  await ex.close();
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return { rate: median(perRound), cpuMsPerProgram: median(cpuMsPerRound), passed, total, perRound, cpuMsPerRound };
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
  if (problems.length > maxProblems) {
    problems = problems.slice(0, maxProblems);
    source += `, the first ${maxProblems}`;
  }
  const bw = await checkBubblewrap();
  const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, model: cpus()[0]?.model, workers },
    python: `${py.executable} ${py.version}`,
    source,
    rounds,
    samplesPerProblem: samples,
    loadAverageAtStart: loadavg().map((x) => Number(x.toFixed(2))),
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
  const modes = ([['bubblewrap', true], ['process', false]] as [string, boolean][]).filter(([n, use]) => modeNames.includes(n) && (bw.ok || !use));
  const execRates: Record<string, unknown> = {};
  for (const [name, use] of modes) execRates[name] = await executorRate(problems, use);
  results.executor = execRates;
  results.loadAverageAtEnd = loadavg().map((x) => Number(x.toFixed(2)));

  const line = (k: string, v: number | null, extra = ''): string => `${k.padEnd(48)} ${v === null ? '   n/a' : v.toFixed(1).padStart(7)} /s ${extra}`;
  const out: string[] = [];
  out.push(`executor benchmark: ${source}${samples > 1 ? `, each ${samples} times in a row` : ''}, ${workers} workers on ${cpus().length} CPUs, ${py.executable} ${py.version}, load average ${results.loadAverageAtStart} -> ${results.loadAverageAtEnd}`);
  out.push(line('bare `python -c pass` launches (floor)', floor));
  out.push(line('`bwrap ... python -c pass` launches', bwrapFloor));
  for (const [name] of modes) {
    const r = execRates[name] as { rate: number; cpuMsPerProgram: number; passed: number; total: number; perRound: number[]; cpuMsPerRound: number[] };
    out.push(line(`HumanEval canonical, executor (${name})`, r.rate, `x${(r.rate / floor).toFixed(2)} of the floor; ${r.cpuMsPerProgram.toFixed(1)} ms of CPU a program (rounds ${r.cpuMsPerRound.map((x) => x.toFixed(1)).join(', ')}); ${r.passed}/${r.total} passed; rounds ${r.perRound.map((x) => x.toFixed(0)).join(', ')}/s`));
  }
  process.stdout.write(out.join('\n') + '\n');
  if (jsonOut) await writeFile(jsonOut, JSON.stringify(results, null, 2) + '\n');
}

await main();
