"""The extension's murphy_nccl_* methods against a fake vLLM NCCL wrapper and a fake worker:
run_nccl(JOB.json) -> dict, a job of worker_extension_check.py (mode "nccl").

JOB: {"uid_hex", "world", "rank_offset", "meta": <murphy_nccl_recv metadata>, "buckets": FILE,
      "layout": {"rank", "dp_rank", "dp_size", "tp", "pp"}}
FILE holds the buckets' bytes back to back (what rank 0 would broadcast). The fake NCCLLibrary
records every call and, for each ncclBroadcast, writes the next bucket into the receive
buffer. The result: info, init and recv results, the calls in order, and per tensor loaded its
name, dtype, shape and values (as float). The fake vLLM modules are installed for the job only
(the extension imports vLLM's NCCL wrapper when a method needs it) and removed after it.
"""
import ctypes
import json
import sys
import types

from murphy_vllm.worker_extension import MurphyWorkerExtension

FAKE_VLLM = ["vllm", "vllm.distributed", "vllm.distributed.device_communicators", "vllm.distributed.device_communicators.pynccl_wrapper"]


class ncclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def run_nccl(job_path):
    job = json.load(open(job_path))
    data = open(job["buckets"], "rb").read()
    calls = []

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

    for n in FAKE_VLLM:
        sys.modules[n] = types.ModuleType(n)
    sys.modules[FAKE_VLLM[-1]].NCCLLibrary = FakeNCCLLibrary
    sys.modules[FAKE_VLLM[-1]].ncclUniqueId = ncclUniqueId
    out = {}
    try:
        w = FakeWorker()
        out["info"] = w.murphy_nccl_info()
        out["init"] = w.murphy_nccl_init(job["uid_hex"], job["world"], job["rank_offset"])
        out["recv"] = w.murphy_nccl_recv(json.dumps(job["meta"]))
        out["close"] = w.murphy_nccl_close()
        out["close_again"] = w.murphy_nccl_close()
        out["seen"] = w.model_runner.model.seen
    except Exception as e:  # reported to the test
        out["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        for n in FAKE_VLLM:
            sys.modules.pop(n, None)
    out["calls"] = calls
    return out
