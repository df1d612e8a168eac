// A small persistent thread pool for the CPU kernels.
#pragma once
#include <cstdint>
#include <functional>

namespace murphy {

// Number of worker threads used by parallel_for (the calling thread included).
// Default: the CPUs this process may run on; MURPHY_NUM_THREADS overrides.
int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) over [0, n) split into contiguous chunks of at least `grain`
// items, on up to num_threads() threads, and returns when all chunks are done.
// Exceptions thrown by fn are rethrown (the first one) in the caller. Calls from several
// threads take turns; a call from inside fn (nested parallelism) runs serially on the
// calling thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace murphy
