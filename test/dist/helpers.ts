// Test helpers: a world of N ranks of the CPU backend inside one process (loopback TCP; rank 0
// listens on a free port and the others start once it does).
import { TcpCollective, type TcpCollectiveOptions } from '../../lib/dist/tcp.js';

const open: TcpCollective[] = [];

/** Closes every collective localWorld made (register with after(): a failed test leaves none open). */
export async function closeWorlds(): Promise<void> {
  await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
}

/** N ranks; every call is bounded by 60 s (a stuck test fails naming the rank instead of hanging). */
export async function localWorld(n: number, over: Partial<TcpCollectiveOptions> = {}): Promise<TcpCollective[]> {
  let listening!: (port: number) => void;
  const port = new Promise<number>((r) => (listening = r));
  const first = TcpCollective.create({ rank: 0, worldSize: n, masterAddr: '127.0.0.1', masterPort: 0, connectTimeoutMs: 20_000, timeoutMs: 60_000, onListening: listening, ...over });
  const p = await Promise.race([port, first.then(() => 0)]);
  const rest = Array.from({ length: n - 1 }, (_, i) => TcpCollective.create({ rank: i + 1, worldSize: n, masterAddr: '127.0.0.1', masterPort: p, connectTimeoutMs: 20_000, timeoutMs: 60_000, ...over }));
  const world = await Promise.all([first, ...rest]);
  open.push(...world);
  return world;
}

