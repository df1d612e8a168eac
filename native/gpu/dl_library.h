// Opening a shared library at run time and resolving a table of entry points (dlopen/dlsym),
// shared by the loaders of cuBLASLt (cublaslt.cc) and NCCL (nccl.cc). No CUDA needed.
#pragma once
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace murphy {
namespace gpu {

// dlopen(path, RTLD_NOW | RTLD_LOCAL), then dlsym of names[0..n) into slots[0..n).
// Returns the handle, or nullptr with *err set to one line: "dlopen failed: <loader's reason>"
// or "not a usable <what>: entry point <name> is missing" (the library is closed again).
void* dl_open_entry_points(const std::string& path, const char* const* names, size_t n, void** slots, const char* what,
                           std::string* err);

// The file a resolved symbol lives in (dladdr), or `fallback` when the loader cannot say.
std::string dl_file_of(void* symbol, const std::string& fallback);

// dlclose(handle).
void dl_close(void* handle);

// One place to look: a path (contains '/') or a bare soname for the dynamic loader.
struct DlCandidate {
  std::string path;
  std::string origin;  // where the candidate came from, e.g. "MURPHY_NCCL", "CUDA_HOME", "python wheel"
};

// What happened to one candidate.
struct DlAttempt {
  DlCandidate candidate;
  std::string error;  // empty: this one loaded
};

// What a search found. Version: the library's own version number type.
template <class Version>
struct DlFound {
  bool ok = false;
  std::string path;  // the file the loader actually opened (resolved through dladdr)
  std::string origin;
  Version version = 0;  // as the library reports it, e.g. major * 10000 + minor * 100 + patch
  std::vector<DlAttempt> attempts;
  std::string reason;  // when !ok: one line naming every candidate and why it failed
};

// "<what> not found: no place to look", or "<what> not found: <path> (<origin>): <error>; ...".
std::string dl_not_found_reason(const char* what, const std::vector<DlAttempt>& attempts);

// One run-time-loaded library of the process: its entry point table Api (a struct of function
// pointers, in the order of `symbols`, the first of which reads the version), found once and
// then kept. Thread-safe (one mutex).
template <class Api, class Version>
class DlLibrary {
 public:
  using Found = DlFound<Version>;
  // Reads the version of an opened library into *version; returns "" when it is acceptable,
  // else the one-line reason it is not.
  using CheckVersion = std::string (*)(const Api& api, Version* version);

  DlLibrary(const char* what, const char* const* symbols, size_t n, CheckVersion check)
      : what_(what), symbols_(symbols), n_(n), check_(check) {}

  // Tries the candidates in order. A candidate is accepted when dlopen succeeds, every entry
  // point resolves, and check accepts the version. install = false: the library is closed again
  // (doctor's probe). install = true: the first accepted library is kept open and becomes the
  // process's (see api()); once installed, later calls return it without opening anything else.
  Found load(const std::vector<DlCandidate>& candidates, bool install) {
    std::lock_guard<std::mutex> lk(mu_);
    if (installed_) return found_;
    Found r;
    for (const DlCandidate& c : candidates) {
      Api api{};
      std::string path, err;
      Version version = 0;
      void* h = try_open(c, &api, &path, &version, &err);
      r.attempts.push_back(DlAttempt{c, err});
      if (!h) continue;
      r.ok = true;
      r.path = path;
      r.origin = c.origin;
      r.version = version;
      if (install) {
        api_ = api;
        installed_ = true;
        found_ = r;
      } else {
        dl_close(h);
      }
      return r;
    }
    r.reason = dl_not_found_reason(what_, r.attempts);
    return r;
  }

  // The installed library's entry points, or nullptr before a successful install.
  const Api* api() {
    std::lock_guard<std::mutex> lk(mu_);
    return installed_ ? &api_ : nullptr;
  }

  // What the install found (ok = false before one).
  const Found& found() {
    std::lock_guard<std::mutex> lk(mu_);
    return found_;
  }

 private:
  // Opens one candidate; on success fills api/path/version and returns the handle.
  void* try_open(const DlCandidate& c, Api* api, std::string* path, Version* version, std::string* err) const {
    void** slots = reinterpret_cast<void**>(api);
    void* h = dl_open_entry_points(c.path, symbols_, n_, slots, what_, err);
    if (!h) return nullptr;
    *path = dl_file_of(slots[0], c.path);
    *err = check_(*api, version);
    if (err->empty()) return h;
    dl_close(h);
    return nullptr;
  }

  const char* what_;
  const char* const* symbols_;
  size_t n_;
  CheckVersion check_;
  std::mutex mu_;
  bool installed_ = false;
  Api api_{};
  Found found_;
};

}  // namespace gpu
}  // namespace murphy
