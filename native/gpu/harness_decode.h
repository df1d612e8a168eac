// The decode kernels (kernels/paged_attention.h, kernels/sampling.h) as harness cases: the
// checks and derived arrays shared by the CPU harness run (harness_decode.cc) and the GPU run
// (cuda_decode_cases.cu), and the runners. Ops:
//   kv_append        params kvHeads, headDim, nBlocks, blockSize; inputs k, v [n_new, G, D],
//                    kPool, vPool [nBlocks, blockSize, G, D] (initial contents); intInputs slots [n_new]
//                    -> kPool, vPool
//   paged_attention  params heads, kvHeads, headDim, blockSize, nBlocks, maxBlocks, partition,
//                    scale (default 1/sqrt(headDim)); inputs q [n_new, H, D], kPool, vPool;
//                    intInputs blockTable [nSeqs, maxBlocks], contextLens [nSeqs], queryLens [nSeqs]
//                    (the new tokens of a sequence are the last queryLens of its context)
//                    -> out [n_new, H, D], lse [n_new, H]
//   sample           params vocab; inputs logits [rows, vocab], temperature, topP, minP [rows];
//                    intInputs topK, seed (as uint32), sampleIndex, step [rows]
//                    -> token, logp [rows]
//   param fault = 1 (harness only) runs a deliberately broken variant, which the tests must catch.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "harness_ops.h"

namespace murphy {
namespace gpu {

bool is_decode_op(const std::string& op);

struct KvAppendCase {
  int64_t n_new = 0, G = 0, D = 0, slots = 0;  // slots = nBlocks x blockSize
  std::vector<int64_t> slot;
};
KvAppendCase kv_append_case(const HarnessCase& c);

struct PagedAttentionCase {
  int64_t n_new = 0, H = 0, G = 0, D = 0, block_size = 0, n_blocks = 0, max_blocks = 0, n_seqs = 0;
  int64_t partition = 0, n_parts = 0;
  float scale = 1.0f;
  std::vector<int32_t> table, seq, pos;  // seq, pos: per new token
};
PagedAttentionCase paged_attention_case(const HarnessCase& c);

struct SampleCase {
  int64_t rows = 0, V = 0;
  std::vector<float> temperature, top_p, min_p;
  std::vector<int32_t> top_k;
  std::vector<uint64_t> stream;  // sample_stream(seed, sampleIndex)
  std::vector<int64_t> step;
};
SampleCase sample_case(const HarnessCase& c);

HarnessOut run_decode_case(const HarnessCase& c);

#ifdef MURPHY_WITH_CUDA
std::map<std::string, std::vector<float>> run_cuda_decode_case(const HarnessCase& c);
#endif

}  // namespace gpu
}  // namespace murphy
