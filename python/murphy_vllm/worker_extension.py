"""vLLM worker extension: load new policy weights from a Hugging Face checkpoint directory, or
receive them over NCCL from the trainer (the murphy_nccl_* methods, below).

The murphy-native trainer writes the policy as a Hugging Face directory (config.json,
model.safetensors or a sharded model.safetensors.index.json) and then asks every vLLM
worker to load it:

    POST /pause?mode=wait            (where the server has it)
    POST /collective_rpc  {"method": "murphy_load_weights", "args": ["/abs/path/step-12"]}
    POST /reset_prefix_cache?reset_running_requests=true
    POST /resume

vLLM mixes this class into its worker class when started with

    VLLM_SERVER_DEV_MODE=1 PYTHONPATH=<package>/python vllm serve MODEL \
        --worker-extension-cls murphy_vllm.worker_extension.MurphyWorkerExtension ...

so `self` is the worker and `self.model_runner.get_model()` (or `.model`) the nn.Module whose
`load_weights` accepts an iterable of (name, tensor) pairs with Hugging Face parameter names (the same
call vLLM's own RLHF examples use). Each tensor-parallel worker reads the full tensors and
`load_weights` keeps its shard.

Written against vLLM's documented worker-extension and collective_rpc API (>= 0.10.2);
only the parts below that do not need vLLM (file discovery, safetensors reading, the call
sequence against a fake model runner) are tested in this repository.
"""

import json
import os
import struct

__all__ = ["MurphyWorkerExtension", "checkpoint_files", "iter_checkpoint", "nccl_rank"]

_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}


def checkpoint_files(path):
    """The safetensors files of a checkpoint directory, in a stable order."""
    if not os.path.isdir(path):
        raise FileNotFoundError("checkpoint directory %r does not exist" % (path,))
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, "r", encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map") or {}
        files = sorted(set(weight_map.values()))
        if not files:
            raise ValueError("%s has an empty weight_map" % (index,))
        return [os.path.join(path, x) for x in files]
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return [single]
    files = sorted(x for x in os.listdir(path) if x.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError("no model.safetensors or model.safetensors.index.json in %r" % (path,))
    return [os.path.join(path, x) for x in files]


def _read_safetensors(file):
    """Minimal safetensors reader (used when the safetensors package is absent)."""
    import torch

    with open(file, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: not a safetensors file" % (file,))
    (hlen,) = struct.unpack("<Q", data[:8])
    if 8 + hlen > len(data):
        raise ValueError("%s: truncated header" % (file,))
    header = json.loads(data[8 : 8 + hlen].decode("utf-8"))
    base = 8 + hlen
    for name in sorted(k for k in header if k != "__metadata__"):
        e = header[name]
        dt = _DTYPES.get(e["dtype"])
        if dt is None:
            raise ValueError("%s: tensor %r has unsupported dtype %s" % (file, name, e["dtype"]))
        a, b = e["data_offsets"]
        if base + b > len(data) or a > b:
            raise ValueError("%s: tensor %r lies outside the file" % (file, name))
        dtype = getattr(torch, dt)
        shape = list(e["shape"])
        if b == a:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(data[base + a : base + b]), dtype=dtype).reshape(shape)
        yield name, t


def iter_checkpoint(path):
    """(name, CPU tensor) for every tensor of the checkpoint."""
    files = checkpoint_files(path)
    try:
        from safetensors.torch import safe_open  # type: ignore
    except ImportError:
        safe_open = None
    for file in files:
        if safe_open is None:
            for item in _read_safetensors(file):
                yield item
        else:
            with safe_open(file, framework="pt", device="cpu") as sf:
                for name in sf.keys():
                    yield name, sf.get_tensor(name)


def _served_model(worker):
    """The nn.Module being served: model_runner.get_model() where the runner has it (V1 GPU
    runner), else model_runner.model."""
    runner = worker.model_runner
    get_model = getattr(runner, "get_model", None)
    return get_model() if callable(get_model) else runner.model


def _layerwise_reload():
    """vLLM's layerwise reload helpers (0.16+), or None where they do not import.

    Wrapped around load_weights they restore each layer's loading-time parameters, load the
    new tensors, then re-run the layer's post-load processing (quantization, FP8 scales), so
    quantized checkpoints reload correctly; without them load_weights writes into the
    already-processed parameters."""
    try:
        from vllm.model_executor.model_loader.reload import (  # type: ignore
            finalize_layerwise_reload,
            initialize_layerwise_reload,
        )
    except Exception:  # not installed, or an older vLLM
        return None
    return initialize_layerwise_reload, finalize_layerwise_reload


def _parallel_layout(worker):
    """(data-parallel rank, tensor-parallel size, pipeline-parallel size) from the worker's config."""
    cfg = getattr(worker, "vllm_config", None)
    par = getattr(cfg, "parallel_config", None)
    dp_rank = getattr(par, "data_parallel_rank", 0) if par is not None else 0
    tp = getattr(par, "tensor_parallel_size", 1) if par is not None else 1
    pp = getattr(par, "pipeline_parallel_size", 1) if par is not None else 1
    return int(dp_rank or 0), int(tp or 1), int(pp or 1)


# ---------------------------------------------------------------------------------------------
# Weight sync over NCCL (docs/distributed.md, "NCCL weight sync"). The trainer is rank 0 of a
# group with every vLLM worker; it calls, through /collective_rpc:
#   murphy_nccl_info()                         -> layout, GPU UUID, NCCL version of each worker
#   murphy_nccl_init(uid_hex, world, offset)   -> joins the group as offset + dp_rank * TP*PP + local rank
#   murphy_nccl_recv(meta_json)                -> receives the bf16 buckets broadcast from rank 0, in
#                                                 order, and loads them; {"loaded": true, "tensors": n}
#   murphy_nccl_close()                        -> destroys the communicator
# vLLM's own NCCL wrapper (pynccl_wrapper.NCCLLibrary) is used, so the NCCL is the one vLLM
# loads. vLLM never calls the extension's __init__: the state lives in _NcclState.

NCCL_UINT8 = 1  # ncclDataType_t ncclUint8


class _NcclState:
    lib = None
    comm = None
    rank = None
    world = None


def _nccl_library():
    """vLLM's NCCLLibrary (loaded once per worker process)."""
    if _NcclState.lib is None:
        from vllm.distributed.device_communicators.pynccl_wrapper import NCCLLibrary  # type: ignore

        _NcclState.lib = NCCLLibrary()
    return _NcclState.lib


def _dp_size(worker):
    cfg = getattr(worker, "vllm_config", None)
    par = getattr(cfg, "parallel_config", None)
    return int(getattr(par, "data_parallel_size", 1) or 1) if par is not None else 1


def nccl_rank(rank_offset, dp_rank, tp, pp, worker_rank):
    """The worker's rank in the weight-sync group: offset + dp_rank * (TP x PP) + its rank within
    its engine (worker_rank modulo TP x PP: some vLLM versions number workers across engines)."""
    per = tp * pp
    return int(rank_offset) + int(dp_rank) * per + int(worker_rank) % per


def _device_and_stream():
    """(torch device, raw CUDA stream handle) of this worker; ("cpu", None) without CUDA (tests)."""
    import torch

    if torch.cuda.is_available():
        dev = torch.device("cuda", torch.cuda.current_device())
        return dev, torch.cuda.current_stream(dev).cuda_stream
    return torch.device("cpu"), None


def _gpu_uuid():
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        u = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
        if u is None:
            return None
        u = str(u)
        return u if u.upper().startswith("GPU-") else "GPU-" + u
    except Exception:
        return None


def _buffer(ptr):
    import ctypes

    return ctypes.c_void_p(ptr)


class MurphyNcclMixin:
    """The murphy_nccl_* methods; mixed into MurphyWorkerExtension."""

    def murphy_nccl_info(self):
        dp_rank, tp, pp = _parallel_layout(self)
        return {
            "rank": getattr(self, "rank", 0),
            "tp_size": tp,
            "pp_size": pp,
            "dp_rank": dp_rank,
            "dp_size": _dp_size(self),
            "gpu_uuid": _gpu_uuid(),
            "nccl_version": str(_nccl_library().ncclGetVersion()),
        }

    def murphy_nccl_init(self, uid_hex, world, rank_offset):
        import ctypes

        from vllm.distributed.device_communicators.pynccl_wrapper import ncclUniqueId  # type: ignore

        raw = bytes.fromhex(uid_hex)
        if len(raw) != 128:
            raise ValueError("murphy_nccl_init: the unique id has %d bytes, NCCL's has 128" % len(raw))
        dp_rank, tp, pp = _parallel_layout(self)
        rank = nccl_rank(rank_offset, dp_rank, tp, pp, getattr(self, "rank", 0))
        if not 0 < rank < int(world):
            raise ValueError("murphy_nccl_init: rank %d is outside 1..%d" % (rank, int(world) - 1))
        lib = _nccl_library()
        if _NcclState.comm is not None:  # a group left over from an aborted sync
            self.murphy_nccl_close()
        uid = ncclUniqueId()
        ctypes.memmove(ctypes.addressof(uid.internal), raw, 128)
        _NcclState.comm = lib.ncclCommInitRank(int(world), uid, rank)
        _NcclState.rank = rank
        _NcclState.world = int(world)
        return {"rank": rank, "world": int(world)}

    def murphy_nccl_recv(self, meta_json):
        import torch

        if _NcclState.comm is None:
            raise RuntimeError("murphy_nccl_recv: no weight-sync group (call murphy_nccl_init first)")
        meta = json.loads(meta_json)
        if meta.get("dtype") != "bfloat16":
            raise ValueError("murphy_nccl_recv: only bfloat16 buckets are supported")
        lib = _nccl_library()
        device, stream = _device_and_stream()
        model = _served_model(self)
        helpers = _layerwise_reload()
        if helpers is not None:
            helpers[0](model)
        count = 0
        received = 0
        for bucket in meta["buckets"]:
            nbytes = int(bucket["bytes"])
            received += nbytes
            buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
            lib.ncclBroadcast(_buffer(buf.data_ptr()), _buffer(buf.data_ptr()), nbytes, NCCL_UINT8, 0, _NcclState.comm, _buffer(stream) if stream is not None else None)
            if device.type == "cuda":
                torch.cuda.current_stream(device).synchronize()
            weights = []
            for t in bucket["tensors"]:
                numel = 1
                for d in t["shape"]:
                    numel *= int(d)
                a = int(t["offset"])
                weights.append((t["name"], buf[a : a + 2 * numel].view(torch.bfloat16).reshape(list(t["shape"]))))
            model.load_weights(weights=weights)
            count += len(weights)
            del weights, buf
        if helpers is not None:
            model_config = getattr(self, "model_config", None) or getattr(getattr(self, "vllm_config", None), "model_config", None)
            helpers[1](model, model_config)
        if device.type == "cuda":
            torch.cuda.synchronize()
        dp_rank, tp, pp = _parallel_layout(self)
        return {"loaded": True, "tensors": count, "buckets": len(meta["buckets"]), "bytes": received, "step": meta.get("step"), "rank": getattr(self, "rank", None), "dp_rank": dp_rank, "world_size": tp * pp, "nccl_rank": _NcclState.rank}

    def murphy_nccl_close(self):
        comm = _NcclState.comm
        _NcclState.comm = None
        _NcclState.rank = None
        _NcclState.world = None
        if comm is not None:
            _nccl_library().ncclCommDestroy(comm)
        return {"closed": True}



class MurphyWorkerExtension(MurphyNcclMixin):
    """Mixed into vLLM's worker class by --worker-extension-cls."""

    def murphy_load_weights(self, path):
        """Loads every tensor of the checkpoint at `path` into the served model.

        Returns a JSON-serialisable summary; vLLM's /collective_rpc returns one per worker
        as {"results": [...]}. The trainer checks that each has loaded == true and that as
        many workers answered as `world_size` (tensor x pipeline parallel size) says. With
        vLLM's internal data parallelism only engine 0's workers' results come back.
        vLLM's own reload_weights is not used: it returns nothing and rewrites the server's
        model path.
        """
        model = _served_model(self)
        count = [0]

        def weights():
            for name, tensor in iter_checkpoint(path):
                count[0] += 1
                yield name, tensor

        helpers = _layerwise_reload()
        if helpers is not None:
            initialize, finalize = helpers
            initialize(model)
            loaded = model.load_weights(weights=weights())
            model_config = getattr(self, "model_config", None) or getattr(getattr(self, "vllm_config", None), "model_config", None)
            finalize(model, model_config)
        else:
            loaded = model.load_weights(weights=weights())
        if count[0] == 0:
            raise ValueError("checkpoint %r has no tensors" % (path,))
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except ImportError:
            pass
        dp_rank, tp, pp = _parallel_layout(self)
        return {
            "loaded": True,
            "path": path,
            "tensors": count[0],
            "params": None if loaded is None else len(loaded),
            "rank": getattr(self, "rank", None),
            "dp_rank": dp_rank,
            "tp_size": tp,
            "pp_size": pp,
            "world_size": tp * pp,
            "layerwise": helpers is not None,
        }

