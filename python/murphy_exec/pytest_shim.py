"""A small stand-in for the parts of pytest that test files use.

The executor runs KodCode-style test files (``def test_...(): assert ...``) without
pytest: it calls each test function itself. Test files still ``import pytest`` for
``pytest.raises``, ``pytest.approx``, ``pytest.mark.parametrize`` and the like; this
module provides those. It is installed as ``sys.modules['pytest']`` inside the sandboxed
child, so the real pytest (if any) is never imported there.
"""

import math
import re as _re
import warnings as _warnings

__version__ = "0+murphy-shim"


class _Outcome(BaseException):
    """Base of skip/fail/xfail outcomes (BaseException, like pytest's)."""


class Skipped(_Outcome):
    pass


class Failed(_Outcome):
    pass


class XFailed(_Outcome):
    pass


def skip(reason="", allow_module_level=False):
    raise Skipped(reason)


def fail(reason="", pytrace=True):
    raise Failed(reason)


def xfail(reason=""):
    raise XFailed(reason)


def importorskip(modname, minversion=None, reason=None):
    try:
        return __import__(modname, fromlist=["__name__"])
    except ImportError:
        raise Skipped(reason or ("could not import %r" % modname))


class ExceptionInfo:
    def __init__(self):
        self.type = None
        self.value = None
        self.tb = None

    def match(self, regexp):
        if not _re.search(regexp, str(self.value)):
            raise AssertionError("Regex pattern %r does not match %r." % (regexp, str(self.value)))
        return True

    def __repr__(self):
        return "<ExceptionInfo %r>" % (self.value,)


class _RaisesContext:
    def __init__(self, expected, match=None):
        self.expected = expected
        self.match_expr = match
        self.excinfo = ExceptionInfo()

    def __enter__(self):
        return self.excinfo

    def __exit__(self, etype, value, tb):
        if etype is None:
            raise Failed("DID NOT RAISE %r" % (self.expected,))
        if not issubclass(etype, self.expected):
            return False
        self.excinfo.type = etype
        self.excinfo.value = value
        self.excinfo.tb = tb
        if self.match_expr is not None:
            self.excinfo.match(self.match_expr)
        return True


def raises(expected_exception, *args, match=None, **kwargs):
    if args:
        func = args[0]
        ctx = _RaisesContext(expected_exception, match)
        with ctx:
            func(*args[1:], **kwargs)
        return ctx.excinfo
    return _RaisesContext(expected_exception, match)


class _WarnsContext:
    def __init__(self, expected, match=None):
        self.expected = expected
        self.match_expr = match
        self._cm = _warnings.catch_warnings(record=True)
        self.list = []

    def __enter__(self):
        self.list = self._cm.__enter__()
        _warnings.simplefilter("always")
        return self

    def __exit__(self, etype, value, tb):
        self._cm.__exit__(etype, value, tb)
        if etype is not None:
            return False
        if self.expected is None:
            return False
        for w in self.list:
            if issubclass(w.category, self.expected) and (
                self.match_expr is None or _re.search(self.match_expr, str(w.message))
            ):
                return False
        raise Failed("DID NOT WARN %r" % (self.expected,))

    def __iter__(self):
        return iter(self.list)

    def __len__(self):
        return len(self.list)


def warns(expected_warning=Warning, *args, match=None, **kwargs):
    ctx = _WarnsContext(expected_warning, match)
    if args:
        with ctx:
            args[0](*args[1:], **kwargs)
        return ctx.list
    return ctx


def deprecated_call(*args, **kwargs):
    return warns((DeprecationWarning, PendingDeprecationWarning), *args, **kwargs)


class _Approx:
    def __init__(self, expected, rel=None, abs=None, nan_ok=False):
        self.expected = expected
        self.rel = rel
        self.abs = abs
        self.nan_ok = nan_ok

    def _close(self, a, b):
        if isinstance(b, (list, tuple)):
            return isinstance(a, (list, tuple)) and len(a) == len(b) and all(self._close(x, y) for x, y in zip(a, b))
        if isinstance(b, dict):
            return isinstance(a, dict) and a.keys() == b.keys() and all(self._close(a[k], b[k]) for k in b)
        try:
            fa, fb = float(a), float(b)
        except (TypeError, ValueError):
            try:
                import numpy as _np  # arrays compared elementwise

                return bool(_np.allclose(a, b, rtol=self.rel or 1e-6, atol=self.abs or 1e-12, equal_nan=self.nan_ok))
            except Exception:
                return a == b
        if math.isnan(fb) or math.isnan(fa):
            return self.nan_ok and math.isnan(fa) and math.isnan(fb)
        if math.isinf(fb):
            return fa == fb
        rel = 1e-6 if self.rel is None else self.rel
        ab = 1e-12 if self.abs is None else self.abs
        return abs(fa - fb) <= max(rel * abs(fb), ab)

    def __eq__(self, other):
        return self._close(other, self.expected)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def __repr__(self):
        return "approx(%r)" % (self.expected,)


def approx(expected, rel=None, abs=None, nan_ok=False):
    return _Approx(expected, rel, abs, nan_ok)


class Mark:
    def __init__(self, name, args, kwargs):
        self.name = name
        self.args = args
        self.kwargs = kwargs


class _MarkDecorator:
    def __init__(self, name, args=(), kwargs=None):
        self.name = name
        self.args = args
        self.kwargs = kwargs or {}

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not self.args and self.name != "parametrize":
            fn = args[0]
            marks = list(getattr(fn, "pytestmark", []))
            marks.append(Mark(self.name, (), {}))
            fn.pytestmark = marks
            return fn
        if self.args or self.kwargs:
            # Already configured: applying to a function.
            fn = args[0]
            marks = list(getattr(fn, "pytestmark", []))
            marks.append(Mark(self.name, self.args, self.kwargs))
            fn.pytestmark = marks
            return fn
        return _MarkDecorator(self.name, args, kwargs)


class _MarkGenerator:
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _MarkDecorator(name)


mark = _MarkGenerator()


class _ParamSet:
    def __init__(self, values, marks=(), id=None):
        self.values = values
        self.marks = marks
        self.id = id


def param(*values, marks=(), id=None):
    return _ParamSet(values, marks, id)


def fixture(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        fn = args[0]
        fn._murphy_fixture = True
        return fn

    def deco(fn):
        fn._murphy_fixture = True
        return fn

    return deco


def main(*args, **kwargs):
    return 0


class MonkeyPatch:
    def __init__(self):
        self._undo = []

    def setattr(self, target, name, value=None, raising=True):
        if isinstance(target, str) and value is None:
            modname, _, attr = target.rpartition(".")
            import importlib

            value = name
            target, name = importlib.import_module(modname), attr
        old = getattr(target, name, _MISSING)
        if old is _MISSING and raising:
            raise AttributeError(name)
        self._undo.append(lambda: (setattr(target, name, old) if old is not _MISSING else delattr(target, name)))
        setattr(target, name, value)

    def delattr(self, target, name, raising=True):
        old = getattr(target, name, _MISSING)
        if old is _MISSING:
            if raising:
                raise AttributeError(name)
            return
        self._undo.append(lambda: setattr(target, name, old))
        delattr(target, name)

    def setitem(self, d, key, value):
        old = d.get(key, _MISSING)
        self._undo.append(lambda: (d.__setitem__(key, old) if old is not _MISSING else d.pop(key, None)))
        d[key] = value

    def delitem(self, d, key, raising=True):
        if key not in d:
            if raising:
                raise KeyError(key)
            return
        old = d[key]
        self._undo.append(lambda: d.__setitem__(key, old))
        del d[key]

    def setenv(self, name, value, prepend=None):
        import os

        self.setitem(os.environ, name, str(value))

    def delenv(self, name, raising=True):
        import os

        self.delitem(os.environ, name, raising)

    def chdir(self, path):
        import os

        old = os.getcwd()
        self._undo.append(lambda: os.chdir(old))
        os.chdir(path)

    def undo(self):
        while self._undo:
            self._undo.pop()()


_MISSING = object()


class _CaptureResult(tuple):
    @property
    def out(self):
        return self[0]

    @property
    def err(self):
        return self[1]


class CaptureFixture:
    def __init__(self):
        import io
        import sys

        self._sys = sys
        self._old = (sys.stdout, sys.stderr)
        self._out = io.StringIO()
        self._err = io.StringIO()
        sys.stdout, sys.stderr = self._out, self._err

    def readouterr(self):
        out, err = self._out.getvalue(), self._err.getvalue()
        self._out.seek(0)
        self._out.truncate()
        self._err.seek(0)
        self._err.truncate()
        return _CaptureResult((out, err))

    def close(self):
        self._sys.stdout, self._sys.stderr = self._old
