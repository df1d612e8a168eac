#!/usr/bin/env bash
# `npm run test:sanitize`: the addon built with AddressSanitizer and UndefinedBehaviorSanitizer
# (cmake-js into build-asan/, CPU only: CMakeLists.txt's MURPHY_SANITIZE), then the test files
# that drive the native code hardest run against it (MURPHY_NATIVE_BINARY, libasan preloaded into
# node): the kernels, the CPU engine (training, generation, sampling across thread counts), the
# device engine's code on the CPU harness, the samplers, serving, and a training run end to end.
# Any report (a heap overflow, a use after free, undefined behaviour) fails the run with its
# stack. Leak checking is off (node's own allocations at exit are not ours), and a failed
# allocation returns null (the engine's out-of-memory test asks for an impossible size).
# Then, with no sanitizer preloaded, the thread pool's stress program built with ThreadSanitizer
# (test/sanitize/thread_pool.tsan.ts).
#   --no-build   reuse build-asan/
#   FILES...     run these test files (under ASan) instead of the default list, and skip the
#                ThreadSanitizer part
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
[ "${1:-}" = "--no-build" ] && { build=0; shift; }
if [ "$build" = 1 ]; then
  echo "== sanitizer build (cmake-js --out build-asan --CDMURPHY_CUDA=OFF --CDMURPHY_SANITIZE=ON)"
  log="$(mktemp)"
  if ! npx --no-install cmake-js rebuild --out build-asan --CDMURPHY_CUDA=OFF --CDMURPHY_SANITIZE=ON --parallel "${JOBS:-2}" >"$log" 2>&1; then
    cat "$log"; rm -f "$log"
    echo "sanitize-check: FAILED: the sanitizer build did not complete" >&2
    exit 1
  fi
  rm -f "$log"
fi
binary="$PWD/build-asan/Release/murphy_native.node"
[ -f "$binary" ] || { echo "sanitize-check: no $binary (run without --no-build)" >&2; exit 1; }
asan="$(${CXX:-g++} -print-file-name=libasan.so)"
[ -f "$asan" ] || { echo "sanitize-check: no libasan.so for ${CXX:-g++} ($asan); install the compiler's libasan" >&2; exit 1; }

files=("$@")
tsan=0
if [ "${#files[@]}" = 0 ]; then
  tsan=1
  files=(
    test/kernels/logprob.test.ts test/kernels/logprob-stream.test.ts test/kernels/logprob-exp.test.ts
    test/kernels/grpo_loss.test.ts test/kernels/adamw.test.ts test/kernels/convert.test.ts
    test/model/engine.test.ts test/model/parity.test.ts test/model/generate-threads.test.ts
    test/model/gemm-bf16.test.ts test/model/gemm.test.ts
    test/gpu-engine/decode-harness.test.ts test/gpu-engine/engine-emulate.test.ts test/gpu-engine/kernel-harness.test.ts
    test/rollout/sample-stream.test.ts test/rollout/serve.test.ts
    test/train/e2e.test.ts
  )
fi
echo "== ${#files[@]} test files against $binary"
LD_PRELOAD="$asan" \
ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:allocator_may_return_null=1:abort_on_error=0" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
MURPHY_NATIVE_BINARY="$binary" \
  node --import ./test/loader/register.mjs --test --test-reporter=./test/skip-summary-reporter.mjs "${files[@]}"

if [ "$tsan" = 1 ]; then
  echo "== ThreadSanitizer: the thread pool's stress program (test/sanitize/thread_pool.tsan.ts)"
  node --import ./test/loader/register.mjs --test --test-reporter=./test/skip-summary-reporter.mjs test/sanitize/thread_pool.tsan.ts
fi
