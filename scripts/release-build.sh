#!/usr/bin/env bash
# The release build (`npm run release:build`): the CUDA-enabled linux-x64 prebuild, then
# `npm pack`. Run on a Linux x64 machine with nvcc 13 and the CUDA runtime (no GPU needed).
#
#   1. the CUDA addon (.ci/cuda-build.sh: static CUDA runtime, sm_80 + sm_90 + PTX; fails on
#      register spills), unless --reuse-cuda-build takes build-cuda/ as it is;
#   2. prebuilds/linux-x64/murphy-native.napi.glibc.node: that binary, stripped; checked to
#      load, to contain the CUDA kernels, to need no newer glibc / libstdc++ than the floor
#      the README states (GLIBC_2.34, GLIBCXX_3.4.30), and to link no CUDA library;
#   3. npm pack into .release/ (the "files" list in package.json decides what goes in; its
#      prepare script rebuilds dist/ with tsc, from clean so no stale files ship);
#      prints the tarball's size and fails above MAX_PACKED_BYTES, or when it holds anything
#      outside the allowed folders.
#
# Options: --reuse-cuda-build (CI: .ci/run has just built build-cuda/), --prebuild-only
# (stop after step 2). Prints the tarball's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

reuse=0
pack=1
for a in "$@"; do
  case "$a" in
    --reuse-cuda-build) reuse=1 ;;
    --prebuild-only) pack=0 ;;
    *) echo "release-build: unknown option $a (use --reuse-cuda-build, --prebuild-only)" >&2; exit 2 ;;
  esac
done

# The stated bounds (README "Install"): raise them there and here together.
GLIBC_FLOOR=2.34
GLIBCXX_FLOOR=3.4.30
MAX_PACKED_BYTES=$((3 * 1024 * 1024))

fail() { echo "release-build: FAILED: $*" >&2; exit 1; }

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  fail "the prebuild is made for linux-x64; this machine is $(uname -s)-$(uname -m)"
fi


cuda_bin=build-cuda/Release/murphy_native.node
if [ "$reuse" = 1 ]; then
  [ -f "$cuda_bin" ] || fail "--reuse-cuda-build: $cuda_bin does not exist (run bash .ci/cuda-build.sh)"
  echo "== CUDA build: reusing $cuda_bin"
else
  bash .ci/cuda-build.sh
fi

echo "== prebuild"
prebuild=prebuilds/linux-x64/murphy-native.napi.glibc.node
rm -rf prebuilds
mkdir -p prebuilds/linux-x64
cp "$cuda_bin" "$prebuild"
if command -v strip >/dev/null; then strip --strip-unneeded "$prebuild"; fi
node -e '
  const b = require(process.argv[1]).buildInfo();
  if (!b.cuda) { console.error("release-build: FAILED: the prebuild was built without CUDA"); process.exit(1); }
  console.log(`loads: CUDA-enabled, N-API ${b.napiVersion}, gcc ${b.compiler}`);
' "./$prebuild"

# The newest symbol version the binary asks of each library must not pass the stated floor.
if command -v objdump >/dev/null; then
  newest() { objdump -T "$prebuild" | grep -o "$1_[0-9.]*" | sed "s/^$1_//" | sort -V | tail -1; }
  glibc="$(newest GLIBC)"
  glibcxx="$(newest GLIBCXX)"
  echo "needs: glibc >= $glibc, libstdc++ >= GLIBCXX_$glibcxx (floor: $GLIBC_FLOOR, $GLIBCXX_FLOOR)"
  above() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" != "$2" ]; }
  if above "$glibc" "$GLIBC_FLOOR"; then fail "the prebuild needs glibc $glibc, above the stated floor $GLIBC_FLOOR"; fi
  if above "$glibcxx" "$GLIBCXX_FLOOR"; then fail "the prebuild needs GLIBCXX_$glibcxx, above the stated floor $GLIBCXX_FLOOR"; fi
  # Only the C/C++ runtime: no libcudart/libcublas/libnccl/libcuda (static cudart; the rest is
  # loaded at run time), or the binary would load on this machine, which has the toolkit, but
  # not on a user's.
  libs="$(objdump -p "$prebuild" | awk '$1 == "NEEDED" { print $2 }' | sort | tr '\n' ' ')"
  echo "links: $libs"
  for l in $libs; do
    case "$l" in
      libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1 | ld-linux-x86-64.so.2 | libpthread.so.0 | libdl.so.2 | librt.so.1) ;;
      *) fail "the prebuild links $l; it may link only the C/C++ runtime (CUDA libraries are static or loaded at run time)" ;;
    esac
  done
else
  echo "needs: (objdump not found: the glibc floor and the linked libraries were not checked)"
fi
ls -l "$prebuild"
[ "$pack" = 1 ] || exit 0

echo "== npm pack (its prepare script rebuilds dist/ with tsc, from clean)"
rm -rf dist
mkdir -p .release
rm -f .release/murphy-native-*.tgz
npm pack --pack-destination .release --json >.release/pack.json
node -e '
  const [j] = require("./.release/pack.json");
  const max = Number(process.argv[1]);
  // What a user needs, and nothing else: no tests, fixtures, build folders or bench results.
  const allowed = /^(dist\/|native\/|python\/|assets\/|docs\/|prebuilds\/linux-x64\/|scripts\/(install-native\.cjs|quiet-install\.mjs)$|binding\.gyp$|CMakeLists\.txt$|README\.md$|LICENSE$|package\.json$)/;
  const denied = /(^|\/)(test|tests|fixtures|__pycache__|build|build-cuda|bench|results)(\/|$)|\.test\.|\.pyc$/;
  const bad = j.files.map((f) => f.path).filter((p) => !allowed.test(p) || denied.test(p));
  const kb = (n) => `${(n / 1024).toFixed(0)} KiB`;
  console.log(`tarball: .release/${j.filename}, ${j.entryCount} files, ${kb(j.size)} packed, ${kb(j.unpackedSize)} unpacked (bound: ${kb(max)} packed)`);
  if (!j.files.some((f) => f.path.startsWith("prebuilds/linux-x64/"))) { console.error("release-build: FAILED: the tarball has no prebuild"); process.exit(1); }
  if (!j.files.some((f) => f.path === "LICENSE")) { console.error("release-build: FAILED: the tarball has no LICENSE"); process.exit(1); }
  if (bad.length) { console.error(`release-build: FAILED: the tarball holds files a user does not need: ${bad.join(", ")}`); process.exit(1); }
  if (j.size > max) { console.error(`release-build: FAILED: the tarball is ${kb(j.size)}, above the bound of ${kb(max)}`); process.exit(1); }
' "$MAX_PACKED_BYTES"
echo "$PWD/.release/$(node -p 'require("./.release/pack.json")[0].filename')"
