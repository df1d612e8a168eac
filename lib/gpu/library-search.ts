// Where murphy-native looks for a run-time-loaded NVIDIA library (cuBLASLt, NCCL): one
// search order for all of them (docs/gpu.md, docs/distributed.md):
//   1. the library's own variable (MURPHY_CUBLASLT, MURPHY_NCCL): a file, or a folder holding
//      the sonames. When set, nothing else is tried (a wrong setting is reported, never bypassed).
//   2. $CUDA_HOME/lib64, $CUDA_PATH/lib64 (/usr/local/cuda/lib64 when neither is set).
//   3. The library's Python wheels under every site-packages folder (nvidia/<x>/lib).
//   4. The dynamic loader (LD_LIBRARY_PATH, ld.so.cache): the bare sonames.
// In each place the sonames are tried in the order given.
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { CublasLtLoadResult as RawLibraryLoad } from '../native.js';

export interface LibrarySpec {
  /** The variable that forces a file or folder, e.g. 'MURPHY_NCCL'. */
  envVar: string;
  /** Tried in this order in every folder, e.g. ['libnccl.so.2']. */
  sonames: readonly string[];
  /** Folders under site-packages, e.g. ['nvidia/nccl/lib']. */
  wheelDirs: readonly string[];
  /** How the wheel folders read in the "looked in" list, e.g. 'nvidia/{cu13,cu12,nccl}/lib'. */
  wheelLabel: string;
}

export interface LibraryCandidate {
  /** A file path, or a bare soname handed to the dynamic loader. */
  path: string;
  /** Where it came from: the variable's name, 'CUDA_HOME', 'CUDA_PATH', 'default CUDA', 'python wheel', 'dynamic loader'. */
  origin: string;
}

export interface CandidateInputs {
  env: Record<string, string | undefined>;
  /** site-packages folders of the Python interpreters found (pythonSitePackages). */
  sitePackages: string[];
  /** Whether a file exists (injected so that tests need no real files). */
  exists: (path: string) => boolean;
  isDirectory: (path: string) => boolean;
}

export interface CandidateList {
  candidates: LibraryCandidate[];
  /** Every place looked at, in order, for the "not found" message. */
  searched: string[];
}

/** The ordered candidates (pure: everything it reads comes in through `inp`). */
export function libraryCandidates(spec: LibrarySpec, inp: CandidateInputs): CandidateList {
  const forced = inp.env[spec.envVar];
  if (forced !== undefined && forced !== '') {
    const searched = [`${spec.envVar}=${forced}`];
    if (inp.isDirectory(forced)) return { candidates: spec.sonames.map((s) => ({ path: join(forced, s), origin: spec.envVar })), searched };
    return { candidates: [{ path: forced, origin: spec.envVar }], searched };
  }
  const candidates: LibraryCandidate[] = [];
  const searched: string[] = [];
  const seen = new Set<string>();
  const roots: [string, string][] = [];
  if (inp.env.CUDA_HOME) roots.push([inp.env.CUDA_HOME, 'CUDA_HOME']);
  if (inp.env.CUDA_PATH) roots.push([inp.env.CUDA_PATH, 'CUDA_PATH']);
  if (roots.length === 0) roots.push(['/usr/local/cuda', 'default CUDA']);
  for (const [root, origin] of roots) {
    const dir = join(root, 'lib64');
    if (seen.has(dir)) continue;
    seen.add(dir);
    searched.push(`${dir} (${origin})`);
    for (const s of spec.sonames) {
      const p = join(dir, s);
      if (inp.exists(p)) candidates.push({ path: p, origin });
    }
  }
  for (const sp of inp.sitePackages) {
    for (const d of spec.wheelDirs) {
      for (const so of spec.sonames) {
        const p = join(sp, d, so);
        if (inp.exists(p) && !candidates.some((c) => c.path === p)) candidates.push({ path: p, origin: 'python wheel' });
      }
    }
  }
  if (inp.sitePackages.length > 0) searched.push(`${spec.wheelLabel} under ${inp.sitePackages.join(', ')} (python wheels)`);
  else searched.push('no python3 on PATH to ask for site-packages (python wheels)');
  searched.push('the dynamic loader');
  for (const s of spec.sonames) candidates.push({ path: s, origin: 'dynamic loader' });
  return { candidates, searched };
}

export interface LoadAttempt {
  path: string;
  origin: string;
  /** Empty for the one that loaded. */
  error: string;
}

/**
 * The one-line "not found" reason from the loader's attempts: with the variable set, why each
 * of its files failed; else the places looked in, the files that were unusable, the dynamic
 * loader's reason, and the fix.
 */
export function notFoundReason(name: string, spec: LibrarySpec, list: CandidateList, attempts: LoadAttempt[], fix: string, forcedFix: string): string {
  const forced = list.candidates.length > 0 && list.candidates.every((c) => c.origin === spec.envVar);
  if (forced) {
    const why = attempts.map((a) => `${a.path}: ${a.error}`).join('; ');
    return `${name} not found: ${spec.envVar} is set and ${why}; ${forcedFix} (or unset it to search the usual places)`;
  }
  const failedFiles = attempts.filter((a) => a.origin !== 'dynamic loader').map((a) => `${a.path} (${a.origin}): ${a.error}`);
  const loaderErr = attempts.filter((a) => a.origin === 'dynamic loader').map((a) => a.error.replace(/^dlopen failed: /, ''));
  return `${name} not found: looked in ${list.searched.join(', ')}` +
    (failedFiles.length ? `; unusable: ${failedFiles.join('; ')}` : '') +
    (loaderErr.length ? ` (${loaderErr.join('; ')})` : '') + `; ${fix}`;
}

/** What a search for one library found, for doctor and the engines. */
export interface LibraryReport {
  found: boolean;
  /** The file that was opened (resolved by the loader). */
  path?: string;
  origin?: string;
  /** The library's version number: major * 10000 + minor * 100 + patch. */
  version?: number;
  /** e.g. "13.1.0". */
  versionText?: string;
  /** When not found: one line naming each place and why it failed, and the fix. */
  reason?: string;
  searched: string[];
  attempts: LoadAttempt[];
}

/** How a library's "not found" line reads: its name and the fixes (see notFoundReason). */
export interface LibraryNaming {
  /** e.g. 'NCCL'. */
  name: string;
  fix: string;
  /** The fix when the variable is set, e.g. 'point it at a libnccl.so.2 file'. */
  forcedFix: string;
}

/**
 * The report from the addon's loader result (cublasLtLoad and ncclLoad answer alike); `load` undefined: the loaded native binary has
 * no loader for this library (it predates it).
 */
export function libraryReport(spec: LibrarySpec, naming: LibraryNaming, list: CandidateList, load: RawLibraryLoad | undefined): LibraryReport {
  if (load === undefined) {
    return {
      found: false, searched: list.searched, attempts: [],
      reason: `${naming.name} not checked: the loaded native binary has no ${naming.name} loader (it predates it); rebuild it (npm run build:native or build:cuda)`,
    };
  }
  if (load.ok) {
    return { found: true, path: load.path, origin: load.origin, version: load.version, versionText: load.versionText, searched: list.searched, attempts: load.attempts };
  }
  const reason = notFoundReason(naming.name, spec, list, load.attempts, naming.fix, naming.forcedFix);
  return { found: false, reason, searched: list.searched, attempts: load.attempts };
}

const SITE_SCRIPT =
  'import json, site, sys\n' +
  'p = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []\n' +
  'p.append(site.getusersitepackages())\n' +
  'p += [x for x in sys.path if x.endswith("-packages")]\n' +
  'print(json.dumps(p))\n';

/** pythonSitePackages's answers in this process, by PATH: cuBLASLt's and NCCL's searches both ask. */
const sitePackagesByPath = new Map<string, string[]>();

/**
 * site-packages folders of every distinct python3 on PATH (each asked once, 10 s at most, and
 * once a process for a given PATH: `doctor` looks for two libraries, and a pyenv shim alone took
 * ~70 ms of CPU a launch). Interpreters that fail are skipped: finding no wheel is not an error here.
 */
export function pythonSitePackages(pathVar: string | undefined = process.env.PATH): string[] {
  const key = pathVar ?? '';
  const known = sitePackagesByPath.get(key);
  if (known) return [...known];
  const out = askInterpreters(pathVar);
  sitePackagesByPath.set(key, out);
  return [...out];
}

function askInterpreters(pathVar: string | undefined): string[] {
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

/**
 * The candidates on this machine: this process's environment, the site-packages of its
 * python3s (not asked when the library's variable is set) and the real file system.
 */
export function machineCandidates(spec: LibrarySpec): CandidateList {
  return libraryCandidates(spec, {
    env: process.env,
    sitePackages: process.env[spec.envVar] ? [] : pythonSitePackages(),
    exists: (p) => existsSync(p),
    isDirectory: (p) => {
      try {
        return statSync(p).isDirectory();
      } catch {
        return false;
      }
    },
  });
}
