// The safetensors format (F32 tensors), used by every TypeScript reader and writer of tensor
// files in lib: master weights, optimizer moments and the KL reference of a checkpoint.
// Layout: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the tensor bytes (offsets relative to the end of the header).

export function encodeSafetensorsF32(tensors: Record<string, { shape: number[]; data: Float32Array }>, metadata: Record<string, string> = {}): Buffer {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  const names = Object.keys(tensors).sort();
  for (const n of names) {
    const t = tensors[n]!;
    header[n] = { dtype: 'F32', shape: t.shape, data_offsets: [off, off + t.data.byteLength] };
    off += t.data.byteLength;
  }
  let hjson = JSON.stringify(header);
  while ((8 + Buffer.byteLength(hjson)) % 8 !== 0) hjson += ' ';
  const hbuf = Buffer.from(hjson, 'utf8');
  const out = Buffer.alloc(8 + hbuf.length + off);
  out.writeBigUInt64LE(BigInt(hbuf.length), 0);
  hbuf.copy(out, 8);
  let p = 8 + hbuf.length;
  for (const n of names) {
    const d = tensors[n]!.data;
    Buffer.from(d.buffer, d.byteOffset, d.byteLength).copy(out, p);
    p += d.byteLength;
  }
  return out;
}

export function decodeSafetensorsF32(buf: Buffer): { tensors: Record<string, { shape: number[]; data: Float32Array }>; metadata: Record<string, string> } {
  const hlen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const base = 8 + hlen;
  const tensors: Record<string, { shape: number[]; data: Float32Array }> = {};
  let metadata: Record<string, string> = {};
  for (const [n, h] of Object.entries(header)) {
    if (n === '__metadata__') {
      metadata = h as unknown as Record<string, string>;
      continue;
    }
    if (h.dtype !== 'F32') throw new Error(`safetensors: tensor ${n} has dtype ${h.dtype}, expected F32`);
    const [a, b] = h.data_offsets;
    const copy = new Float32Array((b - a) / 4);
    Buffer.from(copy.buffer).set(buf.subarray(base + a, base + b));
    tensors[n] = { shape: h.shape, data: copy };
  }
  return { tensors, metadata };
}
