#include "threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace murphy {
namespace {

int default_threads() {
  if (const char* env = std::getenv("MURPHY_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? int(hc) : 1;
}

// True while this thread executes chunks of a parallel region: a parallel_for called from
// inside one runs serially instead of waiting for the pool it is part of.
thread_local bool t_in_region = false;

// One part of a job's chunks, claimed front to back (padded: the threads' counters on separate lines).
struct alignas(64) Part {
  std::atomic<int64_t> next{0};
};

// One parallel_for call. It lives on the caller's stack; workers reach it only through
// Pool::job_ (read under the pool's mutex) and the caller does not return while any worker
// still holds it, so a late worker can never touch the next call's counters.
// Chunk c covers [n c / chunks, n (c + 1) / chunks). The chunks are cut into `nparts` parts of
// `per_part` (a plain parallel_for: one part); thread t claims from part t % nparts first, then
// from the parts after it.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunks = 0, per_part = 0;
  int nparts = 1;
  Part* parts = nullptr;
  // Changed under the pool's mutex (so a sleeping caller's wait sees them); atomics so that the
  // caller's spin can read them without it.
  std::atomic<int64_t> pending{0};  // chunks not yet finished
  std::atomic<int> attached{0};     // workers currently inside drain()
  std::exception_ptr error;

  // Takes chunks until none is left, starting with thread `tid`'s part; returns how many this
  // thread finished.
  int64_t drain(int tid) {
    int64_t done = 0;
    const bool outer = t_in_region;
    t_in_region = true;
    for (int i = 0; i < nparts; ++i) {
      const int p = (tid + i) % nparts;
      for (;;) {
        const int64_t c = parts[p].next.fetch_add(1);
        if (c >= per_part) break;
        const int64_t g = int64_t(p) * per_part + c;
        const int64_t begin = n * g / chunks, end = n * (g + 1) / chunks;
        try {
          (*fn)(begin, end);
        } catch (...) {
          std::lock_guard<std::mutex> lk(error_mutex);
          if (!error) error = std::current_exception();
        }
        ++done;
      }
    }
    t_in_region = outer;
    return done;
  }
  std::mutex error_mutex;
};

// How long an idle thread spins before it sleeps: MURPHY_POOL_SPIN_US microseconds (default
// 100; 0 = sleep at once). Waking a sleeping worker took 4-10 us at the median and 1.5 ms at the
// 90th percentile on the busy development VM (the vCPU descheduled), against ~0.3 ms for a small
// product on two cores; meanwhile the caller does the chunks itself. A worker that just finished
// a job spins that long for the next one (back-to-back products find it awake), and the caller
// spins that long for the workers' last chunks before it sleeps. The bound keeps an idle
// process from holding a core that other processes want.
int default_spin_us() {
  if (const char* env = std::getenv("MURPHY_POOL_SPIN_US")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == 0 && v >= 0) return int(std::min<long>(v, 1000000));
  }
  return 100;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// The first part of a spin, in microseconds, that only pauses: a job posted then is seen within
// ~0.2 us, where a spinner between sched_yield calls (~0.5 us each here) saw it after ~1 us
// (median pick-up delay of a posted job at gaps of 1-50 us, measured on the idle 2-vCPU VM:
// 0.20-0.26 us pausing, 0.89-1.06 us yielding). Half the gaps between the demo's parallel
// regions are under 3.5 us (docs/kernels.md, "SIMD dispatch and threads").
constexpr int kPauseOnlyUs = 10;

// Spins until done() or `us` microseconds have passed; returns done(). The first kPauseOnlyUs
// pause (a job posted then is seen at once), later rounds yield the core, so that a spinner
// never keeps a runnable thread (of this pool, when it has more threads than cores, or of
// another process) off the CPU for long.
template <class F>
bool spin_until(const F& done, int us) {
  if (us <= 0) return done();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::microseconds(us);
  const auto pause_end = start + std::chrono::microseconds(std::min(us, kPauseOnlyUs));
  bool pausing = true;
  for (uint32_t i = 1;; ++i) {
    if (done()) return true;
    if (pausing) {
      cpu_relax();  // ~26 ns on this CPU: the clock is read every 32 rounds
      if (i % 32 == 0 && std::chrono::steady_clock::now() >= pause_end) pausing = false;
      continue;
    }
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

// Workers spin briefly (default_spin_us), then sleep on a condition variable, until a job is
// posted. Every change of the shared state (job_, generation_, quit_, a job's pending and
// attached) is made under m_, so a sleeper cannot miss it; the atomics let the spinners read
// it without the mutex.
class Pool {
 public:
  explicit Pool(int n) : spin_us_(default_spin_us()) { start(n); }
  ~Pool() { stop(); }

  int size() const { return n_threads_; }

  void resize(int n) {
    std::lock_guard<std::mutex> run(run_mutex_);  // no job is running while we resize
    stop();
    start(n);
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn, bool affine) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    const int64_t max_chunks = (n + grain - 1) / grain;
    if (t_in_region || n_threads_ == 1 || max_chunks == 1) {
      fn(0, n);
      return;
    }
    std::lock_guard<std::mutex> run(run_mutex_);  // one parallel region at a time
    Job job;
    job.fn = &fn;
    job.n = n;
    // a few chunks per thread balances uneven work without much overhead
    job.chunks = std::min<int64_t>(max_chunks, int64_t(n_threads_) * 4);
    // affine: one part per thread (fewer when there are fewer chunks), whole chunks each
    job.nparts = affine ? int(std::min<int64_t>(n_threads_, job.chunks)) : 1;
    job.per_part = job.chunks / job.nparts;
    job.chunks = job.per_part * job.nparts;
    for (int p = 0; p < job.nparts; ++p) parts_[p].next.store(0, std::memory_order_relaxed);
    job.parts = parts_.get();
    job.pending.store(job.chunks, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();  // no system call when every worker is spinning
    const int64_t mine = job.drain(0);
    {
      std::lock_guard<std::mutex> lk(m_);
      job.pending.fetch_sub(mine, std::memory_order_relaxed);
    }
    // The workers' last chunks: spin, then sleep. A worker attaches only under m_, so the check
    // under m_ below is final: after it no worker can reach `job`.
    spin_until([&] { return finished(job); }, spin_us_);
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [&] { return finished(job); });
    job_ = nullptr;
    lk.unlock();
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  static bool finished(const Job& job) {
    return job.pending.load(std::memory_order_acquire) == 0 && job.attached.load(std::memory_order_acquire) == 0;
  }

  void start(int n) {
    n_threads_ = std::max(1, n);
    quit_.store(false);
    parts_.reset(new Part[size_t(n_threads_)]);
    // a worker waits for the jobs after this generation (one posted before it runs included)
    const uint64_t gen = generation_.load();
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, gen, i] { worker(gen, i); });
  }

  // Worker `tid` (1 .. threads - 1; the calling thread is 0).
  void worker(uint64_t seen, int tid) {
    for (;;) {
      spin_until([&] { return quit_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; },
                 spin_us_);
      Job* job;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return quit_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_relaxed) != seen; });
        if (quit_.load(std::memory_order_relaxed)) return;
        seen = generation_.load(std::memory_order_relaxed);
        job = job_;
        if (!job) continue;  // that call already finished without us
        job->attached.fetch_add(1, std::memory_order_relaxed);
      }
      const int64_t done = job->drain(tid);
      std::lock_guard<std::mutex> lk(m_);
      job->pending.fetch_sub(done, std::memory_order_release);
      job->attached.fetch_sub(1, std::memory_order_release);
      if (finished(*job)) done_cv_.notify_all();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(m_);
      quit_.store(true);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  const int spin_us_;
  std::mutex run_mutex_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  int n_threads_ = 1;
  std::unique_ptr<Part[]> parts_;  // the running job's part counters (one job at a time: run_mutex_)
  std::atomic<bool> quit_{false};
  std::atomic<uint64_t> generation_{0};
  Job* job_ = nullptr;
};

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }
void set_num_threads(int n) {
  if (t_in_region) return;  // not from inside a parallel region
  pool().resize(n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  pool().run(n, grain, fn, false);
}

void parallel_for_affine(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  pool().run(n, grain, fn, true);
}

}  // namespace murphy
