// Length-prefixed frames over a TCP socket: a 16-byte header (kind, sequence number, payload
// length as two uint32 halves, little endian) then the payload. A FrameReader queues the frames
// that arrive and hands them out in order; a closed or failed socket fails every waiter.
import type { Socket } from 'node:net';

export const HEADER_BYTES = 16;

export interface Frame {
  kind: number;
  seq: number;
  payload: Buffer;
}

/** Writes one frame; resolves when the socket has taken the bytes. */
export function writeFrame(sock: Socket, kind: number, seq: number, payload: Uint8Array): Promise<void> {
  const h = Buffer.alloc(HEADER_BYTES);
  h.writeUInt32LE(kind, 0);
  h.writeUInt32LE(seq >>> 0, 4);
  h.writeUInt32LE(payload.length % 0x100000000, 8);
  h.writeUInt32LE(Math.floor(payload.length / 0x100000000), 12);
  // One write for small payloads; never a zero-length write (its callback may not come).
  return new Promise((resolve, reject) => {
    const done = (err?: Error | null): void => (err ? reject(err) : resolve());
    if (payload.length <= 65536) sock.write(Buffer.concat([h, payload]), done);
    else {
      sock.write(h);
      sock.write(payload, done);
    }
  });
}

export class FrameReader {
  private chunks: Buffer[] = [];
  private have = 0;
  private readonly frames: Frame[] = [];
  private waiters: { resolve: (f: Frame) => void; reject: (e: Error) => void }[] = [];
  private failure: Error | null = null;

  /** `describe` names the peer in errors ("rank 2"). */
  constructor(readonly sock: Socket, public describe: string) {
    sock.on('data', (d: Buffer) => this.push(d));
    sock.on('error', (e: NodeJS.ErrnoException) => {
      const gone = e.code === 'EPIPE' || e.code === 'ECONNRESET';
      this.fail(new Error(gone ? `${this.describe} closed its connection (${e.code}; did it exit?)` : `${this.describe}: connection error (${e.code ?? e.message})`));
    });
    sock.on('close', () => this.fail(new Error(`${this.describe} closed its connection (did it exit?)`)));
  }

  private push(d: Buffer): void {
    this.chunks.push(d);
    this.have += d.length;
    for (;;) {
      if (this.have < HEADER_BYTES) return;
      const head = this.peek(HEADER_BYTES);
      const len = head.readUInt32LE(8) + head.readUInt32LE(12) * 0x100000000;
      if (this.have < HEADER_BYTES + len) return;
      const all = this.take(HEADER_BYTES + len);
      const f: Frame = { kind: all.readUInt32LE(0), seq: all.readUInt32LE(4), payload: all.subarray(HEADER_BYTES) };
      const w = this.waiters.shift();
      if (w) w.resolve(f);
      else this.frames.push(f);
    }
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!;
    const b = Buffer.concat(this.chunks);
    this.chunks = [b];
    return b;
  }

  private take(n: number): Buffer {
    const b = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = b.length > n ? [b.subarray(n)] : [];
    this.have -= n;
    return b.subarray(0, n);
  }

  /** Fails every current and later read with `e` (the first failure wins). */
  fail(e: Error): void {
    if (this.failure) return;
    this.failure = e;
    for (const w of this.waiters) w.reject(e);
    this.waiters = [];
  }

  /** The next frame. */
  next(): Promise<Frame> {
    const f = this.frames.shift();
    if (f) return Promise.resolve(f);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
}

/** Rejects with `message` after ms unless p settles first; the timer never keeps the process alive. */
export function withDeadline<T>(p: Promise<T>, ms: number, message: () => string): Promise<T> {
  if (!Number.isFinite(ms)) return p;
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message())), ms);
    timer.unref?.();
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

