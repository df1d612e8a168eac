// Where this process sits in a distributed job, from the environment: torchrun's variables
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or, when RANK is
// not set, Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE and the first
// host of SLURM_NODELIST, unless MASTER_ADDR is set). docs/distributed.md.

export interface DistEnv {
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  masterAddr: string;
  masterPort: number;
  /** 'torchrun' (RANK/WORLD_SIZE), 'slurm', or 'single' (neither: one process). */
  source: 'torchrun' | 'slurm' | 'single';
}

export const DEFAULT_MASTER_PORT = 29500;

export class DistEnvError extends Error {
  override name = 'DistEnvError';
}

function int(env: NodeJS.ProcessEnv, key: string, min: number, fallback?: number): number {
  const v = env[key];
  if (v === undefined || v === '') {
    if (fallback !== undefined) return fallback;
    throw new DistEnvError(`environment variable ${key} is not set`);
  }
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new DistEnvError(`environment variable ${key}=${JSON.stringify(v)}: expected an integer >= ${min}`);
  return n;
}

/**
 * The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01"; "a,b" -> "a";
 * "rack1-[3-5]" -> "rack1-3".
 */
export function firstSlurmHost(nodelist: string): string {
  const s = nodelist.trim();
  if (s === '') throw new DistEnvError('SLURM_NODELIST is empty');
  let depth = 0;
  let end = s.length;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '[') depth++;
    else if (s[i] === ']') depth--;
    else if (s[i] === ',' && depth === 0) {
      end = i;
      break;
    }
  }
  const first = s.slice(0, end);
  const m = /^(.*?)\[([^\]]*)\](.*)$/.exec(first);
  if (!m) return first;
  const range = m[2]!.split(',')[0]!.split('-')[0]!;
  return `${m[1]}${range}${m[3]}`;
}

/** Slurm's per-node task count "4(x2),3" -> tasks on the node of the given index. */
function slurmTasksPerNode(spec: string | undefined): number | undefined {
  if (!spec) return undefined;
  const m = /^(\d+)/.exec(spec.trim());
  return m ? Number(m[1]) : undefined;
}

function port(env: NodeJS.ProcessEnv): number {
  const p = int(env, 'MASTER_PORT', 1, DEFAULT_MASTER_PORT);
  if (p > 65535) throw new DistEnvError(`environment variable MASTER_PORT=${p}: expected a port 1..65535`);
  return p;
}

/** Reads the job's layout from `env`; a single process when neither convention is present. */
export function readDistEnv(env: NodeJS.ProcessEnv = process.env): DistEnv {
  let d: DistEnv;
  if (env.RANK !== undefined || env.WORLD_SIZE !== undefined) {
    const worldSize = int(env, 'WORLD_SIZE', 1);
    const rank = int(env, 'RANK', 0);
    d = {
      rank,
      worldSize,
      localRank: int(env, 'LOCAL_RANK', 0, rank),
      localWorldSize: int(env, 'LOCAL_WORLD_SIZE', 1, worldSize),
      masterAddr: env.MASTER_ADDR || '127.0.0.1',
      masterPort: port(env),
      source: 'torchrun',
    };
    if (worldSize > 1 && !env.MASTER_ADDR) throw new DistEnvError(`WORLD_SIZE=${worldSize} but MASTER_ADDR is not set: set MASTER_ADDR (rank 0's host) and MASTER_PORT`);
  } else if (env.SLURM_PROCID !== undefined && env.SLURM_NTASKS !== undefined) {
    const worldSize = int(env, 'SLURM_NTASKS', 1);
    const rank = int(env, 'SLURM_PROCID', 0);
    const masterAddr = env.MASTER_ADDR || (worldSize > 1 ? firstSlurmHost(env.SLURM_STEP_NODELIST ?? env.SLURM_NODELIST ?? env.SLURM_JOB_NODELIST ?? '') : '127.0.0.1');
    d = {
      rank,
      worldSize,
      localRank: int(env, 'SLURM_LOCALID', 0, 0),
      localWorldSize: slurmTasksPerNode(env.SLURM_STEP_TASKS_PER_NODE ?? env.SLURM_TASKS_PER_NODE) ?? 1,
      masterAddr,
      masterPort: port(env),
      source: 'slurm',
    };
  } else {
    return { rank: 0, worldSize: 1, localRank: 0, localWorldSize: 1, masterAddr: '127.0.0.1', masterPort: DEFAULT_MASTER_PORT, source: 'single' };
  }
  if (d.rank >= d.worldSize) throw new DistEnvError(`rank ${d.rank} is not below the world size ${d.worldSize} (${d.source === 'slurm' ? 'SLURM_PROCID, SLURM_NTASKS' : 'RANK, WORLD_SIZE'})`);
  if (d.localRank >= d.localWorldSize) d.localWorldSize = d.localRank + 1;
  return d;
}
