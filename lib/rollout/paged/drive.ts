// The executor loop: plans a step, has it executed, applies the sampled tokens, until every
// submitted request is done. The executor is the device engine, or the reference model.
import type { Scheduler, StepPlan } from './scheduler.js';

export interface StepExecutor {
  /** The tokens sampled for each of plan.seqs (plan.seqs[i].sampleIndices.length each). */
  execute(plan: StepPlan): readonly (readonly number[])[] | Promise<readonly (readonly number[])[]>;
}

/** Runs steps until the scheduler has no work; `afterStep` sees each completed step (tests audit there). */
export async function drain(s: Scheduler, exec: StepExecutor, afterStep?: (plan: StepPlan, finished: number[]) => void): Promise<void> {
  while (s.hasWork) {
    const plan = s.schedule();
    const sampled = await exec.execute(plan);
    const finished = s.complete(plan, sampled);
    afterStep?.(plan, finished);
  }
}
