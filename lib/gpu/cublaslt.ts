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
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { cublasLtLoader, type CublasLtLoader } from '../native.js';
import { libraryCandidates, notFoundReason, type CandidateInputs, type CandidateList, type LibraryCandidate, type LibrarySpec, type LoadAttempt } from './library-search.js';

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

const SITE_SCRIPT =
  'import json, site, sys\n' +
  'p = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []\n' +
  'p.append(site.getusersitepackages())\n' +
  'p += [x for x in sys.path if x.endswith("-packages")]\n' +
  'print(json.dumps(p))\n';

/**
 * site-packages folders of every distinct python3 on PATH (each asked once, 10 s at most).
 * Interpreters that fail are skipped: finding no wheel is not an error here.
 */
export function pythonSitePackages(pathVar: string | undefined = process.env.PATH): string[] {
  const out: string[] = [];
  const seenExe = new Set<string>();
  for (const dir of (pathVar ?? '').split(delimiter)) {
    if (!dir) continue;
    const exe = join(dir, 'python3');
    let real: string;
    try {
      if (!statSync(exe).isFile()) continue;
      real = realpathSync(exe);
    } catch {
      continue;
    }
    // pyenv-style shims are scripts that pick an interpreter: key them by their own path.
    if (seenExe.has(real)) continue;
    seenExe.add(real);
    try {
      const text = execFileSync(exe, ['-c', SITE_SCRIPT], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] });
      for (const p of JSON.parse(text.trim().split('\n').pop() ?? '[]') as unknown[]) {
        if (typeof p === 'string' && !out.includes(p)) out.push(p);
      }
    } catch {
      // not a working interpreter
    }
  }
  return out;
}

export type CublasLtAttempt = LoadAttempt;

export interface CublasLtReport {
  found: boolean;
  /** The file that was opened (resolved by the loader). */
  path?: string;
  origin?: string;
  /** cublasLtGetVersion(): major * 10000 + minor * 100 + patch. */
  version?: number;
  /** e.g. "13.1.0". */
  versionText?: string;
  /** When not found: one line naming each place and why it failed, and the fix. */
  reason?: string;
  searched: string[];
  attempts: CublasLtAttempt[];
}

const FIX = 'install the nvidia-cublas Python wheel (pip install nvidia-cublas, or nvidia-cublas-cu12) or set MURPHY_CUBLASLT to the libcublasLt.so.13 or .so.12 file';

/** Opens the candidates in order through the addon; install keeps the first that works for the GPU engine. */
export function loadCublasLt(list: CandidateList, opts: { install?: boolean; loader?: CublasLtLoader } = {}): CublasLtReport {
  const loader = opts.loader ?? cublasLtLoader();
  if (typeof loader !== 'function') {
    return {
      found: false, searched: list.searched, attempts: [],
      reason: 'cuBLASLt not checked: the loaded native binary has no cuBLASLt loader (it predates it); rebuild it (npm run build:native or build:cuda)',
    };
  }
  const r = loader(list.candidates, opts.install ?? false);
  if (r.ok) {
    return { found: true, path: r.path, origin: r.origin, version: r.version, versionText: r.versionText, searched: list.searched, attempts: r.attempts };
  }
  const reason = notFoundReason('cuBLASLt', CUBLASLT_SPEC, list, r.attempts, FIX, 'point it at a libcublasLt.so.13 or .so.12 file');
  return { found: false, reason, searched: list.searched, attempts: r.attempts };
}

let cached: CublasLtReport | undefined;

/**
 * Searches this machine (the environment and python3s of this process), once per process.
 * install: the library found becomes the process's cuBLASLt for the GPU code (kept open).
 */
export function findCublasLt(opts: { refresh?: boolean; install?: boolean } = {}): CublasLtReport {
  if (cached && !opts.refresh && !opts.install) return cached;
  const list = cublasLtCandidates({
    env: process.env,
    sitePackages: process.env.MURPHY_CUBLASLT ? [] : pythonSitePackages(),
    exists: (p) => existsSync(p),
    isDirectory: (p) => {
      try {
        return statSync(p).isDirectory();
      } catch {
        return false;
      }
    },
  });
  cached = loadCublasLt(list, { install: opts.install });
  return cached;
}
