// release_free_heap, advise_huge_pages (murphy/heap.h).
#include "murphy/heap.h"

#include <cstdlib>  // defines __GLIBC__ on glibc (tested below: no C library header, no macro)
#include <cstring>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace murphy {

bool release_free_heap() {
#ifdef __GLIBC__
  return malloc_trim(0) != 0;
#else
  return false;
#endif
}

bool advise_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const char* env = std::getenv("MURPHY_HUGE_PAGES");  // "0": leave the kernel's default
  if (env && std::strcmp(env, "0") == 0) return false;
  return madvise(p, bytes, MADV_HUGEPAGE) == 0;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

}  // namespace murphy
