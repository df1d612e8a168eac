// release_free_heap (murphy/heap.h).
#include "murphy/heap.h"

#include <cstdlib>  // defines __GLIBC__ on glibc (tested below: no C library header, no macro)
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

}  // namespace murphy
