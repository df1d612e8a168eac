// The decode kernels' launch constants and the paged attention's shape, shared by the GPU
// launchers (decode_kernels_cuda.h) and the device engine's host backend (engine/host_backend.h),
// so that both run kernels/paged_attention.h and kernels/sampling.h with the same block sizes
// (block reductions sum in an order that depends on the block size: same size, same bits).
#pragma once
#include <cstdint>

namespace murphy {
namespace gpu {

constexpr int kAppendBlock = 256;     // KV append: one thread per element
constexpr int kPagedAttnBlock = 128;  // per (token, head, partition): threads over positions, then over head_dim
constexpr int kSampleBlock = 512;     // per row of logits

struct PagedAttentionShape {
  int64_t n_new, H, G, D, block_size, max_blocks, partition, n_parts;
  float scale;
};
// fp32 floats of the partials (o [n_new, H, n_parts, D], m and l [n_new, H, n_parts])
inline int64_t paged_attention_workspace_floats(const PagedAttentionShape& a) { return a.n_new * a.H * a.n_parts * (a.D + 2); }

}  // namespace gpu
}  // namespace murphy
