// The executors as lib/murphy's Executor (compile-time proof that they satisfy it exactly).
import type { Problem } from '../data/types.js';
import type { Executor } from '../murphy/types.js';
import type { PythonExecutor } from './executor.js';
import type { SandboxFusionExecutor } from './remote.js';

/** Returns the executor typed as lib/murphy's Executor<Problem> (no wrapping: it already is one). */
export function asMurphyExecutor(ex: PythonExecutor | SandboxFusionExecutor): Executor<Problem> {
  return ex;
}
