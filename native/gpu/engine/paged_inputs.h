// The inputs of one paged generation step of a device engine (docs/gpu.md, "Generation"):
// exactly lib/rollout/paged/plan-arrays.ts's PlanArrays (the varlen layout of vLLM's and
// FlashAttention's kernels) plus one set of sampling options per sample row, and the checks
// that make every index the kernels read or write lie inside its array. All pointers are host
// arrays; nothing here does model math.
#pragma once
#include <cstdint>
#include <string>

#include "murphy/model/model.h"

namespace murphy {
namespace model {

struct PagedInputs {
  int64_t T = 0;           // tokens in the step
  int64_t n_seqs = 0;      // S
  int64_t max_blocks = 0;  // columns of block_tables
  int64_t n_logits = 0;    // L
  int64_t n_samples = 0;   // R
  int64_t n_copies = 0;    // C
  const int32_t* input_ids = nullptr;        // [T]
  const int32_t* positions = nullptr;        // [T]
  const int32_t* slot_mapping = nullptr;     // [T] pool slot = block * block_size + offset
  const int32_t* query_start_loc = nullptr;  // [S + 1], 0 .. T
  const int32_t* seq_lens = nullptr;         // [S] context length after the step
  const int32_t* block_tables = nullptr;     // [S x max_blocks]
  const int32_t* logits_indices = nullptr;   // [L] token whose logits are computed
  const int32_t* sample_rows = nullptr;      // [R] row of the L logits rows
  const int32_t* sample_indices = nullptr;   // [R] sample index j (seed stream (seed, j))
  const int32_t* copies = nullptr;           // [C x 2] (src, dst) block copies, before the KV writes
};

// Per sample row (R of each): as the CPU sampler's SampleOptions (temperature 0 = greedy,
// top_p 1 / top_k 0 / min_p 0 = off); the draw is sample_uniform(sample_stream(seed, j), step).
struct PagedSampling {
  const float* temperature = nullptr;
  const float* top_p = nullptr;
  const int32_t* top_k = nullptr;
  const float* min_p = nullptr;
  const uint32_t* seed = nullptr;
  const int32_t* step = nullptr;
};

// The KV pools of an engine: blocks x block_size slots per layer, bytes_per_token over all
// layers (K and V); free_bytes is the device's free memory, -1 when unknown (no device).
struct KvInfo {
  int64_t blocks = 0, block_size = 0, bytes_per_token = 0, free_bytes = -1;
};

// One line naming the problem and the fix when `in` does not fit the model and the pools
// (n_blocks x block_size slots), or `s` (when given) holds an option out of range:
// queryStartLoc 0 .. T increasing, each sequence's positions seqLen - n .. seqLen - 1 below
// max_position_embeddings, its first ceil(seqLen / blockSize) block-table entries inside the
// pool, each slot the one its block table gives its position (and no slot written twice),
// token ids in the vocabulary, logitsIndices in [0, T), sampleRows in [0, L), copies between
// distinct blocks of the pool (no block written by two copies). `what` prefixes the message.
void check_paged_inputs(const ModelConfig& c, int64_t n_blocks, int64_t block_size, const PagedInputs& in,
                        const PagedSampling* s, const char* what);

}  // namespace model
}  // namespace murphy
