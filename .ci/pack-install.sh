#!/usr/bin/env bash
# The proof that `npm install murphy-native` gives a working binary without compiling:
#
#   A. the packed tarball, installed into a new empty project with a PATH that holds only
#      node, npm and basic shell tools (no cc, c++, g++, gcc, clang, make, nvcc, python3),
#      npm_config_build_from_source=false: the install step says it used the prebuild;
#      `npx murphy-native doctor --json` says it loaded the prebuild (not a local build) and
#      that it is the CUDA build; a 2-step `train` of the CPU demo finishes from that install;
#      installed with --ignore-scripts, the prebuild loads all the same;
#   B. the same tarball without its prebuild, installed where build tools exist: the install
#      step says why and compiles the CPU-only addon, and doctor then reports a local build;
#   C. without build tools, a tarball with no prebuild and one whose prebuild does not load
#      (a mismatched binary): the install fails with one line naming what is missing.
#
# python3 is left out of A's PATH too: node-gyp needs it to compile, and the CPU demo's
# built-in task runs no Python (the executor needs python3 at run time for real datasets;
# doctor's sandbox line says when it is missing).
#
# Usage: bash .ci/pack-install.sh [TARBALL]   (default: npm run release:build --reuse-cuda-build,
# which needs build-cuda/ from .ci/cuda-build.sh). Needs the npm registry for the dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

fail() { echo "pack-install: FAILED: $*" >&2; exit 1; }

if [ $# -ge 1 ]; then
  tarball="$(realpath "$1")"
else
  echo "== release build (reusing build-cuda/)"
  out="$(mktemp)"
  if ! bash scripts/release-build.sh --reuse-cuda-build >"$out"; then cat "$out"; rm -f "$out"; fail "the release build failed"; fi
  cat "$out"
  tarball="$(tail -1 "$out")"
  rm -f "$out"
fi
[ -f "$tarball" ] || fail "no tarball at $tarball"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# A PATH of symlinks to node, npm and the basic tools npm's scripts and this script use.
bin="$tmp/bin"
mkdir -p "$bin"
for t in node npm npx sh bash env cat ls mkdir rm mv cp chmod grep sed head tail tar gzip uname dirname basename mktemp realpath; do
  p="$(command -v "$t")" || fail "$t is not on PATH"
  ln -s "$(realpath "$p")" "$bin/$t"
done
# npm and npx are scripts that find npm's own files relative to their real path.
for t in npm npx; do rm "$bin/$t"; ln -s "$(realpath "$(command -v "$t")")" "$bin/$t"; done
for t in cc c++ g++ gcc clang clang++ make nvcc python3 python node-gyp; do
  if PATH="$bin" command -v "$t" >/dev/null 2>&1; then fail "the bare PATH still has $t"; fi
done

# npm with a given PATH, nothing of this shell's build settings, in directory $1.
npm_in() {
  local dir="$1" path="$2"; shift 2
  (cd "$dir" && env -u MURPHY_NATIVE_BINARY -u CC -u CXX -u PYTHON -u npm_config_python -u MURPHY_BUILD_FROM_SOURCE \
    PATH="$path" npm_config_build_from_source=false npm_config_update_notifier=false "$@")
}
new_project() {
  mkdir -p "$1"
  printf '{ "name": "%s", "version": "1.0.0", "private": true }\n' "$(basename "$1")" >"$1/package.json"
}
# A copy of the tarball with its prebuild removed (missing) or replaced by a file that does
# not load (mismatched).
variant() {
  local kind="$1" dir="$tmp/variant-$1"
  mkdir -p "$dir"
  tar xzf "$tarball" -C "$dir"
  local pb; pb="$(ls "$dir"/package/prebuilds/linux-x64/*.node)"
  if [ "$kind" = missing ]; then rm -rf "$dir/package/prebuilds"; else head -c 4096 /dev/urandom >"$pb"; fi
  tar czf "$tmp/murphy-native-$kind.tgz" -C "$dir" package
  echo "$tmp/murphy-native-$kind.tgz"
}

echo "== A. install the tarball with no build tools on PATH ($(du -k "$tarball" | cut -f1) KiB: $tarball)"
app="$tmp/app"
new_project "$app"
npm_in "$app" "$bin" npm install --prefer-offline --no-audit --no-fund --foreground-scripts "$tarball" >"$tmp/a.log" 2>&1 \
  || { cat "$tmp/a.log"; fail "npm install of the tarball failed with no build tools on PATH"; }
grep "^murphy-native: " "$tmp/a.log" || true
grep -q "^murphy-native: using prebuilds/linux-x64/.*(CUDA-enabled); nothing to compile" "$tmp/a.log" \
  || { cat "$tmp/a.log"; fail "the install step did not say it used the CUDA-enabled prebuild"; }
[ ! -e "$app/node_modules/murphy-native/build" ] || fail "the install compiled something (node_modules/murphy-native/build exists)"

npm_in "$app" "$bin" npx --no-install murphy-native doctor --json >"$tmp/doctor.json" 2>"$tmp/doctor.err" \
  || { cat "$tmp/doctor.err"; fail "murphy-native doctor failed"; }
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const want = (ok, what) => { if (!ok) { console.error(`pack-install: FAILED: doctor: ${what}; got ${JSON.stringify(r.binary)} ${JSON.stringify(r.cuda)}`); process.exit(1); } };
  want(r.binary.source === "prebuild", "binary.source should be \"prebuild\"");
  want(r.binary.path.startsWith(process.argv[2]), `the binary should be under ${process.argv[2]}`);
  want(r.binary.cuda === true && r.cuda.built === true, "the binary should be the CUDA build");
  console.log(`doctor: ${r.binary.source} ${r.binary.path.slice(process.argv[2].length)}, cuda built=${r.cuda.built} runtime=${r.cuda.runtimeVersion}: ${r.cuda.available ? "devices " + r.cuda.devices.length : r.cuda.reason}`);
  if (r.sandbox) console.log(`doctor: sandbox python ${r.sandbox.python}`); else console.log(`doctor: sandbox: ${r.sandboxError}`);
' "$tmp/doctor.json" "$app/node_modules/murphy-native/prebuilds/"

echo "== A. a 2-step train of the CPU demo from that install"
npm_in "$app" "$bin" npx --no-install murphy-native train --max-steps 2 --sft-steps 2 --eval-problems 2 --eval-samples 1 \
  --out "$tmp/run" >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "murphy-native train failed"; }
grep -q "^done after 2 steps" "$tmp/train.log" || { cat "$tmp/train.log"; fail "train did not report 2 steps done"; }
[ "$(grep -c '"step"' "$tmp/run/metrics.jsonl" || true)" -ge 2 ] || fail "train wrote no metrics for its 2 steps"
grep "^done after" "$tmp/train.log"

echo "== A. the same with --ignore-scripts (npm not running install steps): the prebuild still loads"
app2="$tmp/app-ignore-scripts"
new_project "$app2"
npm_in "$app2" "$bin" npm install --prefer-offline --no-audit --no-fund --ignore-scripts "$tarball" >"$tmp/a2.log" 2>&1 \
  || { cat "$tmp/a2.log"; fail "npm install --ignore-scripts of the tarball failed"; }
npm_in "$app2" "$bin" npx --no-install murphy-native doctor --json >"$tmp/doctor2.json" 2>"$tmp/doctor2.err" \
  || { cat "$tmp/doctor2.err"; fail "murphy-native doctor failed after --ignore-scripts"; }
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (r.binary.source !== "prebuild" || r.binary.cuda !== true) {
    console.error(`pack-install: FAILED: with --ignore-scripts doctor says ${JSON.stringify(r.binary)}`); process.exit(1);
  }
  console.log("doctor: prebuild, CUDA-enabled");
' "$tmp/doctor2.json"

echo "== C. no build tools: a missing and a mismatched prebuild fail with one line"
for kind in missing mismatched; do
  tgz="$(variant "$kind")"
  proj="$tmp/app-$kind-bare"
  new_project "$proj"
  if npm_in "$proj" "$bin" npm install --prefer-offline --no-audit --no-fund "$tgz" >"$tmp/c-$kind.log" 2>&1; then
    cat "$tmp/c-$kind.log"; fail "install with a $kind prebuild and no build tools should fail"
  fi
  # npm repeats the script's stderr in its own error lines; the script's line itself is once.
  line="$(grep -o "murphy-native: cannot install: .*" "$tmp/c-$kind.log" | head -1)"
  [ -n "$line" ] || { cat "$tmp/c-$kind.log"; fail "no 'murphy-native: cannot install:' line ($kind prebuild)"; }
  echo "$kind: $line"
  case "$kind" in
    missing) echo "$line" | grep -q "no prebuilt binary for linux-x64" || fail "the line does not say the prebuild is missing" ;;
    mismatched) echo "$line" | grep -q "does not load here" || fail "the line does not say the prebuild does not load" ;;
  esac
  echo "$line" | grep -q "missing a C++17 compiler (c++, g++, clang++), make, python3" || fail "the line does not name the missing tools"
done

echo "== B. a missing prebuild with build tools: compiles from source"
tgz="$tmp/murphy-native-missing.tgz"
proj="$tmp/app-missing-tools"
new_project "$proj"
npm_in "$proj" "$PATH" npm install --prefer-offline --no-audit --no-fund --foreground-scripts "$tgz" >"$tmp/b.log" 2>&1 \
  || { cat "$tmp/b.log"; fail "install with a missing prebuild and build tools failed"; }
grep "^murphy-native: " "$tmp/b.log"
grep -q "^murphy-native: no prebuilt binary for linux-x64 .*; compiling the CPU-only addon from source" "$tmp/b.log" \
  || fail "the install step did not say why it compiles"
npm_in "$proj" "$PATH" npx --no-install murphy-native doctor --json >"$tmp/doctor-b.json" 2>"$tmp/doctor-b.err" \
  || { cat "$tmp/doctor-b.err"; fail "doctor failed after the source build"; }
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (r.binary.source !== "local-build" || r.binary.cuda !== false) {
    console.error(`pack-install: FAILED: after the source build doctor says ${JSON.stringify(r.binary)}`); process.exit(1);
  }
  console.log(`doctor: ${r.binary.source}, CPU-only`);
' "$tmp/doctor-b.json"

echo "pack-install: OK"
