// Argument checks of the device engine's paged generation step (ModelEngine.pagedStep /
// pagedLogits): the type and length of every array of a PlanArrays and of the per-sample-row
// sampling options, in one line naming the array and the fix. The values (slots, block ids,
// positions against seqLens, option ranges) are checked natively (native/gpu/engine/paged_inputs.cc)
// against the pools, which only the engine knows.
import { MurphyNativeError } from './errors.js';
import type { RawPagedSampling, RawPlanArrays } from './raw.js';

/** Per sample row (planArrays' sampleRows / sampleIndices): the request's sampler options, its seed and the draw's step. */
export interface PagedSampling {
  /** 0 = greedy. */
  temperature: Float32Array;
  topP: Float32Array;
  /** 0 = off. */
  topK: Int32Array;
  /** 0 = off. */
  minP: Float32Array;
  /** The request's seed (32 bits): sample row r draws from the stream (seed[r], sampleIndices[r]) (murphy/sample_rng.h). */
  seed: Uint32Array;
  /**
   * Which draw of the stream: the index of the token in its completion (0 for the first), as
   * the CPU engine's generate() numbers its draws, so a seeded request draws the same tokens on
   * both engines (up to the logits' rounding).
   */
  step: Int32Array;
}

type Ctor = Int32ArrayConstructor | Float32ArrayConstructor | Uint32ArrayConstructor;

function arr(op: string, o: object, name: string, type: Ctor, len?: number, lenOf?: string): void {
  const v = (o as Record<string, unknown>)[name];
  if (!(v instanceof type)) throw new MurphyNativeError(`${op}: '${name}' must be an ${type.name}, got ${v === undefined ? 'undefined' : Object.prototype.toString.call(v).slice(8, -1)}`, 'EINVAL');
  if (len !== undefined && v.length !== len) {
    throw new MurphyNativeError(`${op}: '${name}' has ${v.length} entries but ${lenOf ?? 'it'} needs ${len}: the lengths disagree (build the arrays with planArrays())`, 'EINVAL');
  }
}

/** Checks a PlanArrays' shapes; returns it as the binding reads it. */
export function checkPlanArrays(op: string, a: RawPlanArrays): RawPlanArrays {
  if (a === null || typeof a !== 'object') throw new MurphyNativeError(`${op}: pass the step's PlanArrays (lib/rollout/paged planArrays())`, 'EINVAL');
  arr(op, a, 'inputIds', Int32Array);
  const T = a.inputIds.length;
  if (T < 1) throw new MurphyNativeError(`${op}: 'inputIds' is empty: a step computes at least one token`, 'EINVAL');
  arr(op, a, 'positions', Int32Array, T, `inputIds (${T} tokens)`);
  arr(op, a, 'slotMapping', Int32Array, T, `inputIds (${T} tokens)`);
  arr(op, a, 'seqLens', Int32Array);
  const S = a.seqLens.length;
  arr(op, a, 'queryStartLoc', Int32Array, S + 1, `seqLens (${S} sequences) + 1`);
  if (!Number.isSafeInteger(a.maxBlocks) || a.maxBlocks < 1) throw new MurphyNativeError(`${op}: 'maxBlocks' must be an integer >= 1, got ${String(a.maxBlocks)}`, 'EINVAL');
  arr(op, a, 'blockTables', Int32Array, S * a.maxBlocks, `seqLens x maxBlocks (${S} x ${a.maxBlocks})`);
  arr(op, a, 'logitsIndices', Int32Array);
  arr(op, a, 'sampleRows', Int32Array);
  arr(op, a, 'sampleIndices', Int32Array, a.sampleRows.length, `sampleRows (${a.sampleRows.length} samples)`);
  arr(op, a, 'copies', Int32Array);
  if (a.copies.length % 2 !== 0) throw new MurphyNativeError(`${op}: 'copies' has ${a.copies.length} entries: it holds (src, dst) pairs`, 'EINVAL');
  return a;
}

/** Checks the sampling arrays against R = sampleRows.length; returns them as the binding reads them. */
export function checkPagedSampling(op: string, s: PagedSampling, R: number): RawPagedSampling {
  if (s === null || typeof s !== 'object') throw new MurphyNativeError(`${op}: pass the sampling options { temperature, topP, topK, minP, seed, step }, one entry per sample row`, 'EINVAL');
  const of = `sampleRows (${R} samples)`;
  arr(op, s, 'temperature', Float32Array, R, of);
  arr(op, s, 'topP', Float32Array, R, of);
  arr(op, s, 'topK', Int32Array, R, of);
  arr(op, s, 'minP', Float32Array, R, of);
  arr(op, s, 'seed', Uint32Array, R, of);
  arr(op, s, 'step', Int32Array, R, of);
  return { ...s, seed: new Int32Array(s.seed.buffer, s.seed.byteOffset, s.seed.length) };
}
