// The one error class of the native boundary. The addon throws it (the class is handed to
// each environment's addon instance when the binary loads, as better-sqlite3 does with its
// SqliteError), the loader throws it when no binary can be loaded, and the option resolvers
// (lib/native/options.ts) throw it for a bad option before any native code runs.

/**
 * What went wrong, as a stable code:
 * - EINVAL: a bad argument or option (names it and the allowed values)
 * - ENOMEM: an allocation failed (host or device memory)
 * - ECUDA:  a CUDA runtime call failed (names the call)
 * - ENOLIB: a needed library or binary is not there (no addon found, built without CUDA)
 * - EBUSY:  the model engine is running another call; await it first
 * - EIO:    a file could not be read or written
 * - ENOTSUP: the engine cannot do this (e.g. paged generation on the CPU engine; names the engine that can)
 */
export type NativeErrorCode = 'EINVAL' | 'ENOMEM' | 'ECUDA' | 'ENOLIB' | 'EBUSY' | 'EIO' | 'ENOTSUP';

export const NATIVE_ERROR_CODES: readonly NativeErrorCode[] = ['EINVAL', 'ENOMEM', 'ECUDA', 'ENOLIB', 'EBUSY', 'EIO', 'ENOTSUP'];

/** An error raised at the native boundary, with a stable `code`. */
export class MurphyNativeError extends Error {
  override name = 'MurphyNativeError';
  readonly code: NativeErrorCode;
  constructor(message: string, code: NativeErrorCode = 'EINVAL') {
    super(message);
    this.code = NATIVE_ERROR_CODES.includes(code) ? code : 'EINVAL';
  }
}

/** Captures the caller's stack now, for an async native call that may reject later. */
export function callSite(skip: Function): Error {
  const site = new Error();
  Error.captureStackTrace(site, skip);
  return site;
}

/**
 * The async native calls reject from a libuv callback, whose stack says nothing about who
 * called. This puts the stack captured at call time (callSite) on the rejection, as sharp
 * does, keeping the error's class, code and message.
 */
export function withCallerStack<T>(p: Promise<T>, site: Error): Promise<T> {
  return p.catch((err: unknown) => {
    if (err instanceof Error && site.stack !== undefined) {
      const frames = site.stack.split('\n').slice(1).join('\n');
      err.stack = `${err.name}: ${err.message}\n${frames}`;
    }
    throw err;
  });
}
