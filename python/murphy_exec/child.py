"""The child: runs the candidate and its tests in a forked process and reports every step
over the result pipe (messages.Msg). It decides nothing: the supervisor (server.py) does."""

import ast
import base64
import io
import json
import marshal
import os
import reprlib
import sys
import time
import traceback
import types

import pytest_shim
from checks import MARSHAL_CAP, OP_FUNCS, WORLD_REF, _AssertRewriter, _cls_name, make_valuer
from common import LCB_PRELUDE, SOL_FILE, TEST_FILE
from messages import Msg


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
    classify, class_problems = make_valuer(WORLD_REF[0])
    _b64 = base64.b64encode
    _mdumps = marshal.dumps
    _ops = dict(OP_FUNCS)
    _len = len
    _bool = bool
    _range = range
    _FunctionType = types.FunctionType
    _cls_name_ = _cls_name
    _world_changed = WORLD_REF[0].changed
    _real_builtins = sys.modules["builtins"]
    cur = [start]
    tampered = []
    helper_spaces = []  # namespaces holding __murphy_cmp/__murphy_truth

    def tamper(what):
        if what not in tampered:
            tampered.append(what)
            send({"m": Msg.TAMPER, "what": what})

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
        send({"m": Msg.CHECK, "i": cur[0], "ops": ops, "neg": neg, "v": [describe(x) for x in vals], "ok": res})
        return res

    def murphy_truth(neg, v):
        r = (not v) if neg else _bool(v)
        send({"m": Msg.CHECK, "i": cur[0], "ops": (), "neg": neg, "v": [describe(v)], "ok": r})
        return r

    def guard(fn):
        """The candidate as the tests see it: a result carrying behaviour of the program's own
        (an object that equals anything, a number whose subtraction lies) fails the test."""

        def candidate(*args, **kwargs):
            v = fn(*args, **kwargs)
            k, pv = classify(v)
            if k == "u":
                send({"m": Msg.UNTRUSTED, "i": cur[0], "type": pv})
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
        send({"m": Msg.SYNTAX_ERROR, "err": exc_record(e, None)})
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
                send({"m": Msg.SETUP_ERROR, "err": {"errorType": "SystemExit", "message": "the program called exit(%s) before the tests ran" % repr_value(e.code), "traceback": trimmed_tb(tb)}})
            else:
                send({"m": Msg.SETUP_ERROR, "err": exc_record(e, tb)})
            _exit(0)

    def run_unit(i, body):
        """Run one test: body() raises on failure."""
        cur[0] = i
        send({"m": Msg.BEGIN, "i": i})
        buf = _Capped(out_cap)
        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = buf
        fail.set = False
        t0 = _time()
        res = {"m": Msg.END, "i": i, "passed": True}
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

    # What the runners use of the above.
    ctx = types.SimpleNamespace(
        _BaseException=_BaseException, _FunctionType=_FunctionType, _dumps=_dumps, _exc_info=_exc_info,
        _exit=_exit, _isinstance=_isinstance, _real_builtins=_real_builtins, _type=_type, audit=audit,
        check_world=check_world, compile_stmts=compile_stmts, exc_record=exc_record, guard=guard,
        helper_spaces=helper_spaces, murphy_cmp=murphy_cmp, murphy_truth=murphy_truth,
        new_module=new_module, repr_value=repr_value, run_setup=run_setup, run_unit=run_unit, send=send,
        sol_code=sol_code, test_space=test_space,
    )
    RUNNERS[kind](ctx, req, pl, units, start)
    send({"m": Msg.DONE})
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    _exit(0)


# One runner per test kind. Each gets the child's context (the helpers above, with the
# references they captured before any candidate code ran) and runs units start.. of the plan.

def load_solution(ctx, req):
    """Function-style tasks: the program is a module that is not __main__ (the official
    harnesses exec it in a fresh dict), so an `if __name__ == "__main__":` block does not run.
    MBPP's test imports run first, in the same namespace. Returns the module's namespace."""
    audit = ctx.audit
    check_world = ctx.check_world
    new_module = ctx.new_module
    run_setup = ctx.run_setup
    sol_code = ctx.sol_code
    mod = new_module("solution")
    sys.modules["solution"] = mod
    sys.modules["__main__"] = new_module("__main__")
    g = mod.__dict__
    if req["kind"] == "assert" and req.get("imports"):
        run_setup(lambda: exec(compile(req["imports"], TEST_FILE, "exec", dont_inherit=True), g))
    sys.addaudithook(audit)
    run_setup(lambda: exec(sol_code, g))
    check_world()
    return g


def run_assert(ctx, req, pl, units, start):
    _FunctionType = ctx._FunctionType
    _isinstance = ctx._isinstance
    _type = ctx._type
    compile_stmts = ctx.compile_stmts
    guard = ctx.guard
    run_setup = ctx.run_setup
    run_unit = ctx.run_unit
    send = ctx.send
    test_space = ctx.test_space
    g = load_solution(ctx, req)
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
    send({"m": Msg.READY})
    for i in range(start, len(units)):
        c = codes[i]

        def body(c=c):
            if _isinstance(c, SyntaxError):
                raise c
            exec(c, ns)

        run_unit(i, body)


def run_humaneval(ctx, req, pl, units, start):
    _BaseException = ctx._BaseException
    _exit = ctx._exit
    _real_builtins = ctx._real_builtins
    compile_stmts = ctx.compile_stmts
    guard = ctx.guard
    helper_spaces = ctx.helper_spaces
    murphy_cmp = ctx.murphy_cmp
    murphy_truth = ctx.murphy_truth
    run_setup = ctx.run_setup
    run_unit = ctx.run_unit
    send = ctx.send
    test_space = ctx.test_space
    g = load_solution(ctx, req)
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
        send({"m": Msg.SETUP_ERROR, "err": {"errorType": "NameError", "message": "name '%s' is not defined: the program must define %s" % (entry, entry), "traceback": ""}})
        _exit(0)
    cand = guard(g[entry])
    if pl["mode"] == "whole":
        send({"m": Msg.READY})
        run_unit(0, lambda: g["check"](cand))
    else:
        ns = test_space(g)
        # Builtin names the program itself redefined: the tests use the real builtins.
        for k in list(ns):
            if k[:2] != "__" and k in own and own[k] is ns[k] and k in _real_builtins.__dict__ and k != entry:
                del ns[k]
        ns[pl["param"]] = cand
        send({"m": Msg.READY})
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


def run_pytest(ctx, req, pl, units, start):
    audit = ctx.audit
    check_world = ctx.check_world
    compile_stmts = ctx.compile_stmts
    helper_spaces = ctx.helper_spaces
    murphy_cmp = ctx.murphy_cmp
    murphy_truth = ctx.murphy_truth
    new_module = ctx.new_module
    run_setup = ctx.run_setup
    run_unit = ctx.run_unit
    send = ctx.send
    sol_code = ctx.sol_code
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
    send({"m": Msg.READY})
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


def run_functional(ctx, req, pl, units, start):
    _dumps = ctx._dumps
    audit = ctx.audit
    check_world = ctx.check_world
    new_module = ctx.new_module
    repr_value = ctx.repr_value
    run_setup = ctx.run_setup
    run_unit = ctx.run_unit
    send = ctx.send
    sol_code = ctx.sol_code
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
    send({"m": Msg.READY})
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
            send({"m": Msg.VALUE, "i": i, "v": enc[: 1 << 20]})

        run_unit(i, body)


def run_stdio(ctx, req, pl, units, start):
    _BaseException = ctx._BaseException
    _exc_info = ctx._exc_info
    exc_record = ctx.exc_record
    new_module = ctx.new_module
    repr_value = ctx.repr_value
    send = ctx.send
    sol_code = ctx.sol_code
    # One child per case: run the program as __main__; the server compares stdout.
    mod = new_module("__main__")
    sys.modules["__main__"] = mod
    g = mod.__dict__
    send({"m": Msg.BEGIN, "i": start})
    try:
        exec(LCB_PRELUDE, g)
        exec(sol_code, g)
    except SystemExit as e:
        if e.code not in (None, 0):
            send({"m": Msg.SETUP_ERROR, "err": {"errorType": "SystemExit", "message": "exit status %s" % repr_value(e.code), "traceback": ""}})
    except _BaseException as e:
        send({"m": Msg.SETUP_ERROR, "err": exc_record(e, _exc_info()[2])})
    try:
        sys.stdout.flush()
    except _BaseException:
        pass
    send({"m": Msg.END, "i": start, "passed": True})


RUNNERS = {
    "humaneval": run_humaneval,
    "assert": run_assert,
    "pytest": run_pytest,
    "functional": run_functional,
    "stdio": run_stdio,
}
