// Reading and writing the model's weights as Hugging Face safetensors (native/model/weights.cc).
#pragma once
#include <string>
#include <vector>

#include "murphy/model/model.h"

namespace murphy {
namespace model {

// Fills the fp32 master weights w (layout L) from dir's model.safetensors or sharded index.
void load_weights(const std::string& dir, const Layout& L, const ModelConfig& c, float* w);
// Writes w as dir/model.safetensors (or shards of at most max_shard_bytes, and their index)
// in dtype; returns every file written with its size and the XXH64 of its bytes, hashed from
// memory as they are written (no read-back).
std::vector<SavedFile> save_weights(const std::string& dir, const Layout& L, const float* w, FileDType dtype, int64_t max_shard_bytes);
// The whole file as text; throws Error (EIO) naming the path.
std::string read_file_text(const std::string& path);

}  // namespace model
}  // namespace murphy
