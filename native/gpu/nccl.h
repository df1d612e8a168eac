// NCCL, loaded at run time with dlopen (as cuBLASLt is, cublaslt.h): one binary serves CPU-only
// and GPU machines, and nothing here needs NCCL's headers. The entry points and enums used are
// declared by hand from NVIDIA's public nccl.h (docs.nvidia.com/deeplearning/nccl).
//
// Where to look is decided in TypeScript (lib/gpu/nccl.ts: MURPHY_NCCL, CUDA_HOME/CUDA_PATH
// lib64, the nvidia-nccl Python wheel, the dynamic loader); this file opens the candidates and
// drives communicators. It is compiled into every build: with a CPU-only binary the collectives
// run on host pointers, which only a fake library (the tests') accepts; the CUDA build adds a
// stream per communicator (nccl_stream.cu).
//
// Every communicator is non-blocking (ncclConfig_t.blocking = 0): a call returns at once and
// its completion is polled (ncclCommGetAsyncError, and the stream in the CUDA build) against a
// deadline; past it the communicator is aborted (ncclCommAbort), so a dead peer is an error,
// never a hang. The calls that wait run on worker threads (native/gpu/nccl_binding.cc).
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dl_library.h"

namespace murphy {
namespace gpu {

// ---- types and constants of nccl.h (values from the public header)
using ncclResult_t = int;
constexpr ncclResult_t ncclSuccess = 0;
constexpr ncclResult_t ncclInProgress = 7;
using ncclComm_t = struct ncclComm*;
constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};
// ncclDataType_t
constexpr int ncclUint8 = 1;
constexpr int ncclFloat32 = 7;
constexpr int ncclFloat64 = 8;
constexpr int ncclBfloat16 = 9;
// ncclRedOp_t
constexpr int ncclSum = 0;
constexpr int ncclProd = 1;
constexpr int ncclMax = 2;
constexpr int ncclMin = 3;
constexpr int ncclAvg = 4;
// ncclConfig_t as laid out up to NCCL 2.17. NCCL copies `size` bytes of it and takes every
// later field from its own defaults; `version` says which of these fields it may read.
struct ncclConfig_v21700 {
  size_t size;
  unsigned int magic;    // 0xcafebeef
  unsigned int version;  // NCCL_VERSION(2, 17, 0) = 21700
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
};
constexpr int kNcclConfigUndefInt = INT32_MIN;  // NCCL_CONFIG_UNDEF_INT
using cudaStream_t = struct CUstream_st*;

// ---- the entry points (signatures as in nccl.h)
struct NcclApi {
  ncclResult_t (*GetVersion)(int* version);
  ncclResult_t (*GetUniqueId)(ncclUniqueId* id);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, void* config);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t* state);
  ncclResult_t (*CommFinalize)(ncclComm_t comm);
  ncclResult_t (*CommDestroy)(ncclComm_t comm);
  ncclResult_t (*CommAbort)(ncclComm_t comm);
  ncclResult_t (*AllReduce)(const void* send, void* recv, size_t count, int dtype, int op, ncclComm_t comm,
                            cudaStream_t stream);
  ncclResult_t (*ReduceScatter)(const void* send, void* recv, size_t recvcount, int dtype, int op, ncclComm_t comm,
                                cudaStream_t stream);
  ncclResult_t (*AllGather)(const void* send, void* recv, size_t sendcount, int dtype, ncclComm_t comm,
                            cudaStream_t stream);
  ncclResult_t (*Broadcast)(const void* send, void* recv, size_t count, int dtype, int root, ncclComm_t comm,
                            cudaStream_t stream);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t comm);
};

// The names resolved into NcclApi, in its field order.
extern const char* const kNcclSymbols[];
extern const size_t kNcclSymbolCount;

// One place to look, what happened to it, and what a search found (dl_library.h).
// NcclFound::version: ncclGetVersion(), major * 10000 + minor * 100 + patch.
using NcclCandidate = DlCandidate;
using NcclAttempt = DlAttempt;
using NcclFound = DlFound<int>;

// 22304 -> "2.23.4" (also the pre-2.9 encoding major * 1000 + minor * 100 + patch).
std::string nccl_version_text(int v);

// Tries the candidates in order: accepted when dlopen succeeds, every kNcclSymbols entry point
// resolves and ncclGetVersion reports 2.14 or newer (non-blocking communicators, ncclCommFinalize).
// install = false: closed again (doctor's probe); install = true: the first accepted library
// becomes the process's NCCL and stays open (later calls return it).
NcclFound nccl_load(const std::vector<NcclCandidate>& candidates, bool install);

// The installed library, or nullptr before a successful install.
const NcclApi* nccl();
const NcclFound& nccl_found();

// ncclGetUniqueId of the installed library (throws when none is installed).
std::array<uint8_t, kNcclUniqueIdBytes> nccl_unique_id();

// NCCL data types the communicator moves: "f32" -> ncclFloat32, "f64" -> ncclFloat64, "bf16" -> ncclBfloat16,
// "u8" -> ncclUint8.
size_t nccl_type_size(int dtype);

// One communicator of this process (one rank). Thread-safety: one call at a time (an internal
// mutex), except abort(), which may come from any thread while a call waits: that call then
// aborts the communicator and throws.
class NcclComm {
 public:
  // ncclCommInitRankConfig (blocking = 0) on `device` (CUDA build; -1: no device, host pointers
  // and no stream, which only a fake library accepts), then polls until the
  // communicator is ready. Past timeout_ms: ncclCommAbort, and an Error naming rank, world and
  // what to check. Any NCCL error: abort, Error with ncclGetErrorString and ncclGetLastError.
  static std::unique_ptr<NcclComm> init(const std::array<uint8_t, kNcclUniqueIdBytes>& id, int nranks, int rank,
                                        int device, double timeout_ms);
  ~NcclComm();

  // The collectives (counts in elements of dtype; NCCL's argument conventions). Each enqueues on
  // the communicator's stream and waits for it with the deadline.
  void all_reduce(const void* send, void* recv, size_t count, int dtype, int op, double timeout_ms);
  void reduce_scatter(const void* send, void* recv, size_t recvcount, int dtype, int op, double timeout_ms);
  void all_gather(const void* send, void* recv, size_t sendcount, int dtype, double timeout_ms);
  void broadcast(const void* send, void* recv, size_t count, int dtype, int root, double timeout_ms);

  // Started, not waited for (the overlap of ZeRO-1's reductions with the backward pass,
  // zero_shard.h): the call is issued after the work queued so far on the default stream (an
  // event: the gradients it reads), and returns once NCCL has taken it (ncclCommGetAsyncError no
  // longer ncclInProgress, bounded by the deadline as any call); the device work runs on the
  // communicator's stream while the caller goes on. finish() waits for every call started (and
  // the stream) with the deadline. Without a device (a fake library) there is no stream: NCCL
  // taking the call is its completion.
  // `event` (CUDA build, a communicator on a device): a timing event recorded on the
  // communicator's stream after its wait for the default stream, just before the call (the
  // overlap's device timeline; nccl_event_*). Left untouched without a stream.
  void start_all_reduce(const void* send, void* recv, size_t count, int dtype, int op, double timeout_ms,
                        void** event = nullptr);
  void start_reduce_scatter(const void* send, void* recv, size_t recvcount, int dtype, int op, double timeout_ms,
                            void** event = nullptr);
  void finish(const char* what, double timeout_ms);

  // ncclCommFinalize (polled with the deadline; aborted past it), then ncclCommDestroy.
  void close(double timeout_ms);
  // ncclCommAbort now, or (while a call waits) by that call. Idempotent.
  void abort();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int device() const { return device_; }
  bool open() const { return comm_ != nullptr && !aborted_.load(); }

 private:
  NcclComm(int nranks, int rank, int device) : nranks_(nranks), rank_(rank), device_(device) {}
  void check_open(const char* what) const;
  void record_start(void** event);
  // Every collective: under the lock, checks the communicator and the dtype, records the start
  // event when `event` is given, issues `issue()` (an NCCL call returning ncclResult_t; failure
  // aborts), then waits: until done when `block`, else only until NCCL has taken the call.
  template <class Issue>
  void collective(const char* what, int dtype, double timeout_ms, Issue issue, bool block = true,
                  void** event = nullptr);
  // Polls until the communicator is idle (and, CUDA build, with `stream` its stream done);
  // aborts past the deadline.
  void wait(const char* what, double timeout_ms, bool stream = true);
  void abort_locked();
  [[noreturn]] void fail(ncclResult_t st, const char* what);

  const NcclApi* api_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int nranks_ = 0, rank_ = 0, device_ = 0;
  std::mutex mu_;
  std::atomic<bool> abort_requested_{false};
  std::atomic<bool> aborted_{false};
};

#ifdef MURPHY_WITH_CUDA
// nccl_stream.cu: the communicator's stream and device (every CUDA call checked).
void nccl_set_device(int device);
cudaStream_t nccl_stream_create(int device);
// true when every operation on the stream has finished; throws on a CUDA error.
bool nccl_stream_done(cudaStream_t s);
// Makes s wait (on the device) for the work queued so far on the default stream (uploads).
void nccl_stream_wait_default(cudaStream_t s);
void nccl_stream_destroy(cudaStream_t s) noexcept;
// Timing events (the overlap's device timeline, zero_shard.h): one recorded on `s` (nullptr: the
// legacy default stream, where the engine computes); the milliseconds from a to b once both
// have completed (waits for them; > 0: a completed first); destroy.
void* nccl_event_record(cudaStream_t s);
float nccl_event_elapsed_ms(void* a, void* b);
void nccl_event_destroy(void* e) noexcept;
#endif

}  // namespace gpu
}  // namespace murphy
