// Finding and loading the addon binary, lazily: nothing is loaded when lib/ is imported; the
// first call that needs native code loads it (or useNativeBinary() / binaryInfo() do).
//
// The order, first match wins:
//   1. useNativeBinary(path) called before the first native call (the option);
//   2. the MURPHY_NATIVE_BINARY environment variable (a path to a .node file);
//   3. build-cuda/Release/murphy_native.node: a local CUDA build (`npm run build:cuda`); it
//      holds the CPU kernels too;
//   4. build/Release/murphy_native.node: a local CPU build (`npm run build:native`, or
//      `npm install` compiling from source);
//   5. prebuilds/<platform>-<arch>/: the binary shipped in the package (node-gyp-build).
// binaryInfo() says which one was taken and why, and notes a newer local build that was
// passed over (e.g. build/ rebuilt after build-cuda/), so `doctor` can say so; loading the
// binary says it on stderr too.
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';
import { MurphyNativeError } from './errors.js';
import type { RawAddon } from './raw.js';

const require = createRequire(import.meta.url);

/** The package root (two levels above lib/native/ or dist/native/). */
export const packageRoot: string = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Where the binary came from (the order above). */
export type BinarySource = 'option' | 'env' | 'cuda-build' | 'local-build' | 'prebuild';

/** Which binary was chosen, and why. */
export interface BinaryChoice {
  /** Absolute path of the .node file. */
  path: string;
  source: BinarySource;
  /** One sentence: why this binary (which rule of the documented order matched). */
  reason: string;
  /** Things worth knowing, e.g. a newer local build that was not chosen. */
  notes: string[];
}

const LOCAL_BUILDS: { source: 'cuda-build' | 'local-build'; rel: string; what: string }[] = [
  { source: 'cuda-build', rel: join('build-cuda', 'Release', 'murphy_native.node'), what: 'a local CUDA build (npm run build:cuda) exists, and local CUDA builds come first' },
  { source: 'local-build', rel: join('build', 'Release', 'murphy_native.node'), what: 'a local CPU build (npm run build:native) exists and there is no local CUDA build' },
];

let explicit: string | undefined;
let loaded: { addon: RawAddon; choice: BinaryChoice } | undefined;

/**
 * Use this .node file instead of searching (the first rule of the order). Call it before the
 * first native call; afterwards it only accepts the binary already loaded.
 */
export function useNativeBinary(path: string): void {
  const p = resolve(path);
  if (loaded !== undefined) {
    if (loaded.choice.path === p) return;
    throw new MurphyNativeError(`useNativeBinary(${p}): the addon is already loaded from ${loaded.choice.path}; call it before the first native call`, 'EINVAL');
  }
  explicit = p;
}

function fromPath(p: string, source: 'option' | 'env', reason: string): BinaryChoice {
  if (!existsSync(p)) {
    const fix = source === 'env' ? 'unset MURPHY_NATIVE_BINARY or fix the path' : 'pass the path of a murphy_native.node file';
    throw new MurphyNativeError(`${reason}, but ${p} does not exist; ${fix}`, 'ENOLIB');
  }
  return { path: p, source, reason, notes: [] };
}

/** Applies the documented order (without loading anything). */
export function chooseBinary(root = packageRoot, env: NodeJS.ProcessEnv = process.env, option = explicit): BinaryChoice {
  if (option !== undefined) return fromPath(resolve(option), 'option', 'chosen with useNativeBinary()');
  const fromEnv = env.MURPHY_NATIVE_BINARY;
  if (fromEnv) return fromPath(resolve(fromEnv), 'env', `MURPHY_NATIVE_BINARY is set to ${fromEnv}`);
  const present = LOCAL_BUILDS.map((b) => ({ ...b, path: join(root, b.rel) })).filter((b) => existsSync(b.path));
  if (present.length > 0) {
    const [chosen, ...others] = present;
    const notes = others
      .filter((o) => statSync(o.path).mtimeMs > statSync(chosen!.path).mtimeMs)
      .map((o) => `${relative(root, o.path)} is newer than ${relative(root, chosen!.path)}, which was chosen by the order; rebuild the latter or set MURPHY_NATIVE_BINARY=${o.path}`);
    return { path: chosen!.path, source: chosen!.source, reason: chosen!.what, notes };
  }
  const nodeGypBuild = require('node-gyp-build') as { path(dir: string): string };
  try {
    const p = nodeGypBuild.path(root);
    return { path: p, source: 'prebuild', reason: `no local build; the prebuilt binary for ${process.platform}-${process.arch} shipped in the package`, notes: [] };
  } catch (err) {
    throw new MurphyNativeError(
      `no native addon found under ${root} (no local build and no prebuild for ${process.platform}-${process.arch}). ` +
        `Run \`npm rebuild murphy-native\` (needs a C++ compiler) or \`npm run build:native\` in the package, ` +
        `or point MURPHY_NATIVE_BINARY at a murphy_native.node. Cause: ${(err as Error).message}`,
      'ENOLIB',
    );
  }
}

/**
 * Says on stderr, once per process, what the choice's notes say: a newer local build passed over
 * by the order means the code that runs is not the code last built (a developer who rebuilt
 * build/ after a CUDA build would otherwise test the older build-cuda/ binary without knowing).
 */
export function warnChoice(choice: BinaryChoice, write: (s: string) => void = (s) => process.stderr.write(s)): void {
  for (const n of choice.notes) write(`murphy-native: ${n}\n`);
}

/** The addon of this environment (main thread or worker), loaded on first use. */
export function nativeAddon(): RawAddon {
  if (loaded === undefined) {
    const choice = chooseBinary();
    let addon: RawAddon;
    try {
      addon = require(choice.path) as RawAddon;
    } catch (err) {
      throw new MurphyNativeError(`cannot load the native addon ${choice.path} (${choice.reason}): ${(err as Error).message}`, 'ENOLIB');
    }
    addon.setErrorClass(MurphyNativeError);
    if (isMainThread) warnChoice(choice);
    // process.exit() waits for the addon's worker threads: a generation running then must stop
    // and not wait for this (no longer running) thread (native/addon/model.cc, g_exiting).
    // Main thread only: the flag is the process's, and a worker's exit is not the process's.
    if (isMainThread) process.once('exit', () => addon.markExiting?.());
    loaded = { addon, choice };
  }
  return loaded.addon;
}

/** The choice behind the loaded addon (loading it if needed). */
export function loadedChoice(): BinaryChoice {
  nativeAddon();
  return loaded!.choice;
}
