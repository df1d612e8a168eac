"""Runs the extension's murphy_nccl_* methods against a fake vLLM NCCL wrapper and a fake worker.

Usage: python3 worker_extension_nccl_check.py JOB.json
JOB: {"uid_hex", "world", "rank_offset", "meta": <murphy_nccl_recv metadata>, "buckets": FILE,
      "layout": {"rank", "dp_rank", "dp_size", "tp", "pp"}}
FILE holds the buckets' bytes back to back (what rank 0 would broadcast). The fake NCCLLibrary
records every call and, for each ncclBroadcast, writes the next bucket into the receive
buffer. Prints JSON: info, init and recv results, the calls in order, and per tensor loaded its
name, dtype, shape and values (as float).
"""
import ctypes
import json
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

job = json.load(open(sys.argv[1]))
data = open(job["buckets"], "rb").read()
calls = []


class ncclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


class FakeNCCLLibrary:
    def __init__(self, so_file=None):
        calls.append(["load"])
        self.at = 0

    def ncclGetVersion(self):
        return "2.21.5"

    def ncclCommInitRank(self, world, uid, rank):
        calls.append(["init", world, rank, bytes(uid.internal).hex()])
        return "comm-%d" % rank

    def ncclBroadcast(self, send, recv, count, dtype, root, comm, stream):
        calls.append(["broadcast", count, dtype, root, comm, send.value == recv.value])
        ctypes.memmove(recv.value, data[self.at : self.at + count], count)
        self.at += count

    def ncclCommDestroy(self, comm):
        calls.append(["destroy", comm])


names = ["vllm", "vllm.distributed", "vllm.distributed.device_communicators", "vllm.distributed.device_communicators.pynccl_wrapper"]
for n in names:
    sys.modules[n] = types.ModuleType(n)
sys.modules[names[-1]].NCCLLibrary = FakeNCCLLibrary
sys.modules[names[-1]].ncclUniqueId = ncclUniqueId

from murphy_vllm.worker_extension import MurphyWorkerExtension  # noqa: E402


class FakeModel:
    def __init__(self):
        self.seen = []

    def load_weights(self, weights):
        for name, t in weights:
            calls.append(["load_weights", name])
            self.seen.append({"name": name, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "values": [float(x) for x in t.float().reshape(-1)]})
        return set(n for n, _ in weights)


class Runner:
    def __init__(self):
        self.model = FakeModel()


L = job["layout"]


class FakeWorker(MurphyWorkerExtension):
    def __init__(self):
        self.rank = L["rank"]
        self.model_runner = Runner()
        par = types.SimpleNamespace(data_parallel_rank=L["dp_rank"], data_parallel_size=L["dp_size"], tensor_parallel_size=L["tp"], pipeline_parallel_size=L["pp"])
        self.vllm_config = types.SimpleNamespace(parallel_config=par, model_config=None)


w = FakeWorker()
out = {}
try:
    out["info"] = w.murphy_nccl_info()
    out["init"] = w.murphy_nccl_init(job["uid_hex"], job["world"], job["rank_offset"])
    out["recv"] = w.murphy_nccl_recv(json.dumps(job["meta"]))
    out["close"] = w.murphy_nccl_close()
    out["close_again"] = w.murphy_nccl_close()
    out["seen"] = w.model_runner.model.seen
except Exception as e:  # reported to the test
    out["error"] = "%s: %s" % (type(e).__name__, e)
out["calls"] = calls
print(json.dumps(out))
