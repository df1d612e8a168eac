"""Runs MurphyWorkerExtension.murphy_load_weights against a fake vLLM worker.

Usage: python3 worker_extension_check.py CHECKPOINT_DIR MODE [CHECKPOINT_DIR MODE ...]
(the worker-extension tests of test/rollout/worker-extension.test.ts, in one process)
  MODE plain:     the runner exposes .model only, no vllm_config
       v1:        the runner has get_model() (its .model is a decoy) and a vllm_config with
                  data_parallel_rank 1, tensor_parallel_size 2, pipeline_parallel_size 3
       layerwise: as v1, plus a fake vllm.model_executor.model_loader.reload module whose
                  initialize/finalize calls are recorded around load_weights (removed again
                  after that job, so that the jobs do not see each other's modules)
       nccl:      CHECKPOINT_DIR is instead a JOB.json of worker_extension_nccl.py: the
                  murphy_nccl_* methods against a fake vLLM NCCL wrapper
Prints one JSON line per job, in order: the extension's return value, the calls seen, and,
per tensor, dtype, shape, sum and first values as the fake model's load_weights received them
(in the order received). One process runs every job: importing torch is most of the cost.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from murphy_vllm.worker_extension import MurphyWorkerExtension  # noqa: E402


class FakeModel:
    def __init__(self):
        self.seen = []

    def load_weights(self, weights):
        # vLLM models consume an iterable of (name, tensor) and return the loaded names
        names = set()
        for name, t in weights:
            flat = t.float().reshape(-1)
            self.seen.append({
                "name": name,
                "dtype": str(t.dtype).replace("torch.", ""),
                "shape": list(t.shape),
                "sum": float(flat.double().sum()),
                "head": [float(x) for x in flat[:4]],
            })
            names.add(name)
        return names


import types


class V1Runner:
    def __init__(self):
        self.served = FakeModel()
        self.model = None  # a decoy: the extension must use get_model()

    def get_model(self):
        return self.served


class FakeWorker(MurphyWorkerExtension):
    def __init__(self, mode):
        self.rank = 0
        if mode == "plain":
            self.model_runner = FakeRunner()
        else:
            self.model_runner = V1Runner()
            par = types.SimpleNamespace(data_parallel_rank=1, tensor_parallel_size=2, pipeline_parallel_size=3)
            self.vllm_config = types.SimpleNamespace(parallel_config=par, model_config="the-model-config")


class FakeRunner:
    def __init__(self):
        self.model = FakeModel()


FAKE_VLLM = ["vllm", "vllm.model_executor", "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.reload"]


def run_one(path, mode):
    events = []
    if mode == "layerwise":
        for n in FAKE_VLLM:
            sys.modules[n] = types.ModuleType(n)
        reload = sys.modules[FAKE_VLLM[-1]]
        reload.initialize_layerwise_reload = lambda model: events.append(["init", len(model.seen)])
        reload.finalize_layerwise_reload = lambda model, cfg: events.append(["finalize", len(model.seen), cfg])
    try:
        w = FakeWorker(mode)
        model = w.model_runner.model if mode == "plain" else w.model_runner.served
        try:
            out = w.murphy_load_weights(path)
            return {"result": out, "seen": model.seen, "events": events}
        except Exception as e:  # reported to the test
            return {"error": "%s: %s" % (type(e).__name__, e)}
    finally:
        for n in FAKE_VLLM:
            sys.modules.pop(n, None)


from worker_extension_nccl import run_nccl  # noqa: E402

args = sys.argv[1:]
for i in range(0, len(args), 2):
    mode = args[i + 1] if i + 1 < len(args) else "plain"
    print(json.dumps(run_nccl(args[i]) if mode == "nccl" else run_one(args[i], mode)))
