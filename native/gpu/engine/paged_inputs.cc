// See paged_inputs.h.
#include "paged_inputs.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace murphy {
namespace model {

namespace {
std::string n2s(int64_t v) { return std::to_string(v); }
}  // namespace

void check_paged_inputs(const ModelConfig& c, int64_t n_blocks, int64_t block_size, const PagedInputs& in,
                        const PagedSampling* s, const char* what) {
  const std::string w = std::string(what) + ": ";
  auto bad = [&](const std::string& m) { throw Error(w + m); };
  if (n_blocks <= 0 || block_size <= 0) bad("no KV pools allocated; call kvAllocate({ blocks, blockSize }) first");
  if (in.T < 1) bad("no tokens in the step (inputIds is empty)");
  if (in.n_seqs < 1) bad("no sequences in the step (queryStartLoc must hold at least [0, T])");
  if (in.max_blocks < 1) bad("maxBlocks must be >= 1");
  if (in.n_logits < 0 || in.n_samples < 0 || in.n_copies < 0) bad("negative array length");
  const int32_t* q = in.query_start_loc;
  if (q[0] != 0 || q[in.n_seqs] != in.T)
    bad("queryStartLoc must start at 0 and end at the number of tokens (" + n2s(in.T) + "); got " + n2s(q[0]) + " .. " +
        n2s(q[in.n_seqs]));
  const int64_t slots = n_blocks * block_size;
  for (int64_t sq = 0; sq < in.n_seqs; ++sq) {
    const int64_t n = int64_t(q[sq + 1]) - q[sq], len = in.seq_lens[sq];
    const std::string ss = "sequence " + n2s(sq);
    if (n < 1) bad(ss + " has no new tokens (queryStartLoc must increase)");
    if (len < n) bad(ss + ": seqLens = " + n2s(len) + " is shorter than its " + n2s(n) + " new tokens");
    if (len > c.max_pos) bad(ss + ": seqLens = " + n2s(len) + " is beyond max_position_embeddings (" + n2s(c.max_pos) + ")");
    const int64_t nb = (len + block_size - 1) / block_size;
    if (nb > in.max_blocks)
      bad(ss + ": seqLens = " + n2s(len) + " needs " + n2s(nb) + " blocks of " + n2s(block_size) + " but maxBlocks is " +
          n2s(in.max_blocks));
    const int32_t* table = in.block_tables + sq * in.max_blocks;
    for (int64_t b = 0; b < nb; ++b)
      if (table[b] < 0 || table[b] >= n_blocks)
        bad(ss + ": block id " + n2s(table[b]) + " (blockTables entry " + n2s(b) + ") is outside the pool's " +
            n2s(n_blocks) + " blocks");
    for (int64_t k = 0; k < n; ++k) {
      const int64_t t = q[sq] + k, p = len - n + k;
      if (in.positions[t] != p)
        bad(ss + ": positions[" + n2s(t) + "] = " + n2s(in.positions[t]) + " but its new tokens sit at positions " +
            n2s(len - n) + " .. " + n2s(len - 1) + " (seqLens - n .. seqLens - 1): the lengths disagree");
      if (in.input_ids[t] < 0 || in.input_ids[t] >= c.vocab)
        bad("inputIds[" + n2s(t) + "] = " + n2s(in.input_ids[t]) + " is outside the vocabulary [0, " + n2s(c.vocab) + ")");
      const int64_t slot = in.slot_mapping[t];
      if (slot < 0 || slot >= slots)
        bad("slotMapping[" + n2s(t) + "] = " + n2s(slot) + " is outside the pool's " + n2s(slots) + " slots");
      const int64_t want = int64_t(table[p / block_size]) * block_size + p % block_size;
      if (slot != want)
        bad("slotMapping[" + n2s(t) + "] = " + n2s(slot) + " but the block table of " + ss + " puts position " + n2s(p) +
            " at slot " + n2s(want));
    }
  }
  std::vector<int32_t> sl(in.slot_mapping, in.slot_mapping + in.T);
  std::sort(sl.begin(), sl.end());
  for (size_t i = 1; i < sl.size(); ++i)
    if (sl[i] == sl[i - 1]) bad("slot " + n2s(sl[i]) + " is written by two tokens of the step (blocks shared while written)");
  for (int64_t i = 0; i < in.n_logits; ++i)
    if (in.logits_indices[i] < 0 || in.logits_indices[i] >= in.T)
      bad("logitsIndices[" + n2s(i) + "] = " + n2s(in.logits_indices[i]) + " is outside the step's " + n2s(in.T) + " tokens");
  for (int64_t r = 0; r < in.n_samples; ++r) {
    if (in.sample_rows[r] < 0 || in.sample_rows[r] >= in.n_logits)
      bad("sampleRows[" + n2s(r) + "] = " + n2s(in.sample_rows[r]) + " is outside the " + n2s(in.n_logits) + " logits rows");
    if (in.sample_indices[r] < 0) bad("sampleIndices[" + n2s(r) + "] must be >= 0");
  }
  std::vector<int32_t> dst;
  for (int64_t i = 0; i < in.n_copies; ++i) {
    const int32_t a = in.copies[2 * i], b = in.copies[2 * i + 1];
    if (a < 0 || a >= n_blocks || b < 0 || b >= n_blocks)
      bad("copies[" + n2s(i) + "] = (" + n2s(a) + ", " + n2s(b) + ") names a block outside the pool's " + n2s(n_blocks) +
          " blocks");
    if (a == b) bad("copies[" + n2s(i) + "] copies block " + n2s(a) + " onto itself");
    dst.push_back(b);
  }
  std::sort(dst.begin(), dst.end());
  for (size_t i = 1; i < dst.size(); ++i)
    if (dst[i] == dst[i - 1]) bad("block " + n2s(dst[i]) + " is the destination of two copies");
  if (!s) return;
  for (int64_t r = 0; r < in.n_samples; ++r) {
    const std::string rr = "[" + n2s(r) + "]";
    if (!(s->temperature[r] >= 0.0f) || !std::isfinite(s->temperature[r])) bad("temperature" + rr + " must be >= 0 (0 = greedy)");
    if (!(s->top_p[r] > 0.0f && s->top_p[r] <= 1.0f)) bad("topP" + rr + " must be in (0, 1]");
    if (!(s->min_p[r] >= 0.0f && s->min_p[r] <= 1.0f)) bad("minP" + rr + " must be in [0, 1]");
    if (s->top_k[r] < 0) bad("topK" + rr + " must be >= 0 (0 = off)");
    if (s->step[r] < 0) bad("step" + rr + " must be >= 0");
  }
}

}  // namespace model
}  // namespace murphy
