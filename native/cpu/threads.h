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

// parallel_for whose chunks have a home thread: [0, n) is cut into one contiguous part per
// thread (the calling thread's first, then the workers' in a fixed order), and each thread takes
// the chunks of its own part first, front to back, then helps with the chunks the others have not
// claimed. When every thread is running, repeated calls of one size give each thread the same
// items, so memory-bound loops over the same data (a decode step's weight rows) find their part
// in that core's caches; a thread that is late or descheduled leaves its chunks to the others.
void parallel_for_affine(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace murphy
