// Shared by the serve tests: an engine wrapper that records every call and can hold calls
// at a gate, so tests wait on events instead of time.
import type { EngineInfo, EngineRequest, EngineSample, PolicyWeights, RolloutEngine } from '../../lib/rollout/index.js';

export interface SpyCall {
  batch: EngineRequest[];
  result: Promise<EngineSample[][]>;
}

/** A deferred: a promise and its resolve. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

export class SpyEngine implements RolloutEngine {
  readonly calls: SpyCall[] = [];
  /** When set, the next calls wait for it before generating. */
  gate: Promise<void> | undefined;
  private waiters: ((c: SpyCall) => void)[] = [];

  constructor(readonly inner: RolloutEngine) {}

  info(): EngineInfo { return this.inner.info(); }
  canBatch(a: EngineRequest, b: EngineRequest): boolean { return this.inner.canBatch(a, b); }
  loadWeights(dir: string): Promise<void> { return this.inner.loadWeights(dir); }
  setWeights(p: PolicyWeights): Promise<void> | void { return this.inner.setWeights?.(p); }

  generate(batch: EngineRequest[]): Promise<EngineSample[][]> {
    const gate = this.gate;
    const result = (gate ?? Promise.resolve()).then(() => this.inner.generate(batch));
    const call = { batch, result };
    this.calls.push(call);
    for (const w of this.waiters.splice(0)) w(call);
    return result;
  }

  /** Resolves with the next call made after now. */
  nextCall(): Promise<SpyCall> {
    return new Promise((ok) => this.waiters.push(ok));
  }
}
