// config.json parsing, the parameter layout (Hugging Face names), and safetensors I/O:
// memory-mapped reads of single or sharded files (bf16, fp16, fp32), atomic writes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "../cpu/threads.h"
#include "murphy/model/json.h"
#include "murphy/model/model.h"
#include "murphy/xxh64.h"
#include "weights.h"

namespace murphy {
namespace model {

// ------------------------------------------------------------------------------------
// fp16

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
  if (mag >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (mag < 0x38800000u) {                                   // subnormal half (or zero)
    if (mag < 0x33000000u) return uint16_t(sign);            // < 2^-25: rounds to 0
    const uint32_t e = mag >> 23;
    const uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 - (e - 127) + 13 - 1 ... gives the half subnormal
    uint32_t r = m >> (shift - 0);
    // round to nearest even on the bits shifted out
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    r = m >> shift;
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = mag - 0x38000000u;  // rebias exponent 127 -> 15
  r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  return uint16_t(sign | r);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0) {
    if (m == 0) {
      x = sign;
    } else {  // subnormal
      float f = std::ldexp(float(m), -24);
      std::memcpy(&x, &f, 4);
      x |= sign;
    }
  } else if (e == 31) {
    x = sign | 0x7f800000u | (m << 13);
  } else {
    x = sign | ((e + 112) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {
template <class V>
void assign_zeros(V& v, int64_t n, const char* what) {
  try {
    v.assign(static_cast<size_t>(n), 0.0f);
  } catch (const std::bad_alloc&) {
    throw Error(std::string("out of memory allocating ") + std::to_string(n * 4 / (1 << 20)) + " MiB for " + what, ErrorCode::NoMem);
  } catch (const std::length_error&) {
    throw Error(std::string("out of memory allocating ") + std::to_string(n * 4 / (1 << 20)) + " MiB for " + what, ErrorCode::NoMem);
  }
}
}  // namespace

void checked_resize(std::vector<float>& v, int64_t n, const char* what) { assign_zeros(v, n, what); }
void checked_resize(BigFloats& v, int64_t n, const char* what) { assign_zeros(v, n, what); }

// ------------------------------------------------------------------------------------
// config.json

namespace {

int64_t get_int(const Json& j, const char* key, const std::string& where, int64_t fallback, bool required) {
  const Json* v = j.find(key);
  if (!v || v->is_null()) {
    if (required) throw Error(where + ": field '" + key + "' is missing");
    return fallback;
  }
  if (!v->is_number() || v->num != std::floor(v->num) || v->num < 1 || v->num > 1e12)
    throw Error(where + ": field '" + key + "' must be a positive integer");
  return int64_t(v->num);
}

double get_num(const Json& j, const char* key, const std::string& where, double fallback) {
  const Json* v = j.find(key);
  if (!v || v->is_null()) return fallback;
  if (!v->is_number() || !(v->num > 0)) throw Error(where + ": field '" + key + "' must be a positive number");
  return v->num;
}

}  // namespace

ModelConfig parse_config(const std::string& text, const std::string& where) {
  Json j = json_parse(text, where);
  if (!j.is_object()) throw Error(where + ": expected a JSON object");
  ModelConfig c;
  const Json* mt = j.find("model_type");
  if (!mt || !mt->is_string()) throw Error(where + ": field 'model_type' is missing");
  c.model_type = mt->str;
  if (c.model_type == "qwen3") c.arch = Arch::Qwen3;
  else if (c.model_type == "olmo2") c.arch = Arch::Olmo2;
  else throw Error(where + ": model_type '" + c.model_type + "' is not supported (supported: qwen3, olmo2)");
  c.vocab = get_int(j, "vocab_size", where, 0, true);
  c.hidden = get_int(j, "hidden_size", where, 0, true);
  c.intermediate = get_int(j, "intermediate_size", where, 0, true);
  c.n_layers = get_int(j, "num_hidden_layers", where, 0, true);
  c.n_heads = get_int(j, "num_attention_heads", where, 0, true);
  c.n_kv = get_int(j, "num_key_value_heads", where, c.n_heads, false);
  c.head_dim = get_int(j, "head_dim", where, c.hidden / c.n_heads, false);
  c.max_pos = get_int(j, "max_position_embeddings", where, 4096, false);
  c.rms_eps = get_num(j, "rms_norm_eps", where, 1e-6);
  c.rope_theta = get_num(j, "rope_theta", where, 10000.0);
  const Json* tie = j.find("tie_word_embeddings");
  c.tie = tie && tie->type == Json::Type::Bool ? tie->b : false;
  if (c.vocab > int64_t(INT32_MAX)) throw Error(where + ": field 'vocab_size' is too large");
  if (c.n_heads % c.n_kv != 0)
    throw Error(where + ": num_attention_heads (" + std::to_string(c.n_heads) +
                ") must be a multiple of num_key_value_heads (" + std::to_string(c.n_kv) + ")");
  if (c.head_dim % 2 != 0) throw Error(where + ": head_dim must be even for rotary embeddings");
  if (c.max_pos > (int64_t(1) << 22)) throw Error(where + ": max_position_embeddings is too large");
  if (const Json* rs = j.find("rope_scaling"); rs && !rs->is_null()) {
    const Json* t = rs->find("rope_type");
    if (!t) t = rs->find("type");
    if (!t || !t->is_string() || t->str != "default")
      throw Error(where + ": rope_scaling " + (t && t->is_string() ? "'" + t->str + "' " : "") +
                  "is not supported (only none / 'default')");
  }
  if (const Json* a = j.find("hidden_act"); a && a->is_string() && a->str != "silu")
    throw Error(where + ": hidden_act '" + a->str + "' is not supported (only silu)");
  if (const Json* b = j.find("attention_bias"); b && b->type == Json::Type::Bool && b->b)
    throw Error(where + ": attention_bias = true is not supported");
  if (const Json* sw = j.find("use_sliding_window"); sw && sw->type == Json::Type::Bool && sw->b)
    throw Error(where + ": use_sliding_window = true is not supported");
  const Json* dt = j.find("torch_dtype");
  if (!dt) dt = j.find("dtype");
  if (dt && dt->is_string()) {
    if (dt->str == "float32") c.dtype = FileDType::F32;
    else if (dt->str == "bfloat16") c.dtype = FileDType::BF16;
    else if (dt->str == "float16") c.dtype = FileDType::F16;
    else throw Error(where + ": torch_dtype '" + dt->str + "' is not supported (float32, bfloat16, float16)");
  }
  return c;
}

// ------------------------------------------------------------------------------------
// Layout

Layout make_layout(const ModelConfig& c) {
  Layout L;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    ParamInfo p;
    p.name = name;
    p.shape = std::move(shape);
    p.numel = 1;
    for (int64_t s : p.shape) p.numel *= s;
    p.offset = L.total;
    p.decay = p.shape.size() > 1;
    L.total += (p.numel + 15) / 16 * 16;  // 64-byte aligned starts
    L.params.push_back(p);
    return int(L.params.size() - 1);
  };
  const int64_t H = c.hidden, qd = c.n_heads * c.head_dim, kd = c.n_kv * c.head_dim, I = c.intermediate;
  L.embed = add("model.embed_tokens.weight", {c.vocab, H});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerParams lp;
    if (c.arch == Arch::Qwen3) lp.in_norm = add(p + "input_layernorm.weight", {H});
    lp.q = add(p + "self_attn.q_proj.weight", {qd, H});
    lp.k = add(p + "self_attn.k_proj.weight", {kd, H});
    lp.v = add(p + "self_attn.v_proj.weight", {kd, H});
    lp.o = add(p + "self_attn.o_proj.weight", {H, qd});
    if (c.arch == Arch::Qwen3) {
      lp.q_norm = add(p + "self_attn.q_norm.weight", {c.head_dim});
      lp.k_norm = add(p + "self_attn.k_norm.weight", {c.head_dim});
    } else {
      lp.q_norm = add(p + "self_attn.q_norm.weight", {qd});
      lp.k_norm = add(p + "self_attn.k_norm.weight", {kd});
    }
    lp.post_attn_norm = add(p + "post_attention_layernorm.weight", {H});
    if (c.arch == Arch::Olmo2) lp.post_ff_norm = add(p + "post_feedforward_layernorm.weight", {H});
    lp.gate = add(p + "mlp.gate_proj.weight", {I, H});
    lp.up = add(p + "mlp.up_proj.weight", {I, H});
    lp.down = add(p + "mlp.down_proj.weight", {H, I});
    L.layers.push_back(lp);
  }
  L.final_norm = add("model.norm.weight", {H});
  if (!c.tie) L.lm_head = add("lm_head.weight", {c.vocab, H});
  return L;
}

// ------------------------------------------------------------------------------------
// safetensors

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open (" + std::strerror(errno) + ")", ErrorCode::Io);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

struct Mapped {
  std::string path;
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapped() {
    if (base != MAP_FAILED) munmap(base, size);
  }
};

struct StEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  const Mapped* file = nullptr;
};

void map_file(Mapped& m, const std::string& path) {
  m.path = path;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(path + ": cannot open (" + std::strerror(errno) + ")", ErrorCode::Io);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(path + ": cannot stat", ErrorCode::Io);
  }
  m.size = size_t(st.st_size);
  if (m.size < 8) {
    ::close(fd);
    throw Error(path + ": corrupt safetensors file (" + std::to_string(m.size) + " bytes, shorter than its header)");
  }
  m.base = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m.base == MAP_FAILED) throw Error(path + ": mmap failed (" + std::strerror(errno) + ")", ErrorCode::Io);
}

void parse_st(const Mapped& m, std::map<std::string, StEntry>& out) {
  const uint8_t* b = static_cast<const uint8_t*>(m.base);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | b[i];
  if (hlen > m.size - 8 || hlen > (uint64_t(100) << 20))
    throw Error(m.path + ": corrupt safetensors file (header length " + std::to_string(hlen) + " exceeds the file)");
  Json h = json_parse(std::string(reinterpret_cast<const char*>(b + 8), size_t(hlen)), m.path + " (safetensors header)");
  if (!h.is_object()) throw Error(m.path + ": corrupt safetensors header (not an object)");
  const size_t data0 = 8 + size_t(hlen), dsize = m.size - data0;
  for (const auto& kv : h.obj) {
    if (kv.first == "__metadata__") continue;
    const Json& t = kv.second;
    const Json* dt = t.find("dtype");
    const Json* sh = t.find("shape");
    const Json* off = t.find("data_offsets");
    if (!dt || !dt->is_string() || !sh || !sh->is_array() || !off || !off->is_array() || off->arr.size() != 2)
      throw Error(m.path + ": corrupt safetensors header entry for '" + kv.first + "'");
    StEntry e;
    e.dtype = dt->str;
    int64_t numel = 1;
    for (const Json& d : sh->arr) {
      if (!d.is_number() || d.num < 0) throw Error(m.path + ": bad shape for '" + kv.first + "'");
      e.shape.push_back(int64_t(d.num));
      numel *= int64_t(d.num);
    }
    const double o0 = off->arr[0].num, o1 = off->arr[1].num;
    if (!(o0 >= 0 && o1 >= o0 && o1 <= double(dsize)))
      throw Error(m.path + ": corrupt safetensors file: data of '" + kv.first + "' lies outside the file (truncated?)");
    e.data = b + data0 + size_t(o0);
    e.nbytes = size_t(o1 - o0);
    size_t esize = e.dtype == "F32" ? 4 : (e.dtype == "BF16" || e.dtype == "F16") ? 2 : 0;
    if (esize && e.nbytes != size_t(numel) * esize)
      throw Error(m.path + ": corrupt safetensors file: '" + kv.first + "' has " + std::to_string(e.nbytes) +
                  " bytes for " + std::to_string(numel) + " elements of " + e.dtype);
    e.file = &m;
    out[kv.first] = e;
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

// which config.json field determines each dimension, for error messages
std::string shape_fields(const std::string& name) {
  if (name.find("embed_tokens") != std::string::npos || name.find("lm_head") != std::string::npos)
    return "vocab_size, hidden_size";
  if (name.find("q_norm") != std::string::npos || name.find("k_norm") != std::string::npos)
    return "head_dim, num_attention_heads, num_key_value_heads";
  if (name.find("_proj") != std::string::npos && name.find("self_attn") != std::string::npos)
    return "hidden_size, num_attention_heads, num_key_value_heads, head_dim";
  if (name.find("mlp") != std::string::npos) return "hidden_size, intermediate_size";
  return "hidden_size";
}

void write_all(int fd, const void* p, size_t n, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(path + ": write failed (" + std::strerror(errno) + ")");
    }
    c += w;
    n -= size_t(w);
  }
}

// writes bytes via tmp file + fsync + rename
struct AtomicFile {
  std::string path, tmp;
  int fd = -1;
  explicit AtomicFile(const std::string& p) : path(p), tmp(p + ".tmp" + std::to_string(::getpid())) {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw Error(tmp + ": cannot create (" + std::strerror(errno) + ")");
  }
  void commit() {
    if (::fsync(fd) != 0) throw Error(tmp + ": fsync failed (" + std::strerror(errno) + ")");
    ::close(fd);
    fd = -1;
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path + ": rename failed (" + std::strerror(errno) + ")");
  }
  ~AtomicFile() {
    if (fd >= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
  }
};

const char* st_dtype(FileDType d) { return d == FileDType::F32 ? "F32" : d == FileDType::BF16 ? "BF16" : "F16"; }
size_t st_size(FileDType d) { return d == FileDType::F32 ? 4 : 2; }

}  // namespace

void load_weights(const std::string& dir, const Layout& L, const ModelConfig& c, float* w) {
  std::vector<std::unique_ptr<Mapped>> files;
  std::map<std::string, StEntry> entries;
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string single = dir + "/model.safetensors";
  if (file_exists(index)) {
    Json j = json_parse(read_text(index), index);
    const Json* wm = j.find("weight_map");
    if (!wm || !wm->is_object()) throw Error(index + ": field 'weight_map' is missing");
    std::set<std::string> shards;
    for (const auto& kv : wm->obj) {
      if (!kv.second.is_string()) throw Error(index + ": weight_map entry '" + kv.first + "' is not a file name");
      if (kv.second.str.find('/') != std::string::npos || kv.second.str.find("..") != std::string::npos)
        throw Error(index + ": weight_map entry '" + kv.first + "' names a file outside the directory");
      shards.insert(kv.second.str);
    }
    for (const std::string& s : shards) {
      files.emplace_back(new Mapped());
      map_file(*files.back(), dir + "/" + s);
      parse_st(*files.back(), entries);
    }
  } else if (file_exists(single)) {
    files.emplace_back(new Mapped());
    map_file(*files.back(), single);
    parse_st(*files.back(), entries);
  } else {
    throw Error(dir + ": no model.safetensors or model.safetensors.index.json (is this a Hugging Face model directory?)");
  }
  for (const ParamInfo& p : L.params) {
    auto it = entries.find(p.name);
    if (it == entries.end())
      throw Error(dir + ": tensor '" + p.name + "' is missing from the safetensors files");
    const StEntry& e = it->second;
    if (e.shape != p.shape)
      throw Error(e.file->path + ": tensor '" + p.name + "' has shape " + shape_str(e.shape) + " but config.json (" +
                  shape_fields(p.name) + ") implies " + shape_str(p.shape));
    if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16")
      throw Error(e.file->path + ": tensor '" + p.name + "' has dtype " + e.dtype + " (supported: F32, BF16, F16)");
    float* dst = w + p.offset;
    const uint8_t* src = e.data;
    const std::string dt = e.dtype;
    parallel_for(p.numel, 1 << 16, [&](int64_t a, int64_t b) {
      if (dt == "F32") {
        std::memcpy(dst + a, src + a * 4, size_t(b - a) * 4);
      } else if (dt == "BF16") {
        for (int64_t i = a; i < b; ++i) {
          uint16_t h;
          std::memcpy(&h, src + i * 2, 2);
          dst[i] = bf16_to_f32(h);
        }
      } else {
        for (int64_t i = a; i < b; ++i) {
          uint16_t h;
          std::memcpy(&h, src + i * 2, 2);
          dst[i] = f16_to_f32(h);
        }
      }
    });
  }
  (void)c;
}

// Each file's bytes go to write_all and, the same buffer, to a streaming XXH64 (the checkpoint
// manifest's hash, native/cpu/xxh64.cc): the hash is of exactly what was handed to the file.
std::vector<SavedFile> save_weights(const std::string& dir, const Layout& L, const float* w, FileDType dtype, int64_t max_shard_bytes) {
  const size_t es = st_size(dtype);
  std::vector<SavedFile> saved;
  Xxh64 hash;
  const auto put = [&hash](const AtomicFile& f, const void* p, size_t n) {
    write_all(f.fd, p, n, f.tmp);
    hash.update(p, n);
  };
  const auto done = [&hash, &saved](AtomicFile& f, const std::string& name) {
    f.commit();
    saved.push_back(SavedFile{name, hash.total, hash.digest()});
    hash = Xxh64();
  };
  // assign tensors to shards in layout order
  std::vector<std::vector<int>> shards(1);
  int64_t cur = 0;
  for (size_t i = 0; i < L.params.size(); ++i) {
    const int64_t bytes = L.params[i].numel * int64_t(es);
    if (max_shard_bytes > 0 && cur > 0 && cur + bytes > max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(int(i));
    cur += bytes;
  }
  const size_t ns = shards.size();
  std::vector<std::string> names(ns);
  int64_t total = 0;
  for (size_t s = 0; s < ns; ++s) {
    char buf[64];
    if (ns == 1) snprintf(buf, sizeof buf, "model.safetensors");
    else snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, ns);
    names[s] = buf;
    std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
    size_t off = 0;
    for (int i : shards[s]) {
      const ParamInfo& p = L.params[size_t(i)];
      const size_t nb = size_t(p.numel) * es;
      h += "," + json_quote(p.name) + ":{\"dtype\":\"" + st_dtype(dtype) + "\",\"shape\":[";
      for (size_t k = 0; k < p.shape.size(); ++k) h += (k ? "," : "") + std::to_string(p.shape[k]);
      h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + nb) + "]}";
      off += nb;
    }
    h += "}";
    while (h.size() % 8) h += ' ';
    AtomicFile f(dir + "/" + names[s]);
    uint8_t len[8];
    for (int k = 0; k < 8; ++k) len[k] = uint8_t((uint64_t(h.size()) >> (8 * k)) & 0xff);
    put(f, len, 8);
    put(f, h.data(), h.size());
    std::vector<uint8_t> buf2;
    for (int i : shards[s]) {
      const ParamInfo& p = L.params[size_t(i)];
      const float* src = w + p.offset;
      if (dtype == FileDType::F32) {
        put(f, src, size_t(p.numel) * 4);
      } else {
        buf2.resize(static_cast<size_t>(p.numel) * 2);
        uint16_t* d16 = reinterpret_cast<uint16_t*>(buf2.data());
        if (dtype == FileDType::BF16)
          for (int64_t k = 0; k < p.numel; ++k) d16[k] = f32_to_bf16(src[k]);
        else
          for (int64_t k = 0; k < p.numel; ++k) d16[k] = f32_to_f16(src[k]);
        put(f, buf2.data(), buf2.size());
      }
      total += p.numel * int64_t(es);
    }
    done(f, names[s]);
  }
  const std::string index = dir + "/model.safetensors.index.json";
  if (ns > 1) {
    std::string j = "{\n  \"metadata\": {\"total_size\": " + std::to_string(total) + "},\n  \"weight_map\": {";
    bool first = true;
    for (size_t s = 0; s < ns; ++s)
      for (int i : shards[s]) {
        j += std::string(first ? "" : ",") + "\n    " + json_quote(L.params[size_t(i)].name) + ": " + json_quote(names[s]);
        first = false;
      }
    j += "\n  }\n}\n";
    AtomicFile f(index);
    put(f, j.data(), j.size());
    done(f, "model.safetensors.index.json");
  } else if (file_exists(index)) {
    ::unlink(index.c_str());
  }
  return saved;
}

std::string read_file_text(const std::string& path) { return read_text(path); }

}  // namespace model
}  // namespace murphy
