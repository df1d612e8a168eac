// Input checks and storage conversions shared by the harness runner (harness_ops.cc) and
// the CUDA runner of the same cases (cuda_ops.cu).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "harness_ops.h"

namespace murphy {
namespace gpu {

inline const std::vector<float>& input(const HarnessCase& c, const char* name, int64_t expect) {
  auto it = c.in.find(name);
  if (it == c.in.end()) throw Error("kernelHarness(" + c.op + "): missing input '" + name + "'");
  if (int64_t(it->second.size()) != expect)
    throw Error("kernelHarness(" + c.op + "): input '" + name + "' has " + std::to_string(it->second.size()) +
                " values, expected " + std::to_string(expect));
  return it->second;
}

template <typename T>
std::vector<T> to_storage(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) st(out.data(), int64_t(i), v[i]);
  return out;
}

template <typename T>
std::vector<float> widen(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ld(v.data(), int64_t(i));
  return out;
}

inline void need_positive(const HarnessCase& c, std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (auto& s : sizes)
    if (s.second <= 0) throw Error("kernelHarness(" + c.op + "): '" + s.first + "' must be positive");
}

}  // namespace gpu
}  // namespace murphy
