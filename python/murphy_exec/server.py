"""murphy-native executor: the warm harness.

One server process per pool worker. It reads one JSON request per line on stdin, runs the
candidate program in a *fresh forked child* per program (or per stdin/stdout test case),
and writes one JSON response per line on stdout. The server itself runs inside the
bubblewrap sandbox when bwrap is available (see docs/executor.md), so its children inherit
the sandbox's namespaces (no network, private /tmp, read-only view of the interpreter
only). Per child it adds:

- a fresh temporary directory (removed afterwards), made the working directory;
- a new session and process group (os.setsid);
- setrlimit: CPU time, address space, file size, process count, open files, no core;
- a dedicated unprivileged uid when the server runs as root (distinct per worker);
- an empty environment apart from what Python needs; stdin /dev/null or the test's input;
- stdout/stderr captured through pipes, capped in bytes;
- wall-clock timeouts per test and per program enforced *here*, outside the child: the
  child's process tree is SIGKILLed (the server is a child subreaper, so even daemons that
  left the process group are found and killed).

Results come back over a separate pipe with a per-run random token; the program's own
exit status and its stdout never count as a pass. A test passes only when the child
reports the end of that test, and a run succeeds only when the child reports that every
test ran.
"""

import ast
import base64
import ctypes
import marshal
import operator
import errno
import io
import json
import os
import resource
import secrets
import select
import shutil
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

# Warm modules: imported once in the server so children do not pay for them.
import bisect  # noqa: F401,E402
import collections  # noqa: F401,E402
import copy  # noqa: F401,E402
import dataclasses  # noqa: F401,E402
import datetime  # noqa: F401,E402
import decimal  # noqa: F401,E402
import fractions  # noqa: F401,E402
import functools  # noqa: F401,E402
import heapq  # noqa: F401,E402
import itertools  # noqa: F401,E402
import math  # noqa: F401,E402
import random  # noqa: F401,E402
import re  # noqa: F401,E402
import reprlib  # noqa: E402
import statistics  # noqa: F401,E402
import string  # noqa: F401,E402
import types  # noqa: E402
import typing  # noqa: F401,E402
import unittest  # noqa: F401,E402
import hashlib  # noqa: F401,E402
import enum  # noqa: F401,E402
import abc  # noqa: F401,E402
import array  # noqa: F401,E402
import textwrap  # noqa: F401,E402

sys.path.insert(0, HERE)
if os.getcwd() not in sys.path:
    sys.path.insert(1, os.getcwd())  # the remote driver ships pytest_shim.py beside the script
import pytest_shim  # noqa: E402

SOL_FILE = "solution.py"
TEST_FILE = "test.py"
CHILD_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

# LiveCodeBench's harness runs programs after these imports (lcb_runner's import header).
LCB_PRELUDE = compile(
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\nfrom functools import *\n"
    "from operator import *\nfrom io import *\nfrom sys import *\nfrom json import *\n"
    "from builtins import *\nfrom typing import *\nimport string\nimport re\nimport datetime\n"
    "import collections\nimport heapq\nimport bisect\nimport copy\nimport math\nimport random\n"
    "import statistics\nimport itertools\nimport functools\nimport operator\nimport io\nimport sys\n"
    "import json\nsys.setrecursionlimit(50000)\n",
    "<prelude>",
    "exec",
)

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def try_unshare(flags):
    try:
        return libc().unshare(ctypes.c_int(flags)) == 0
    except Exception:
        return False


CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 16384, 1 << 18
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def private_scratch(root, size):
    """Without bubblewrap: a mount namespace of the server's own, with a fresh tmpfs on /tmp,
    /var/tmp and /dev/shm, so that programs cannot write to (or read) the host's. Returns the
    directories made private (none when the kernel refuses)."""
    uid, gid = os.getuid(), os.getgid()
    if not try_unshare(CLONE_NEWNS if root else CLONE_NEWNS | CLONE_NEWUSER):
        return []
    if not root:
        try:
            for f, data in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)), ("gid_map", "%d %d 1" % (gid, gid))):
                with open("/proc/self/" + f, "w") as fh:
                    fh.write(data)
        except OSError:
            return []
    lc = libc()
    if lc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
        return []
    done = []
    opts = ("mode=1777,size=%d" % int(size)).encode()
    for d in SCRATCH_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            if lc.mount(b"tmpfs", d.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), opts) == 0:
                done.append(d)
    return done


def set_subreaper():
    try:
        return libc().prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False


# --------------------------------------------------------------------------- planning
# The server (trusted) parses the tests and decides the list of test units; the child
# only executes unit i. Each unit: {"name", "source", "code" (for assert kinds)}.


def _segment(src, node, _cache={}):
    """ast.get_source_segment without re-splitting the source for every node."""
    lines = _cache.get(src)
    if lines is None:
        _cache.clear()
        lines = _cache[src] = src.splitlines(True)
    try:
        l0, l1 = node.lineno - 1, node.end_lineno - 1
        c0, c1 = node.col_offset, node.end_col_offset
        if l0 == l1:
            return lines[l0].encode()[c0:c1].decode()
        first = lines[l0].encode()[c0:].decode()
        last = lines[l1].encode()[:c1].decode()
        return first + "".join(lines[l0 + 1:l1]) + last
    except (AttributeError, IndexError, TypeError, UnicodeDecodeError):
        return ast.unparse(node)


def _contains_assert(node):
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def plan_humaneval(req):
    test = req["test"]
    tree = ast.parse(test, TEST_FILE)
    check = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            check = node
    if check is None or not check.args.args:
        return {"mode": "whole"}, [{"name": "check", "source": "check(%s)" % req["entryPoint"]}]
    param = check.args.args[0].arg
    units = []
    pending = []  # statements that set up later asserts
    for stmt in check.body:
        if isinstance(stmt, ast.Expr) and isinstance(getattr(stmt, "value", None), ast.Constant) and isinstance(stmt.value.value, str):
            continue  # docstring
        if _contains_assert(stmt):
            units.append({"name": "test %d" % (len(units) + 1), "source": _segment(test, stmt), "pre": pending, "stmt": stmt})
            pending = []
        else:
            pending = pending + [stmt]
    if not units:
        return {"mode": "whole"}, [{"name": "check", "source": "check(%s)" % req["entryPoint"]}]
    if pending:
        # Trailing non-assert statements (e.g. a loop calling a helper) run as part of the last unit.
        units[-1]["post"] = pending
    for u in units:
        u["lineno"] = u["stmt"].lineno
        u["checks"] = isinstance(u["stmt"], ast.Assert)
    return {"mode": "units", "param": param, "check": check}, units


def plan(req):
    kind = req["kind"]
    if kind == "humaneval":
        return plan_humaneval(req)
    if kind == "assert":
        return {}, [{"name": "test %d" % (i + 1), "source": a, "checks": True} for i, a in enumerate(req["asserts"])]
    if kind == "pytest":
        tree = ast.parse(req["testCode"], TEST_FILE)
        units = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                units.append({"name": node.name, "source": "def %s(...)" % node.name, "fn": node.name, "lineno": node.lineno})
            elif isinstance(node, (ast.ImportFrom, ast.Import)):
                # pytest collects any module-level callable named test*, imported ones too
                # (e.g. `from heapq import merge as test_merge`).
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    if bound.startswith("test") and alias.name != "*":
                        units.append({"name": bound, "source": ast.unparse(node), "fn": bound, "lineno": node.lineno, "imported": True})
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef) and sub.name.startswith("test"):
                        units.append({"name": "%s.%s" % (node.name, sub.name), "source": "def %s(...)" % sub.name,
                                      "cls": node.name, "fn": sub.name, "lineno": sub.lineno})
        return {}, units
    if kind in ("stdio", "functional"):
        units = []
        for i, c in enumerate(req["cases"]):
            if kind == "stdio":
                src = "stdin: " + _short(c["input"], 200)
            else:
                src = "%s(%s)" % (req["fnName"], ", ".join(_short(x, 100) for x in c["input"].split("\n") if x.strip()))
            units.append({"name": "test %d" % (i + 1), "source": src})
        return {}, units
    raise ValueError("unknown kind %r" % kind)


def _short(s, n):
    s = s.replace("\n", "\\n") if "\n" in s.strip() else s.strip()
    return s if len(s) <= n else s[: n - 3] + "..."


# --------------------------------------------------------------------------- the child


class _Capped(io.TextIOBase):
    """A text sink keeping at most `cap` characters (the rest is counted, not stored)."""

    def __init__(self, cap):
        self.cap = cap
        self.parts = []
        self.size = 0
        self.dropped = 0

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str")
        room = self.cap - self.size
        if room > 0:
            self.parts.append(s[:room])
            self.size += min(room, len(s))
        if len(s) > room:
            self.dropped += len(s) - max(room, 0)
        return len(s)

    def flush(self):
        pass

    def isatty(self):
        return False

    def getvalue(self):
        v = "".join(self.parts)
        if self.dropped:
            v += "\n... [%d more characters]" % self.dropped
        return v


class _FailInfo:
    __slots__ = ("left", "right", "set")

    def __init__(self):
        self.set = False


CMP_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
OP_FUNCS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "in": lambda a, b: a in b, "not in": lambda a, b: a not in b, "is": operator.is_, "is not": operator.is_not}


class _AssertRewriter(ast.NodeTransformer):
    """Every assert reports what it checked, so that the supervisor can judge it again from
    the values (see "values out of the child" below):

    - `assert L op R [op S ...]` -> `assert __murphy_cmp(("op", ...), neg, L, R, ...)`
    - `assert not X` flips `neg`; `assert A and B` checks A and B each;
    - any other `assert X` -> `assert __murphy_truth(neg, X)`.
    """

    def visit_Assert(self, node):
        node.test = ast.copy_location(self.wrap(node.test, False), node.test)
        ast.fix_missing_locations(node)
        return node

    def wrap(self, t, neg):
        if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
            return self.wrap(t.operand, not neg)
        if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.And) and not neg:
            return ast.copy_location(ast.BoolOp(op=ast.And(), values=[self.wrap(v, False) for v in t.values]), t)
        if isinstance(t, ast.Compare) and all(type(o) in CMP_OPS for o in t.ops):
            ops = ast.Constant(tuple(CMP_OPS[type(o)] for o in t.ops))
            call = ast.Call(func=ast.Name(id="__murphy_cmp", ctx=ast.Load()), args=[ops, ast.Constant(neg), t.left] + list(t.comparators), keywords=[])
            return ast.copy_location(call, t)
        call = ast.Call(func=ast.Name(id="__murphy_truth", ctx=ast.Load()), args=[ast.Constant(neg), t], keywords=[])
        return ast.copy_location(call, t)


# --------------------------------------------------------------------------- values out of the child
# The verdict must not depend on code the program controls (its own classes' __eq__, patched
# builtins or helpers). Each checked value is classified by the harness, with references taken
# before the program ran and without calling any of the program's methods:
#   "p"  plain data (None, bool, int, float, complex, str, bytes and lists, tuples, dicts, sets of
#        them; subclass instances are read through the builtin base type): marshalled out of the
#        child and compared again by the supervisor;
#   "t"  objects of classes that existed before the program ran (numpy scalars, Fraction,
#        pytest.approx, ...): their comparison code is not the program's, the child's verdict holds;
#   "u"  objects of classes the program defined that carry their own behaviour (__eq__, __bool__,
#        arithmetic, ...): they may not decide a comparison against a value of the test.
# Programs that modify builtins, standard modules, pre-existing classes or the harness fail.

HEAPTYPE = 1 << 9
BEHAVIOUR = frozenset(
    "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __len__ __contains__ __iter__ __next__ "
    "__getitem__ __reversed__ __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __matmul__ __rmatmul__ "
    "__truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __divmod__ __rdivmod__ __pow__ "
    "__rpow__ __abs__ __neg__ __pos__ __invert__ __round__ __trunc__ __floor__ __ceil__ __float__ __int__ "
    "__index__ __complex__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __lshift__ __rlshift__ "
    "__rshift__ __rrshift__ __getattr__ __getattribute__ __class__ __instancecheck__ __subclasscheck__ "
    "keys items values __array__ __array_ufunc__ __array_function__ __buffer__".split()
)
# Modules whose attributes the program may not replace (checked after the program's own
# module-level code and after every test).
WATCHED_MODULES = (
    "builtins", "math", "cmath", "operator", "json", "re", "collections", "itertools", "functools", "heapq",
    "bisect", "string", "copy", "random", "statistics", "fractions", "pytest_shim",
)
# Single attributes watched in larger modules (all of os or typing would cost a copy-on-write
# fault per object in every forked child).
WATCHED_ATTRS = (("sys", ("exit", "modules", "_getframe", "addaudithook", "settrace", "setprofile")),
                 ("os", ("_exit", "write", "kill", "killpg", "fork")))
WATCHED_CLASS_MODULES = ("collections", "fractions", "statistics", "pytest_shim")
IGNORED_CLASS_KEYS = frozenset(("__slotnames__", "__abstractmethods__", "_abc_impl", "__annotations__"))
MARSHAL_CAP = 1 << 20
_cls_dict = type.__dict__["__dict__"].__get__
_cls_mro = type.__dict__["__mro__"].__get__
_cls_flags = type.__dict__["__flags__"].__get__
_cls_name = type.__dict__["__qualname__"].__get__
_oid = object.__hash__  # identity, like id(), but id() is an audited event (slow with a hook)
_type_of = type


class World:
    """What existed before the program ran: every class (by id, kept alive here), the
    dictionaries of classes defined in Python, and the watched modules' attributes. Taken
    once in the server; children inherit it with the fork."""

    def __init__(self):
        self.classes = {}
        stack = [object]
        while stack:
            c = stack.pop()
            if _oid(c) in self.classes:
                continue
            self.classes[_oid(c)] = c
            try:
                stack.extend(type.__subclasses__(c))
            except TypeError:
                pass
        self.class_dicts = {}
        for k, c in self.classes.items():
            if _cls_flags(c) & HEAPTYPE:
                self.class_dicts[k] = dict(_cls_dict(c))
        self.modules = []
        self.module_objects = []
        for name in WATCHED_MODULES:
            m = sys.modules.get(name)
            if m is not None:
                d = m.__dict__
                self.modules.append((name, d, list(d.items())))
                self.module_objects.append((name, m))
        for name, attrs in WATCHED_ATTRS:
            d = sys.modules[name].__dict__
            self.modules.append((name, d, [(k, d[k]) for k in attrs if k in d]))
        # Classes of the watched modules written in Python (C types cannot be changed).
        seen = set()
        self.watched_classes = []
        for m in [sys.modules[n] for n in WATCHED_CLASS_MODULES if n in sys.modules] + [unittest.case]:
            for v in list(vars(m).values()):
                if isinstance(v, type) and _oid(v) in self.class_dicts and _oid(v) not in seen:
                    seen.add(_oid(v))
                    self.watched_classes.append(v)
        self.fps = self._fingerprints()

    def class_changed(self, c):
        """The first attribute of a pre-existing class the program replaced or added, or None."""
        snap = self.class_dicts.get(_oid(c))
        if snap is None:
            return None
        d = _cls_dict(c)
        for k, v in snap.items():
            if k not in IGNORED_CLASS_KEYS and d.get(k, _MISSING) is not v:
                return k
        if len(d) != len(snap):
            for k in d:
                if k not in snap and type(k) is str and k in BEHAVIOUR:
                    return k
        return None

    def _fingerprints(self):
        """(owner, dict, keys, ids of the values) per watched module and class, in the dict's
        order, so that a check is a few passes in C. A class's real dict is taken once here,
        before any program runs (its mappingproxy hides it)."""
        import gc

        fps = []
        for name, d, items in self.modules:
            fps.append((name, d, [k for k, _ in items], [v for _, v in items]))
        for c in self.watched_classes:
            real = [r for r in gc.get_referents(_cls_dict(c)) if type(r) is dict]
            if len(real) == 1:
                items = list(real[0].items())
                fps.append((c, real[0], [k for k, _ in items], [v for _, v in items]))
        return fps

    def changed(self):
        """What the program replaced among the watched names ("replaced math.isclose"), or None.
        Values are compared by identity (the snapshot keeps them alive), in C: no `id()`,
        which is an audited event."""
        _all, _map, _is, _islice, _len = all, map, operator.is_, itertools.islice, len
        for owner, d, keys, values in self.fps:
            n = _len(values)
            if _all(_map(_is, _islice(d.values(), n), values)) and _all(_map(_is, _islice(d, n), keys)):
                if _type_of(owner) is str or _len(d) == n:
                    continue
            # Something moved: find out exactly what (additions to a module are allowed).
            if _type_of(owner) is str:
                for k, v in zip(keys, values):
                    if d.get(k, _MISSING) is not v:
                        return "replaced %s.%s" % (owner, k)
            else:
                k = self.class_changed(owner)
                if k is not None:
                    return "replaced %s.%s" % (_cls_name(owner), k)
        for name, m in self.module_objects:
            if sys.modules.get(name) is not m:
                return "replaced the module %s" % name
        return None


_MISSING = object()


def make_valuer(world):
    """classify(v) -> (kind, plain value or None); see the comment above."""
    _type = type
    _id = _oid
    _len = len
    _issubclass = issubclass
    classes = world.classes
    exact_scalars = frozenset(map(id, (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))))
    conv = [
        (int, int.__int__), (float, float.__float__), (complex, complex.__complex__), (str, str.__str__),
        (bytes, bytes.__bytes__),
    ]
    seqs = [(tuple, tuple.__iter__, tuple), (list, list.__iter__, list), (frozenset, frozenset.__iter__, frozenset), (set, set.__iter__, set)]
    _dict_items = dict.items
    order = {"p": 0, "t": 1, "u": 2}
    rank = order.__getitem__
    problems = []  # (kind, detail): tampered classes found on the way

    def behaves(t):
        """Whether the program-defined part of t's class hierarchy defines behaviour."""
        if _id(_type(t)) not in classes:
            return True  # a metaclass of the program's
        for c in _cls_mro(t):
            if _id(c) in classes:
                continue
            for k in _cls_dict(c):
                if _type(k) is str and k in BEHAVIOUR:
                    return True
        return False

    def walk(v, depth, budget):
        budget[0] -= 1
        if budget[0] < 0 or depth > 100:
            return "u", "too large or too deeply nested"
        t = _type(v)
        tid = _id(t)
        if tid in exact_scalars:
            return "p", v
        if t is list or t is tuple or t is set or t is frozenset:
            return walk_items(t, t.__iter__(v), t, depth, budget)
        if t is dict:
            return walk_dict(v, depth, budget)
        known = tid in classes
        if known:
            if _cls_flags(t) & HEAPTYPE:
                k = world.class_changed(t)
                if k is not None:
                    problems.append("replaced %s.%s" % (_cls_name(t), k))
                    return "u", _cls_name(t)
        elif behaves(t):
            return "u", _cls_name(t)
        for base, fn in conv:
            if _issubclass(t, base):
                return "p", fn(v)
        for base, it, make in seqs:
            if _issubclass(t, base):
                return walk_items(base, it(v), make, depth, budget)
        if _issubclass(t, dict):
            return walk_dict(v, depth, budget)
        return ("t" if known else "n"), None

    def walk_items(base, it, make, depth, budget):
        kind = "p"
        out = []
        for x in it:
            k, pv = walk(x, depth + 1, budget)
            if k == "u":
                return "u", pv
            if k != "p":
                kind = "t"
            else:
                out.append(pv)
        if kind != "p":
            return "t", None
        try:
            return "p", make(out)
        except TypeError:
            return "t", None

    def walk_dict(v, depth, budget):
        out = []
        kind = "p"
        for key, val in _dict_items(v):
            k1, p1 = walk(key, depth + 1, budget)
            k2, p2 = walk(val, depth + 1, budget)
            if k1 == "u" or k2 == "u":
                return "u", p1 if k1 == "u" else p2
            if k1 != "p" or k2 != "p":
                kind = "t"
            else:
                out.append((p1, p2))
        if kind != "p":
            return "t", None
        try:
            return "p", dict(out)
        except TypeError:
            return "t", None

    def classify(v):
        """(kind, plain): kind "p", "t", "n" (an inert object of the program's: no behaviour of
        its own, so it compares by identity) or "u"."""
        k, pv = walk(v, 0, [2000000])
        if k == "n":
            return "n", None
        return k, pv

    return classify, problems


def judge(m):
    """The supervisor's verdict on one reported check (a "C" message): None when it holds,
    else (errorType, message)."""
    vals = m.get("v") or []
    kinds = [x.get("k") for x in vals]
    neg = bool(m.get("neg"))
    ops = m.get("ops") or []
    if not ops:
        k = kinds[0] if kinds else "u"
        if k in ("u", "n"):
            return ("UntrustedValue", "the test checks the truth of %s defined by the program; it must be plain data" % _what(vals[0]))
        if k == "p":
            try:
                r = bool(_load(vals[0]))
            except Exception:
                return ("UntrustedValue", "the checked value could not be read back")
            if r == neg:
                return ("AssertionError", "the check failed when judged outside the program")
        return None
    verdicts = []
    for j, op in enumerate(ops):
        a, b = vals[j], vals[j + 1]
        ka, kb = a.get("k"), b.get("k")
        if (ka == "u") != (kb == "u"):
            bad = a if ka == "u" else b
            return ("UntrustedValue", "%s defined by the program was compared with a value of the test (%s); return plain data" % (_what(bad), op))
        if ka == "p" and kb == "p":
            try:
                x, y = _load(a), _load(b)
            except Exception:
                return ("UntrustedValue", "the compared values could not be read back")
            if op in ("is", "is not") and not (_singleton(x) or _singleton(y)):
                verdicts.append(None)
                continue
            try:
                verdicts.append(bool(OP_FUNCS[op](x, y)))
            except Exception:
                verdicts.append(False)
        else:
            verdicts.append(None)
    if all(v is not None for v in verdicts):
        if all(verdicts) == neg:
            return ("AssertionError", "the check failed when judged outside the program")
    elif not neg and any(v is False for v in verdicts):
        return ("AssertionError", "the check failed when judged outside the program")
    return None


def _singleton(x):
    return x is None or x is True or x is False or x is Ellipsis


def _what(v):
    t = v.get("type")
    return ("a %s object" % t) if t else "an object"


def _load(v):
    if "b" not in v:
        raise ValueError("no value")
    return marshal.loads(base64.b64decode(v["b"]))


def child_main(req, pl, units, start, chan_fd, token, cfg):
    # Captured before any untrusted code runs: later monkey-patching cannot reach these.
    _write = os.write
    _dumps = json.dumps
    _exit = os._exit
    _repr = reprlib.Repr()
    _repr.maxstring = 300
    _repr.maxother = 300
    _repr.maxlist = 30
    _repr.maxdict = 20
    _repr.maxlevel = 4
    _saferepr = _repr.repr
    _exc_info = sys.exc_info
    _extract_tb = traceback.extract_tb
    _time = time.perf_counter
    _isinstance = isinstance
    _str = str
    _type = type
    _BaseException = BaseException
    _Outcome = pytest_shim._Outcome
    _Skipped = pytest_shim.Skipped
    out_cap = int(cfg["outBytes"])
    sol_lines = req["solution"].split("\n")

    def send(obj):
        obj["t"] = token
        data = (_dumps(obj) + "\n").encode("utf-8", "replace")
        while data:
            n = _write(chan_fd, data)
            data = data[n:]

    def repr_value(v):
        try:
            return _saferepr(v)
        except _BaseException:
            return "<unrepresentable %s>" % _type(v).__name__

    def trimmed_tb(tb):
        frames = []
        try:
            for fr in _extract_tb(tb):
                if fr.filename == SOL_FILE:
                    line = fr.line
                    if not line and 0 < fr.lineno <= len(sol_lines):
                        line = sol_lines[fr.lineno - 1].strip()
                    frames.append('  File "%s", line %d, in %s\n    %s' % (SOL_FILE, fr.lineno, fr.name, line or ""))
        except _BaseException:
            pass
        if len(frames) > 12:
            frames = frames[:4] + ["  ... %d frames omitted (recursion?) ..." % (len(frames) - 8)] + frames[-4:]
        return "\n".join(frames)

    def exc_record(e, tb):
        rec = {"errorType": _type(e).__name__}
        try:
            rec["message"] = _str(e)[:2000]
        except _BaseException:
            rec["message"] = "<unprintable>"
        if _isinstance(e, SyntaxError):
            rec["lineno"] = e.lineno
            rec["text"] = (e.text or "").rstrip("\n")
            rec["message"] = e.msg
            rec["file"] = e.filename
        rec["traceback"] = trimmed_tb(tb)
        return rec

    fail = _FailInfo()

    # ---- checks reported to the supervisor (see "values out of the child")
    classify, class_problems = make_valuer(WORLD)
    _b64 = base64.b64encode
    _mdumps = marshal.dumps
    _ops = dict(OP_FUNCS)
    _len = len
    _bool = bool
    _range = range
    _FunctionType = types.FunctionType
    _cls_name_ = _cls_name
    _world_changed = WORLD.changed
    _real_builtins = sys.modules["builtins"]
    cur = [start]
    tampered = []
    helper_spaces = []  # namespaces holding __murphy_cmp/__murphy_truth

    def tamper(what):
        if what not in tampered:
            tampered.append(what)
            send({"m": "T", "what": what})

    def describe(v):
        try:
            k, pv = classify(v)
        except _BaseException:
            return {"k": "u", "type": _cls_name_(_type(v))}
        while class_problems:
            tamper(class_problems.pop())
        if k == "p":
            try:
                b = _mdumps(pv)
            except _BaseException:
                return {"k": "t"}
            if _len(b) > MARSHAL_CAP:
                return {"k": "t"}  # large plain data: compared by the interpreter's own C code
            return {"k": "p", "b": _b64(b).decode("ascii")}
        if k == "u":
            return {"k": "u", "type": pv}
        if k == "n":
            return {"k": "n", "type": _cls_name_(_type(v))}
        return {"k": "t"}

    def murphy_cmp(ops, neg, *vals):
        r = True
        for j in _range(_len(ops)):
            if not _ops[ops[j]](vals[j], vals[j + 1]):
                r = False
                break
        if not r and ops == ("==",):
            fail.left = vals[0]
            fail.right = vals[1]
            fail.set = True
        res = (not r) if neg else r
        send({"m": "C", "i": cur[0], "ops": ops, "neg": neg, "v": [describe(x) for x in vals], "ok": res})
        return res

    def murphy_truth(neg, v):
        r = (not v) if neg else _bool(v)
        send({"m": "C", "i": cur[0], "ops": (), "neg": neg, "v": [describe(v)], "ok": r})
        return r

    def guard(fn):
        """The candidate as the tests see it: a result carrying behaviour of the program's own
        (an object that equals anything, a number whose subtraction lies) fails the test."""

        def candidate(*args, **kwargs):
            v = fn(*args, **kwargs)
            k, pv = classify(v)
            if k == "u":
                send({"m": "U", "i": cur[0], "type": pv})
            return v

        return candidate

    def test_space(base):
        """A copy of the module's namespace for the tests (names the tests define never reach
        the candidate), with the real builtins and the harness's helpers."""
        ns = dict(base)
        ns["__builtins__"] = _real_builtins
        ns["__murphy_cmp"] = murphy_cmp
        ns["__murphy_truth"] = murphy_truth
        helper_spaces.append(ns)
        return ns

    def check_world():
        what = _world_changed()
        if what is None:
            for ns in helper_spaces:
                if ns.get("__murphy_cmp") is not murphy_cmp or ns.get("__murphy_truth") is not murphy_truth:
                    what = "replaced the harness's check functions"
                    break
        if what is not None:
            tamper(what)

    harness_file = child_main.__code__.co_filename
    denied = frozenset(("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys._current_exceptions"))

    def audit(event, args):
        if event in denied or event[:7] == "ctypes.":
            tamper("called %s" % event)
            raise PermissionError("%s is not allowed here" % event)
        if event == "sys._getframe":
            if args and args[0].f_code.co_filename == harness_file:
                tamper("reached the harness's frames")
                raise PermissionError("the harness's frames are not reachable")
        elif event == "object.__setattr__":
            if args and _type(args[0]) is _FunctionType and args[1] in ("__code__", "__defaults__", "__kwdefaults__"):
                fn_file = args[0].__code__.co_filename
                if fn_file not in (SOL_FILE, TEST_FILE) and fn_file[:1] != "<":
                    tamper("replaced %s of a function it did not define" % args[1])
                    raise PermissionError("changing %s of %s is not allowed" % (args[1], fn_file))
        elif event == "open":
            path = args[0] if args else None
            if _type(path) is str and path[:6] == "/proc/" and path[-4:] == "/mem":
                tamper("opened process memory")
                raise PermissionError("process memory is not readable here")

    sys.modules["pytest"] = pytest_shim
    sys.argv = [SOL_FILE]
    kind = req["kind"]

    # ---- compile the candidate (syntax errors are reported with their line)
    try:
        sol_code = compile(req["solution"], SOL_FILE, "exec", dont_inherit=True)
    except _BaseException as e:
        send({"m": "S", "err": exc_record(e, None)})
        _exit(0)

    def new_module(name):
        mod = types.ModuleType(name)
        mod.__file__ = os.path.join(os.getcwd(), SOL_FILE)
        mod.__builtins__ = __builtins__
        return mod

    def run_setup(fn):
        """Run module-level code; on failure report it as a setup error and stop."""
        try:
            fn()
        except _BaseException as e:
            tb = _exc_info()[2]
            if _isinstance(e, SystemExit):
                send({"m": "X", "err": {"errorType": "SystemExit", "message": "the program called exit(%s) before the tests ran" % repr_value(e.code), "traceback": trimmed_tb(tb)}})
            else:
                send({"m": "X", "err": exc_record(e, tb)})
            _exit(0)

    def run_unit(i, body):
        """Run one test: body() raises on failure."""
        cur[0] = i
        send({"m": "B", "i": i})
        buf = _Capped(out_cap)
        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = buf
        fail.set = False
        t0 = _time()
        res = {"m": "E", "i": i, "passed": True}
        try:
            body()
        except _BaseException as e:
            tb = _exc_info()[2]
            res["passed"] = False
            if _isinstance(e, _Skipped):
                res["status"] = "skipped"
            rec = exc_record(e, tb)
            if _isinstance(e, SystemExit):
                rec["message"] = "the program called exit(%s) during the test" % repr_value(e.code)
            res.update(rec)
            if _isinstance(e, AssertionError) and fail.set:
                res["actual"] = repr_value(fail.left)
                res["expected"] = repr_value(fail.right)
        finally:
            sys.stdout, sys.stderr = old
        res["ms"] = (_time() - t0) * 1000.0
        res["output"] = buf.getvalue()
        check_world()
        send(res)

    rewriter = _AssertRewriter()

    def compile_stmts(stmts, filename=TEST_FILE):
        mod = ast.Module(body=[rewriter.visit(s) for s in stmts], type_ignores=[])
        ast.fix_missing_locations(mod)
        return compile(mod, filename, "exec", dont_inherit=True)

    if kind in ("humaneval", "assert"):
        # Function-style tasks: the program is a module that is not __main__ (the official
        # harnesses exec it in a fresh dict), so an `if __name__ == "__main__":` block does not run.
        mod = new_module("solution")
        sys.modules["solution"] = mod
        sys.modules["__main__"] = new_module("__main__")
        g = mod.__dict__
        if kind == "assert" and req.get("imports"):
            run_setup(lambda: exec(compile(req["imports"], TEST_FILE, "exec", dont_inherit=True), g))
        sys.addaudithook(audit)
        run_setup(lambda: exec(sol_code, g))
        check_world()
        if kind == "assert":
            # MBPP: code, then setup, then the asserts (as the official harness); the asserts run
            # in a copy of the namespace and see the program's functions through `guard`.
            if req.get("setup"):
                run_setup(lambda: exec(compile(req["setup"], TEST_FILE, "exec", dont_inherit=True), g))
            ns = test_space(g)
            for name, v in list(g.items()):
                if _type(v) is _FunctionType and v.__code__.co_filename == SOL_FILE:
                    ns[name] = guard(v)
            codes = []
            for u in units:
                try:
                    codes.append(compile_stmts(ast.parse(u["source"], TEST_FILE).body))
                except SyntaxError as e:
                    codes.append(e)
            send({"m": "R"})
            for i in range(start, len(units)):
                c = codes[i]

                def body(c=c):
                    if _isinstance(c, SyntaxError):
                        raise c
                    exec(c, ns)

                run_unit(i, body)
        else:
            # HumanEval: prompt + completion, then the test module, in one namespace (as the
            # official harness); check()'s statements then run in a copy of it, as check's own
            # locals would, so that `str = ...` in a check never reaches the candidate.
            entry = req["entryPoint"]
            own = dict(g)
            for k in ("__murphy_cmp", "__murphy_truth"):
                g[k] = murphy_cmp if k == "__murphy_cmp" else murphy_truth
            helper_spaces.append(g)
            test_code = compile_stmts(ast.parse(req["test"], TEST_FILE).body)
            run_setup(lambda: exec(test_code, g))
            if entry not in g:
                send({"m": "X", "err": {"errorType": "NameError", "message": "name '%s' is not defined: the program must define %s" % (entry, entry), "traceback": ""}})
                _exit(0)
            cand = guard(g[entry])
            if pl["mode"] == "whole":
                send({"m": "R"})
                run_unit(0, lambda: g["check"](cand))
            else:
                ns = test_space(g)
                # Builtin names the program itself redefined: the tests use the real builtins.
                for k in list(ns):
                    if k[:2] != "__" and k in own and own[k] is ns[k] and k in _real_builtins.__dict__ and k != entry:
                        del ns[k]
                ns[pl["param"]] = cand
                send({"m": "R"})
                for i in range(start, len(units)):
                    u = units[i]
                    pre = compile_stmts(list(u["pre"])) if u["pre"] else None
                    main = compile_stmts([u["stmt"]])
                    post = compile_stmts(list(u["post"])) if u.get("post") else None

                    def body(pre=pre, main=main, post=post):
                        if pre is not None:
                            exec(pre, ns)
                        exec(main, ns)
                        if post is not None:
                            exec(post, ns)

                    if start > 0 and i == start:
                        # Re-run setup statements of the skipped units (they may define names).
                        for j in range(0, start):
                            if units[j]["pre"]:
                                try:
                                    exec(compile_stmts(list(units[j]["pre"])), ns)
                                except _BaseException:
                                    pass
                    run_unit(i, body)
    elif kind == "pytest":
        smod = new_module("solution")
        sys.modules["solution"] = smod
        sys.modules["__main__"] = new_module("__main__")
        sys.addaudithook(audit)
        run_setup(lambda: exec(sol_code, smod.__dict__))
        check_world()
        tmod = new_module("test_solution")
        sys.modules["test_solution"] = tmod
        tg = tmod.__dict__
        tg["__murphy_cmp"] = murphy_cmp
        tg["__murphy_truth"] = murphy_truth
        helper_spaces.append(tg)
        test_tree = ast.parse(req["testCode"], TEST_FILE)
        test_code = compile_stmts(test_tree.body)

        def load_tests():
            exec("from solution import *", tg)
            exec(test_code, tg)

        run_setup(load_tests)
        send({"m": "R"})
        fixtures = {}

        def call_test(fn, name):
            import inspect

            if not callable(fn):
                return  # pytest ignores non-callables named test*
            if inspect.isgeneratorfunction(fn):
                # pytest >= 8 refuses these at collection; so do we (a silently passing test would hide it).
                raise pytest_shim.Failed("'yield' keyword is allowed in fixtures, but not in tests (%s): pytest refuses this test" % name)
            marks = list(getattr(fn, "pytestmark", []))
            for mk in marks:
                if mk.name == "skip":
                    raise pytest_shim.Skipped(mk.kwargs.get("reason", ""))
                if mk.name == "skipif" and mk.args and mk.args[0]:
                    raise pytest_shim.Skipped(mk.kwargs.get("reason", ""))
            param_sets = [{}]
            for mk in marks:
                if mk.name == "parametrize":
                    names, values = mk.args[0], mk.args[1]
                    if isinstance(names, str):
                        names = [n.strip() for n in names.split(",") if n.strip()]
                    new = []
                    for base in param_sets:
                        for v in values:
                            if isinstance(v, pytest_shim._ParamSet):
                                v = v.values
                            if len(names) == 1:
                                v = (v,)
                            d = dict(base)
                            d.update(zip(names, v))
                            new.append(d)
                    param_sets = new
            try:
                params = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                params = []
            for ps in param_sets:
                kwargs = {}
                cleanup = []
                for p in params:
                    if p in ps:
                        kwargs[p] = ps[p]
                    elif p == "tmp_path" or p == "tmpdir":
                        import pathlib
                        import tempfile

                        kwargs[p] = pathlib.Path(tempfile.mkdtemp(dir=os.getcwd()))
                    elif p == "monkeypatch":
                        mp = pytest_shim.MonkeyPatch()
                        kwargs[p] = mp
                        cleanup.append(mp.undo)
                    elif p == "capsys" or p == "capfd":
                        cf = pytest_shim.CaptureFixture()
                        kwargs[p] = cf
                        cleanup.append(cf.close)
                    elif p in tg and callable(tg[p]) and getattr(tg[p], "_murphy_fixture", False):
                        if p not in fixtures or True:
                            val = tg[p]()
                            if isinstance(val, types.GeneratorType):
                                gen = val
                                val = next(gen)
                                cleanup.append(lambda gen=gen: next(gen, None))
                        kwargs[p] = val
                    elif p == "self":
                        continue
                    else:
                        raise pytest_shim.Failed("fixture '%s' not found (the executor supports tmp_path, monkeypatch, capsys and module-level @pytest.fixture functions)" % p)
                try:
                    r = fn(**kwargs)
                    if hasattr(r, "__await__"):
                        import asyncio

                        asyncio.run(r)
                finally:
                    for c in reversed(cleanup):
                        c()

        for i in range(start, len(units)):
            u = units[i]

            def body(u=u):
                if "cls" in u:
                    inst = tg[u["cls"]]()
                    if hasattr(inst, "setup_method"):
                        inst.setup_method(getattr(inst, u["fn"]))
                    call_test(getattr(inst, u["fn"]), u["name"])
                else:
                    call_test(tg[u["fn"]], u["name"])

            run_unit(i, body)
    elif kind == "functional":
        # LiveCodeBench's harness loads a LeetCode-style program as a module ("tmp_sol"), not __main__.
        mod = new_module("solution")
        sys.modules["solution"] = mod
        sys.modules["__main__"] = new_module("__main__")
        g = mod.__dict__
        run_setup(lambda: exec(LCB_PRELUDE, g))
        sys.addaudithook(audit)
        run_setup(lambda: exec(sol_code, g))
        check_world()
        fn_name = req["fnName"]
        send({"m": "R"})
        for i in range(start, len(units)):
            case = req["cases"][i]

            def body(case=case, i=i):
                args = [json.loads(line) for line in case["input"].split("\n") if line.strip()]
                if "Solution" in g and isinstance(g["Solution"], type):
                    target = getattr(g["Solution"](), fn_name)
                elif fn_name in g:
                    target = g[fn_name]
                else:
                    raise NameError("the program defines neither class Solution nor %s" % fn_name)
                value = target(*args)
                try:
                    enc = _dumps(value)
                except (TypeError, ValueError):
                    enc = _dumps(repr_value(value))
                send({"m": "V", "i": i, "v": enc[: 1 << 20]})

            run_unit(i, body)
    elif kind == "stdio":
        # One child per case: run the program as __main__; the server compares stdout.
        mod = new_module("__main__")
        sys.modules["__main__"] = mod
        g = mod.__dict__
        send({"m": "B", "i": start})
        try:
            exec(LCB_PRELUDE, g)
            exec(sol_code, g)
        except SystemExit as e:
            if e.code not in (None, 0):
                send({"m": "X", "err": {"errorType": "SystemExit", "message": "exit status %s" % repr_value(e.code), "traceback": ""}})
        except _BaseException as e:
            send({"m": "X", "err": exc_record(e, _exc_info()[2])})
        try:
            sys.stdout.flush()
        except _BaseException:
            pass
        send({"m": "E", "i": start, "passed": True})
    send({"m": "D"})
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    _exit(0)


# --------------------------------------------------------------------------- server side


WORLD = None


class Server:
    def __init__(self, args):
        global WORLD
        if WORLD is None:
            WORLD = World()
        self.args = args
        self.root = os.geteuid() == 0
        self.child_uid = args.get("childUid")
        self.info = {"pid": os.getpid(), "root": self.root, "python": sys.version.split()[0]}
        self.info["subreaper"] = set_subreaper()
        # Scratch directories private to this server (bubblewrap's /tmp, or our own tmpfs
        # mounts): emptied after every program, and the work directories live there.
        self.scratch = list(args.get("privateScratch") or [])
        if args.get("privateTmp"):
            self.scratch = private_scratch(self.root, args.get("tmpBytes") or (64 << 20))
            self.info["privateTmp"] = "/tmp" in self.scratch
        in_userns = bool(args.get("privateTmp")) and not self.root and bool(self.scratch)
        if args.get("unshareNet"):
            flags = CLONE_NEWNET
            if not self.root and not in_userns:
                flags |= CLONE_NEWUSER
            self.info["netns"] = try_unshare(flags)
        self.base = "/tmp/murphy" if "/tmp" in self.scratch else args["workBase"]
        os.makedirs(self.base, exist_ok=True)
        # Sweeping every process of the program's uid is safe only in a pid namespace of our
        # own (bubblewrap): on the host it would also kill the programs of other executors
        # using the same uid. There the subreaper's process tree finds every descendant.
        self.sweep_uid = self.child_uid is not None and (bool(args.get("pidNamespace")) or not self.info["subreaper"])
        self.info["childUid"] = self.child_uid if self.root else os.getuid()
        self.info["nprocEnforced"] = not self.root or self.child_uid is not None
        self.seq = 0

    # -- process tree cleanup
    def children_tree(self):
        """Descendants through /proc/<pid>/task/<tid>/children (cheap: no scan of /proc).
        The server is a child subreaper, so orphaned descendants are re-parented to it and
        stay in this tree. Returns None when the kernel lacks the children files."""
        out = []
        stack = [os.getpid()]
        seen = set()
        first = True
        while stack:
            pid = stack.pop()
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except OSError:
                continue
            for tid in tids:
                try:
                    with open("/proc/%d/task/%s/children" % (pid, tid), "rb") as f:
                        kids = f.read().split()
                except FileNotFoundError:
                    if first:
                        return None
                    continue
                except OSError:
                    continue
                first = False
                for k in kids:
                    k = int(k)
                    if k not in seen:
                        seen.add(k)
                        out.append(k)
                        stack.append(k)
            first = False
        return out

    def descendants(self, full=False):
        if not full:
            tree = self.children_tree()
            if tree is not None:
                return tree
        me = os.getpid()
        parent = {}
        uids = {}
        try:
            names = os.listdir("/proc")
        except OSError:
            return []
        for n in names:
            if not n.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % n, "rb") as f:
                    st = f.read().decode("latin-1")
                ppid = int(st[st.rindex(")") + 2:].split()[1])
                parent[int(n)] = ppid
                if self.child_uid is not None:
                    with open("/proc/%s/status" % n, "rb") as f:
                        for line in f:
                            if line.startswith(b"Uid:"):
                                uids[int(n)] = int(line.split()[1])
                                break
            except (OSError, ValueError, IndexError):
                continue
        out = set()
        for pid in parent:
            p = pid
            seen = 0
            while p in parent and seen < 4096:
                if parent[p] == me:
                    out.add(pid)
                    break
                p = parent[p]
                seen += 1
        if self.child_uid is not None:
            for pid, uid in uids.items():
                if uid == self.child_uid and pid != me:
                    out.add(pid)
        out.discard(me)
        return sorted(out)

    def kill_all(self, full=False):
        for _ in range(50):
            pids = self.descendants(full)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.reap()
            if not pids:
                return True
            time.sleep(0.002)
        return False

    def reap(self):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    # -- one child
    def spawn(self, req, pl, units, start, workdir, stdin_data, cfg):
        token = secrets.token_hex(16)
        r_chan, w_chan = os.pipe()
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        in_path = None
        if stdin_data is not None:
            in_path = os.path.join(workdir, ".stdin")
            with open(in_path, "w", encoding="utf-8") as f:
                f.write(stdin_data)
            if self.root and self.child_uid is not None:
                os.chown(in_path, self.child_uid, self.child_uid)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                # high, unguessable-ish fd for the result channel
                chan = 200 + secrets.randbelow(700)
                os.dup2(w_chan, chan)
                fd0 = os.open(in_path if in_path else os.devnull, os.O_RDONLY)
                os.dup2(fd0, 0)
                os.dup2(w_out, 1)
                os.dup2(w_err, 2)
                os.closerange(3, chan)
                os.closerange(chan + 1, 65536)
                os.chdir(workdir)
                cpu = max(1, int(cfg["cpuSeconds"]))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
                resource.setrlimit(resource.RLIMIT_FSIZE, (int(cfg["fileBytes"]), int(cfg["fileBytes"])))
                resource.setrlimit(resource.RLIMIT_NOFILE, (int(cfg["maxOpenFiles"]), int(cfg["maxOpenFiles"])))
                if self.root and self.child_uid is not None:
                    os.setgroups([])
                    os.setgid(self.child_uid)
                    os.setuid(self.child_uid)
                resource.setrlimit(resource.RLIMIT_NPROC, (int(cfg["maxProcs"]), int(cfg["maxProcs"])))
                resource.setrlimit(resource.RLIMIT_AS, (int(cfg["memoryBytes"]), int(cfg["memoryBytes"])))
                os.environ.clear()
                os.environ.update(CHILD_ENV)
                os.environ["HOME"] = workdir
                os.environ["TMPDIR"] = workdir
                import tempfile

                tempfile.tempdir = workdir
                sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace", write_through=False)
                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace", write_through=True)
                sys.__stdout__, sys.__stderr__, sys.__stdin__ = sys.stdout, sys.stderr, sys.stdin
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGHUP, signal.SIG_DFL)
                child_main(req, pl, units, start, chan, token, cfg)
            except BaseException:
                try:
                    os.write(2, traceback.format_exc().encode())
                finally:
                    os._exit(70)
            os._exit(0)
        os.close(w_chan)
        os.close(w_out)
        os.close(w_err)
        return pid, token, r_chan, r_out, r_err

    def run_child(self, req, pl, units, start, workdir, cfg, per_test, deadline, stdin_data=None):
        """Run one child; returns (messages, stdout bytes, stderr bytes, ended_by, cur)."""
        pid, token, r_chan, r_out, r_err = self.spawn(req, pl, units, start, workdir, stdin_data, cfg)
        out_cap = int(cfg["stdoutBytes"]) if req["kind"] == "stdio" else int(cfg["outBytes"])
        err_cap = int(cfg["outBytes"])
        bufs = {r_chan: bytearray(), r_out: bytearray(), r_err: bytearray()}
        caps = {r_chan: 64 << 20, r_out: out_cap, r_err: err_cap}
        over = {r_out: 0, r_err: 0, r_chan: 0}
        msgs = []
        open_fds = [r_chan, r_out, r_err]
        test_deadline = min(time.monotonic() + per_test, deadline)
        ended_by = "exit"
        cur = None
        pending = b""
        while open_fds:
            now = time.monotonic()
            if now >= test_deadline:
                ended_by = "timeout"
                break
            try:
                ready, _, _ = select.select(open_fds, [], [], test_deadline - now)
            except InterruptedError:
                continue
            for fd in ready:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:
                    data = b""
                if not data:
                    open_fds.remove(fd)
                    continue
                if fd == r_chan:
                    pending += data
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        try:
                            m = json.loads(line)
                        except ValueError:
                            continue
                        if not isinstance(m, dict) or m.get("t") != token:
                            continue
                        msgs.append(m)
                        kindm = m.get("m")
                        if kindm == "B":
                            cur = m["i"]
                            test_deadline = min(time.monotonic() + per_test, deadline)
                        elif kindm == "E":
                            cur = None
                            test_deadline = min(time.monotonic() + per_test, deadline)
                        elif kindm == "R":
                            test_deadline = min(time.monotonic() + per_test, deadline)
                else:
                    b = bufs[fd]
                    room = caps[fd] - len(b)
                    if room > 0:
                        b += data[:room]
                    over[fd] += max(0, len(data) - max(room, 0))
        status = None
        if ended_by == "timeout":
            self.kill_all()
        # Wait for the direct child (it may still be alive: EOF on pipes but not exited).
        t_end = time.monotonic() + 0.5
        while True:
            try:
                wpid, st = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if wpid == pid:
                status = st
                break
            if time.monotonic() > t_end:
                self.kill_all()
                t_end = time.monotonic() + 5
            time.sleep(0.0005)
        self.kill_all()
        for fd in (r_chan, r_out, r_err):
            os.close(fd)
        sig = None
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
        return {
            "msgs": msgs,
            "stdout": bytes(bufs[r_out]),
            "stderr": bytes(bufs[r_err]),
            "stdoutDropped": over[r_out],
            "stderrDropped": over[r_err],
            "endedBy": ended_by,
            "cur": cur,
            "signal": sig,
            "exitCode": os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None,
        }

    def new_workdir(self):
        self.seq += 1
        d = os.path.join(self.base, "run-%d-%d" % (os.getpid(), self.seq))
        os.mkdir(d, 0o700)
        if self.root and self.child_uid is not None:
            os.chown(d, self.child_uid, self.child_uid)
        return d

    def remove_workdir(self, d):
        def onerror(func, path, exc):
            try:
                os.chmod(os.path.dirname(path), 0o700)
                os.chmod(path, 0o700)
                func(path)
            except OSError:
                pass

        for _ in range(3):
            shutil.rmtree(d, onerror=onerror)
            if not os.path.exists(d):
                return True
        return not os.path.exists(d)

    def empty_scratch(self):
        """Removes whatever the program left in the private scratch directories (the next
        program finds them empty). Returns False when something could not be removed."""
        ok = True
        for d in self.scratch:
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for name in names:
                p = os.path.join(d, name)
                if p == self.base:
                    continue
                try:
                    if os.path.isdir(p) and not os.path.islink(p):
                        ok = self.remove_workdir(p) and ok
                    else:
                        os.unlink(p)
                except OSError:
                    ok = False
        return ok

    def handle(self, req):
        t0 = time.monotonic()
        cfg = req["limits"]
        # "program" mode (the official harnesses' protocol): one budget for the whole program.
        per_test = float(cfg["programTimeout"]) if cfg.get("timeoutMode") == "program" else float(cfg["testTimeout"])
        deadline = t0 + float(cfg["programTimeout"])
        try:
            pl, units = plan(req)
        except SyntaxError as e:
            return {"id": req["id"], "error": "the problem's tests do not parse: %s (line %s)" % (e.msg, e.lineno)}
        n = len(units)
        results = [None] * n
        resp = {"id": req["id"], "n": n, "names": [u["name"] for u in units], "sources": [u["source"] for u in units]}
        workdir = self.new_workdir()
        stdout_all = bytearray()
        stderr_all = bytearray()
        timed_out = False
        setup_error = None
        syntax_error = None
        notes = []
        tampered = []
        try:
            if req["kind"] == "stdio":
                for i, case in enumerate(req["cases"]):
                    if time.monotonic() >= deadline:
                        results[i] = {"passed": False, "status": "timeout", "errorType": "Timeout", "message": "not run: the program's time budget was spent"}
                        timed_out = True
                        continue
                    r = self.run_child(req, pl, units, i, workdir, cfg, per_test, deadline, stdin_data=case["input"])
                    stderr_all += r["stderr"][: max(0, int(cfg["outBytes"]) - len(stderr_all))]
                    res = {"passed": False}
                    errs = [m for m in r["msgs"] if m["m"] in ("X", "S")]
                    done = any(m["m"] == "D" for m in r["msgs"])
                    got = r["stdout"].decode("utf-8", "replace")
                    res["output"] = got[: int(cfg["outBytes"])]
                    res["expected"] = case["output"]
                    res["actual"] = got
                    if r["endedBy"] == "timeout":
                        res.update({"status": "timeout", "errorType": "Timeout", "message": "timed out after %g s" % per_test})
                        timed_out = True
                        if not req.get("continueAfterTimeout"):
                            results[i] = res
                            for j in range(i + 1, n):
                                results[j] = dict(NOT_RUN)
                            break
                    elif errs:
                        res.update(errs[0]["err"])
                        if errs[0]["m"] == "S":
                            syntax_error = errs[0]["err"]
                    elif not done:
                        res.update(crash_reason(r))
                    elif r["stdoutDropped"]:
                        res.update({"errorType": "OutputLimit", "message": "output exceeded %d bytes" % int(cfg["stdoutBytes"])})
                    elif outputs_match(got, case["output"]):
                        res["passed"] = True
                    else:
                        res.update({"errorType": "WrongAnswer", "message": "wrong answer"})
                    results[i] = res
                    self.remove_workdir(workdir)
                    workdir = self.new_workdir()
                    if syntax_error:
                        for j in range(i + 1, n):
                            results[j] = dict(syntax_error, passed=False)
                        break
            else:
                start = 0
                verdicts = {}  # unit -> (errorType, message) from the supervisor's own checks
                checked = set()  # units that reported at least one check
                while start < n:
                    if time.monotonic() >= deadline:
                        for j in range(start, n):
                            results[j] = {"passed": False, "status": "timeout", "errorType": "Timeout", "message": "not run: the program's time budget was spent"}
                        timed_out = True
                        break
                    r = self.run_child(req, pl, units, start, workdir, cfg, per_test, deadline)
                    stdout_all += r["stdout"][: max(0, int(cfg["outBytes"]) - len(stdout_all))]
                    stderr_all += r["stderr"][: max(0, int(cfg["outBytes"]) - len(stderr_all))]
                    ready = False
                    done = False
                    values = {}
                    for m in r["msgs"]:
                        k = m["m"]
                        if k == "S":
                            syntax_error = m["err"]
                        elif k == "X":
                            setup_error = m["err"]
                        elif k == "R":
                            ready = True
                        elif k == "V":
                            values[m["i"]] = m["v"]
                        elif k == "C" or k == "U":
                            i = m.get("i")
                            if not isinstance(i, int):
                                continue
                            checked.add(i)
                            if i not in verdicts:
                                v = judge(m) if k == "C" else (
                                    "UntrustedValue",
                                    "the candidate returned a %s object whose class (the program's own) defines comparison, "
                                    "truth or arithmetic: return plain data" % _short(str(m.get("type")), 80))
                                if v is not None:
                                    verdicts[i] = v
                        elif k == "T":
                            if not tampered:
                                tampered.append(_short(str(m.get("what")), 120))
                        elif k == "E":
                            i = m["i"]
                            res = {kk: vv for kk, vv in m.items() if kk not in ("m", "t", "i")}
                            if res.get("passed") and 0 <= i < n and units[i].get("checks") and i not in checked:
                                verdicts[i] = ("NoCheck", "the test's assert reported nothing to the harness")
                            if res.get("passed") and i in verdicts:
                                res["passed"] = False
                                res["errorType"], res["message"] = verdicts[i]
                            if req["kind"] == "functional" and res.get("passed"):
                                exp = req["cases"][i]["output"]
                                got = values.get(i)
                                res["expected"] = exp
                                res["actual"] = got
                                if got is None or not values_match(got, exp):
                                    res["passed"] = False
                                    res["errorType"] = "WrongAnswer"
                                    res["message"] = "returned %s, expected %s" % (_short(got or "nothing", 300), _short(exp, 300))
                            if 0 <= i < n and results[i] is None:
                                results[i] = res
                        elif k == "D":
                            done = True
                    if syntax_error or setup_error or not ready:
                        err = syntax_error or setup_error
                        if err is None:
                            if r["endedBy"] == "timeout":
                                err = {"status": "timeout", "errorType": "Timeout", "message": "timed out after %g s before the tests ran (module-level code)" % per_test}
                                timed_out = True
                            else:
                                err = crash_reason(r, before=True)
                        for j in range(start, n):
                            if results[j] is None:
                                results[j] = dict(err, passed=False)
                        break
                    if done:
                        break
                    # The child stopped mid-way: timeout, crash or exit during test `cur`.
                    cur = r["cur"]
                    if cur is None:
                        # between tests: the next unreported test is the culprit
                        cur = next((j for j in range(start, n) if results[j] is None), None)
                        if cur is None:
                            break
                    if r["endedBy"] == "timeout":
                        results[cur] = {"passed": False, "status": "timeout", "errorType": "Timeout", "message": "timed out after %g s" % per_test}
                        timed_out = True
                        if not req.get("continueAfterTimeout"):
                            for j in range(cur + 1, n):
                                if results[j] is None:
                                    results[j] = dict(NOT_RUN)
                            break
                    else:
                        results[cur] = dict(crash_reason(r), passed=False)
                    start = cur + 1
                    self.remove_workdir(workdir)
                    workdir = self.new_workdir()
        finally:
            # Full sweep once per program (in bubblewrap's pid namespace: every process of the program's uid).
            clean = self.kill_all(full=self.sweep_uid)
            removed = self.remove_workdir(workdir) and self.empty_scratch()
            if not clean:
                notes.append("could not kill every process of the program")
            if not removed:
                notes.append("could not remove the temporary directory")
        if tampered:
            why = {"passed": False, "errorType": "Tampering",
                   "message": "the program %s: a program that changes the interpreter, its standard modules "
                              "or the test harness fails every test" % tampered[0]}
            for i in range(n):
                results[i] = dict(why)
        for i in range(n):
            if results[i] is None:
                results[i] = {"passed": False, "errorType": "NotRun", "message": "the test did not run"}
            results[i]["name"] = units[i]["name"]
            results[i]["source"] = units[i]["source"]
        resp.update({
            "tests": results,
            "timedOut": timed_out,
            "syntaxError": syntax_error,
            "setupError": setup_error,
            "stdout": stdout_all.decode("utf-8", "replace"),
            "stderr": stderr_all.decode("utf-8", "replace"),
            "wallMs": (time.monotonic() - t0) * 1000.0,
            "notes": notes,
        })
        return resp


NOT_RUN = {"passed": False, "status": "notrun", "errorType": "NotRun", "message": "not run: an earlier test timed out"}


def crash_reason(r, before=False):
    when = "before the tests ran" if before else "during the test"
    if r["signal"] is not None:
        name = signal.Signals(r["signal"]).name if r["signal"] in signal.Signals._value2member_map_ else str(r["signal"])
        extra = ""
        if r["signal"] == signal.SIGXCPU or r["signal"] == signal.SIGKILL:
            extra = " (CPU-time limit?)" if r["signal"] == signal.SIGXCPU else ""
        if r["signal"] == signal.SIGXFSZ:
            extra = " (file-size limit)"
        return {"errorType": "Crash", "message": "the program was killed by %s %s%s" % (name, when, extra)}
    code = r["exitCode"]
    err = r["stderr"].decode("utf-8", "replace").strip()
    if "MemoryError" in err:
        return {"errorType": "MemoryError", "message": "out of memory " + when}
    return {"errorType": "Exit", "message": "the program exited (status %s) %s" % (code, when)}


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


def main():
    args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    args.setdefault("workBase", "/tmp/murphy-exec")
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    # Anything else printed by the server goes to stderr, never into the response stream.
    os.dup2(2, 1)
    # A parent that went away (EPIPE on the answer) or a signal ends the loop, not the
    # process: the work directory is removed either way.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    server = Server(args)
    try:
        out.write(json.dumps({"ready": True, "info": server.info}) + "\n")
        out.flush()
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
            except ValueError as e:
                out.write(json.dumps({"id": None, "error": "bad request: %s" % e}) + "\n")
                continue
            try:
                resp = server.handle(req)
            except Exception:
                resp = {"id": req.get("id"), "error": "harness error: " + traceback.format_exc()[-2000:]}
                server.kill_all()
            out.write(json.dumps(resp) + "\n")
            out.flush()
    except (BrokenPipeError, SystemExit):
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        server.kill_all(full=server.sweep_uid)
        shutil.rmtree(server.base, ignore_errors=True)


if __name__ == "__main__":
    main()
