// The executor a command asked for: the local sandboxed pool or a SandboxFusion service.
import type { Problem } from '../data/types.js';
import type { Executor } from '../murphy/types.js';
import { PythonExecutor, type PythonExecutorOptions } from './executor.js';
import { SandboxFusionExecutor } from './remote.js';
import type { ExecutionResult, ExecutorKind } from './types.js';

export { EXECUTOR_KINDS, type ExecutorKind } from './types.js';

/** What train and eval need of an executor (both classes have it; lib/murphy's Executor). */
export interface RunningExecutor extends Executor<Problem> {
  execute(problem: Problem, code: string): Promise<ExecutionResult>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface CreateExecutorOptions extends PythonExecutorOptions {
  kind?: ExecutorKind;
  /** SandboxFusion base URL (kind 'sandboxfusion'). */
  sandboxUrl?: string | null;
}

/**
 * `local` (default): PythonExecutor, sandboxed on this machine. `sandboxfusion`: each program
 * goes to a SandboxFusion service's /run_code (the same harness runs there).
 */
export function createExecutor(o: CreateExecutorOptions = {}): RunningExecutor {
  if ((o.kind ?? 'local') === 'sandboxfusion') {
    if (!o.sandboxUrl) throw new Error('--executor sandboxfusion needs --sandbox-url URL (the SandboxFusion service, e.g. http://127.0.0.1:8080)');
    return new SandboxFusionExecutor({ endpoint: o.sandboxUrl, limits: o.limits, feedback: o.feedback, binaryReward: o.binaryReward, continueAfterTimeout: o.continueAfterTimeout, concurrency: o.workers });
  }
  return new PythonExecutor(o);
}
