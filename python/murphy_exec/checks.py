"""Verdicts the program cannot change: the assert rewriter, the classification of values
(plain data marshalled out of the child, pre-existing classes, the program's own classes),
the tamper check (World) and the supervisor's judgement of each reported check."""

import ast
import base64
import itertools
import marshal
import operator
import sys
import unittest

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
# The World, made once by the server before it forks (children inherit it).
WORLD_REF = [None]


def make_valuer(world):
    """classify(v) -> (kind, plain value or None); see the comment above."""
    _type = type
    _id = _oid
    _issubclass = issubclass
    classes = world.classes
    exact_scalars = frozenset(map(id, (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))))
    conv = [
        (int, int.__int__), (float, float.__float__), (complex, complex.__complex__), (str, str.__str__),
        (bytes, bytes.__bytes__),
    ]
    seqs = [(tuple, tuple.__iter__, tuple), (list, list.__iter__, list), (frozenset, frozenset.__iter__, frozenset), (set, set.__iter__, set)]
    _dict_items = dict.items
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
    """The supervisor's verdict on one reported check (a Msg.CHECK message): None when it holds,
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
