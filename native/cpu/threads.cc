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

// Workers sleep on a condition variable; a job is a chunk counter they drain.
class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return n_threads_; }

  void resize(int n) {
    std::lock_guard<std::mutex> run(run_mutex_);
    stop();
    n_threads_ = std::max(1, n);
    quit_ = false;
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker(); });
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    int64_t max_chunks = (n + grain - 1) / grain;
    if (n_threads_ == 1 || max_chunks == 1) {
      fn(0, n);
      return;
    }
    std::lock_guard<std::mutex> run(run_mutex_);  // one parallel region at a time
    // A few chunks per thread balances uneven rows without much overhead.
    int64_t chunks = std::min<int64_t>(max_chunks, int64_t(n_threads_) * 4);
    {
      std::lock_guard<std::mutex> lk(m_);
      fn_ = &fn;
      n_ = n;
      n_chunks_ = chunks;
      next_.store(0);
      pending_ = chunks;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    drain();
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [this] { return pending_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void drain() {
    for (;;) {
      int64_t c = next_.fetch_add(1);
      if (c >= n_chunks_) return;
      int64_t begin = n_ * c / n_chunks_, end = n_ * (c + 1) / n_chunks_;
      try {
        (*fn_)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lk(m_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(m_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }

  void worker() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
      }
      drain();
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
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, n_chunks_ = 0, pending_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }
void set_num_threads(int n) { pool().resize(n); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  pool().run(n, grain, fn);
}

}  // namespace murphy
