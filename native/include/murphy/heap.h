// The C heap's free memory, given back to the system on request; big blocks marked for huge pages.
#pragma once
#include <cstddef>

namespace murphy {

// Returns the free pages of the malloc arenas to the system (glibc's malloc_trim(0)); true when
// some were returned, false when none were or the C library has no such call. Costly for
// whoever allocates next: each page given back is faulted in again (and zeroed) at its next
// use, ~0.1-11 us per 4 KiB page depending on the machine; for a server between requests, not
// for the steps of a loop.
bool release_free_heap();

// Marks [p, p + bytes) for transparent huge pages (madvise MADV_HUGEPAGE), best effort: false
// where the call failed or is absent, or MURPHY_HUGE_PAGES=0 (leave the kernel's default).
// Users: the model engine's parameter buffers (murphy/model/big_buffer.h).
bool advise_huge_pages(void* p, std::size_t bytes);

}  // namespace murphy
