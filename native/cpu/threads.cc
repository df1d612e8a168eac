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

// The running parallel_for call, kept in the pool (one call at a time: Pool::run_mutex_).
// Chunk c covers [n c / chunks, n (c + 1) / chunks). The chunks are cut into `nparts` parts of
// `per_part` (a plain parallel_for: one part); thread t claims from part t % nparts first, then
// from the parts after it. The caller writes the fields before it publishes the job's
// generation (Pool::post); a worker reads them after it has seen that generation.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunks = 0, per_part = 0;
  int nparts = 1;
  Part* parts = nullptr;
  std::exception_ptr error;
  std::mutex error_mutex;

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
// posted. The hand-off takes no lock while the threads are awake (a posted job used to take the
// pool's mutex five times between the caller and a worker, each a cache-line transfer between
// cores: 0.6-0.9 us for an empty region on 2 vCPUs); the mutex and the condition variables are
// only for sleeping. Three counters, all sequentially consistent:
//   generation_  the posted job's number (the caller writes the job, then the generation);
//   done_gen_    the last job whose chunks are all finished;
//   active_      workers between taking a generation and letting go of it.
// A worker counts itself in (active_ + 1), then reads generation_ and done_gen_, and works on
// the job only if it is not done. The caller, once every chunk is finished (pending_ 0), sets
// done_gen_ and then waits for active_ to reach 0 before it returns (and may reset the parts'
// counters for the next job). Whichever of "worker counts in" and "caller reads active_" comes
// first in the single order of seq_cst operations, either the caller waits for that worker or the
// worker sees done_gen_ and touches nothing: a late worker never claims the next job's chunks
// with this job's fields. (A worker that counted in and then sees the next generation already
// posted works on that one; the next call's wait covers it.)
// Sleeping: a worker announces itself (sleepers_ + 1) under m_ and re-checks generation_ before
// it waits; the caller publishes generation_ and then reads sleepers_, and notifies under m_ if
// any: one of the two sees the other. The caller's own wait (waiting_ and done_cv_) is the same
// pattern against the workers' decrements of pending_ and active_.
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
    Job& job = job_;
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
    job.error = nullptr;
    pending_.store(job.chunks);
    const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
    generation_.store(gen);  // publishes the job (seq_cst: also orders the sleepers_ read below)
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lk(m_);  // a worker between its check and its wait holds m_
      cv_.notify_all();
    }
    const int64_t mine = job.drain(0);
    if (mine > 0) pending_.fetch_sub(mine);
    wait_until([&] { return pending_.load() == 0; });
    done_gen_.store(gen);
    wait_until([&] { return active_.load() == 0; });
    job.fn = nullptr;
    if (job.error) {
      std::exception_ptr e = job.error;
      job.error = nullptr;
      std::rethrow_exception(e);
    }
  }

 private:
  // The caller's wait for the workers: spin, then sleep until a worker's decrement notifies.
  template <class F>
  void wait_until(const F& done) {
    if (spin_until(done, spin_us_)) return;
    std::unique_lock<std::mutex> lk(m_);
    waiting_.store(true);
    done_cv_.wait(lk, done);
    waiting_.store(false);
  }

  // After a worker's decrement of pending_ or active_: wakes a sleeping caller.
  void notify_caller() {
    if (waiting_.load()) {
      std::lock_guard<std::mutex> lk(m_);
      done_cv_.notify_all();
    }
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
    const auto posted = [&] { return quit_.load() || generation_.load() != seen; };
    for (;;) {
      if (!spin_until(posted, spin_us_)) {
        std::unique_lock<std::mutex> lk(m_);
        sleepers_.fetch_add(1);
        cv_.wait(lk, posted);
        sleepers_.fetch_sub(1);
      }
      if (quit_.load()) return;
      active_.fetch_add(1);
      const uint64_t gen = generation_.load();
      if (done_gen_.load() != gen) {
        const int64_t done = job_.drain(tid);
        if (done > 0 && pending_.fetch_sub(done) == done) notify_caller();
      }
      seen = gen;
      if (active_.fetch_sub(1) == 1) notify_caller();
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
  std::unique_ptr<Part[]> parts_;  // the running job's part counters
  Job job_;
  std::atomic<bool> quit_{false};
  // Written by the caller, read by the workers (one line); written by the workers (another).
  alignas(64) std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> done_gen_{0};
  std::atomic<bool> waiting_{false};
  alignas(64) std::atomic<int64_t> pending_{0};  // chunks of the posted job not yet finished
  std::atomic<int> active_{0};
  std::atomic<int> sleepers_{0};
  char pad_[64];
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
