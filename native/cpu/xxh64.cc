// XXH64 (seed 0), straight from the specification (doc/xxhash_spec.md of xxHash):
//   P1..P5 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
//   round(acc, x)    = rotl(acc + x * P2, 31) * P1
//   stripes of 32 bytes feed 4 accumulators v1..v4 (initialised P1+P2, P2, 0, -P1), one
//   little-endian u64 lane each; input < 32 bytes starts from h = P5 instead of merging them:
//   h = rotl(v1,1) + rotl(v2,7) + rotl(v3,12) + rotl(v4,18), then for each v: h = (h ^ xround(0, v)) * P1 + P4
//   h += length; the tail: 8-byte words h = rotl(h ^ xround(0, w), 27) * P1 + P4,
//   one 4-byte word h = rotl(h ^ (w * P1), 23) * P2 + P3, bytes h = rotl(h ^ (b * P5), 11) * P1
//   avalanche: h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32
// Scalar code: the four lanes are independent, so it runs at several bytes per cycle, far
// above the disk and page-cache rates it competes with; no SIMD path is needed.
#include "murphy/xxh64.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "murphy/common.h"

namespace murphy {
namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t P3 = 0x165667B19E3779F9ULL;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads, whatever the host's byte order (one unaligned load on little-endian hosts).
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint64_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
#else
inline uint64_t read64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t read32(const unsigned char* p) {
  return uint64_t(p[0]) | (uint64_t(p[1]) << 8) | (uint64_t(p[2]) << 16) | (uint64_t(p[3]) << 24);
}
#endif

inline uint64_t xround(uint64_t acc, uint64_t x) { return rotl(acc + x * P2, 31) * P1; }
inline uint64_t merge(uint64_t h, uint64_t v) { return (h ^ xround(0, v)) * P1 + P4; }

}  // namespace

Xxh64::Xxh64() : v{P1 + P2, P2, 0, 0 - P1}, mem{} {}

void Xxh64::update(const void* data, size_t len) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  total += len;
  if (mem_size + len < 32) {
    if (len) std::memcpy(mem + mem_size, p, len);
    mem_size += len;
    return;
  }
  if (mem_size) {
    const size_t fill = 32 - mem_size;
    std::memcpy(mem + mem_size, p, fill);
    for (int i = 0; i < 4; ++i) v[i] = xround(v[i], read64(mem + 8 * i));
    p += fill;
    len -= fill;
    mem_size = 0;
  }
  uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
  while (len >= 32) {
    a = xround(a, read64(p));
    b = xround(b, read64(p + 8));
    c = xround(c, read64(p + 16));
    d = xround(d, read64(p + 24));
    p += 32;
    len -= 32;
  }
  v[0] = a, v[1] = b, v[2] = c, v[3] = d;
  if (len) std::memcpy(mem, p, len);
  mem_size = len;
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total >= 32) {
    h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
    for (int i = 0; i < 4; ++i) h = merge(h, v[i]);
  } else {
    h = v[2] /* the seed */ + P5;
  }
  h += total;
  const unsigned char* p = mem;
  size_t n = mem_size;
  for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ xround(0, read64(p)), 27) * P1 + P4;
  if (n >= 4) {
    h = rotl(h ^ (read32(p) * P1), 23) * P2 + P3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; ++p, --n) h = rotl(h ^ (uint64_t(*p) * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(const void* data, size_t len) {
  Xxh64 s;
  s.update(data, len);
  return s.digest();
}

std::string xxh64_hex(uint64_t h) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

uint64_t xxh64_file(const std::string& path, uint64_t* bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error("cannot open " + path + ": " + std::strerror(errno), ErrorCode::Io);
  constexpr size_t kChunk = size_t(8) << 20;
  std::unique_ptr<unsigned char[]> buf(new unsigned char[kChunk]);
  Xxh64 s;
  for (;;) {
    const size_t n = std::fread(buf.get(), 1, kChunk, f);
    s.update(buf.get(), n);
    if (n < kChunk) break;
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw Error("cannot read " + path + ": " + std::strerror(err), ErrorCode::Io);
  if (bytes) *bytes = s.total;
  return s.digest();
}

}  // namespace murphy
