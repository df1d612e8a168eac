"""Output comparison (in the supervisor): stdin/stdout answers and functional results."""

import json
import math

def normalize_output(s):
    lines = [" ".join(l.split()) for l in s.strip().splitlines()]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def outputs_match(got, expected):
    a, b = normalize_output(got), normalize_output(expected)
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for la, lb in zip(a, b):
        if la == lb:
            continue
        ta, tb = la.split(), lb.split()
        if len(ta) != len(tb):
            return False
        for x, y in zip(ta, tb):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                return False
            if not math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6):
                return False
    return True


def _canon(v):
    if isinstance(v, tuple):
        return [_canon(x) for x in v]
    if isinstance(v, list):
        return [_canon(x) for x in v]
    if isinstance(v, dict):
        return {k: _canon(x) for k, x in v.items()}
    return v


def _eq(a, b):
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_eq(a[k], b[k]) for k in a)
    return a == b


def values_match(got_json, exp_json):
    try:
        got = _canon(json.loads(got_json))
        exp = _canon(json.loads(exp_json))
    except ValueError:
        return got_json.strip() == exp_json.strip()
    return _eq(got, exp)
