// Shared set-up of the paged-KV tests: a pool, a scheduler and the reference model.
import { KvPool, ReferenceModel, Scheduler, type SchedulerOptions } from '../../../lib/rollout/paged/index.js';

export const VOCAB = 40;

export function setup(blocks: number, blockSize: number, o: SchedulerOptions): { pool: KvPool; s: Scheduler; model: ReferenceModel } {
  const pool = new KvPool({ blocks, blockSize });
  return { pool, s: new Scheduler(pool, o), model: new ReferenceModel(blockSize, { vocab: VOCAB, verify: true }) };
}

/** Runs one planned step through the model; returns the plan. */
export function step(s: Scheduler, model: ReferenceModel) {
  const plan = s.schedule();
  s.complete(plan, model.execute(plan));
  s.audit();
  return plan;
}

export const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
