// C/C++ helpers the tests compile (fake shared libraries, a stress program) are built once per
// distinct input and kept in a per-user temp folder: the key is the compiler (its resolved path,
// size and modification time), the flags, and the contents of the sources and of every header
// (.h, .hpp, .inc) in the -I folders. A changed source, header, flag or compiler builds again;
// an unchanged one is copied from the cache (g++ -O2 of the thread-pool stress program costs
// ~1.3 s of CPU, each fake library ~0.1 s). The build is written under a temporary name and
// renamed into place, so concurrent test files never see half a binary.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { findOnPath } from '../../lib/exec/sandbox.js';
import { CC_CACHE as CACHE } from '../loader/cache-dirs.mjs';

export interface CompileOptions {
  /** The compiler command (looked up on PATH), e.g. 'cc' or process.env.CXX ?? 'g++'. */
  compiler: string;
  /** Flags before the sources; -I folders among them are hashed with their headers. Paths other than -I here are part of the key as written. */
  flags: string[];
  /** Source files, compiled in this order. */
  sources: string[];
  /** Where the result goes (copied from the cache). */
  out: string;
  /**
   * Compile the sources as one translation unit (a file with the first source's extension that
   * #includes each, in order), so that the standard headers they share are parsed once. Parsing
   * is most of these small programs' compile: the GEMM cache check's four sources took 2.6 s of
   * CPU as four units and 1.6 s as one. The sources must not define the same internal name twice.
   */
  oneUnit?: boolean;
}

let systemCxx: { cxx: string; have: boolean } | undefined;
/**
 * The system C++ compiler the tests build their C++ checks with ($CXX, else g++) and whether it
 * runs (`--version`), asked once per process; a test skips, naming it, when it does not.
 */
export function cxxCompiler(): { cxx: string; have: boolean } {
  if (!systemCxx) {
    const cxx = process.env.CXX ?? 'g++';
    systemCxx = { cxx, have: spawnSync(cxx, ['--version'], { stdio: 'ignore' }).status === 0 };
  }
  return systemCxx;
}

function resolveCommand(cmd: string): string {
  if (cmd.includes('/')) return realpathSync(cmd);
  const p = findOnPath(cmd);
  if (p === null) throw new Error(`compiler ${cmd} is not on PATH`);
  return realpathSync(p);
}

/** The cache key of a build: compiler identity, flags, sources' and headers' contents. */
export function compileKey(o: Omit<CompileOptions, 'out'>): string {
  const h = createHash('sha256');
  const cc = resolveCommand(o.compiler);
  const st = statSync(cc);
  h.update(JSON.stringify([cc, st.size, st.mtimeMs, o.flags, o.oneUnit === true])).update('\0');
  for (const s of o.sources) h.update(readFileSync(s)).update('\0');
  for (const f of o.flags) {
    if (!f.startsWith('-I')) continue;
    const dir = f.slice(2);
    for (const name of readdirSync(dir).filter((n) => /\.(h|hpp|inc)$/.test(n)).sort()) h.update(name).update('\0').update(readFileSync(join(dir, name))).update('\0');
  }
  return h.digest('hex');
}

/** Compiles `sources` with `flags` into `out` unless the same build is cached; returns `out`. */
export function compileCached(o: CompileOptions): string {
  const cached = join(CACHE, compileKey(o), basename(o.out));
  mkdirSync(dirname(o.out), { recursive: true });
  try {
    copyFileSync(cached, o.out);
    return o.out;
  } catch {
    // not built yet, or pruned (test/loader/cache-dirs.mjs) since: build it
  }
  mkdirSync(dirname(cached), { recursive: true });
  const tmp = `${cached}.${process.pid}.tmp`;
  const unit = `${cached}.${process.pid}.unit${extname(o.sources[0] ?? '.c')}`;
  try {
    if (o.oneUnit) writeFileSync(unit, o.sources.map((s) => `#include ${JSON.stringify(resolve(s))}\n`).join(''));
    execFileSync(o.compiler, [...o.flags, ...(o.oneUnit ? [unit] : o.sources), '-o', tmp], { stdio: ['ignore', 'pipe', 'pipe'] });
    renameSync(tmp, cached);
  } finally {
    rmSync(tmp, { force: true });
    rmSync(unit, { force: true });
  }
  copyFileSync(cached, o.out);
  return o.out;
}
