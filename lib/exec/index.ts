// Sandboxed execution of model-written Python: harnesses, isolation, feedback (docs/executor.md).
export * from './types.js';
export { defaultUidBase, PythonExecutor, toResult, unprotectedLine, type PythonExecutorOptions } from './executor.js';
export { formatFeedback, describeFailure, type FeedbackInput } from './feedback.js';
export { buildRequest, humanEvalProgram, type HarnessRequest } from './program.js';
export { describeIsolation, probePython, checkBubblewrap, harnessDir, sweepStaleWorkDirs, type IsolationReport, type PythonInfo } from './sandbox.js';
export { SandboxFusionExecutor, remoteScript, type SandboxFusionOptions, type RunCodeRequest, type RunCodeResponse } from './remote.js';
export { createExecutor, EXECUTOR_KINDS, type CreateExecutorOptions, type ExecutorKind, type RunningExecutor } from './create.js';
