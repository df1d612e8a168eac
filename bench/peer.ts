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
  fair: boolean;
  unfair_reason: string | null;
}

/** One line for the log: the peer's configuration, and why no ratio is printed when it is not fair. */
export function describePeer(p: TorchPeer, threads: number): string {
  const base = `PyTorch ${p.torch_version} on ${p.blas} BLAS, ${p.threads} threads (machine: ${threads})`;
  return p.fair ? base : `${base}: NOT a fair peer, no torch ratios (${p.unfair_reason})`;
}
