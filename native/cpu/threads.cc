#include "threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
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

// One parallel_for call. It lives on the caller's stack; workers reach it only through
// Pool::job_ (read under the pool's mutex) and the caller does not return while any worker
// still holds it, so a late worker can never touch the next call's counters.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunks = 0;
  std::atomic<int64_t> next{0};
  int64_t pending = 0;   // chunks not yet finished (guarded by the pool's mutex)
  int attached = 0;      // workers currently inside drain() (guarded by the pool's mutex)
  std::exception_ptr error;

  // Takes chunks until none is left; returns how many this thread finished.
  int64_t drain() {
    int64_t done = 0;
    const bool outer = t_in_region;
    t_in_region = true;
    for (;;) {
      const int64_t c = next.fetch_add(1);
      if (c >= chunks) break;
      const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      try {
        (*fn)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_mutex);
        if (!error) error = std::current_exception();
      }
      ++done;
    }
    t_in_region = outer;
    return done;
  }
  std::mutex error_mutex;
};

// Workers sleep on a condition variable until a job is posted.
class Pool {
 public:
  explicit Pool(int n) { start(n); }
  ~Pool() { stop(); }

  int size() const { return n_threads_; }

  void resize(int n) {
    std::lock_guard<std::mutex> run(run_mutex_);  // no job is running while we resize
    stop();
    start(n);
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
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
    job.pending = job.chunks;
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &job;
      ++generation_;
    }
    cv_.notify_all();
    const int64_t mine = job.drain();
    std::unique_lock<std::mutex> lk(m_);
    job.pending -= mine;
    done_cv_.wait(lk, [&] { return job.pending == 0 && job.attached == 0; });
    job_ = nullptr;
    lk.unlock();
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  void start(int n) {
    n_threads_ = std::max(1, n);
    quit_ = false;
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker(); });
  }

  void worker() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      Job* job = job_;
      if (!job) continue;  // that call already finished without us
      ++job->attached;
      lk.unlock();
      const int64_t done = job->drain();
      lk.lock();
      job->pending -= done;
      --job->attached;
      if (job->pending == 0 && job->attached == 0) done_cv_.notify_all();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(m_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::mutex run_mutex_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  int n_threads_ = 1;
  bool quit_ = false;
  uint64_t generation_ = 0;
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
  pool().run(n, grain, fn);
}

}  // namespace murphy
