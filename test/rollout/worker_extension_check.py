"""Runs MurphyWorkerExtension.murphy_load_weights against a fake vLLM worker.

Usage: python3 worker_extension_check.py CHECKPOINT_DIR
Prints JSON: the extension's return value and, per tensor, dtype, shape, sum and first values
as the fake model's load_weights received them (in the order received).
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


class FakeRunner:
    def __init__(self):
        self.model = FakeModel()


class FakeWorker(MurphyWorkerExtension):
    def __init__(self):
        self.model_runner = FakeRunner()
        self.rank = 0


w = FakeWorker()
try:
    out = w.murphy_load_weights(sys.argv[1])
    print(json.dumps({"result": out, "seen": w.model_runner.model.seen}))
except Exception as e:  # reported to the test
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
