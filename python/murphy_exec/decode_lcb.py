#!/usr/bin/env python3
"""Decode LiveCodeBench's compressed-pickle test blobs into plain JSON for murphy-native.

LiveCodeBench (code_generation_lite testN.jsonl) stores `private_test_cases` as
base64(zlib(pickle(JSON string))); SandboxFusion's packaging stores its `test` field as
base64(zlib(pickle({"input_output": JSON string}))). JavaScript cannot read pickles safely,
so decode them once here:

    python3 decode_lcb.py test6.jsonl test6.decoded.jsonl
        -> the same records with private_test_cases replaced by its JSON string
    python3 decode_lcb.py code_eval_live_code_bench_v1.jsonl code_eval_live_code_bench_v1.tests-decoded.json
        -> (SandboxFusion packaging) a JSON array [{id, task_id, category, difficulty, fn_name, inputs, outputs}]

Unpickling uses a restricted unpickler that refuses every class and function: only plain
strings, numbers, lists and dicts load, so a malicious blob cannot run code.
"""

import base64
import io
import json
import pickle
import sys
import zlib


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):  # noqa: D401
        raise pickle.UnpicklingError("refusing to load %s.%s: only plain data is accepted" % (module, name))


def decode_blob(blob):
    raw = zlib.decompress(base64.b64decode(blob))
    return _PlainUnpickler(io.BytesIO(raw)).load()


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    src, dst = argv[1], argv[2]
    records = [json.loads(line) for line in open(src, encoding="utf-8") if line.strip()]
    if records and "question_content" in records[0]:
        with open(dst, "w", encoding="utf-8") as out:
            for r in records:
                priv = r.get("private_test_cases")
                if isinstance(priv, str) and priv.strip() and priv.strip()[0] not in "[{":
                    value = decode_blob(priv)
                    r["private_test_cases"] = value if isinstance(value, str) else json.dumps(value)
                out.write(json.dumps(r) + "\n")
        return 0
    decoded = []
    for r in records:
        labels = json.loads(r["labels"]) if isinstance(r.get("labels"), str) else (r.get("labels") or {})
        value = decode_blob(r["test"])
        io_json = value["input_output"] if isinstance(value, dict) else value
        spec = json.loads(io_json) if isinstance(io_json, str) else io_json
        decoded.append({
            "id": r["id"],
            "task_id": labels.get("task_id"),
            "category": labels.get("category"),
            "difficulty": labels.get("difficulty"),
            "fn_name": spec.get("fn_name"),
            "inputs": spec["inputs"],
            "outputs": spec["outputs"],
        })
    with open(dst, "w", encoding="utf-8") as out:
        json.dump(decoded, out, indent=1)
        out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
