// The TCP rendezvous of a distributed job: rank 0 listens at MASTER_ADDR:MASTER_PORT, the other
// ranks connect (retrying until the deadline while rank 0 is not up yet) and register their
// rank, world size and the port they listen on; rank 0 checks the world size and duplicate
// ranks, then hands every rank the table of addresses and a payload (the CPU backend: nothing;
// NCCL: the unique id bytes). Every failure is one line naming the rank at fault, and rank 0
// sends it to every rank that did arrive so they all fail with the same line.
import net from 'node:net';
import { FrameReader, withDeadline, writeFrame } from './frames.js';

export interface PeerAddress {
  host: string;
  port: number;
}

export interface RendezvousOptions {
  rank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number;
  /** Every rank must have arrived (and, for the others, heard back) within this many ms. */
  timeoutMs: number;
  /** The port this rank's backend listens on (advertised to the others). */
  advertisePort: number;
  /** Rank 0: bytes handed to every rank (e.g. the NCCL unique id). */
  payload?: Uint8Array;
  /** Ranks other than 0: pause between connection attempts (default 200 ms). */
  retryMs?: number;
  /** Called after each failed connection attempt (tests use it as a barrier). */
  onRetry?: (attempt: number, reason: string) => void;
  /** Rank 0: called when it listens (tests). */
  onListening?: (port: number) => void;
}

export interface RendezvousResult {
  /** Address of every rank's backend, by rank. */
  peers: PeerAddress[];
  payload: Uint8Array;
}

export class RendezvousError extends Error {
  override name = 'RendezvousError';
}

const REGISTER = 1;
const ANSWER = 2;

interface Registration {
  rank: number;
  worldSize: number;
  port: number;
}

type Answer = { ok: true; peers: PeerAddress[]; payload: string } | { ok: false; error: string };

const isLoopback = (h: string): boolean => h === 'localhost' || h === '::1' || h.startsWith('127.');
/** The address to listen on for connections to `masterAddr`. */
export function bindHost(masterAddr: string): string {
  return isLoopback(masterAddr) ? (masterAddr === 'localhost' ? '127.0.0.1' : masterAddr) : '0.0.0.0';
}

function json(b: Buffer): unknown {
  try {
    return JSON.parse(b.toString('utf8'));
  } catch {
    return null;
  }
}

/** Joins the job's rendezvous; resolves with the address table once every rank has arrived. */
export function rendezvous(o: RendezvousOptions): Promise<RendezvousResult> {
  if (!Number.isSafeInteger(o.worldSize) || o.worldSize < 1) return Promise.reject(new RendezvousError(`world size must be an integer >= 1, got ${o.worldSize}`));
  if (!Number.isSafeInteger(o.rank) || o.rank < 0 || o.rank >= o.worldSize) return Promise.reject(new RendezvousError(`rank ${o.rank} is not in 0..${o.worldSize - 1}`));
  return o.rank === 0 ? host(o) : join(o);
}

async function host(o: RendezvousOptions): Promise<RendezvousResult> {
  const where = `${o.masterAddr}:${o.masterPort}`;
  const W = o.worldSize;
  const self: PeerAddress = { host: o.masterAddr === 'localhost' ? '127.0.0.1' : o.masterAddr, port: o.advertisePort };
  if (W === 1) return { peers: [self], payload: o.payload ?? new Uint8Array(0) };
  const arrived = new Map<number, { reg: Registration; sock: net.Socket; from: string }>();
  const socks = new Set<net.Socket>();
  /** Every socket that registered (also the faulty ones: they hear the error too). */
  const joined = new Set<net.Socket>();
  const server = net.createServer();
  let settle!: (e: Error | null) => void;
  const done = new Promise<Error | null>((r) => (settle = r));
  let finished = false;
  const finish = (e: Error | null): void => {
    if (finished) return;
    finished = true;
    settle(e);
  };
  server.on('connection', (sock) => {
    socks.add(sock);
    const rd = new FrameReader(sock, 'a rank joining the rendezvous');
    const from = `${(sock.remoteAddress ?? '?').replace(/^::ffff:/, '')}`;
    rd.next().then((f) => {
      const r = json(f.payload) as Registration | null;
      if (f.kind !== REGISTER || !r || !Number.isSafeInteger(r.rank) || !Number.isSafeInteger(r.worldSize) || !Number.isSafeInteger(r.port)) {
        sock.destroy();
        return; // not one of ours: ignore it
      }
      joined.add(sock);
      if (r.worldSize !== W) return finish(new RendezvousError(`rendezvous at ${where}: rank ${r.rank} (from ${from}) has world size ${r.worldSize}, rank 0 has ${W}; every rank must be started with the same WORLD_SIZE (--nproc-per-node x nodes)`));
      if (r.rank <= 0 || r.rank >= W) return finish(new RendezvousError(`rendezvous at ${where}: a process (from ${from}) joined as rank ${r.rank}, not in 1..${W - 1}; check RANK / SLURM_PROCID`));
      const prev = arrived.get(r.rank);
      if (prev) return finish(new RendezvousError(`rendezvous at ${where}: rank ${r.rank} joined twice (from ${prev.from} and ${from}); every process needs its own RANK`));
      arrived.set(r.rank, { reg: r, sock, from });
      if (arrived.size === W - 1) finish(null);
    }, () => undefined);
  });
  const listening = new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => reject(new RendezvousError(`rank 0 cannot listen at ${where} (${e.code ?? e.message}); choose another MASTER_PORT`)));
    server.listen(o.masterPort, bindHost(o.masterAddr), () => resolve());
  });
  await listening;
  o.onListening?.((server.address() as net.AddressInfo).port);
  const timer = setTimeout(() => {
    const missing = Array.from({ length: W - 1 }, (_, i) => i + 1).filter((r) => !arrived.has(r));
    finish(new RendezvousError(`rendezvous at ${where}: rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} did not arrive within ${o.timeoutMs / 1000} s (world size ${W}); check that every rank was started and can reach ${where}`));
  }, o.timeoutMs);
  const err = await done;
  clearTimeout(timer);
  const payload = o.payload ?? new Uint8Array(0);
  let answer: Answer;
  if (err) answer = { ok: false, error: err.message };
  else {
    const peers: PeerAddress[] = [self];
    for (let r = 1; r < W; r++) {
      const a = arrived.get(r)!;
      peers.push({ host: a.from, port: a.reg.port });
    }
    answer = { ok: true, peers, payload: Buffer.from(payload).toString('hex') };
  }
  const text = Buffer.from(JSON.stringify(answer));
  await Promise.allSettled([...joined].map((s) => writeFrame(s, ANSWER, 0, text)));
  for (const s of socks) s.end();
  await new Promise<void>((r) => server.close(() => r()));
  for (const s of socks) s.destroy();
  if (err) throw err;
  return { peers: (answer as { peers: PeerAddress[] }).peers, payload };
}

async function join(o: RendezvousOptions): Promise<RendezvousResult> {
  const where = `${o.masterAddr}:${o.masterPort}`;
  const deadline = Date.now() + o.timeoutMs;
  const retry = o.retryMs ?? 200;
  let attempt = 0;
  let sock: net.Socket | null = null;
  let last = '';
  while (sock === null) {
    attempt++;
    try {
      sock = await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect({ host: o.masterAddr, port: o.masterPort });
        s.once('connect', () => {
          s.removeAllListeners('error');
          resolve(s);
        });
        s.once('error', (e: NodeJS.ErrnoException) => {
          s.destroy();
          reject(new Error(e.code ?? e.message));
        });
      });
    } catch (e) {
      last = (e as Error).message;
      o.onRetry?.(attempt, last);
      const left = deadline - Date.now();
      if (left <= 0) throw new RendezvousError(`rank ${o.rank}: rank 0 did not answer at ${where} within ${o.timeoutMs / 1000} s (${last}); is rank 0 running, and MASTER_ADDR/MASTER_PORT the same on every rank?`);
      await new Promise((r) => setTimeout(r, Math.min(retry, left)));
    }
  }
  const rd = new FrameReader(sock, `rank 0 at ${where}`);
  try {
    await writeFrame(sock, REGISTER, 0, Buffer.from(JSON.stringify({ rank: o.rank, worldSize: o.worldSize, port: o.advertisePort } satisfies Registration)));
    const f = await withDeadline(rd.next(), Math.max(1, deadline - Date.now()), () => `rank ${o.rank}: rank 0 at ${where} did not complete the rendezvous within ${o.timeoutMs / 1000} s (some rank did not arrive?)`);
    const a = json(f.payload) as Answer | null;
    if (f.kind !== ANSWER || !a) throw new Error(`rank ${o.rank}: malformed rendezvous answer from ${where}`);
    if (!a.ok) throw new Error(a.error);
    return { peers: a.peers, payload: new Uint8Array(Buffer.from(a.payload, 'hex')) };
  } catch (e) {
    throw e instanceof RendezvousError ? e : new RendezvousError((e as Error).message);
  } finally {
    sock.destroy();
  }
}
