// A fake libnccl.so.2, compiled by the tests with the system C compiler: the entry points the
// loader resolves (native/gpu/nccl.h), with world-size-1 semantics on host memory, and a log of
// every call (to the file named by FAKE_NCCL_LOG) so that tests check the op order. What a
// communicator does is chosen by the first bytes of its unique id:
//   "hang-init"  ncclCommInitRankConfig never completes (ncclInProgress until aborted)
//   "slow-init"  completes after a few polls of ncclCommGetAsyncError
//   "fail-init"  fails with ncclInternalError and a two-line ncclGetLastError
//   "hang-ops"   every collective stays in progress (a dead peer) until aborted
//   anything else (ncclGetUniqueId's "fake-nccl:..."): completes at once; with world size 1 a
//                collective copies send to recv, and with a world size > 1 the communicators of
//                one id in this process form a world (below)
// A world (several communicators of one id in one process, e.g. one per test rank): each
// collective stays in progress until every rank has posted it; the last one to post checks that
// all posted the same call (else every rank's ncclCommGetAsyncError reports ncclInvalidUsage and
// ncclGetLastError names the mismatch) and computes every rank's result on the host, reducing in
// rank order 0, 1, ..., N-1 (sum, prod, max, min, avg of f32 / f64 / bf16). Its log lines end with
// " rank=R". Communicators wait on libuv worker threads: at most 3 ranks per world in tests.
// Build variants: -DVERSION=n (ncclGetVersion), -DPARTIAL (only ncclGetVersion).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { compileCached } from './compile-cache.js';

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
static size_t tsize(int t) { return t == 7 ? 4 : t == 8 ? 8 : t == 9 ? 2 : t == 1 ? 1 : 0; }
#include <math.h>
#include <pthread.h>
#include <stdint.h>
/* ---- worlds: the communicators of one id in this process */
enum { INVALID_USAGE = 5, MAXR = 8, MAXW = 16 };
typedef struct world {
  char id[128], msg[256]; int nranks, joined, broken;
  /* the call being posted: kind (1 allReduce, 2 reduceScatter, 3 allGather, 4 broadcast) and its arguments */
  int kind, dtype, op, root, posted, mismatch; size_t count;
  const void* send[MAXR]; void* recv[MAXR];
  long seq, completed, failed;
} world;
static world worlds[MAXW];
static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
typedef struct { world* w; long seq; } fwc;
static fwc wcomm[4096];
static int nwcomm = 0;
static double get(const void* p, int t, size_t i) {
  if (t == 7) return ((const float*)p)[i];
  if (t == 8) return ((const double*)p)[i];
  uint32_t u = (uint32_t)((const uint16_t*)p)[i] << 16; float f; memcpy(&f, &u, 4); return f;
}
static void put(void* p, int t, size_t i, double x) {
  if (t == 7) { ((float*)p)[i] = (float)x; return; }
  if (t == 8) { ((double*)p)[i] = x; return; }
  float f = (float)x; uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) { ((uint16_t*)p)[i] = 0x7fc0; return; }
  u += 0x7fff + ((u >> 16) & 1); ((uint16_t*)p)[i] = (uint16_t)(u >> 16); /* round to nearest even */
}
/* one step of the reduction in the element type's arithmetic (bf16: fp32, rounded by put) */
static double red(double a, double b, int op, int t) {
  if (t == 8) return op == 0 || op == 4 ? a + b : op == 1 ? a * b : op == 2 ? (b > a || isnan(b) ? b : a) : (b < a || isnan(b) ? b : a);
  float x = (float)a, y = (float)b;
  return op == 0 || op == 4 ? x + y : op == 1 ? x * y : op == 2 ? (y > x || isnan(y) ? y : x) : (y < x || isnan(y) ? y : x);
}
/* out[i] = op over ranks, in rank order, of in[q][i0 + i] for i < n; avg divides the sum at the end */
static void reduce_into(void* out, const void* const* in, int nr, size_t i0, size_t n, int t, int op) {
  for (size_t i = 0; i < n; i++) {
    double a = get(in[0], t, i0 + i);
    for (int q = 1; q < nr; q++) {
      a = red(a, get(in[q], t, i0 + i), op, t);
      if (t == 9) { uint16_t b; put(&b, 9, 0, a); a = get(&b, 9, 0); }
    }
    if (op == 4) a = t == 8 ? a / nr : (double)((float)a / (float)nr);
    put(out, t, i, a);
  }
}
static void compute(world* w) {
  const int nr = w->nranks, t = w->dtype; const size_t n = w->count, es = tsize(t);
  char* tmp = malloc(n * es * nr + 1);
  if (w->kind == 1) reduce_into(tmp, w->send, nr, 0, n, t, w->op);
  else if (w->kind == 2) for (int r = 0; r < nr; r++) reduce_into(tmp + r * n * es, w->send, nr, r * n, n, t, w->op);
  else if (w->kind == 3) for (int q = 0; q < nr; q++) memcpy(tmp + q * n * es, w->send[q], n * es);
  else memcpy(tmp, w->send[w->root], n * es);
  for (int r = 0; r < nr; r++) memcpy(w->recv[r], w->kind == 2 ? tmp + r * n * es : tmp, w->kind == 3 ? n * es * nr : n * es);
  free(tmp);
}
static const char* KINDS[] = {"", "allReduce", "reduceScatter", "allGather", "broadcast"};
static fwc* wc_of(ncclComm_t c) { return c->mode >= 100 ? &wcomm[c->mode - 100] : NULL; }
/* this rank posts a call; its result comes with a later poll, once every rank has posted */
static int post(ncclComm_t c, int kind, const void* s, void* r, size_t n, int t, int op, int root) {
  fwc* x = wc_of(c); world* w = x->w;
  logf_("%s count=%zu dtype=%d op=%d root=%d rank=%d", KINDS[kind], n, t, op, root, c->rank);
  pthread_mutex_lock(&wmu);
  if (w->posted == 0) { w->kind = kind; w->count = n; w->dtype = t; w->op = op; w->root = root; w->mismatch = 0; }
  else if (w->kind != kind || w->count != n || w->dtype != t || w->op != op || w->root != root) {
    if (!w->mismatch) snprintf(w->msg, sizeof w->msg, "fake world: rank %d called %s count=%zu dtype=%d while another rank called %s count=%zu dtype=%d", c->rank, KINDS[kind], n, t, KINDS[w->kind], w->count, w->dtype);
    w->mismatch = 1;
  }
  w->send[c->rank] = s; w->recv[c->rank] = r; x->seq = w->seq;
  if (++w->posted == w->nranks) {
    if (w->mismatch) w->failed = w->seq;
    else if (!w->broken) { compute(w); w->completed = w->seq; }
    w->seq++; w->posted = 0;
  }
  pthread_mutex_unlock(&wmu);
  c->pending = 1;
  return OK;
}
static int world_poll(ncclComm_t c, int* state) {
  fwc* x = wc_of(c); world* w = x->w;
  pthread_mutex_lock(&wmu);
  int st = !c->pending ? OK : w->failed == x->seq ? INVALID_USAGE : w->broken ? INTERNAL : w->completed >= x->seq ? OK : INPROGRESS;
  if (st == INVALID_USAGE) snprintf(last_error, sizeof last_error, "%s", w->msg);
  if (st == INTERNAL) snprintf(last_error, sizeof last_error, "fake world: a peer aborted");
  pthread_mutex_unlock(&wmu);
  if (st == OK) c->pending = 0;
  *state = st;
  return OK;
}
static void world_join(ncclComm_t c, const ncclUniqueId* id) {
  pthread_mutex_lock(&wmu);
  world* w = NULL;
  for (int i = 0; i < MAXW && !w; i++) if (worlds[i].nranks && !memcmp(worlds[i].id, id->internal, 128) && worlds[i].joined < worlds[i].nranks) w = &worlds[i];
  for (int i = 0; i < MAXW && !w; i++) if (!worlds[i].nranks) { w = &worlds[i]; memset(w, 0, sizeof *w); memcpy(w->id, id->internal, 128); w->nranks = c->nranks; w->completed = w->failed = -1; }
  w->joined++;
  wcomm[nwcomm].w = w; wcomm[nwcomm].seq = -1;
  c->mode = 100 + nwcomm++;
  pthread_mutex_unlock(&wmu);
}
/* a rank leaves (destroy or abort); one that leaves with a call posted breaks its world (its buffers go) */
static void world_leave(ncclComm_t c, int aborted) {
  fwc* x = wc_of(c); if (!x) return;
  pthread_mutex_lock(&wmu);
  if (aborted || (c->pending && x->seq == x->w->seq)) x->w->broken = 1;
  if (--x->w->joined == 0) x->w->nranks = 0;
  pthread_mutex_unlock(&wmu);
}
/* ---- */
int ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, void* config) {
  const cfg_head* c = (const cfg_head*)config;
  logf_("init nranks=%d rank=%d id=%.16s size=%zu magic=%x version=%u blocking=%d", nranks, rank, id.internal, c->size, c->magic, c->version, c->blocking);
  ncclComm_t comm = calloc(1, sizeof *comm);
  comm->nranks = nranks; comm->rank = rank;
  comm->mode = !strncmp(id.internal, "hang-init", 9) ? 1 : !strncmp(id.internal, "slow-init", 9) ? 2 : !strncmp(id.internal, "fail-init", 9) ? 3 : !strncmp(id.internal, "hang-ops", 8) ? 4 : 0;
  if (comm->mode == 3) { snprintf(last_error, sizeof last_error, "fake: init failed\nsecond line"); free(comm); *out = NULL; return INTERNAL; }
  if (comm->mode == 0 && nranks > 1) world_join(comm, &id);
  comm->polls = comm->mode == 2 ? 5 : 0;
  comm->pending = comm->mode == 1 || comm->mode == 2;
  *out = comm;
  return comm->pending ? INPROGRESS : OK;
}
int ncclCommGetAsyncError(ncclComm_t c, int* state) {
  if (c->mode >= 100) return world_poll(c, state);
  if (c->mode == 1 || (c->mode == 4 && c->pending)) { *state = INPROGRESS; return OK; }
  if (c->pending && c->polls > 0) { c->polls--; *state = INPROGRESS; return OK; }
  c->pending = 0; *state = OK; return OK;
}
int ncclCommFinalize(ncclComm_t c) { logf_("finalize rank=%d", c->rank); return OK; }
int ncclCommDestroy(ncclComm_t c) { logf_("destroy rank=%d", c->rank); world_leave(c, 0); free(c); return OK; }
int ncclCommAbort(ncclComm_t c) { logf_("abort rank=%d", c->rank); world_leave(c, 1); free(c); return OK; }
static void start(ncclComm_t c) { if (c->mode == 4) c->pending = 1; }
int ncclAllReduce(const void* s, void* r, size_t n, int t, int op, ncclComm_t c, void* stream) {
  if (c->mode >= 100) return post(c, 1, s, r, n, t, op, -1);
  logf_("allReduce count=%zu dtype=%d op=%d", n, t, op); if (c->nranks == 1 && s != r) memcpy(r, s, n * tsize(t)); start(c); return OK;
}
int ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, ncclComm_t c, void* stream) {
  if (c->mode >= 100) return post(c, 2, s, r, n, t, op, -1);
  logf_("reduceScatter recvcount=%zu dtype=%d op=%d", n, t, op); if (c->nranks == 1) memmove(r, s, n * tsize(t)); start(c); return OK;
}
int ncclAllGather(const void* s, void* r, size_t n, int t, ncclComm_t c, void* stream) {
  if (c->mode >= 100) return post(c, 3, s, r, n, t, -1, -1);
  logf_("allGather sendcount=%zu dtype=%d", n, t); if (c->nranks == 1) memmove(r, s, n * tsize(t)); start(c); return OK;
}
int ncclBroadcast(const void* s, void* r, size_t n, int t, int root, ncclComm_t c, void* stream) {
  if (c->mode >= 100) return post(c, 4, s, r, n, t, -1, root);
  logf_("broadcast count=%zu dtype=%d root=%d", n, t, root); if (c->rank == root && s != r) memmove(r, s, n * tsize(t)); start(c); return OK;
}
int ncclGroupStart(void) { logf_("groupStart"); return OK; }
int ncclGroupEnd(void) { logf_("groupEnd"); return OK; }
const char* ncclGetErrorString(int st) { static char b[64]; snprintf(b, sizeof b, "fake error %d", st); return b; }
const char* ncclGetLastError(ncclComm_t c) { return last_error; }
#endif
`;

/** Compiles the fake into `out` (e.g. <dir>/libnccl.so.2; built once per version and variant, test/helpers/compile-cache.ts) and returns out. */
export function buildFakeNccl(out: string, opts: { version?: number; partial?: boolean } = {}): string {
  mkdirSync(dirname(out), { recursive: true });
  const src = join(dirname(out), `fake-nccl-${process.pid}.c`);
  writeFileSync(src, FAKE_NCCL_SRC);
  return compileCached({ compiler: 'cc', flags: ['-shared', '-fPIC', '-pthread', `-DVERSION=${opts.version ?? 22304}`, ...(opts.partial ? ['-DPARTIAL'] : [])], sources: [src], out });
}

/** A 128-byte unique id whose text chooses the fake's behaviour ("hang-init", ...). */
export function fakeId(mode: string): Uint8Array {
  const id = new Uint8Array(128);
  id.set(Buffer.from(mode, 'latin1'));
  return id;
}
