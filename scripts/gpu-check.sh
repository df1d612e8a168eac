#!/usr/bin/env bash
# `npm run gpu:check -- pack` here, then `npm run gpu:check -- run --out DIR` on the GPU machine
# (DESIGN.md §8: only the working tree and named ignored paths travel; that machine has no
# Node.js and reaches no registry).
#
#   pack [--no-build]   builds the CUDA addon (bash .ci/cuda-build.sh; --no-build reuses
#                       build-cuda/) and writes .gpu-pack/ (git-ignored): the .node file, this
#                       machine's node binary (xz), and the few node_modules the GPU tests
#                       import (tsx, esbuild and its linux-x64 binary, node-gyp-build, tinybench,
#                       @huggingface's tokenizers and jinja for the engine test's demo run).
#                       Carry it: the device tool's carry = [".gpu-pack"].
#   run --out DIR       unpacks node to /tmp, runs `test:gpu` (test/gpu/*.test.ts; the multi-GPU
#                       checks among them, nccl-multi, train-nccl-multi and zero-overlap (the
#                       overlap of ZeRO-1's reductions with the backward pass), skip on one GPU,
#                       saying why), then the
#                       kernel tests again under `compute-sanitizer --tool memcheck` when it is
#                       installed, then `bench:gpu`; logs and summary.json (exit codes and the
#                       pass/fail/skip counts) go to DIR; then bench/gpu-model.bench.ts --quick (the
#                       policy engine's training step), then bench/gpu-generate.bench.ts --device
#                       --quick (generation through the paged step; its JSON is copied into
#                       summary.json). Exits non-zero when a step failed.
# Budget: the whole run is meant to fit in 8 minutes on an H200. To fit, the generation benchmark
# runs --quick: decode at batch 1 and 32 only (batch 256 cut), 32 new tokens instead of 128 after
# the 1k-token prompts, the tree workload on 2 problems (not 8) with 64-token completions (not
# 256), HF generate with one timed repetition; memcheck runs test/gpu/generate.test.ts with
# MURPHY_GPU_SMALL=1 (the small preset's case and three of the four chi-square option sets cut).
# The full sizes are `npm run bench:gpu`. Every step is bounded with `timeout`.
# Written on a machine without a GPU: `run` has been exercised there only (every GPU test
# skips, saying why); it has not yet run on a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PACK=.gpu-pack

pack() {
  local build=1
  [ "${1:-}" = "--no-build" ] && build=0
  if [ "$build" = 1 ]; then bash .ci/cuda-build.sh || exit 1; fi
  [ -f build-cuda/Release/murphy_native.node ] || { echo "gpu-check pack: no build-cuda/Release/murphy_native.node (run without --no-build)" >&2; exit 1; }
  rm -rf "$PACK.tmp" && mkdir -p "$PACK.tmp/node_modules/@esbuild"
  cp build-cuda/Release/murphy_native.node "$PACK.tmp/"
  if [ -f "$PACK/node.xz" ] && [ "$PACK/node.xz" -nt "$(command -v node)" ]; then cp "$PACK/node.xz" "$PACK.tmp/"
  else xz -9 -T0 -c "$(command -v node)" > "$PACK.tmp/node.xz"; fi
  for m in tsx esbuild node-gyp-build tinybench @huggingface; do cp -a "node_modules/$m" "$PACK.tmp/node_modules/"; done  # @huggingface: the demo run of test/gpu/engine.test.ts (tokenizer, chat template)
  cp -a node_modules/@esbuild/linux-x64 "$PACK.tmp/node_modules/@esbuild/"
  rm -f "$PACK.tmp/node_modules/esbuild/bin/esbuild"  # the same binary as @esbuild/linux-x64's (ESBUILD_BINARY_PATH)
  rm -rf "$PACK" && mv "$PACK.tmp" "$PACK"
  echo "gpu-check pack: $(du -sh "$PACK" | cut -f1) in $PACK (carry it: [\"$PACK\"])"
}

count() { # count <log> <word>: the node:test summary number (spec reporter "ℹ pass 3" or TAP "# pass 3")
  grep -E "^(ℹ|#) $2 [0-9]+" "$1" 2>/dev/null | tail -1 | grep -oE '[0-9]+$' || echo null
}

run() {
  [ "${1:-}" = "--out" ] && [ -n "${2:-}" ] || { echo "usage: gpu-check.sh run --out DIR" >&2; exit 2; }
  local out="$2"
  mkdir -p "$out"
  [ -f "$PACK/murphy_native.node" ] || { echo "gpu-check run: $PACK is missing: run \`npm run gpu:check -- pack\` and carry $PACK" >&2; exit 1; }
  local node=node
  if ! command -v node >/dev/null 2>&1; then xz -dc "$PACK/node.xz" > /tmp/murphy-node && chmod +x /tmp/murphy-node && node=/tmp/murphy-node; fi
  [ -e node_modules ] || ln -s "$PACK/node_modules" node_modules
  export MURPHY_NATIVE_BINARY="$PWD/$PACK/murphy_native.node"
  [ -f node_modules/esbuild/bin/esbuild ] || export ESBUILD_BINARY_PATH="$PWD/node_modules/@esbuild/linux-x64/bin/esbuild"
  local tests; tests="$(find test/gpu -name '*.test.ts' | sort)"
  local status=0
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed or absent" >> "$out/nvidia-smi.txt"

  # shellcheck disable=SC2086
  timeout 300 "$node" --import tsx --test --test-reporter=spec $tests > "$out/test-gpu.log" 2>&1; local t_rc=$?
  [ "$t_rc" = 0 ] || status=1
  local m_rc=null
  if command -v compute-sanitizer >/dev/null 2>&1; then
    MURPHY_GPU_SMALL=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 99 "$node" --import tsx --test --test-reporter=spec \
      test/gpu/model-kernels.test.ts test/gpu/attention.test.ts test/gpu/decode.test.ts test/gpu/generate.test.ts > "$out/memcheck.log" 2>&1; m_rc=$?
    [ "$m_rc" = 0 ] || status=1
  else
    echo "compute-sanitizer not found on PATH: memcheck not run" > "$out/memcheck.log"
  fi
  timeout 150 "$node" --import tsx bench/gpu.bench.ts --json "$out/bench-gpu.json" > "$out/bench-gpu.log" 2>&1; local b_rc=$?
  [ "$b_rc" = 0 ] || status=1
  # the policy engine's training step; --quick (4k-token micro-batches) while attention runs on the host
  timeout 150 "$node" --import tsx bench/gpu-model.bench.ts --quick --json "$out/bench-gpu-model.json" > "$out/bench-gpu-model.log" 2>&1; local g_rc=$?
  [ "$g_rc" = 0 ] || status=1
  # generation through the paged step (issue 14): decode tokens/s against the bandwidth bound and HF generate, the tree workload
  timeout 240 "$node" --import tsx bench/gpu-generate.bench.ts --device --quick --json "$out/bench-gpu-generate.json" > "$out/bench-gpu-generate.log" 2>&1; local gen_rc=$?
  [ "$gen_rc" = 0 ] || status=1
  local gen_json=null
  [ -s "$out/bench-gpu-generate.json" ] && gen_json="$(cat "$out/bench-gpu-generate.json")"

  cat > "$out/summary.json" <<JSON
{
  "testGpu": { "exitCode": $t_rc, "pass": $(count "$out/test-gpu.log" pass), "fail": $(count "$out/test-gpu.log" fail), "skipped": $(count "$out/test-gpu.log" skipped) },
  "memcheck": { "exitCode": $m_rc, "pass": $(count "$out/memcheck.log" pass), "fail": $(count "$out/memcheck.log" fail) },
  "benchGpu": { "exitCode": $b_rc },
  "benchGpuModel": { "exitCode": $g_rc },
  "benchGpuGenerate": { "exitCode": $gen_rc, "result": $gen_json },
  "logs": ["test-gpu.log", "memcheck.log", "bench-gpu.log", "bench-gpu-model.log", "bench-gpu-generate.log", "nvidia-smi.txt"]
}
JSON
  cat "$out/summary.json"
  exit "$status"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: gpu-check.sh pack [--no-build] | run --out DIR" >&2; exit 2 ;;
esac
