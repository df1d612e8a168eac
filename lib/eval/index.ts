// Iter-k pass@1 evaluation (docs/evaluation.md).
export { evaluateIterK, firstPass, formatIterKTable, type IterKOptions, type IterKPoint, type IterKProblem, type IterKResult, type EvalResultsFile } from './iterk.js';
