// Problem sources: HumanEval, MBPP (full and sanitized), KodCode, LiveCodeBench, generic JSONL.
export type { DatasetSource, IOCase, Problem, ProblemTests, TestKind } from './types.js';
export { readText, parseJsonl, parseRecords } from './io.js';
export { humanEvalFromRecords, loadHumanEval } from './humaneval.js';
export { mbppFromRecords, loadMbpp, mbppSplit, mbppEntryPoint, type MbppSplit, type MbppOptions } from './mbpp.js';
export { kodCodeFromRecords, loadKodCode } from './kodcode.js';
export { liveCodeBenchFromRecords, loadLiveCodeBench, loadDecodedTests, type LiveCodeBenchOptions } from './livecodebench.js';
export { jsonlFromRecords, loadJsonlProblems } from './jsonl.js';
export { humanEvalInstruction, mbppPrompt, kodCodePrompt, liveCodeBenchPrompt, problemPrompt } from './prompts.js';
export { detectFormat, loadDataset, sampleDataDir, loadSample, SAMPLE_FILES, DATASET_FORMATS, type DatasetFormat, type LoadOptions } from './load.js';
export { loadTrainingProblems, hasTests, selectSplit, type SplitChoice } from './check.js';
