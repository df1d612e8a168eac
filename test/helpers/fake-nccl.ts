// A fake libnccl.so.2, compiled by the tests with the system C compiler: the entry points the
// loader resolves (native/gpu/nccl.h), with world-size-1 semantics on host memory, and a log of
// every call (to the file named by FAKE_NCCL_LOG) so that tests check the op order. What a
// communicator does is chosen by the first bytes of its unique id:
//   "hang-init"  ncclCommInitRankConfig never completes (ncclInProgress until aborted)
//   "slow-init"  completes after a few polls of ncclCommGetAsyncError
//   "fail-init"  fails with ncclInternalError and a two-line ncclGetLastError
//   "hang-ops"   every collective stays in progress (a dead peer) until aborted
//   anything else (ncclGetUniqueId's "fake-nccl:..."): completes at once
// Build variants: -DVERSION=n (ncclGetVersion), -DPARTIAL (only ncclGetVersion).
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const FAKE_NCCL_SRC = String.raw`
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { size_t size; unsigned magic, version; int blocking; } cfg_head;
typedef struct fake_comm { int nranks, rank, mode, polls, pending; } *ncclComm_t;
enum { OK = 0, INTERNAL = 3, INPROGRESS = 7 };
static void logf_(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void logf_(const char* fmt, ...) {
  const char* p = getenv("FAKE_NCCL_LOG");
  if (!p || !*p) return;
  FILE* f = fopen(p, "a");
  if (!f) return;
  va_list ap; va_start(ap, fmt); vfprintf(f, fmt, ap); va_end(ap);
  fputc('\n', f); fclose(f);
}
int ncclGetVersion(int* v) { *v = VERSION; return OK; }
#ifndef PARTIAL
static int ids = 0;
static char last_error[256] = "";
int ncclGetUniqueId(ncclUniqueId* id) { memset(id, 0, sizeof *id); snprintf(id->internal, 128, "fake-nccl:%d", ++ids); logf_("getUniqueId"); return OK; }
static size_t tsize(int t) { return t == 7 ? 4 : t == 9 ? 2 : t == 1 ? 1 : 0; }
int ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, void* config) {
  const cfg_head* c = (const cfg_head*)config;
  logf_("init nranks=%d rank=%d id=%.16s size=%zu magic=%x version=%u blocking=%d", nranks, rank, id.internal, c->size, c->magic, c->version, c->blocking);
  ncclComm_t comm = calloc(1, sizeof *comm);
  comm->nranks = nranks; comm->rank = rank;
  comm->mode = !strncmp(id.internal, "hang-init", 9) ? 1 : !strncmp(id.internal, "slow-init", 9) ? 2 : !strncmp(id.internal, "fail-init", 9) ? 3 : !strncmp(id.internal, "hang-ops", 8) ? 4 : 0;
  if (comm->mode == 3) { snprintf(last_error, sizeof last_error, "fake: init failed\nsecond line"); free(comm); *out = NULL; return INTERNAL; }
  comm->polls = comm->mode == 2 ? 5 : 0;
  comm->pending = comm->mode == 1 || comm->mode == 2;
  *out = comm;
  return comm->pending ? INPROGRESS : OK;
}
int ncclCommGetAsyncError(ncclComm_t c, int* state) {
  if (c->mode == 1 || (c->mode == 4 && c->pending)) { *state = INPROGRESS; return OK; }
  if (c->pending && c->polls > 0) { c->polls--; *state = INPROGRESS; return OK; }
  c->pending = 0; *state = OK; return OK;
}
int ncclCommFinalize(ncclComm_t c) { logf_("finalize rank=%d", c->rank); return OK; }
int ncclCommDestroy(ncclComm_t c) { logf_("destroy rank=%d", c->rank); free(c); return OK; }
int ncclCommAbort(ncclComm_t c) { logf_("abort rank=%d", c->rank); free(c); return OK; }
static void start(ncclComm_t c) { if (c->mode == 4) c->pending = 1; }
int ncclAllReduce(const void* s, void* r, size_t n, int t, int op, ncclComm_t c, void* stream) {
  logf_("allReduce count=%zu dtype=%d op=%d", n, t, op); if (c->nranks == 1 && s != r) memcpy(r, s, n * tsize(t)); start(c); return OK;
}
int ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, ncclComm_t c, void* stream) {
  logf_("reduceScatter recvcount=%zu dtype=%d op=%d", n, t, op); if (c->nranks == 1) memmove(r, s, n * tsize(t)); start(c); return OK;
}
int ncclAllGather(const void* s, void* r, size_t n, int t, ncclComm_t c, void* stream) {
  logf_("allGather sendcount=%zu dtype=%d", n, t); if (c->nranks == 1) memmove(r, s, n * tsize(t)); start(c); return OK;
}
int ncclBroadcast(const void* s, void* r, size_t n, int t, int root, ncclComm_t c, void* stream) {
  logf_("broadcast count=%zu dtype=%d root=%d", n, t, root); if (c->rank == root && s != r) memmove(r, s, n * tsize(t)); start(c); return OK;
}
int ncclGroupStart(void) { logf_("groupStart"); return OK; }
int ncclGroupEnd(void) { logf_("groupEnd"); return OK; }
const char* ncclGetErrorString(int st) { static char b[64]; snprintf(b, sizeof b, "fake error %d", st); return b; }
const char* ncclGetLastError(ncclComm_t c) { return last_error; }
#endif
`;

/** Compiles the fake into `out` (e.g. <dir>/libnccl.so.2) and returns out. */
export function buildFakeNccl(out: string, opts: { version?: number; partial?: boolean } = {}): string {
  mkdirSync(dirname(out), { recursive: true });
  const src = join(dirname(out), `fake-nccl-${process.pid}.c`);
  writeFileSync(src, FAKE_NCCL_SRC);
  execFileSync('cc', ['-shared', '-fPIC', '-o', out, `-DVERSION=${opts.version ?? 22304}`, ...(opts.partial ? ['-DPARTIAL'] : []), src]);
  return out;
}

/** A 128-byte unique id whose text chooses the fake's behaviour ("hang-init", ...). */
export function fakeId(mode: string): Uint8Array {
  const id = new Uint8Array(128);
  id.set(Buffer.from(mode, 'latin1'));
  return id;
}
