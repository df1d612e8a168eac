"""The child: runs the candidate and its tests in a forked process and reports to the
supervisor (server.py), which decides. See docs/executor.md "What decides a pass".

Two kinds of thread:

- the harness thread (the process's main thread) holds the result channel's key. Only it sends
  the messages that count (authenticated with the key and numbered: ready, begin, end, done,
  errors, tampering). It never runs the program's code: a profile function on that thread stops
  the process if it ever would (a finalizer or a gc callback of the program's).
- worker threads run the program's module-level code and each test. Their frames, and every
  object reachable from them, hold no key. What they write to the channel are records
  (unauthenticated: checks, values, details of a failure), which can only make a test fail.

The harness thread learns that a test ran to its end from the generator that ran it on the worker
thread (_w_unit): it stops at its one yield only when the test's code returned, and its state
(gi_suspended, gi_frame) is kept by the interpreter, not by code the program can reach.
"""

import _thread
import ast
import binascii
import hashlib
import io
import marshal
import os
import reprlib
import sys
import time
import traceback
import types
import warnings

import pytest_shim
from checks import WORLD_REF, World, _AssertRewriter, _oid, bind_reporters, reporter_state, reporters
from common import LCB_PRELUDE, SOL_FILE, TEST_FILE
from messages import Msg

_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80


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


# --------------------------------------------------------------------------- on worker threads
# _w_unit and _w_drive use only their arguments: no global name, no closure (the program's
# thread reaches them). The helpers in _WorkerSide (feedback, output capture) use globals: what
# they produce is feedback, never a verdict.


def _w_unit(st, fn, args):
    """Runs fn(*args); reaches its one yield only when fn returned. st: (BaseException,
    begin() -> box, on_error(box, exc), on_end(box))."""
    box = st[1]()
    try:
        fn(*args)
    except st[0] as e:
        st[2](box, e)
        raise
    finally:
        st[3](box)
    yield


def _w_drive(steps, releases, base):
    """A worker thread's entry: each job's generator one step (to its yield, or its end), then
    wake the harness thread, which reads the generator's state."""
    j = 0
    n = steps.__len__()
    while j < n:
        try:
            steps[j]()
        except base:
            pass
        releases[j]()
        j += 1


def _w_copy_into(dst, src):
    dst.update(src)


def _w_exec_all(ex, codes, ns):
    for c in codes:
        ex(c, ns)


def _w_stdio(ex, prelude, code, g, system_exit):
    """A stdin/stdout program as __main__: exit(0) and exit() are a normal end."""
    try:
        ex(prelude, g)
        ex(code, g)
    except system_exit as e:
        if e.code is not None and e.code != 0:
            raise


def _w_flush():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass


def _w_stdio_flushed(ex, prelude, code, g, system_exit):
    try:
        _w_stdio(ex, prelude, code, g, system_exit)
    finally:
        _w_flush()


class _WorkerSide:
    """Feedback from worker threads: exception records, captured output (records)."""

    def __init__(self, req, chan_fd, cfg):
        self.fd = chan_fd
        self.cap = int(cfg["outBytes"])
        self.sol_lines = req["solution"].split("\n")
        r = reprlib.Repr()
        r.maxstring = 300
        r.maxother = 300
        r.maxlist = 30
        r.maxdict = 20
        r.maxlevel = 4
        self._repr = r.repr

    def repr_value(self, v):
        try:
            return self._repr(v)
        except BaseException:
            return "<unrepresentable %s>" % type(v).__name__

    def record(self, obj):
        data = b"R " + binascii.b2a_base64(marshal.dumps(obj), newline=False) + b"\n"
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def trimmed_tb(self, tb):
        frames = []
        try:
            for fr in traceback.extract_tb(tb):
                if fr.filename == SOL_FILE:
                    line = fr.line
                    if not line and 0 < fr.lineno <= len(self.sol_lines):
                        line = self.sol_lines[fr.lineno - 1].strip()
                    frames.append('  File "%s", line %d, in %s\n    %s' % (SOL_FILE, fr.lineno, fr.name, line or ""))
        except BaseException:
            pass
        if len(frames) > 12:
            frames = frames[:4] + ["  ... %d frames omitted (recursion?) ..." % (len(frames) - 8)] + frames[-4:]
        return "\n".join(frames)

    def exc_record(self, e, tb):
        rec = {"errorType": type(e).__name__}
        try:
            rec["message"] = str(e)[:2000]
        except BaseException:
            rec["message"] = "<unprintable>"
        if isinstance(e, SyntaxError):
            rec["lineno"] = e.lineno if type(e.lineno) is int else None
            rec["text"] = str(e.text or "").rstrip("\n")
            rec["message"] = str(e.msg)
            rec["file"] = str(e.filename)
        rec["traceback"] = self.trimmed_tb(tb)
        return rec

    def _safe(self, fn):
        try:
            fn()
        except BaseException:
            pass

    # st for _w_unit, one per flavour
    def unit_state(self, i, current):
        def begin():
            current[0] = i
            buf = _Capped(self.cap)
            box = {"buf": buf, "old": (sys.stdout, sys.stderr), "err": None, "t0": time.perf_counter()}
            sys.stdout = sys.stderr = buf
            return box

        def on_error(box, e):
            rec = self.exc_record(e, e.__traceback__)
            if isinstance(e, SystemExit):
                rec["message"] = "the program called exit(%s) during the test" % self.repr_value(e.code)
            if isinstance(e, pytest_shim.Skipped):
                rec["status"] = "skipped"
            box["err"] = rec

        def on_end(box):
            sys.stdout, sys.stderr = box["old"]
            _w_flush()
            rec = dict(box["err"] or {})
            rec["m"] = Msg.DETAIL
            rec["i"] = i
            rec["ms"] = (time.perf_counter() - box["t0"]) * 1000.0
            rec["output"] = box["buf"].getvalue()
            self.record(rec)

        return (BaseException, begin, on_error, on_end)

    def setup_state(self, stdio=False):
        def begin():
            return {}

        def on_error(box, e):
            if isinstance(e, SystemExit):
                msg = ("exit status %s" if stdio else "the program called exit(%s) before the tests ran") % self.repr_value(e.code)
                rec = {"errorType": "SystemExit", "message": msg, "traceback": "" if stdio else self.trimmed_tb(e.__traceback__)}
            else:
                rec = self.exc_record(e, e.__traceback__)
            rec["m"] = Msg.DETAIL
            rec["setup"] = True
            self._safe(lambda: self.record(rec))

        def on_end(box):
            _w_flush()

        return (BaseException, begin, on_error, on_end)


# --------------------------------------------------------------------------- pytest (worker side)


def _w_fixture(name, tg, cleanup):
    """The value of fixture `name` for one call (tmp_path, monkeypatch, capsys, @pytest.fixture)."""
    if name == "tmp_path" or name == "tmpdir":
        import pathlib
        import tempfile

        return pathlib.Path(tempfile.mkdtemp(dir=os.getcwd()))
    if name == "monkeypatch":
        mp = pytest_shim.MonkeyPatch()
        cleanup.append(mp.undo)
        return mp
    if name == "capsys" or name == "capfd":
        cf = pytest_shim.CaptureFixture()
        cleanup.append(cf.close)
        return cf
    f = tg.get(name)
    if callable(f) and getattr(f, "_murphy_fixture", False):
        val = f()
        if isinstance(val, types.GeneratorType):
            gen = val
            val = next(gen)
            cleanup.append(lambda gen=gen: next(gen, None))
        return val
    raise pytest_shim.Failed("fixture '%s' not found (the executor supports tmp_path, monkeypatch, capsys and module-level @pytest.fixture functions)" % name)


def _w_await(r):
    if hasattr(r, "__await__"):
        import asyncio

        asyncio.run(r)


def _w_pytest_call(st, fn, cls, params, sets, tg):
    """A verified test function (its code is the test file's): one call per parameter set (a
    tuple of (name, value) pairs, fixed before the tests ran). st: (fixture(name, tg, cleanup),
    await(result), list, dict)."""
    for ps in sets:
        kwargs = st[3]()
        for name, value in ps:
            kwargs[name] = value
        cleanup = st[2]()
        try:
            for p in params:
                if p not in kwargs:
                    kwargs[p] = st[0](p, tg, cleanup)
            if cls is not None:
                inst = cls()
                setup = getattr(inst, "setup_method", None)
                if setup is not None:
                    setup(fn.__get__(inst))
                st[1](fn(inst, **kwargs))
            else:
                st[1](fn(**kwargs))
        finally:
            for c in reversed(cleanup):
                c()


def _w_call_test_unverified(tg, u):
    """A test callable whose code is not the test file's own def (imported, or wrapped by a
    decorator): as pytest would call it."""
    import inspect

    if "cls" in u:
        inst = tg[u["cls"]]()
        fn = getattr(inst, u["fn"])
        if hasattr(inst, "setup_method"):
            inst.setup_method(fn)
    else:
        fn = tg[u["fn"]]
    if not callable(fn):
        return  # pytest ignores non-callables named test*
    if inspect.isgeneratorfunction(fn):
        raise pytest_shim.Failed("'yield' keyword is allowed in fixtures, but not in tests (%s): pytest refuses this test" % u["name"])
    sets, skip = _param_sets(list(getattr(fn, "pytestmark", [])))
    if skip is not None:
        raise pytest_shim.Skipped(skip)
    try:
        params = [p for p in inspect.signature(fn).parameters if p != "self"]
    except (TypeError, ValueError):
        params = []
    _w_pytest_call((_w_fixture, _w_await, list, dict), _Bound(fn), None, tuple(params), sets, tg)


class _Bound:
    """Calls fn(**kwargs) (the unverified path hands bound methods and wrappers to _w_pytest_call)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, **kwargs):
        return self.fn(**kwargs)


def _param_sets(marks):
    """(parameter sets as tuples of (name, value) pairs, skip reason or None) from a test's marks."""
    for mk in marks:
        if mk.name == "skip":
            return (), mk.kwargs.get("reason", "")
        if mk.name == "skipif" and mk.args and mk.args[0]:
            return (), mk.kwargs.get("reason", "")
    sets = [()]
    for mk in marks:
        if mk.name == "parametrize":
            names, values = mk.args[0], mk.args[1]
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",") if n.strip()]
            new = []
            for base in sets:
                for v in values:
                    if isinstance(v, pytest_shim._ParamSet):
                        v = v.values
                    if len(names) == 1:
                        v = (v,)
                    new.append(tuple(base) + tuple(zip(names, v)))
            sets = new
    return tuple(sets), None


def _test_codes(code, out=None, prefix=""):
    """{(qualified name, first line): code object} of the functions a test module defines at
    module level and in its classes (what pytest collects)."""
    if out is None:
        out = {}
    for c in code.co_consts:
        if type(c) is types.CodeType:
            if c.co_flags & 0x02 and not prefix:  # CO_NEWLOCALS: a function
                out[(c.co_name, c.co_firstlineno)] = c
            elif prefix:
                out[(prefix + "." + c.co_name, c.co_firstlineno)] = c
            else:
                _test_codes(c, out, c.co_name)  # a class body
    return out


# --------------------------------------------------------------------------- the tests, compiled in the server
# The tests are the problem's (trusted), never the program's: the server compiles them once per
# problem, before it forks (compile_tests), and every child of that problem inherits the code
# objects. The rewritten asserts call string placeholders, random per server process; each child
# replaces them with its own reporters (bind_reporters), so the tests call the reporters as
# constants and the placeholders never reach a program's code.

PLACEHOLDERS = ("__murphy_cmp_" + os.urandom(16).hex(), "__murphy_truth_" + os.urandom(16).hex())
_REWRITER = _AssertRewriter(*PLACEHOLDERS)
_STAR = compile("from solution import *", TEST_FILE, "exec", dont_inherit=True)


def compile_tree(stmts, filename=TEST_FILE):
    """Statements -> a code object whose asserts report their checks (still to be bound)."""
    mod = ast.Module(body=[_REWRITER.visit(s) for s in stmts], type_ignores=[])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'str' object is not callable": the placeholders
        return compile(mod, filename, "exec", dont_inherit=True)


def _compile_assert(src):
    """One MBPP assert; a SyntaxError is kept, to fail that test alone."""
    try:
        return compile_tree(ast.parse(src, TEST_FILE).body)
    except SyntaxError as e:
        return e


def compile_tests(req, pl, units):
    """The code objects a problem's tests need (each runner's `tests`), from the request and its
    plan (planning.py). Raises SyntaxError when the tests as a whole do not compile; one assert
    that does not compile fails only its own test (MBPP)."""
    kind = req["kind"]
    if kind == "assert":
        return {
            "units": [_compile_assert(u["source"]) for u in units],
            "setup": compile(req["setup"], TEST_FILE, "exec", dont_inherit=True) if req.get("setup") else None,
            "imports": compile(req["imports"], TEST_FILE, "exec", dont_inherit=True) if req.get("imports") else None,
        }
    if kind == "humaneval":
        out = {"test": compile_tree(ast.parse(req["test"], TEST_FILE).body), "units": [], "pre": []}
        if pl["mode"] != "whole":
            for u in units:
                out["units"].append(compile_tree(list(u["pre"]) + [u["stmt"]] + list(u.get("post") or [])))
            # setup statements of the units a resumed child skips (they may define names)
            out["pre"] = [compile_tree(list(u["pre"])) if u["pre"] else None for u in units]
        return out
    if kind == "pytest":
        return {"test": compile_tree(ast.parse(req["testCode"], TEST_FILE).body), "star": _STAR}
    return {}


# --------------------------------------------------------------------------- the harness thread


def _harness_codes():
    """Every code object of the harness's modules (what may run on the harness thread)."""
    out = set()
    keep = []

    def add(code):
        if _oid(code) in out:
            return
        out.add(_oid(code))
        keep.append(code)
        for c in code.co_consts:
            if type(c) is types.CodeType:
                add(c)

    import checks
    import common
    import messages

    for mod in (sys.modules[__name__], checks, common, messages):
        for v in list(vars(mod).values()):
            if isinstance(v, types.FunctionType):
                add(v.__code__)
            elif isinstance(v, type):
                for a in list(vars(v).values()):
                    if isinstance(a, (staticmethod, classmethod)):
                        a = a.__func__
                    if isinstance(a, types.FunctionType):
                        add(a.__code__)
    return frozenset(out), keep


_PREPARED = [None]


def prepare(world):
    """What every child needs and the server computes once before forking (building it in each
    child would fault in pages of every class): (the reporters' classification state, the
    private World's class, the harness's code objects). child_main takes the private class and
    clears this slot, so that the program cannot reach it."""
    import checks

    codes = _harness_codes()
    _PREPARED[0] = (checks.classification_state(world), _private_world_class(), codes)
    return _PREPARED[0]


def _private_world_class():
    """A copy of the World class whose methods run with globals and builtins of their own: the
    program can replace names in the checks module, not in these."""
    import builtins

    import checks

    g = dict(vars(checks))
    g["__builtins__"] = dict(vars(builtins))
    ns = {}
    for k, v in vars(World).items():
        if isinstance(v, types.FunctionType):
            ns[k] = types.FunctionType(v.__code__, g, v.__name__, v.__defaults__, v.__closure__)
    return type("World", (), ns)


def child_main(req, pl, units, start, chan_fd, key, cfg, tests=None):
    """Runs the program and its tests (from unit `start` on) in this forked child. tests: what
    compile_tests(req, pl, units) returned (the server's; computed here when absent)."""
    # Captured before any candidate code runs; never handed to a worker thread.
    _write = os.write
    _mdumps = marshal.dumps
    _b2a = binascii.b2a_base64
    _blake = hashlib.blake2b
    _start_thread = _thread.start_new_thread
    _lock = _thread.allocate_lock
    _time = time.perf_counter
    _exit = os._exit
    _unit = _w_unit
    _drive = _w_drive
    _BE = BaseException
    _exec = exec
    seq = [0]
    keep = []  # all handed to worker threads stays referenced: no finalizer runs on this thread

    def send(obj):
        obj["s"] = seq[0]
        seq[0] += 1
        payload = _b2a(_mdumps(obj), newline=False)
        mac = _blake(payload, key=key, digest_size=16).hexdigest().encode("ascii")
        data = b"A " + mac + b" " + payload + b"\n"
        while data:
            n = _write(chan_fd, data)
            data = data[n:]

    # The World, private to this thread (the server made it before forking; the program's
    # thread gets only the read-only copy inside the reporters' state).
    world = WORLD_REF[0]
    WORLD_REF[0] = None
    cs, world_cls, (codes, code_refs) = _PREPARED[0] or prepare(world)
    _PREPARED[0] = None
    pw = object.__new__(world_cls)
    vars(pw).update(vars(world))
    _changed = pw.changed
    _mark = pw.mark
    ws = _WorkerSide(req, chan_fd, cfg)
    unit_box = [None]
    rs = reporter_state(cs, chan_fd, ws.repr_value, unit_box)
    r_cmp, r_truth, guard = reporters(rs)
    tampered = []

    def tamper(what):
        if what not in tampered:
            tampered.append(what)
            send({"m": Msg.TAMPER, "what": what})

    def check_world():
        what = _changed()
        if what is not None:
            tamper(what)

    _codes = codes

    def stray():
        send({"m": Msg.TAMPER, "what": "ran its own code on the harness's thread (a finalizer or a gc callback)"})
        _exit(0)

    def profile(frame, event, arg):
        if event == "call" and _oid(frame.f_code) not in _codes:
            _write(2, ("murphy harness: %s:%s ran on the harness's thread\n" % (frame.f_code.co_filename, frame.f_code.co_name)).encode())
            stray()

    # ---- the audit hook: refuses what would reach the interpreter's internals. It holds no key
    # (its frame shows in the traceback of what it refuses) and uses only its closure.
    harness_files = frozenset((child_main.__code__.co_filename, _w_unit.__code__.co_filename, rs[17].__code__.co_filename))
    denied = frozenset(("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                        "sys._current_exceptions", "sys.settrace", "sys.setprofile"))
    own_files = frozenset((SOL_FILE,))
    _type = type
    _str = str
    _bytes = bytes
    _FunctionType = types.FunctionType
    _PermissionError = PermissionError
    _RuntimeError = RuntimeError
    _record = ws.record

    def note(what):
        try:
            _record({"m": Msg.TAMPER, "what": what})
        except _BE:
            pass

    def audit(event, args):
        if event in denied or event[:7] == "ctypes.":
            note("called %s" % event)
            raise _PermissionError("%s is not allowed here" % event)
        if event == "sys.addaudithook":
            raise _RuntimeError("audit hooks are not allowed here")  # CPython drops the new hook silently
        if event == "sys._getframe":
            if args and args[0].f_code.co_filename in harness_files:
                note("reached the harness's frames")
                raise _PermissionError("the harness's frames are not reachable")
        elif event == "object.__setattr__":
            if args and _type(args[0]) is _FunctionType and _type(args[1]) is _str and args[1] in ("__code__", "__defaults__", "__kwdefaults__"):
                fn_file = args[0].__code__.co_filename
                if fn_file not in own_files and fn_file[:1] != "<":
                    note("replaced %s of a function it did not define" % args[1])
                    raise _PermissionError("changing %s of %s is not allowed" % (args[1], fn_file))
        elif event == "open" or event == "os.symlink" or event == "os.link":
            path = args[0] if args else None
            if _type(path) is _bytes:
                path = path.decode("latin-1")
            if _type(path) is _str and (path[-4:] == "/mem" or path == "mem" or (event != "open" and "proc" in path)):
                note("opened process memory")
                raise _PermissionError("process memory is not readable here")

    started = [False]

    def start_program():
        """From here on, the program's code may run (on worker threads only)."""
        if not started[0]:
            started[0] = True
            _mark()
            sys.setprofile(profile)
            sys.addaudithook(audit)

    def start_jobs(jobs):
        """Runs jobs [(st, fn, args)] one after the other on one new worker thread, which does not
        wait for this one; returns [(generator, lock)] to wait on, in order."""
        start_program()  # (every runner did already: the tags are noted before any program code)
        out = []
        steps = []
        releases = []
        for st, fn, args in jobs:
            gen = _unit(st, fn, args)
            done = _lock()
            done.acquire()
            out.append((gen, done))
            steps.append(gen.__next__)
            releases.append(done.release)
        keep.append((out, jobs))
        _start_thread(_drive, (tuple(steps), tuple(releases), _BE))
        return out

    def wait(job):
        """True when the job's code returned (its generator stopped at its yield)."""
        gen, done = job
        while True:
            done.acquire(True, 0.05)
            if gen.gi_frame is None:
                return False
            if gen.gi_suspended:
                return True

    def run_job(st, fn, args):
        return wait(start_jobs([(st, fn, args)])[0])

    setup_st = ws.setup_state()

    def run_setup(*jobs):
        """Module-level code, jobs (fn, args) in order; on a failure report a setup error (details:
        the worker's record) and stop."""
        start_program()
        for job in start_jobs([(setup_st, fn, args) for fn, args in jobs]):
            if not wait(job):
                send({"m": Msg.SETUP_ERROR})
                _exit(0)

    def run_units(items):
        """The tests [(i, fn, args)], one after the other on one worker thread. Their ends are
        reported in order, each when its generator says it returned; this thread wakes when the
        last test ends, or every 0.2 s meanwhile (so that the supervisor's clock for each test
        starts at most that late, without a wake-up per test). At each wake-up: the tests that
        ended since the last one, then one tamper check (made after every one of them ended: the
        same check each would get on its own, back to back), then their ends."""
        if not items:
            return
        jobs = [(ws.unit_state(i, unit_box), fn, args) for i, fn, args in items]
        send({"m": Msg.BEGIN, "i": items[0][0]})
        started = start_jobs(jobs)
        n = len(items)
        last = started[n - 1][1]
        k = 0
        while k < n:
            last.acquire(True, 0.2)
            ended = []
            j = k
            while j < n:
                gen = started[j][0]
                if gen.gi_frame is None:
                    ended.append(False)
                elif gen.gi_suspended:
                    ended.append(True)
                else:
                    break  # still running (or not started yet)
                j += 1
            if not ended:
                continue
            check_world()
            for ok in ended:
                send({"m": Msg.END, "i": items[k][0], "passed": ok})
                k += 1
                if k < n:
                    send({"m": Msg.BEGIN, "i": items[k][0]})

    bound = {PLACEHOLDERS[0]: r_cmp, PLACEHOLDERS[1]: r_truth}

    def bind(code):
        """The tests' code with this child's reporters in place of the placeholders."""
        return bind_reporters(code, bound) if type(code) is types.CodeType else code

    if tests is None:
        tests = compile_tests(req, pl, units)

    sys.modules["pytest"] = pytest_shim
    sys.argv = [SOL_FILE]
    kind = req["kind"]

    # ---- compile the candidate (syntax errors are reported with their line)
    try:
        sol_code = compile(req["solution"], SOL_FILE, "exec", dont_inherit=True)
    except _BE as e:
        send({"m": Msg.SYNTAX_ERROR, "err": ws.exc_record(e, None)})
        _exit(0)

    sol_path = os.path.join(os.getcwd(), SOL_FILE)

    def new_module(name):
        mod = types.ModuleType(name)
        mod.__file__ = sol_path
        mod.__builtins__ = __builtins__
        return mod

    ctx = types.SimpleNamespace(
        _exec=_exec, check_world=check_world, bind=bind, tests=tests, guard=guard, new_module=new_module,
        run_setup=run_setup, run_units=run_units, send=send, sol_code=sol_code, ws=ws, run_job=run_job,
        start_program=start_program,
    )
    RUNNERS[kind](ctx, req, pl, units, start)
    send({"m": Msg.DONE})
    _exit(0)


# One runner per test kind, on the harness thread. Each binds the tests the server compiled
# (ctx.tests, ctx.bind) before the program runs, then hands the program's and the tests' code to worker threads (ctx.run_setup,
# ctx.run_units) and reads back only whether each returned.


def load_solution(ctx, req, pre=(), post=lambda g: ()):
    """Function-style tasks: the program is a module that is not __main__ (the official
    harnesses exec it in a fresh dict), so an `if __name__ == "__main__":` block does not run.
    pre: code run first in the same namespace (MBPP's test imports); post(g): jobs after it.
    Returns the module's namespace."""
    mod = ctx.new_module("solution")
    sys.modules["solution"] = mod
    sys.modules["__main__"] = ctx.new_module("__main__")
    g = mod.__dict__
    jobs = [(ctx._exec, (c, g)) for c in pre] + [(ctx._exec, (ctx.sol_code, g))] + [(fn, args) for fn, args in post(g)]
    ctx.run_setup(*jobs)
    ctx.check_world()
    return g


def run_assert(ctx, req, pl, units, start):
    # MBPP: code, then setup, then the asserts (as the official harness); the asserts run
    # in a copy of the namespace and see the program's functions through `guard`.
    codes = [ctx.bind(c) for c in ctx.tests["units"]]
    setup = ctx.tests["setup"]
    imports = ctx.tests["imports"]
    g = load_solution(ctx, req, pre=(imports,) if imports is not None else (),
                      post=lambda g: ((ctx._exec, (setup, g)),) if setup is not None else ())
    ns = dict(g)
    ns["__builtins__"] = sys.modules["builtins"]
    for name, v in list(g.items()):
        if type(v) is types.FunctionType and v.__code__.co_filename == SOL_FILE:
            ns[name] = ctx.guard(v)
    ctx.send({"m": Msg.READY})
    ctx.run_units([(i, _raise, (codes[i],)) if isinstance(codes[i], SyntaxError) else (i, ctx._exec, (codes[i], ns))
                   for i in range(start, len(units))])


def _raise(e):
    raise e


def run_humaneval(ctx, req, pl, units, start):
    # HumanEval: prompt + completion, then the test module, in one namespace (as the
    # official harness); check()'s statements then run in a copy of it, as check's own
    # locals would, so that `str = ...` in a check never reaches the candidate.
    entry = req["entryPoint"]
    test_code = ctx.bind(ctx.tests["test"])
    check_code = None
    if pl["mode"] == "whole":
        check_code = next((c for (n, _), c in _test_codes(test_code).items() if n == "check"), None)
    unit_codes = [ctx.bind(c) for c in ctx.tests["units"]]
    # setup statements of the units a resumed child skips (they may define names)
    pre_codes = [ctx.bind(c) for c in ctx.tests["pre"][:start]]
    own = {}
    g = load_solution(ctx, req, post=lambda g: ((_w_copy_into, (own, g)), (ctx._exec, (test_code, g))))
    if entry not in g:
        ctx.send({"m": Msg.SETUP_ERROR, "err": {"errorType": "NameError", "message": "name '%s' is not defined: the program must define %s" % (entry, entry), "traceback": ""}})
        os._exit(0)
    cand = ctx.guard(g[entry])
    if pl["mode"] == "whole":
        chk = g.get("check")
        if check_code is not None and (type(chk) is not types.FunctionType or chk.__code__ is not check_code):
            chk = None  # the program replaced the tests' check function
        ctx.send({"m": Msg.READY})
        ctx.run_units([(0, chk, (cand,)) if chk is not None else (0, _raise, (NameError("the tests' check function was replaced"),))])
        return
    ns = dict(g)
    ns["__builtins__"] = sys.modules["builtins"]
    # Builtin names the program itself redefined: the tests use the real builtins.
    real = vars(sys.modules["builtins"])
    for k in list(ns):
        if k[:2] != "__" and k in own and own[k] is ns[k] and k in real and k != entry:
            del ns[k]
    ns[pl["param"]] = cand
    ctx.send({"m": Msg.READY})
    if start > 0:
        # Setup statements of the skipped units (they may define names).
        pre = tuple(c for c in pre_codes[:start] if c is not None)
        if pre:
            ctx.run_job(ctx.ws.setup_state(), _w_exec_all_quiet, (ctx._exec, pre, ns))
    ctx.run_units([(i, ctx._exec, (unit_codes[i], ns)) for i in range(start, len(units))])


def _w_exec_all_quiet(ex, codes, ns):
    for c in codes:
        try:
            ex(c, ns)
        except BaseException:
            pass


def run_pytest(ctx, req, pl, units, start):
    test_code = ctx.bind(ctx.tests["test"])
    star = ctx.tests["star"]
    expected = _test_codes(test_code)
    smod = ctx.new_module("solution")
    sys.modules["solution"] = smod
    sys.modules["__main__"] = ctx.new_module("__main__")
    tmod = ctx.new_module("test_solution")
    sys.modules["test_solution"] = tmod
    tg = tmod.__dict__
    ctx.run_setup((ctx._exec, (ctx.sol_code, smod.__dict__)), (_w_exec_all, (ctx._exec, (star, test_code), tg)))
    ctx.check_world()
    # What each test calls, fixed now: the test file's own function (its code object, compared
    # by identity), its parameter sets and fixture names.
    plans = [_plan_test(u, tg, expected) for u in units]
    ctx.send({"m": Msg.READY})
    st = (_w_fixture, _w_await, list, dict)
    items = []
    for i in range(start, len(units)):
        p = plans[i]
        if p[0] == "call":
            items.append((i, _w_pytest_call, (st,) + p[1:] + (tg,)))
        elif p[0] == "fail":
            items.append((i, _raise, (p[1],)))
        else:
            items.append((i, _w_call_test_unverified, (tg, units[i])))
    ctx.run_units(items)


def _plan_test(u, tg, expected):
    """("call", fn, cls, params, sets) for the test file's own functions, ("fail", exc) when a
    test function was replaced or refused, ("unverified",) for imported or decorated ones."""
    if u.get("imported"):
        return ("unverified",)
    name = u["name"] if "cls" in u else u["fn"]
    code = expected.get((name, u["lineno"]))
    cls = None
    if "cls" in u:
        cls = tg.get(u["cls"])
        if type(cls) is not type:
            return ("unverified",)
        fn = type.__dict__["__dict__"].__get__(cls).get(u["fn"])
    else:
        fn = tg.get(u["fn"])
    if code is None or type(fn) is not types.FunctionType:
        return ("unverified",)
    if fn.__code__ is not code:
        if fn.__code__.co_filename == TEST_FILE:
            return ("fail", pytest_shim.Failed("the test function %s was replaced" % u["name"]))
        return ("unverified",)
    if code.co_flags & _CO_GENERATOR:
        return ("fail", pytest_shim.Failed("'yield' keyword is allowed in fixtures, but not in tests (%s): pytest refuses this test" % u["name"]))
    sets, skip = _param_sets(tuple(fn.__dict__.get("pytestmark", ())))
    if skip is not None:
        return ("fail", pytest_shim.Skipped(skip))
    n = code.co_argcount + code.co_kwonlyargcount
    params = tuple(p for p in code.co_varnames[:n] if not (cls is not None and p == "self"))
    if cls is not None and code.co_argcount and code.co_varnames[0] == "self":
        params = tuple(code.co_varnames[1:n])
    return ("call", fn, cls, params, sets)


def run_functional(ctx, req, pl, units, start):
    # LiveCodeBench's harness loads a LeetCode-style program as a module ("tmp_sol"), not __main__.
    mod = ctx.new_module("solution")
    sys.modules["solution"] = mod
    sys.modules["__main__"] = ctx.new_module("__main__")
    g = mod.__dict__
    ctx.run_setup((ctx._exec, (LCB_PRELUDE, g)), (ctx._exec, (ctx.sol_code, g)))
    ctx.check_world()
    ctx.send({"m": Msg.READY})
    ctx.run_units([(i, _w_functional, (ctx.ws, g, req["fnName"], req["cases"][i]["input"], i)) for i in range(start, len(units))])


def _w_functional(ws, g, fn_name, text, i):
    import json

    args = [json.loads(line) for line in text.split("\n") if line.strip()]
    if "Solution" in g and isinstance(g["Solution"], type):
        target = getattr(g["Solution"](), fn_name)
    elif fn_name in g:
        target = g[fn_name]
    else:
        raise NameError("the program defines neither class Solution nor %s" % fn_name)
    value = target(*args)
    try:
        enc = json.dumps(value)
    except (TypeError, ValueError):
        enc = json.dumps(ws.repr_value(value))
    ws.record({"m": Msg.VALUE, "i": i, "v": enc[: 1 << 20]})


def run_stdio(ctx, req, pl, units, start):
    # One child per case: run the program as __main__; the server compares stdout.
    mod = ctx.new_module("__main__")
    sys.modules["__main__"] = mod
    g = mod.__dict__
    ctx.send({"m": Msg.BEGIN, "i": start})
    ctx.start_program()
    if not ctx.run_job(ctx.ws.setup_state(stdio=True), _w_stdio_flushed, (ctx._exec, LCB_PRELUDE, ctx.sol_code, g, SystemExit)):
        ctx.send({"m": Msg.SETUP_ERROR})
    ctx.send({"m": Msg.END, "i": start, "passed": True})


RUNNERS = {
    "humaneval": run_humaneval,
    "assert": run_assert,
    "pytest": run_pytest,
    "functional": run_functional,
    "stdio": run_stdio,
}
