// `murphy-native train --nproc-per-node N`: starts N rank processes of the same command on this
// machine (torchrun's variables set for each), one GPU each with --device cuda, or sharing the
// CPU with --device cpu (MURPHY_NUM_THREADS = cores / N, unless set). Several machines: the same
// command on each, with NNODES and NODE_RANK (or Slurm's SLURM_NNODES and SLURM_NODEID) and
// MASTER_ADDR / MASTER_PORT. Signals are forwarded once to every rank (the ranks run in their
// own process group, so a terminal's Ctrl-C does not reach them twice); when a rank fails, the
// others are stopped and the job fails with that rank's line.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import { DEFAULT_MASTER_PORT, DistEnvError } from './env.js';

export interface LaunchOptions {
  nprocPerNode: number;
  /** Command-line arguments of each rank (the launcher's own flags removed). */
  args: string[];
  device: 'auto' | 'cpu' | 'cuda' | 'emulate';
  env?: NodeJS.ProcessEnv;
  /** Lines of the launcher itself (default: stderr). */
  log?: (line: string) => void;
  /** The script each rank runs (default: this process's, i.e. the murphy-native CLI). */
  script?: string;
  /** Seconds between SIGTERM and SIGKILL when stopping the other ranks after a failure. Default 10. */
  killAfterSeconds?: number;
}

export interface NodeLayout {
  nnodes: number;
  nodeRank: number;
  masterAddr: string;
  masterPort: number | null;
}

function envInt(env: NodeJS.ProcessEnv, key: string, min: number): number | undefined {
  const v = env[key];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new DistEnvError(`environment variable ${key}=${JSON.stringify(v)}: expected an integer >= ${min}`);
  return n;
}

/** This node's place among the job's nodes (NNODES/NODE_RANK, else Slurm's, else one node). */
export function nodeLayout(env: NodeJS.ProcessEnv): NodeLayout {
  const nnodes = envInt(env, 'NNODES', 1) ?? envInt(env, 'SLURM_NNODES', 1) ?? 1;
  const nodeRank = envInt(env, 'NODE_RANK', 0) ?? envInt(env, 'SLURM_NODEID', 0) ?? 0;
  if (nodeRank >= nnodes) throw new DistEnvError(`node rank ${nodeRank} is not below the number of nodes ${nnodes} (NODE_RANK, NNODES)`);
  if (nnodes > 1 && !env.MASTER_ADDR) throw new DistEnvError(`${nnodes} nodes: set MASTER_ADDR (node 0's address, the same on every node) and MASTER_PORT`);
  const port = envInt(env, 'MASTER_PORT', 1);
  return { nnodes, nodeRank, masterAddr: env.MASTER_ADDR || '127.0.0.1', masterPort: port ?? (nnodes > 1 ? DEFAULT_MASTER_PORT : null) };
}

/** The environment of local rank `local` (torchrun's variables, threads or GPU). */
export function rankEnv(base: NodeJS.ProcessEnv, o: { nproc: number; local: number; layout: NodeLayout; port: number; device: LaunchOptions['device']; cores: number }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const k of ['SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_LOCALID']) delete env[k];
  env.RANK = String(o.layout.nodeRank * o.nproc + o.local);
  env.WORLD_SIZE = String(o.layout.nnodes * o.nproc);
  env.LOCAL_RANK = String(o.local);
  env.LOCAL_WORLD_SIZE = String(o.nproc);
  env.MASTER_ADDR = o.layout.masterAddr;
  env.MASTER_PORT = String(o.port);
  if (o.device === 'cuda') {
    const visible = base.CUDA_VISIBLE_DEVICES?.split(',').map((s) => s.trim()).filter(Boolean);
    env.CUDA_VISIBLE_DEVICES = visible ? visible[o.local % visible.length]! : String(o.local);
  } else if (!base.MURPHY_NUM_THREADS) {
    env.MURPHY_NUM_THREADS = String(Math.max(1, Math.floor(o.cores / o.nproc)));
  }
  return env;
}

async function freePort(host: string): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, host, () => resolve());
  });
  const p = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}

/** Runs the ranks; resolves with the job's exit code (0, the first failing rank's, or 128 + signal). */
export async function launchLocal(o: LaunchOptions): Promise<number> {
  const env = o.env ?? process.env;
  const log = o.log ?? ((l: string) => process.stderr.write(l + '\n'));
  if (!Number.isSafeInteger(o.nprocPerNode) || o.nprocPerNode < 1) throw new DistEnvError(`--nproc-per-node must be an integer >= 1, got ${o.nprocPerNode}`);
  const layout = nodeLayout(env);
  const port = layout.masterPort ?? (await freePort('127.0.0.1'));
  const cores = os.availableParallelism();
  const children: ChildProcess[] = [];
  let failure: { rank: number; code: number; line: string } | null = null;
  let signalled: NodeJS.Signals | null = null;
  let killTimer: NodeJS.Timeout | null = null;
  const stopOthers = (): void => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    killTimer ??= setTimeout(() => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    }, (o.killAfterSeconds ?? 10) * 1000);
    killTimer.unref();
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    signalled ??= sig;
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill(sig);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const killAll = (): void => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  process.on('exit', killAll);
  const exits: Promise<void>[] = [];
  try {
    for (let local = 0; local < o.nprocPerNode; local++) {
      const rank = layout.nodeRank * o.nprocPerNode + local;
      const child = spawn(process.execPath, [...process.execArgv, o.script ?? process.argv[1]!, ...o.args], {
        env: rankEnv(env, { nproc: o.nprocPerNode, local, layout, port, device: o.device, cores }),
        stdio: rank === 0 ? ['ignore', 'inherit', 'inherit'] : ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      children.push(child);
      let last = '';
      const prefix = (stream: NodeJS.WritableStream) => (d: Buffer): void => {
        const lines = d.toString('utf8').split(/\r?\n|\r/).filter((l) => l.trim() !== '');
        if (lines.length) last = lines[lines.length - 1]!;
        for (const l of lines) stream.write(`[rank ${rank}] ${l}\n`);
      };
      child.stdout?.on('data', prefix(process.stdout));
      child.stderr?.on('data', prefix(process.stderr));
      exits.push(new Promise<void>((resolve) => {
        child.on('error', (e) => {
          failure ??= { rank, code: 1, line: `cannot start: ${e.message}` };
          stopOthers();
          resolve();
        });
        child.on('exit', (code, sig) => {
          const c = code ?? (sig ? 128 + (os.constants.signals[sig] ?? 0) : 1);
          if (c !== 0 && failure === null && signalled === null) {
            failure = { rank, code: c, line: rank === 0 && local === 0 ? '(its error is above)' : last || `exited with ${sig ?? `code ${c}`}` };
            log(`murphy-native train: rank ${rank} failed (exit ${sig ?? `code ${c}`}): ${failure.line}; stopping the other ranks`);
            stopOthers();
          }
          resolve();
        });
      }));
    }
    await Promise.all(exits);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', killAll);
    if (killTimer) clearTimeout(killTimer);
  }
  if (failure) return (failure as { code: number }).code;
  if (signalled) return 128 + (os.constants.signals[signalled as NodeJS.Signals] ?? 0);
  return 0;
}
