// The executor loop: plans a step, has it executed, applies the sampled tokens, until every
// submitted request is done. The executor is the device engine, or the reference model.
import type { Scheduler, StepOutput, StepPlan } from './scheduler.js';

export interface StepExecutor {
  /** Runs the step: copies, KV writes, attention, sampling of plan.seqs[i].sampleIndices. */
  execute(plan: StepPlan): StepOutput | Promise<StepOutput>;
}

/** Runs steps until the scheduler has no work; `afterStep` sees each completed step (tests audit there). */
export async function drain(s: Scheduler, exec: StepExecutor, afterStep?: (plan: StepPlan, finished: number[]) => void): Promise<void> {
  while (s.hasWork) {
    const plan = s.schedule();
    const finished = s.complete(plan, await exec.execute(plan));
    afterStep?.(plan, finished);
  }
}
