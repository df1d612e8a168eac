"""The PyTorch peer's configuration, and a GEMM peer figure, for the benchmarks that compare with torch.

A peer is only fair when it runs on an optimised BLAS with the machine's cores: Debian's torch
falls back to the reference BLAS (libblas3, single-threaded and ~50x slower on GEMM) unless an
optimised one is installed (apt-get install libopenblas0-pthread). peer_info() records what is
really loaded (the BLAS library mapped into this process after a matrix product), torch's own
build configuration and its thread count; gemm() times torch.mm and numpy.matmul on given shapes.
"""
import os
import statistics
import re
import time

FIX = "apt-get install libopenblas0-pthread"


def _loaded_blas():
    """Paths of the BLAS/LAPACK libraries mapped into this process."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if any(k in name for k in ("blas", "mkl", "blis", "atlas")) or "openblas" in path:
                    found.add(path)
    except OSError:
        pass
    return sorted(found)


def _kind(paths):
    """Which BLAS serves sgemm: the libblas.so.3 torch links decides when one is mapped (Debian's
    alternatives, or LD_LIBRARY_PATH, may pair it with another library's LAPACK)."""
    def classify(text, allow_reference):
        text = text.lower()
        for k in ("mkl", "openblas", "blis", "atlas"):
            if k in text:
                return k
        return "reference" if allow_reference else "unknown"

    blas = [os.path.realpath(p) for p in paths if os.path.basename(p).startswith("libblas.so")]
    if blas:
        return classify(blas[0], allow_reference=True)
    return classify(" ".join(paths + [os.path.realpath(p) for p in paths]), allow_reference=False)


# OpenBLAS cores (openblas_get_corename) that run AVX-512 kernels; on a CPU with AVX-512 any
# other core (Haswell, Zen, ...) means OpenBLAS was held to AVX2 or less, most often by
# OPENBLAS_CORETYPE in the environment (bench/peer.ts's peerEnv() drops it for the peer).
AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")
BLAS_ENV_PREFIXES = ("OPENBLAS_", "GOTO_", "OMP_", "MKL_")


def _cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


def _openblas_core(paths):
    """openblas_get_corename() of the OpenBLAS mapped into this process (the kernels its sgemm runs), or None."""
    import ctypes

    for p in paths:
        if "openblas" in os.path.realpath(p).lower():
            try:
                lib = ctypes.CDLL(p)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return lib.openblas_get_corename().decode()
            except (OSError, AttributeError):
                continue
    return None


def _core_reason(core, avx512, forced):
    """Why an OpenBLAS on `core` kernels is not a fair peer on this CPU, or None: a core without
    AVX-512 on a CPU with it (forced: OPENBLAS_CORETYPE as the peer saw it, or None)."""
    if core is None or not avx512 or core.lower() in AVX512_CORES:
        return None
    why = f"OPENBLAS_CORETYPE={forced} in its environment" if forced else "its CPU detection"
    return f"OpenBLAS runs its {core} kernels, without AVX-512, on a CPU with AVX-512 ({why}); unset OPENBLAS_CORETYPE"


def peer_info(threads):
    """Sets torch's threads to `threads` and describes the peer; `fair` is False on the reference
    BLAS, with fewer threads, or on an OpenBLAS held to AVX2 kernels on a CPU with AVX-512."""
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(64, 64)
    (a @ a).sum().item()  # loads the BLAS
    paths = _loaded_blas()
    kind = _kind(paths)
    config = torch.__config__.show()
    blas_info = re.findall(r"(?:BLAS_INFO|LAPACK_INFO|USE_MKLDNN|USE_OPENMP)=[^,\s]+", config)
    got = torch.get_num_threads()
    reasons = []
    if kind == "reference":
        reasons.append(f"PyTorch runs on the reference BLAS ({', '.join(paths)}); {FIX} gives it OpenBLAS")
    if got < threads:
        reasons.append(f"PyTorch uses {got} threads, the machine has {threads}")
    core = _openblas_core(paths) if kind == "openblas" else None
    avx512 = _cpu_has_avx512()
    core_reason = _core_reason(core, avx512, os.environ.get("OPENBLAS_CORETYPE"))
    if core_reason:
        reasons.append(core_reason)
    return {
        "torch_version": torch.__version__,
        "threads": got,
        "requested_threads": threads,
        "blas": kind,
        "blas_libraries": [{"path": p, "real": os.path.realpath(p)} for p in paths],
        "config_blas": blas_info,
        "openblas_core": core,
        "cpu_avx512": avx512,
        "blas_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(BLAS_ENV_PREFIXES)},
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES"),
        "fair": not reasons,
        "unfair_reason": "; ".join(reasons) or None,
    }


def time_ms(fn, reps, warmup=1, clock=time.perf_counter, warm_ms=0.0):
    """Best and median time of fn() in ms over `reps` runs, after `warmup` untimed runs and then
    more untimed runs until `warm_ms` ms have passed (wall time; clock=time.process_time for this
    process's CPU time)."""
    for _ in range(warmup):
        fn()
    until = time.perf_counter() + warm_ms / 1e3
    while time.perf_counter() < until:
        fn()
    ts = []
    for _ in range(reps):
        t0 = clock()
        fn()
        ts.append((clock() - t0) * 1e3)
    return min(ts), statistics.median(ts)


def gemm(shapes, reps=5):
    """torch.mm and numpy.matmul (float32) on [(name, m, k, n)]: best and median ms and GFLOP/s (2mkn flops)."""
    import torch

    out = []
    g = torch.Generator().manual_seed(0)
    try:
        import numpy as np
    except ImportError:
        np = None
    for name, m, k, n in shapes:
        a = torch.randn(m, k, generator=g)
        b = torch.randn(k, n, generator=g)
        flops = 2.0 * m * k * n
        best, med = time_ms(lambda: torch.mm(a, b), reps)
        row = {"name": name, "m": m, "k": k, "n": n, "torch_best_ms": best, "torch_median_ms": med, "torch_gflops": flops / best / 1e6}
        if np is not None:
            an, bn = a.numpy(), b.numpy()
            best, med = time_ms(lambda: an @ bn, reps)
            row.update({"numpy_best_ms": best, "numpy_median_ms": med, "numpy_gflops": flops / best / 1e6})
        out.append(row)
    if np is not None:
        try:
            cfg = np.show_config(mode="dicts")  # numpy >= 1.25
            blas = cfg.get("Build Dependencies", {}).get("blas", {}).get("name")
        except TypeError:
            blas = None
        out_meta = {"numpy_version": np.__version__, "numpy_blas_build": blas}
    else:
        out_meta = {"numpy_version": None}
    return {"shapes": out, **out_meta, "note": "float32, one product per call, best of reps (median also given); GFLOP/s = 2mkn / best"}


def serve_gemm(threads, stdin=None, stdout=None, cpu_time=False):
    """Answers GEMM timing requests, one JSON line each, so that a benchmark can interleave the peer
    with its own runs in one session: {"m", "k", "n", "reps", "layout"?, "inner"?} -> {"torch_best_ms",
    "numpy_best_ms"} (float32, (m x k) @ (k x n), best of reps after one warm-up, each rep timing
    `inner` products back to back (default 1) and reporting the time of one; wall time, or
    this process's CPU time with cpu_time=True). "layout" (default "nn") says which operand is the
    transposed view of a row-major array, as in the model's products: "nt" = a @ b.T with b
    stored (n x k) (nn.Linear's forward, x @ W^T), "tn" = a.T @ b with a stored (k x m) (the
    weight gradient, dY^T @ X); both libraries hand the view to BLAS as a transpose flag, no copy.
    Stops at end of input."""
    import json
    import sys

    import numpy as np
    import torch

    torch.set_num_threads(threads)
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    g = torch.Generator().manual_seed(0)
    cache = {}
    for line in stdin:
        req = json.loads(line)
        m, k, n, reps = req["m"], req["k"], req["n"], req["reps"]
        layout = req.get("layout", "nn")
        if (m, k, n, layout) not in cache:
            cache.clear()
            a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
            b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
            cache[(m, k, n, layout)] = (a, b, a.numpy(), b.numpy())
        a, b, an, bn = cache[(m, k, n, layout)]
        clock = time.process_time if cpu_time else time.perf_counter
        inner = int(req.get("inner", 1))

        def times(f):
            def run():
                for _ in range(inner):
                    f()
            return run

        # "warm_ms": untimed products for that long first (the process may have slept since its
        # last turn: gemm.bench.ts, WARM_MS); numpy then runs right after torch.
        tb, _ = time_ms(times(lambda: torch.mm(a, b)), reps, clock=clock, warm_ms=float(req.get("warm_ms", 0)))
        nb, _ = time_ms(times(lambda: an @ bn), reps, clock=clock)
        tb, nb = tb / inner, nb / inner
        stdout.write(json.dumps({"torch_best_ms": tb, "numpy_best_ms": nb}) + "\n")
        stdout.flush()
