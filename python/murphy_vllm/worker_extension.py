"""vLLM worker extension: load new policy weights from a Hugging Face checkpoint directory.

The murphy-native trainer writes the policy as a Hugging Face directory (config.json,
model.safetensors or a sharded model.safetensors.index.json) and then asks every vLLM
worker to load it:

    POST /collective_rpc  {"method": "murphy_load_weights", "args": ["/abs/path/step-12"]}
    POST /reset_prefix_cache

vLLM mixes this class into its worker class when started with

    VLLM_SERVER_DEV_MODE=1 PYTHONPATH=<package>/python vllm serve MODEL \
        --worker-extension-cls murphy_vllm.worker_extension.MurphyWorkerExtension ...

so `self` is the worker and `self.model_runner.model` the nn.Module whose `load_weights`
accepts an iterable of (name, tensor) pairs with Hugging Face parameter names (the same
call vLLM's own RLHF examples use). Each tensor-parallel worker reads the full tensors and
`load_weights` keeps its shard.

Written against vLLM's documented worker-extension and collective_rpc API (>= 0.10.2);
only the parts below that do not need vLLM (file discovery, safetensors reading, the call
sequence against a fake model runner) are tested in this repository.
"""

import json
import os
import struct

__all__ = ["MurphyWorkerExtension", "checkpoint_files", "iter_checkpoint"]

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


class MurphyWorkerExtension:
    """Mixed into vLLM's worker class by --worker-extension-cls."""

    def murphy_load_weights(self, path):
        """Loads every tensor of the checkpoint at `path` into the served model.

        Returns a JSON-serialisable summary; vLLM's /collective_rpc returns one per worker
        as {"results": [...]} and the trainer checks each has loaded == true.
        """
        model = self.model_runner.model
        count = [0]

        def weights():
            for name, tensor in iter_checkpoint(path):
                count[0] += 1
                yield name, tensor

        loaded = model.load_weights(weights=weights())
        if count[0] == 0:
            raise ValueError("checkpoint %r has no tensors" % (path,))
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except ImportError:
            pass
        return {
            "loaded": True,
            "path": path,
            "tensors": count[0],
            "params": None if loaded is None else len(loaded),
            "rank": getattr(self, "rank", None),
        }
