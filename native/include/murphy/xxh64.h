// XXH64 (xxHash, 64-bit, seed 0): the checkpoint manifest's integrity hash.
// Specification: https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md
// Not cryptographic: it detects truncation and accidental corruption (bit rot, torn or
// misdirected writes) with a miss probability of about 2^-64 per file; it does not defend
// against someone who can also rewrite the manifest (nor did SHA-256 in an unsigned manifest).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace murphy {

// Streaming state: update() any number of times, then digest(). The digest equals the
// one-shot hash of the concatenated input.
struct Xxh64 {
  uint64_t v[4];
  uint64_t total = 0;
  unsigned char mem[32];
  size_t mem_size = 0;

  Xxh64();
  void update(const void* data, size_t len);
  uint64_t digest() const;
};

uint64_t xxh64(const void* data, size_t len);

// The digest as 16 lower-case hex digits (big-endian, as xxhsum prints it).
std::string xxh64_hex(uint64_t h);

// XXH64 and byte count of a file, read in 8 MiB chunks. Throws murphy::Error (Io) naming the
// file when it cannot be opened or read.
uint64_t xxh64_file(const std::string& path, uint64_t* bytes);

}  // namespace murphy
