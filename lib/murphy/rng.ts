// Small deterministic helpers: a 32-bit mixer and a seeded PRNG (mulberry32).

/** Mixes 32-bit integers into one well-spread unsigned 32-bit value. */
export function mix32(...xs: number[]): number {
  let h = 0x9e3779b9;
  for (const x of xs) {
    h ^= Math.imul((x | 0) ^ (h >>> 15), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** Hash of an integer array (FNV-1a over 32-bit words, then mixed). */
export function hashIds(ids: readonly number[], seed = 0): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < ids.length; i++) h = Math.imul(h ^ (ids[i]! | 0), 0x01000193);
  return mix32(h, ids.length);
}

/** Seeded PRNG returning floats in [0, 1) (mulberry32). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
