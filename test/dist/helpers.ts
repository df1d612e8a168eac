// Test helpers: a world of N ranks inside one process, of the CPU backend (loopback TCP) or of
// the NCCL backend on the tests' fake library (device -1, host buffers; the fake's communicators
// of one id form a world). Rank 0 listens on a free port and the others start once it does.
import type { Collective } from '../../lib/dist/collective.js';
import { NcclCollective, type NcclCollectiveOptions } from '../../lib/dist/nccl-collective.js';
import { TcpCollective, type TcpCollectiveOptions } from '../../lib/dist/tcp.js';

const open: Collective[] = [];

/** Closes every collective localWorld / ncclLocalWorld made (register with after(): a failed test leaves none open). */
export async function closeWorlds(): Promise<void> {
  await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
}

type Join<C> = (rank: number, masterPort: number, onListening?: (port: number) => void) => Promise<C>;

async function world<C extends Collective>(n: number, join: Join<C>): Promise<C[]> {
  let listening!: (port: number) => void;
  const port = new Promise<number>((r) => (listening = r));
  const first = join(0, 0, listening);
  const p = await Promise.race([port, first.then(() => 0)]);
  const all = await Promise.all([first, ...Array.from({ length: n - 1 }, (_, i) => join(i + 1, p))]);
  open.push(...all);
  return all;
}

/** N ranks of the CPU backend; every call is bounded by 60 s (a stuck test fails naming the rank instead of hanging). */
export function localWorld(n: number, over: Partial<TcpCollectiveOptions> = {}): Promise<TcpCollective[]> {
  return world(n, (rank, masterPort, onListening) => TcpCollective.create({ rank, worldSize: n, masterAddr: '127.0.0.1', masterPort, connectTimeoutMs: 20_000, timeoutMs: 60_000, onListening, ...over }));
}

/**
 * N ranks of the NCCL backend on device -1 (host buffers): only with the fake library loaded
 * (MURPHY_NCCL = test/helpers/fake-nccl.ts's build, findNccl({ install: true })). At most 3
 * ranks: each waiting call holds a libuv worker thread.
 */
export function ncclLocalWorld(n: number, over: Partial<NcclCollectiveOptions> = {}): Promise<NcclCollective[]> {
  return world(n, (rank, masterPort, onListening) => NcclCollective.create({ rank, worldSize: n, masterAddr: '127.0.0.1', masterPort, device: -1, connectTimeoutMs: 20_000, timeoutMs: 60_000, onListening, ...over }));
}
