// Imported first by every GPU test file (and bench/gpu.bench.ts): the GPU tests need the
// CUDA-enabled binary, so when MURPHY_NATIVE_BINARY is not set and build-cuda/ holds one
// (from .ci/cuda-build.sh or `cmake-js --out build-cuda`), point lib/native.ts at it
// before it loads, whichever local build is newer.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cudaBinary = fileURLToPath(new URL('../../build-cuda/Release/murphy_native.node', import.meta.url));
if (!process.env.MURPHY_NATIVE_BINARY && existsSync(cudaBinary)) process.env.MURPHY_NATIVE_BINARY = cudaBinary;
