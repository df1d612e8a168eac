// Random grpoLoss inputs, shared by the CPU kernel test and its device twin.
import type { GrpoLossInput } from '../../lib/native.js';
import type { Rng } from './random.js';

export interface GrpoCase {
  input: GrpoLossInput;
  /** Sequence boundaries: sequence s is tokens [offsets[s], offsets[s + 1]). */
  offsets: number[];
}

export interface GrpoCaseOptions {
  /** Give refLogp (the KL term). */
  ref?: boolean;
  /** Give a mask, 1 with probability 0.8 per token. */
  mask?: boolean;
  /** Scale of a sequence's advantage (a standard normal draw times this; default 1). */
  advScale?: number;
  /** Spread of logp around oldLogp (default 0.3). */
  drift?: number;
  /** Probability that a sequence is empty (default 0). */
  emptyFrac?: number;
}

/** nSeqs sequences of 0..maxLen tokens each: oldLogp = -2|N|, logp = oldLogp + drift N,
 * refLogp = logp + 0.2 N, one advantage per sequence. */
export function grpoCase(rng: Rng, nSeqs: number, maxLen: number, o: GrpoCaseOptions = {}): GrpoCase {
  const offsets = [0];
  for (let s = 0; s < nSeqs; s++) offsets.push(offsets[s] + (rng.next() < (o.emptyFrac ?? 0) ? 0 : rng.int(maxLen + 1)));
  const T = offsets[nSeqs];
  const logp = new Float32Array(T), oldLogp = new Float32Array(T), adv = new Float32Array(T), ref = new Float32Array(T);
  const mask = new Uint8Array(T);
  for (let s = 0; s < nSeqs; s++) {
    const a = rng.normal() * (o.advScale ?? 1);
    for (let t = offsets[s]; t < offsets[s + 1]; t++) {
      oldLogp[t] = -Math.abs(rng.normal()) * 2;
      logp[t] = oldLogp[t] + rng.normal() * (o.drift ?? 0.3);
      ref[t] = logp[t] + rng.normal() * 0.2;
      adv[t] = a;
      mask[t] = rng.next() < 0.8 ? 1 : 0;
    }
  }
  const input: GrpoLossInput = {
    logp, oldLogp, advantages: adv, seqOffsets: BigInt64Array.from(offsets, BigInt),
    ...(o.ref ? { refLogp: ref } : {}), ...(o.mask ? { mask } : {}),
  };
  return { input, offsets };
}
