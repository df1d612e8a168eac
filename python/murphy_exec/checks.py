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

    def __init__(self, cmp_name="__murphy_cmp", truth_name="__murphy_truth"):
        # Names the rewritten asserts call; child.py passes placeholder strings instead, which
        # become constants (bind_reporters): the tests then call the reporters without a lookup
        # in a namespace the program can reach.
        self.cmp_name = cmp_name
        self.truth_name = truth_name
        self.const = cmp_name != "__murphy_cmp"

    def _fn(self, name, at):
        node = ast.Constant(name) if self.const else ast.Name(id=name, ctx=ast.Load())
        return ast.copy_location(node, at)

    def visit_Assert(self, node):
        # Every node wrap() makes gets its location from the expression it stands for (as
        # ast.fix_missing_locations would give it), so that no walk of the whole test is needed:
        # that walk cost half the compilation of a test with large literals.
        node.test = ast.copy_location(self.wrap(node.test, False, node.test), node.test)
        return node

    def wrap(self, t, neg, top=None):
        """The check of `t`. top: the assert's whole expression when t is it or its operand under
        `not`: the call made stands for it (and takes its location)."""
        at = lambda n: ast.copy_location(n, top or t)  # noqa: E731
        if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
            return self.wrap(t.operand, not neg, top)
        if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.And) and not neg:
            return at(ast.BoolOp(op=ast.And(), values=[self.wrap(v, False) for v in t.values]))
        if isinstance(t, ast.Compare) and all(type(o) in CMP_OPS for o in t.ops):
            ops = at(ast.Constant(tuple(CMP_OPS[type(o)] for o in t.ops)))
            return at(ast.Call(func=self._fn(self.cmp_name, t), args=[ops, at(ast.Constant(neg)), t.left] + list(t.comparators), keywords=[]))
        return at(ast.Call(func=self._fn(self.truth_name, t), args=[at(ast.Constant(neg)), t], keywords=[]))


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
        # The version tags of the watched dicts (and of sys.modules), read again by every check:
        # see changed().
        self.tag_dicts = tuple(d for _, d, _, _ in self.fps) + (sys.modules,)
        self.tags = _dict_version_readers(self.tag_dicts)
        self.marks = None

    def mark(self):
        """Notes the watched dicts' version tags, just before the program's first code runs."""
        if self.tags is not None:
            self.marks = tuple(map(_tag_value, self.tags))

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
        # Fast path: a dict whose version tag (PEP 509: CPython gives a dict a new one at each
        # change) is the one noted before the program ran was not changed since. Reading the tags
        # writes nothing, where comparing the values touches (increfs) every watched object: in a
        # forked child that is a copy-on-write page fault per page of them (~270 a child).
        same = None
        if self.marks is not None:
            same = tuple(_map(operator.eq, _map(_tag_value, self.tags), self.marks))
        for j, (owner, d, keys, values) in enumerate(self.fps):
            if same is not None and same[j]:
                continue
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
        if same is not None and same[-1]:
            return None
        for name, m in self.module_objects:
            if sys.modules.get(name) is not m:
                return "replaced the module %s" % name
        return None


_MISSING = object()
try:
    from ctypes import _SimpleCData

    # The C getter of ctypes' immutable base type: a program can override `value` on c_uint64 (a
    # class defined in Python), not here.
    _tag_value = _SimpleCData.__dict__["value"].__get__
except Exception:
    _tag_value = None


def _dict_version_readers(dicts):
    """A ctypes view of each dict's version tag (PyDictObject.ma_version_tag, PEP 509: CPython
    3.6-3.13 give a dict a new tag at every change of its content), or None where this
    interpreter does not keep one that way (then every check compares the values). The layout
    and the behaviour are checked on a probe dict first: the field before the tag must be the
    dict's size, and setting, replacing and deleting an item must each change the tag."""
    try:
        import ctypes
        import sysconfig

        if _tag_value is None or sys.implementation.name != "cpython" or not (3, 6) <= sys.version_info[:2] <= (3, 13):
            return None
        if sysconfig.get_config_var("Py_GIL_DISABLED") or hasattr(sys, "gettotalrefcount"):
            return None
        off = dict.__basicsize__ - 3 * ctypes.sizeof(ctypes.c_void_p)  # ma_version_tag, then ma_keys, ma_values
        probe = {}
        used = ctypes.c_ssize_t.from_address(id(probe) + off - ctypes.sizeof(ctypes.c_ssize_t))
        tag = ctypes.c_uint64.from_address(id(probe) + off)
        seen = [_tag_value(tag)]
        for change in (lambda: probe.__setitem__("a", 1), lambda: probe.__setitem__("a", 2), lambda: probe.__setitem__("b", 3),
                       lambda: probe.__delitem__("a"), lambda: probe.update(c=4), lambda: probe.pop("b"), probe.clear):
            change()
            if used.value != len(probe):
                return None
            seen.append(_tag_value(tag))
        if len(set(seen)) != len(seen):
            return None
        return tuple(ctypes.c_uint64.from_address(id(d) + off) for d in dicts)
    except Exception:
        return None


# The World, made once by the server before it forks (children inherit it).
WORLD_REF = [None]


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


# --------------------------------------------------------------------------- reporters on the program's thread
# The program's thread can reach whatever the tests' code can: the reporters the rewritten
# asserts call, the wrapper around the candidate, and everything those reference. So they hold
# only what cannot be changed from Python: their code (replacing __code__ or __defaults__ is
# refused by the audit hook), tuples, frozensets, read-only mapping views and functions written
# in C. They use no global name (a module's globals can be replaced) and no closure (a cell's
# contents can be): each takes its state, a tuple, as an argument, and reaches every other
# function and builtin through it. They are handed out as bound methods (types.MethodType:
# __func__ and __self__ are read-only).


class UntrustedValue(BaseException):
    """The candidate returned an object of its own class that carries behaviour (comparison,
    truth, arithmetic). A BaseException, so that the tests' `except Exception` does not hide it."""


def _w_in(a, b):
    return a in b


def _w_not_in(a, b):
    return a not in b


# Classification state (CS), by index:
#  0 type  1 identity  2 ids of pre-existing classes  3 flags  4 class dict  5 mro  6 qualname
#  7 BEHAVIOUR  8 snapshots of pre-existing Python classes' dicts  9 IGNORED_CLASS_KEYS
# 10 conversions  11 sequence types  12 issubclass  13 ids of exact scalar types  14 dict.items
# 15 _MISSING  16 list  17 tuple  18 set  19 frozenset  20 dict  21 str  22 HEAPTYPE
# 23 BaseException  24 _w_walk  25 _w_items  26 _w_dict  27 TypeError  28 _w_class_changed
# 29 _w_behaves  30 _w_classify  31 len


def _w_class_changed(t, st):
    """The first attribute of a pre-existing class the program replaced or added, or None."""
    snap = st[8].get(st[1](t))
    if snap is None:
        return None
    d = st[4](t)
    missing = st[15]
    for k, v in snap.items():
        if k not in st[9] and d.get(k, missing) is not v:
            return k
    if st[31](d) != st[31](snap):
        for k in d:
            if st[0](k) is st[21] and k not in snap and k in st[7]:
                return k
    return None


def _w_behaves(t, st):
    """Whether the program-defined part of t's class hierarchy defines behaviour."""
    if st[1](st[0](t)) not in st[2]:
        return True  # a metaclass of the program's
    for c in st[5](t):
        if st[1](c) in st[2]:
            continue
        for k in st[4](c):
            if st[0](k) is st[21] and k in st[7]:
                return True
    return False


def _w_walk(v, depth, budget, st):
    budget[0] -= 1
    if budget[0] < 0 or depth > 100:
        return "u", "too large or too deeply nested"
    t = st[0](v)
    tid = st[1](t)
    if tid in st[13]:
        return "p", v
    if t is st[16] or t is st[17] or t is st[18] or t is st[19]:
        return st[25](t.__iter__(v), t, depth, budget, st)
    if t is st[20]:
        return st[26](v, depth, budget, st)
    known = tid in st[2]
    if known:
        if st[3](t) & st[22] and st[28](t, st) is not None:
            return "u", st[6](t)
    elif st[29](t, st):
        return "u", st[6](t)
    for base, fn in st[10]:
        if st[12](t, base):
            return "p", fn(v)
    for base, it, make in st[11]:
        if st[12](t, base):
            return st[25](it(v), make, depth, budget, st)
    if st[12](t, st[20]):
        return st[26](v, depth, budget, st)
    return ("t" if known else "n"), None


def _w_items(it, make, depth, budget, st):
    kind = "p"
    out = st[16]()
    for x in it:
        k, pv = st[24](x, depth + 1, budget, st)
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
    except st[27]:
        return "t", None


def _w_dict(v, depth, budget, st):
    out = st[16]()
    kind = "p"
    for key, val in st[14](v):
        k1, p1 = st[24](key, depth + 1, budget, st)
        k2, p2 = st[24](val, depth + 1, budget, st)
        if k1 == "u" or k2 == "u":
            return "u", p1 if k1 == "u" else p2
        if k1 != "p" or k2 != "p":
            kind = "t"
        else:
            out.append((p1, p2))
    if kind != "p":
        return "t", None
    try:
        return "p", st[20](out)
    except st[27]:
        return "t", None


def _w_classify(v, st):
    """(kind, plain value or type name); see the comment above about the kinds; never raises."""
    try:
        return st[24](v, 0, [2000000], st)
    except st[23]:
        return "u", "unclassifiable"


# Reporter state (RS), by index:
#  0 CS  1 marshal.dumps  2 b2a_base64  3 os.write  4 the channel's fd  5 the operators (read-only)
#  6 repr for feedback  7 len  8 range  9 bool  10 BaseException  11 MARSHAL_CAP  12 type  13 str
# 14 UntrustedValue  15 the candidate (guards only)  16 qualname  17 _w_send  18 _w_describe
# 19 _w_verdict  20 _w_report  21 the index of the test running (a one-item list; labels records only)


def _w_send(st, obj):
    """An unauthenticated record (it can only make a test fail): 'R ' + base64(marshal(obj))."""
    obj["i"] = st[21][0]
    data = b"R " + st[2](st[1](obj), newline=False) + b"\n"
    while data:
        n = st[3](st[4], data)
        data = data[n:]


def _w_describe(st, v):
    """(kind, plain value or None, wire form) of one checked value."""
    cs = st[0]
    k, pv = cs[30](v, cs)
    if k == "p":
        try:
            b = st[1](pv)
        except st[10]:
            return "t", None, {"k": "t"}
        if st[7](b) > st[11]:
            return "t", None, {"k": "t"}  # large plain data: compared by the interpreter's own C code
        return "p", pv, {"k": "p", "b": st[2](b, newline=False).decode("ascii")}
    if k == "u":
        return "u", None, {"k": "u", "type": pv if st[12](pv) is st[13] else "?"}
    if k == "n":
        return "n", None, {"k": "n", "type": st[16](st[12](v))}
    return "t", None, {"k": "t"}


def _w_verdict(ops, neg, kinds, plains, st):
    """judge() on the values as classified in the child: True when the check holds."""
    if not ops:
        k = kinds[0]
        if k == "u" or k == "n":
            return False
        if k == "p" and st[9](plains[0]) == neg:
            return False
        return True
    known = 0
    bad = False
    n = st[7](ops)
    for j in st[8](n):
        ka, kb = kinds[j], kinds[j + 1]
        if (ka == "u") != (kb == "u"):
            return False
        if ka == "p" and kb == "p":
            x, y = plains[j], plains[j + 1]
            op = ops[j]
            if (op == "is" or op == "is not") and not (x is None or x is True or x is False or x is ...
                                                       or y is None or y is True or y is False or y is ...):
                continue
            try:
                ok = st[9](st[5][op](x, y))
            except st[10]:
                ok = False
            known += 1
            if not ok:
                bad = True
    if known == n:
        return (not bad) != neg
    return neg or not bad


def _w_report(st, ops, neg, vals, r):
    """Judges one check (the child's own result r, then the plain values again) and records it."""
    try:
        kinds = []
        plains = []
        wire = []
        for v in vals:
            k, pv, w = st[18](st, v)
            kinds.append(k)
            plains.append(pv)
            wire.append(w)
        ok = r and st[19](ops, neg, kinds, plains, st)
        rec = {"m": "check", "ops": ops, "neg": neg, "v": wire, "ok": ok}
        if not ok and ops == ("==",):
            try:
                rec["actual"] = st[6](vals[0])
                rec["expected"] = st[6](vals[1])
            except st[10]:
                pass
        st[17](st, rec)
        return ok
    except st[10]:
        return False  # fail closed


def w_cmp(st, ops, neg, *vals):
    """`assert L op R ...`, rewritten: True when the check holds."""
    r = True
    for j in st[8](st[7](ops)):
        if not st[5][ops[j]](vals[j], vals[j + 1]):
            r = False
            break
    r = (not r) if neg else r
    return st[20](st, ops, neg, vals, r)


def w_truth(st, neg, v):
    """`assert X`, rewritten."""
    r = (not v) if neg else st[9](v)
    return st[20](st, (), neg, (v,), r)


def w_guard(st, *args, **kwargs):
    """The candidate as the tests see it: a result carrying behaviour of the program's own fails the test."""
    v = st[15](*args, **kwargs)
    cs = st[0]
    k, pv = cs[30](v, cs)
    if k == "u":
        name = pv if st[12](pv) is st[13] else "?"
        try:
            st[17](st, {"m": "untrusted", "type": name})
        except st[10]:
            pass
        raise st[14]("the candidate returned a %s object whose class (the program's own) defines comparison, "
                     "truth or arithmetic: return plain data" % name)
    return v


def classification_state(world):
    """CS above, from the World taken before the program ran. Built once in the server: the
    children share it (building it in each child would fault in the pages of every class)."""
    import types

    snaps = {}
    for k, d in world.class_dicts.items():
        snaps[k] = types.MappingProxyType(dict(d))
    exact = frozenset(_oid(t) for t in (type(None), bool, int, float, complex, str, bytes, type(Ellipsis)))
    conv = ((int, int.__int__), (float, float.__float__), (complex, complex.__complex__), (str, str.__str__), (bytes, bytes.__bytes__))
    seqs = ((tuple, tuple.__iter__, tuple), (list, list.__iter__, list), (frozenset, frozenset.__iter__, frozenset), (set, set.__iter__, set))
    return (type, _oid, frozenset(world.classes), _cls_flags, _cls_dict, _cls_mro, _cls_name, BEHAVIOUR,
            types.MappingProxyType(snaps), IGNORED_CLASS_KEYS, conv, seqs, issubclass, exact, dict.items, _MISSING,
            list, tuple, set, frozenset, dict, str, HEAPTYPE, BaseException, _w_walk, _w_items, _w_dict, TypeError,
            _w_class_changed, _w_behaves, _w_classify, len)


def reporter_state(cs, chan_fd, saferepr, unit):
    """RS above, for one child. unit: a one-item list, the index of the test running (set by the
    worker thread; it only labels records)."""
    import binascii
    import os
    import types

    ops = types.MappingProxyType({"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
                                  ">": operator.gt, ">=": operator.ge, "in": _w_in, "not in": _w_not_in,
                                  "is": operator.is_, "is not": operator.is_not})
    return (cs, marshal.dumps, binascii.b2a_base64, os.write, chan_fd, ops, saferepr, len, range, bool, BaseException,
            MARSHAL_CAP, type, str, UntrustedValue, None, _cls_name, _w_send, _w_describe, _w_verdict, _w_report, unit)


def bind_reporters(code, mapping):
    """code with each placeholder string constant (nested code objects included) replaced by its
    object in mapping: code objects cannot be changed afterwards."""
    consts = []
    changed = False
    for c in code.co_consts:
        if type(c) is str and c in mapping:
            consts.append(mapping[c])
            changed = True
        elif type(c) is type(code):
            n = bind_reporters(c, mapping)
            changed = changed or n is not c
            consts.append(n)
        else:
            consts.append(c)
    return code.replace(co_consts=tuple(consts)) if changed else code


def reporters(rs):
    """(the check of `assert L op R`, the check of `assert X`, guard(fn)) over the state rs."""
    import types

    def guard(fn):
        return types.MethodType(w_guard, rs[:15] + (fn,) + rs[16:])

    return types.MethodType(w_cmp, rs), types.MethodType(w_truth, rs), guard
