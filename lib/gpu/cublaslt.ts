// Where murphy-native looks for cuBLASLt, and what it found. The GPU engine calls cuBLASLt
// through dlopen (native/gpu/cublaslt.cc), so one binary runs on machines with and without
// it. The search order (docs/gpu.md):
//   1. MURPHY_CUBLASLT: a library file, or a folder holding libcublasLt.so.13/.12. When set,
//      nothing else is tried (a wrong setting is reported, never silently bypassed).
//   2. $CUDA_HOME/lib64, $CUDA_PATH/lib64 (/usr/local/cuda/lib64 when neither is set).
//   3. The nvidia-cublas Python wheels of every python3 on PATH: <site-packages>/nvidia/
//      cu13/lib, nvidia/cu12/lib and nvidia/cublas/lib (the CUDA 12 wheel's folder).
//   4. The dynamic loader (LD_LIBRARY_PATH, ld.so.cache): the bare sonames.
// In each place libcublasLt.so.13 is tried before libcublasLt.so.12.
import { cublasLtLoader, type CublasLtLoader } from '../native.js';
import { libraryCandidates, libraryReport, machineCandidates, type CandidateInputs, type CandidateList, type LibraryCandidate, type LibraryNaming, type LibraryReport, type LibrarySpec, type LoadAttempt } from './library-search.js';

export { pythonSitePackages } from './library-search.js';

export const CUBLASLT_SONAMES = ['libcublasLt.so.13', 'libcublasLt.so.12'] as const;
export const WHEEL_LIB_DIRS = ['nvidia/cu13/lib', 'nvidia/cu12/lib', 'nvidia/cublas/lib'] as const;

export type CublasLtCandidate = LibraryCandidate;
export type { CandidateInputs, CandidateList };

/** cuBLASLt's place in the shared search order (lib/gpu/library-search.ts). */
export const CUBLASLT_SPEC: LibrarySpec = {
  envVar: 'MURPHY_CUBLASLT', sonames: CUBLASLT_SONAMES, wheelDirs: WHEEL_LIB_DIRS, wheelLabel: 'nvidia/{cu13,cu12,cublas}/lib',
};

/** The ordered candidates (pure: everything it reads comes in through `inp`). */
export function cublasLtCandidates(inp: CandidateInputs): CandidateList {
  return libraryCandidates(CUBLASLT_SPEC, inp);
}

export type CublasLtAttempt = LoadAttempt;

/** What the search found (found, path, origin, version, versionText, reason, searched, attempts). */
export type CublasLtReport = LibraryReport;

const NAMING: LibraryNaming = {
  name: 'cuBLASLt',
  fix: 'install the nvidia-cublas Python wheel (pip install nvidia-cublas, or nvidia-cublas-cu12) or set MURPHY_CUBLASLT to the libcublasLt.so.13 or .so.12 file',
  forcedFix: 'point it at a libcublasLt.so.13 or .so.12 file',
};

/** Opens the candidates in order through the addon; install keeps the first that works for the GPU engine. */
export function loadCublasLt(list: CandidateList, opts: { install?: boolean; loader?: CublasLtLoader } = {}): CublasLtReport {
  const loader = opts.loader ?? cublasLtLoader();
  const load = typeof loader === 'function' ? loader(list.candidates, opts.install ?? false) : undefined;
  return libraryReport(CUBLASLT_SPEC, NAMING, list, load);
}

let cached: CublasLtReport | undefined;

/**
 * Searches this machine (the environment and python3s of this process), once per process.
 * install: the library found becomes the process's cuBLASLt for the GPU code (kept open).
 */
export function findCublasLt(opts: { refresh?: boolean; install?: boolean } = {}): CublasLtReport {
  if (cached && !opts.refresh && !opts.install) return cached;
  cached = loadCublasLt(machineCandidates(CUBLASLT_SPEC), { install: opts.install });
  return cached;
}
