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

export const CUBLASLT_SONAMES = ['libcublasLt.so.13', 'libcublasLt.so.12'] as const;
export const WHEEL_LIB_DIRS = ['nvidia/cu13/lib', 'nvidia/cu12/lib', 'nvidia/cublas/lib'] as const;

export interface CublasLtCandidate {
  /** A file path, or a bare soname handed to the dynamic loader. */
  path: string;
  /** Where it came from: 'MURPHY_CUBLASLT', 'CUDA_HOME', 'CUDA_PATH', 'default CUDA', 'python wheel', 'dynamic loader'. */
  origin: string;
}

export interface CandidateInputs {
  env: Record<string, string | undefined>;
  /** site-packages folders of the Python interpreters found (see pythonSitePackages). */
  sitePackages: string[];
  /** Whether a file exists (injected so that tests need no real files). */
  exists: (path: string) => boolean;
  isDirectory: (path: string) => boolean;
}

export interface CandidateList {
  candidates: CublasLtCandidate[];
  /** Every place looked at, in order, for the "not found" message. */
  searched: string[];
}

/** The ordered candidates (pure: everything it reads comes in through `inp`). */
export function cublasLtCandidates(inp: CandidateInputs): CandidateList {
  const forced = inp.env.MURPHY_CUBLASLT;
  if (forced !== undefined && forced !== '') {
    if (inp.isDirectory(forced)) {
      return {
        candidates: CUBLASLT_SONAMES.map((s) => ({ path: join(forced, s), origin: 'MURPHY_CUBLASLT' })),
        searched: [`MURPHY_CUBLASLT=${forced}`],
      };
    }
    return { candidates: [{ path: forced, origin: 'MURPHY_CUBLASLT' }], searched: [`MURPHY_CUBLASLT=${forced}`] };
  }
  const candidates: CublasLtCandidate[] = [];
  const searched: string[] = [];
  const seen = new Set<string>();
  const addDir = (dir: string, origin: string): void => {
    if (seen.has(dir)) return;
    seen.add(dir);
    searched.push(`${dir} (${origin})`);
    for (const s of CUBLASLT_SONAMES) {
      const p = join(dir, s);
      if (inp.exists(p)) candidates.push({ path: p, origin });
    }
  };
  const roots: [string, string][] = [];
  if (inp.env.CUDA_HOME) roots.push([inp.env.CUDA_HOME, 'CUDA_HOME']);
  if (inp.env.CUDA_PATH) roots.push([inp.env.CUDA_PATH, 'CUDA_PATH']);
  if (roots.length === 0) roots.push(['/usr/local/cuda', 'default CUDA']);
  for (const [root, origin] of roots) addDir(join(root, 'lib64'), origin);
  for (const sp of inp.sitePackages) {
    for (const d of WHEEL_LIB_DIRS) {
      const dir = join(sp, d);
      for (const so of CUBLASLT_SONAMES) {
        const p = join(dir, so);
        if (inp.exists(p) && !candidates.some((c) => c.path === p)) candidates.push({ path: p, origin: 'python wheel' });
      }
    }
  }
  if (inp.sitePackages.length > 0) searched.push(`nvidia/{cu13,cu12,cublas}/lib under ${inp.sitePackages.join(', ')} (python wheels)`);
  else searched.push('no python3 on PATH to ask for site-packages (python wheels)');
  searched.push('the dynamic loader');
  for (const s of CUBLASLT_SONAMES) candidates.push({ path: s, origin: 'dynamic loader' });
  return { candidates, searched };
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

export interface CublasLtAttempt {
  path: string;
  origin: string;
  /** Empty for the one that loaded. */
  error: string;
}

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
  const forced = list.candidates.length > 0 && list.candidates.every((c) => c.origin === 'MURPHY_CUBLASLT');
  let reason: string;
  if (forced) {
    const why = r.attempts.map((a) => `${a.path}: ${a.error}`).join('; ');
    reason = `cuBLASLt not found: MURPHY_CUBLASLT is set and ${why}; point it at a libcublasLt.so.13 or .so.12 file (or unset it to search the usual places)`;
  } else {
    const failedFiles = r.attempts.filter((a) => a.origin !== 'dynamic loader').map((a) => `${a.path} (${a.origin}): ${a.error}`);
    const loaderErr = r.attempts.filter((a) => a.origin === 'dynamic loader').map((a) => a.error.replace(/^dlopen failed: /, ''));
    reason = `cuBLASLt not found: looked in ${list.searched.join(', ')}` +
      (failedFiles.length ? `; unusable: ${failedFiles.join('; ')}` : '') +
      (loaderErr.length ? ` (${loaderErr.join('; ')})` : '') + `; ${FIX}`;
  }
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
