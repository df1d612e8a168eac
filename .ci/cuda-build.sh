#!/usr/bin/env bash
# Compile the CUDA addon (cmake-js + nvcc, sm_80 + sm_90 + PTX) into build-cuda/,
# print ptxas's register / spill report for every kernel, and check that the addon
# loads (on a machine without a GPU it must report "no CUDA device: ...").
# Fails on a build error, and if any kernel has spill stores or spill loads > 0.
# The binary is build-cuda/Release/murphy_native.node (build/ is node-gyp's CPU build).
set -euo pipefail
cd "$(dirname "$0")/.."

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

echo "== CUDA build (cmake-js --out build-cuda --CDMURPHY_CUDA=ON)"
if ! npx --no-install cmake-js rebuild --out build-cuda --CDMURPHY_CUDA=ON --parallel "${JOBS:-2}" >"$log" 2>&1; then
  cat "$log"
  echo "cuda-build: FAILED: the CUDA build did not complete" >&2
  exit 1
fi
grep -E "(error|warning)" "$log" | grep -v "^ptxas info" || true

echo "== ptxas report (arch, registers, stack bytes, spill stores, spill loads, kernel)"
demangle() { if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi; }
report="$(awk '
  /Compiling entry function/ {
    match($0, /function .[^'"'"']+/); name = substr($0, RSTART + 10, RLENGTH - 10)
    match($0, /for .sm_[0-9a-z]+/);   arch = substr($0, RSTART + 5, RLENGTH - 5)
    next
  }
  /bytes stack frame/ { stack = $1; sst = $5; sld = $9; next }
  /Used [0-9]+ registers/ {
    match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15)
    if (name != "") printf "%s\t%s\t%s\t%s\t%s\t%s\n", arch, regs, stack, sst, sld, name
    name = ""
  }' "$log")"
if [ -z "$report" ]; then
  echo "cuda-build: FAILED: no ptxas report found in the build output" >&2
  exit 1
fi
printf '%s\n' "$report" | while IFS=$'\t' read -r arch regs stack sst sld name; do
  printf '%-6s regs=%-4s stack=%-4s spill_st=%-4s spill_ld=%-4s %s\n' \
    "$arch" "$regs" "$stack" "$sst" "$sld" "$(printf '%s' "$name" | demangle | cut -c1-120)"
done
kernels="$(printf '%s\n' "$report" | wc -l)"
spilling="$(printf '%s\n' "$report" | awk -F'\t' '$4 > 0 || $5 > 0' | wc -l)"
echo "== $kernels kernel compilations, $spilling with spills"
if [ "$spilling" -ne 0 ]; then
  echo "cuda-build: FAILED: $spilling kernel compilation(s) spill registers (see spill_st / spill_ld above)" >&2
  exit 1
fi

echo "== load check"
node -e '
  const a = require("./build-cuda/Release/murphy_native.node");
  const s = a.cudaStatus();
  console.log(JSON.stringify(s));
  if (!s.built) { console.error("cuda-build: FAILED: the CUDA binary says it was built without CUDA"); process.exit(1); }
  if (!s.available && !/^no CUDA device/.test(s.reason)) { console.error("cuda-build: FAILED: unexpected reason"); process.exit(1); }
'
echo "cuda-build: OK (build-cuda/Release/murphy_native.node)"
