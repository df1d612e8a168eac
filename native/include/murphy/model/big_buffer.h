// An allocator for the engine's parameter-sized buffers (weights, gradients, AdamW moments, the
// reference copy, the bf16 copy): blocks of kHugeMinBytes and more are placed on 2 MiB
// boundaries and marked MADV_HUGEPAGE, so that where transparent huge pages are "madvise" (the
// default of many distributions, and of the development VMs) the kernel backs them with 2 MiB
// pages at first touch: one page fault per 2 MiB instead of 512, and a TLB entry per 2 MiB for
// the streams that read them (AdamW, the forward's weights, decode). Where THP is "never" or the
// call fails, the memory is the same, on 4 KiB pages. Smaller blocks come from operator new.
// MURPHY_HUGE_PAGES=0 leaves the advice out (the kernel's default: 4 KiB pages under "madvise").
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "murphy/heap.h"

namespace murphy {
namespace model {

constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;
constexpr std::size_t kHugeMinBytes = std::size_t(8) << 20;  // at most 1/4 of a block rounded up

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  // Whether a block of n values is placed for huge pages (the rest comes from operator new).
  static bool huge(std::size_t n) noexcept { return n * sizeof(T) >= kHugeMinBytes; }

  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_alloc();
    const std::size_t bytes = n * sizeof(T);
    if (!huge(n)) return static_cast<T*>(::operator new(bytes));
    const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = nullptr;
    if (posix_memalign(&p, kHugePageBytes, rounded) != 0) throw std::bad_alloc();
    advise_huge_pages(p, rounded);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (!huge(n)) ::operator delete(p);
    else std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const noexcept { return false; }
};

using BigFloats = std::vector<float, HugePageAllocator<float>>;
using BigHalfs = std::vector<uint16_t, HugePageAllocator<uint16_t>>;

}  // namespace model
}  // namespace murphy
