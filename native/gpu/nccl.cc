// Opening NCCL at run time and driving non-blocking communicators (see nccl.h).
// No CUDA needed to compile this file; the CUDA build adds the stream (nccl_stream.cu).
#include "nccl.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "murphy/common.h"

namespace murphy {
namespace gpu {

const char* const kNcclSymbols[] = {
    "ncclGetVersion",   "ncclGetUniqueId",     "ncclCommInitRankConfig", "ncclCommGetAsyncError",
    "ncclCommFinalize", "ncclCommDestroy",     "ncclCommAbort",          "ncclAllReduce",
    "ncclReduceScatter", "ncclAllGather",      "ncclBroadcast",          "ncclGroupStart",
    "ncclGroupEnd",     "ncclGetErrorString",  "ncclGetLastError",
};
const size_t kNcclSymbolCount = sizeof(kNcclSymbols) / sizeof(kNcclSymbols[0]);
static_assert(sizeof(kNcclSymbols) / sizeof(kNcclSymbols[0]) * sizeof(void*) == sizeof(NcclApi),
              "kNcclSymbols must name every NcclApi field, in order");

namespace {

constexpr int kMinVersion = 21400;  // 2.14: ncclCommInitRankConfig with blocking = 0, ncclCommFinalize

// Accepts NCCL 2.14 or newer (ncclGetVersion() = major * 10000 + minor * 100 + patch).
std::string check_version(const NcclApi& api, int* version) {
  const ncclResult_t st = api.GetVersion(version);
  if (st != ncclSuccess) return "ncclGetVersion() failed with status " + std::to_string(st);
  if (*version >= kMinVersion) return "";
  return "ncclGetVersion() reports " + nccl_version_text(*version) + " (raw " + std::to_string(*version) +
         "); murphy-native needs NCCL 2.14 or newer (non-blocking communicators)";
}

DlLibrary<NcclApi, int> g_lib("NCCL", kNcclSymbols, kNcclSymbolCount, check_version);

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

std::string ms_text(double ms) {
  return ms >= 1000 ? std::to_string(int64_t(ms / 1000)) + " s" : std::to_string(int64_t(ms)) + " ms";
}

}  // namespace

std::string nccl_version_text(int v) {
  if (v < 10000) return std::to_string(v / 1000) + "." + std::to_string((v / 100) % 10) + "." + std::to_string(v % 100);
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

NcclFound nccl_load(const std::vector<NcclCandidate>& candidates, bool install) {
  return g_lib.load(candidates, install);
}

const NcclApi* nccl() { return g_lib.api(); }

const NcclFound& nccl_found() { return g_lib.found(); }

namespace {
const NcclApi* installed(const char* what) {
  const NcclApi* api = nccl();
  if (!api) {
    throw Error(std::string(what) + ": NCCL is not loaded in this process (lib/gpu/nccl.ts findNccl({ install: true }) loads it)",
                ErrorCode::NoLib);
  }
  return api;
}
std::string status_text(const NcclApi* api, ncclResult_t st) {
  const char* s = api->GetErrorString ? api->GetErrorString(st) : nullptr;
  return std::string(s ? s : "unknown NCCL error") + " (status " + std::to_string(st) + ")";
}
}  // namespace

std::array<uint8_t, kNcclUniqueIdBytes> nccl_unique_id() {
  const NcclApi* api = installed("ncclGetUniqueId");
  ncclUniqueId id{};
  const ncclResult_t st = api->GetUniqueId(&id);
  if (st != ncclSuccess) throw Error("ncclGetUniqueId failed: " + status_text(api, st));
  std::array<uint8_t, kNcclUniqueIdBytes> out{};
  std::memcpy(out.data(), id.internal, kNcclUniqueIdBytes);
  return out;
}

size_t nccl_type_size(int dtype) {
  switch (dtype) {
    case ncclUint8: return 1;
    case ncclBfloat16: return 2;
    case ncclFloat32: return 4;
    case ncclFloat64: return 8;
    default: throw Error("NCCL: unsupported data type " + std::to_string(dtype) + " (f32, f64, bf16 or u8)");
  }
}

std::unique_ptr<NcclComm> NcclComm::init(const std::array<uint8_t, kNcclUniqueIdBytes>& id, int nranks, int rank,
                                         int device, double timeout_ms) {
  const NcclApi* api = installed("ncclCommInitRankConfig");
  if (nranks < 1) throw Error("NCCL init: world size must be >= 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    throw Error("NCCL init: rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
  if (!(timeout_ms > 0)) throw Error("NCCL init: the timeout must be > 0 ms");
  std::unique_ptr<NcclComm> c(new NcclComm(nranks, rank, device));
  c->api_ = api;
#ifdef MURPHY_WITH_CUDA
  if (device >= 0) {
    nccl_set_device(device);  // ncclCommInitRankConfig binds the calling thread's device
    c->stream_ = nccl_stream_create(device);
  }
#endif
  ncclUniqueId uid{};
  std::memcpy(uid.internal, id.data(), kNcclUniqueIdBytes);
  ncclConfig_v21700 cfg{};
  cfg.size = sizeof(cfg);
  cfg.magic = 0xcafebeef;
  cfg.version = 21700;
  cfg.blocking = 0;
  cfg.cgaClusterSize = kNcclConfigUndefInt;
  cfg.minCTAs = kNcclConfigUndefInt;
  cfg.maxCTAs = kNcclConfigUndefInt;
  cfg.netName = nullptr;
  cfg.splitShare = kNcclConfigUndefInt;
  std::lock_guard<std::mutex> lk(c->mu_);
  const ncclResult_t st = api->CommInitRankConfig(&c->comm_, nranks, uid, rank, &cfg);
  if (st != ncclSuccess && st != ncclInProgress) {
    if (c->comm_) c->abort_locked();
    c->fail(st, "ncclCommInitRankConfig");
  }
  if (!c->comm_) throw Error("ncclCommInitRankConfig returned no communicator (status " + std::to_string(st) + ")");
  c->wait("init (ncclCommInitRankConfig)", timeout_ms);
  return c;
}

NcclComm::~NcclComm() {
  // A communicator dropped without close(): abort (never blocks, frees its resources).
  std::lock_guard<std::mutex> lk(mu_);
  abort_locked();
#ifdef MURPHY_WITH_CUDA
  if (stream_) nccl_stream_destroy(stream_);
#endif
}

void NcclComm::fail(ncclResult_t st, const char* what) {
  std::string last;
  if (api_->GetLastError) {
    const char* l = api_->GetLastError(comm_);  // NCCL ignores the argument (NULL is fine)
    if (l && *l) last = std::string("; NCCL says: ") + l;
  }
  std::string msg = std::string("NCCL ") + what + " failed on rank " + std::to_string(rank_) + " of " +
                    std::to_string(nranks_) + ": " + status_text(api_, st) + last;
  for (char& ch : msg)
    if (ch == '\n' || ch == '\r') ch = ' ';
  throw Error(msg);
}

void NcclComm::abort_locked() {
  if (comm_ && !aborted_.exchange(true)) api_->CommAbort(comm_);
  comm_ = nullptr;
}

void NcclComm::abort() {
  abort_requested_ = true;
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (lk.owns_lock()) abort_locked();  // else the waiting call aborts at its next poll
}

void NcclComm::check_open(const char* what) const {
  if (aborted_.load() || abort_requested_.load() || comm_ == nullptr)
    throw Error(std::string("NCCL ") + what + ": the communicator was closed or aborted; create a new one");
#ifdef MURPHY_WITH_CUDA
  if (device_ >= 0) nccl_set_device(device_);  // calls come from any libuv worker thread
  if (stream_) nccl_stream_wait_default(stream_);  // the uploads of the call's buffers first
#endif
}

// Completion of a non-blocking call: ncclCommGetAsyncError leaves ncclInProgress when NCCL has
// finished the call's host side; the stream then holds the device side (CUDA build).
void NcclComm::wait(const char* what, double timeout_ms, bool stream) {
  const double deadline = now_ms() + timeout_ms;
  int sleep_us = 50;
  for (;;) {
    if (abort_requested_.load()) {
      abort_locked();
      throw Error(std::string("NCCL ") + what + " on rank " + std::to_string(rank_) + " of " + std::to_string(nranks_) +
                  ": aborted while waiting");
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t st = api_->CommGetAsyncError(comm_, &state);
    if (st != ncclSuccess) {
      const std::string e = status_text(api_, st);
      abort_locked();
      throw Error(std::string("NCCL ncclCommGetAsyncError failed during ") + what + ": " + e);
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string text = status_text(api_, state), last;
      const char* l = api_->GetLastError(comm_);
      if (l && *l) last = std::string("; NCCL says: ") + l;
      abort_locked();
      std::string msg = std::string("NCCL ") + what + " failed on rank " + std::to_string(rank_) + " of " +
                        std::to_string(nranks_) + ": " + text + last + " (the communicator was aborted)";
      for (char& ch : msg)
        if (ch == '\n' || ch == '\r') ch = ' ';
      throw Error(msg);
    }
    bool done = state == ncclSuccess;
#ifdef MURPHY_WITH_CUDA
    if (done && stream && stream_) done = nccl_stream_done(stream_);
#endif
    if (done) return;
    if (now_ms() > deadline) {
      abort_locked();
      throw Error(std::string("NCCL ") + what + " did not complete within " + ms_text(timeout_ms) + " on rank " +
                      std::to_string(rank_) + " of " + std::to_string(nranks_) +
                      ": the communicator was aborted; a peer is missing, stuck or on the same GPU (check that every "
                      "rank started and reached the same call)",
                  ErrorCode::Busy);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    if (sleep_us < 2000) sleep_us *= 2;
  }
}

#define MURPHY_NCCL_CALL(what, expr)                                   \
  do {                                                                 \
    const ncclResult_t murphy_nccl_st_ = (expr);                       \
    if (murphy_nccl_st_ != ncclSuccess && murphy_nccl_st_ != ncclInProgress) { \
      abort_locked();                                                  \
      fail(murphy_nccl_st_, what);                                     \
    }                                                                  \
  } while (0)

template <class Issue>
void NcclComm::collective(const char* what, int dtype, double timeout_ms, Issue issue, bool block, void** event) {
  std::lock_guard<std::mutex> lk(mu_);
  check_open(what);
  nccl_type_size(dtype);
  if (event) record_start(event);
  MURPHY_NCCL_CALL(what, issue());
  wait(what, timeout_ms, block);
}

void NcclComm::all_reduce(const void* send, void* recv, size_t count, int dtype, int op, double timeout_ms) {
  collective("ncclAllReduce", dtype, timeout_ms,
             [&] { return api_->AllReduce(send, recv, count, dtype, op, comm_, stream_); });
}

void NcclComm::reduce_scatter(const void* send, void* recv, size_t recvcount, int dtype, int op, double timeout_ms) {
  collective("ncclReduceScatter", dtype, timeout_ms,
             [&] { return api_->ReduceScatter(send, recv, recvcount, dtype, op, comm_, stream_); });
}

void NcclComm::all_gather(const void* send, void* recv, size_t sendcount, int dtype, double timeout_ms) {
  collective("ncclAllGather", dtype, timeout_ms,
             [&] { return api_->AllGather(send, recv, sendcount, dtype, comm_, stream_); });
}

void NcclComm::broadcast(const void* send, void* recv, size_t count, int dtype, int root, double timeout_ms) {
  if (root < 0 || root >= nranks_) throw Error("NCCL broadcast: root " + std::to_string(root) + " is not a rank");
  collective("ncclBroadcast", dtype, timeout_ms,
             [&] { return api_->Broadcast(send, recv, count, dtype, root, comm_, stream_); });
}

void NcclComm::start_all_reduce(const void* send, void* recv, size_t count, int dtype, int op, double timeout_ms,
                                void** event) {
  collective("ncclAllReduce", dtype, timeout_ms,
             [&] { return api_->AllReduce(send, recv, count, dtype, op, comm_, stream_); }, false, event);
}

void NcclComm::start_reduce_scatter(const void* send, void* recv, size_t recvcount, int dtype, int op,
                                    double timeout_ms, void** event) {
  collective("ncclReduceScatter", dtype, timeout_ms,
             [&] { return api_->ReduceScatter(send, recv, recvcount, dtype, op, comm_, stream_); }, false, event);
}

void NcclComm::record_start(void** event) {
#ifdef MURPHY_WITH_CUDA
  if (event && stream_) *event = nccl_event_record(stream_);
#else
  (void)event;
#endif
}

void NcclComm::finish(const char* what, double timeout_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  if (aborted_.load() || abort_requested_.load() || comm_ == nullptr)
    throw Error(std::string("NCCL ") + what + ": the communicator was closed or aborted; create a new one");
#ifdef MURPHY_WITH_CUDA
  if (device_ >= 0) nccl_set_device(device_);
#endif
  wait(what, timeout_ms);
}

void NcclComm::close(double timeout_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  if (comm_ == nullptr || aborted_.load()) return;
  MURPHY_NCCL_CALL("ncclCommFinalize", api_->CommFinalize(comm_));
  wait("close (ncclCommFinalize)", timeout_ms);
  const ncclResult_t st = api_->CommDestroy(comm_);
  comm_ = nullptr;
  aborted_ = true;  // closed: no further calls
  if (st != ncclSuccess) throw Error("NCCL ncclCommDestroy failed: " + status_text(api_, st));
}

}  // namespace gpu
}  // namespace murphy
