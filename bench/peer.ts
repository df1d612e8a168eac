// The PyTorch peer of the benchmarks (bench/torch_peer.py describes it): what it runs on, and
// whether a ratio against it is fair (an optimised BLAS and the machine's cores).
export interface TorchPeer {
  torch_version: string;
  threads: number;
  requested_threads: number;
  /** the BLAS really loaded: openblas, mkl, blis, atlas, reference or unknown */
  blas: string;
  blas_libraries: { path: string; real: string }[];
  /** torch.__config__.show()'s BLAS_INFO / LAPACK_INFO entries */
  config_blas: string[];
  /** openblas_get_corename(): the kernels OpenBLAS's sgemm runs (SkylakeX, Cooperlake, Haswell, ...), null when not OpenBLAS */
  openblas_core: string | null;
  cpu_avx512: boolean;
  /** the OPENBLAS_ / GOTO_ / OMP_ / MKL_ variables the peer ran with (after peerEnv()) */
  blas_env: Record<string, string>;
  /** GLIBC_TUNABLES as the peer ran with it (peerEnv() adds PEER_MALLOC_TUNABLE), null when unset */
  glibc_tunables?: string | null;
  fair: boolean;
  unfair_reason: string | null;
}

/** One line for the log: the peer's configuration, and why no ratio is printed when it is not fair. */
export function describePeer(p: TorchPeer, threads: number): string {
  const core = p.openblas_core ? ` (${p.openblas_core} kernels)` : '';
  const heap = p.glibc_tunables ? `, GLIBC_TUNABLES=${p.glibc_tunables}` : '';
  const base = `PyTorch ${p.torch_version} on ${p.blas} BLAS${core}, ${p.threads} threads (machine: ${threads})${heap}`;
  return p.fair ? base : `${base}: NOT a fair peer, no torch ratios (${p.unfair_reason})`;
}

/**
 * Variables that hold a BLAS below the machine: OPENBLAS_CORETYPE picks OpenBLAS's kernels by hand
 * (a sandbox here sets Haswell, which halves sgemm on an AVX-512 CPU), OPENBLAS_L2_SIZE overrides
 * the cache size its blocking uses. The peer runs without them, on OpenBLAS's own CPU detection.
 */
export const PEER_ENV_DROPPED = ['OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE'] as const;

/**
 * glibc's malloc with transparent huge pages (glibc >= 2.35; older ones ignore it): the peer's
 * heap and the mmap'd blocks of its big tensors get MADV_HUGEPAGE, as the native engine's big
 * buffers do (docs/model.md). PyTorch's CPU allocator takes every tensor from malloc and frees it
 * after use, so each big activation or gradient is fresh pages again; on the Zen 5 VM of
 * 2026-12-02 (12 us a 4 KiB page fault) the peer trained the Qwen3-shaped model at 18 tok/s
 * without it and 83 with it, the small preset at 247 and 678 (native 184 and 2080 either way).
 */
export const PEER_MALLOC_TUNABLE = 'glibc.malloc.hugetlb=1';

/**
 * The environment for a peer process: this one's, less PEER_ENV_DROPPED, with PEER_MALLOC_TUNABLE
 * added to GLIBC_TUNABLES (unless it sets glibc.malloc.hugetlb already), plus `extra`.
 */
export function peerEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of PEER_ENV_DROPPED) delete env[k];
  const tunables = env.GLIBC_TUNABLES ?? '';
  if (!/(^|:)glibc\.malloc\.hugetlb=/.test(tunables)) env.GLIBC_TUNABLES = tunables ? `${tunables}:${PEER_MALLOC_TUNABLE}` : PEER_MALLOC_TUNABLE;
  return { ...env, ...extra };
}

/** The dropped variables that were set here (for the JSON), e.g. { OPENBLAS_CORETYPE: 'Haswell' }. */
export function peerEnvDropped(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of PEER_ENV_DROPPED) if (process.env[k] !== undefined) out[k] = process.env[k]!;
  return out;
}
