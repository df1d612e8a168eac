// A loopback fake of the NCCL weight-sync group, for `murphy-native serve` and the tests: the
// trainer (rank 0) listens on 127.0.0.1, the "unique id" names the port and a random token,
// the workers connect and say their rank, and a broadcast writes each bucket to every worker
// and waits for each one's acknowledgement. Same shape as the NCCL channel (join with a
// deadline, broadcast with a deadline, abort), so the trainer's sequencing, timeouts and
// fallback run end to end without a GPU. Wire format: a JSON hello line from each worker
// {"token", "rank"}; then per bucket an 8-byte little-endian length and the bytes, answered by
// one byte 0x06.
import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { SyncChannel } from './weight-sync.js';

const MAGIC = 'murphy-loopback-v1';
const ACK = 0x06;
/** How long an accepted connection may take to say hello. */
const HELLO_MS = 600_000;

/** The 128-byte id (as hex) naming the port and token. */
export function loopbackIdHex(port: number, token: string): string {
  const id = Buffer.alloc(128);
  id.write(`${MAGIC} 127.0.0.1:${port} ${token}`, 'latin1');
  return id.toString('hex');
}

/** Reads an id made by loopbackIdHex; undefined when it is not one (e.g. a real NCCL id). */
export function parseLoopbackId(hex: string): { port: number; token: string } | undefined {
  if (!/^[0-9a-f]{256}$/i.test(hex)) return undefined;
  const text = Buffer.from(hex, 'hex').toString('latin1').replace(/\0+$/, '');
  const m = /^murphy-loopback-v1 127\.0\.0\.1:(\d+) ([0-9a-f]+)$/.exec(text);
  return m ? { port: Number(m[1]), token: m[2] } : undefined;
}

/** Buffered reads of exact byte counts from a socket, each with a deadline. */
class Reader {
  private chunks: Buffer[] = [];
  private size = 0;
  private waiter: (() => void) | undefined;
  private ended: Error | undefined;
  constructor(readonly socket: Socket, what: string) {
    socket.on('data', (c: Buffer) => { this.chunks.push(c); this.size += c.length; this.waiter?.(); });
    const end = (e?: Error) => { this.ended ??= new Error(`${what} closed the weight-sync connection${e ? `: ${e.message}` : ''}`); this.waiter?.(); };
    socket.on('close', () => end());
    socket.on('error', (e) => end(e));
  }
  private take(n: number): Buffer {
    const all = Buffer.concat(this.chunks);
    this.chunks = [all.subarray(n)];
    this.size -= n;
    return all.subarray(0, n);
  }
  /** Waits until more bytes arrive, the socket ends, or the deadline passes. */
  private async more(deadline: number, what: string): Promise<void> {
    const before = this.size;
    while (this.size === before) {
      if (this.ended) throw this.ended;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what}: timed out`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiter = () => { clearTimeout(t); resolve(); };
      });
      this.waiter = undefined;
    }
  }
  async read(n: number, deadline: number, what: string): Promise<Buffer> {
    while (this.size < n) await this.more(deadline, what);
    return this.take(n);
  }
  async line(deadline: number, what: string): Promise<string> {
    for (;;) {
      const i = Buffer.concat(this.chunks).indexOf(10);
      if (i >= 0) return this.take(i + 1).toString('utf8').trim();
      if (this.size > 4096) throw new Error(`${what}: the hello line is too long`);
      await this.more(deadline, what);
    }
  }
}

export interface LoopbackChannelOptions {
  /** Reported for the start-up checks (the serve side says 'loopback'). */
  ncclVersion?: string;
  gpuUuid?: string | null;
}

/** Rank 0's side (the trainer). Create with LoopbackChannel.open(). */
export class LoopbackChannel implements SyncChannel {
  readonly kind = 'loopback';
  readonly ncclVersion: string;
  readonly gpuUuid: string | null;
  readonly idHex: string;
  private readonly token = randomBytes(8).toString('hex');
  private peers: Reader[] = [];
  /** Every connection accepted (abort ends them all, joined or not). */
  private readonly sockets = new Set<Socket>();
  private aborted = false;

  /** Workers that said hello with the right token, by rank (before or during join). */
  private readonly arrived = new Map<number, Reader>();
  private onHello: (() => void) | undefined;

  private constructor(private readonly server: Server, port: number, o: LoopbackChannelOptions) {
    this.idHex = loopbackIdHex(port, this.token);
    this.ncclVersion = o.ncclVersion ?? 'loopback';
    this.gpuUuid = o.gpuUuid ?? null;
    // accept from the start: a worker may connect before join() is called
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      if (this.aborted) return void s.destroy();
      const r = new Reader(s, 'a worker');
      r.line(Date.now() + HELLO_MS, 'weight-sync hello').then((text) => {
        const h = JSON.parse(text) as { token?: string; rank?: number };
        if (h.token !== this.token || !Number.isSafeInteger(h.rank) || h.rank! < 1 || this.arrived.has(h.rank!)) return void s.destroy();
        this.arrived.set(h.rank!, r);
        this.onHello?.();
      }).catch(() => s.destroy());
    });
  }

  static async open(o: LoopbackChannelOptions = {}): Promise<LoopbackChannel> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(0, '127.0.0.1', () => resolve()); });
    const port = (server.address() as { port: number }).port;
    return new LoopbackChannel(server, port, o);
  }

  /** Resolves once ranks 1..world-1 have said hello with the token; rejects at the deadline naming the missing ranks. */
  async join(world: number, timeoutMs: number): Promise<void> {
    const missing = () => Array.from({ length: world - 1 }, (_, i) => i + 1).filter((r) => !this.arrived.has(r));
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (missing().length > 0) return;
        clearTimeout(timer);
        this.onHello = undefined;
        resolve();
      };
      const timer = setTimeout(() => {
        this.onHello = undefined;
        reject(new Error(`the weight-sync group did not form within ${timeoutMs} ms: rank(s) ${missing().join(', ')} of ${world} did not join`));
      }, timeoutMs);
      this.onHello = check;
      check();
    });
    for (const [rank, r] of this.arrived) if (rank >= world) r.socket.destroy();
    this.peers = [...this.arrived].filter(([rank]) => rank < world).map(([, r]) => r);
  }

  async broadcast(bytes: Uint8Array, timeoutMs: number): Promise<void> {
    if (this.aborted) throw new Error('the weight-sync group was aborted');
    const deadline = Date.now() + timeoutMs;
    const head = Buffer.alloc(8);
    head.writeBigUInt64LE(BigInt(bytes.length));
    await Promise.all(this.peers.map(async (p) => {
      p.socket.write(head);
      p.socket.write(bytes);
      const ack = await p.read(1, deadline, `broadcast of ${bytes.length} bytes (waiting for a worker's acknowledgement)`);
      if (ack[0] !== ACK) throw new Error('a worker answered the broadcast with garbage');
    }));
  }

  async close(): Promise<void> {
    this.abort();
  }

  abort(): void {
    this.aborted = true;
    for (const s of this.sockets) s.destroy();
    this.server.close();
  }
}

/** A worker's side (serve's murphy_nccl_* methods). */
export class LoopbackReceiver {
  private constructor(private readonly reader: Reader, readonly rank: number) {}

  static async connect(idHex: string, rank: number, timeoutMs: number): Promise<LoopbackReceiver> {
    const id = parseLoopbackId(idHex);
    if (id === undefined) {
      throw new Error("this server's murphy_nccl_* methods are a loopback fake and the id is not one of its ids (a real NCCL trainer?): use --weight-sync disk with murphy-native serve");
    }
    const s = createConnection({ host: '127.0.0.1', port: id.port });
    s.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => { s.destroy(); reject(new Error(`could not reach the trainer at 127.0.0.1:${id.port} within ${timeoutMs} ms`)); }, timeoutMs);
      s.once('connect', () => { clearTimeout(t); resolve(); });
      s.once('error', (e) => { clearTimeout(t); reject(e); });
    });
    const r = new Reader(s, 'the trainer');
    s.write(`${JSON.stringify({ token: id.token, rank })}\n`);
    return new LoopbackReceiver(r, rank);
  }

  /** The next broadcast: exactly `bytes` bytes, acknowledged. */
  async recv(bytes: number, timeoutMs: number): Promise<Uint8Array> {
    const deadline = Date.now() + timeoutMs;
    const head = await this.reader.read(8, deadline, 'weight-sync receive');
    const n = Number(head.readBigUInt64LE());
    if (n !== bytes) throw new Error(`the trainer broadcast ${n} bytes, the plan says ${bytes}: the two sides disagree on the bucket order`);
    const data = await this.reader.read(n, deadline, 'weight-sync receive');
    this.reader.socket.write(Buffer.from([ACK]));
    return new Uint8Array(data.buffer, data.byteOffset, data.length);
  }

  close(): void {
    this.reader.socket.destroy();
  }
}
