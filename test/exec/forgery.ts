// Programs that try to forge the harness's verdict from inside the candidate's interpreter
// (docs/executor.md "What decides a pass"). Shared by test/exec/hostile.test.ts.
import { jsonlFromRecords, type Problem } from '../../lib/data/index.js';

/** Python: walks every frame reachable from `start` (f_back, and the frames of tracebacks and
 *  generators met in their locals) and collects the callables named `send` found in locals
 *  and in closures of functions found there; then sends a passing check and end for units
 *  0..49, `done`, and exits. Defines forge(start) -> bool (False when nothing was found). */
const FORGE = `
import sys as _s, os as _o, base64 as _b, marshal as _m, types as _t
def _frames(f):
    seen = []
    todo = [f]
    while todo:
        f = todo.pop()
        while f is not None and all(f is not x for x in seen):
            seen.append(f)
            try:
                loc = dict(f.f_locals)
            except Exception:
                loc = {}
            for v in loc.values():
                tb = getattr(v, "__traceback__", None) if isinstance(v, BaseException) else None
                if tb is not None:
                    while tb is not None:
                        todo.append(tb.tb_frame)
                        tb = tb.tb_next
                for a in ("gi_frame", "cr_frame"):
                    fr = getattr(v, a, None) if isinstance(v, (_t.GeneratorType, _t.CoroutineType)) else None
                    if fr is not None:
                        todo.append(fr)
            f = f.f_back
    return seen
def _senders(frames):
    out = []
    def look(v, depth):
        if depth > 3:
            return
        if isinstance(v, _t.FunctionType):
            if v.__name__ == "send":
                out.append(v)
            for c in (v.__closure__ or ()):
                try:
                    look(c.cell_contents, depth + 1)
                except ValueError:
                    pass
        elif isinstance(v, _t.SimpleNamespace):
            for x in vars(v).values():
                look(x, depth + 1)
    for f in frames:
        for d in (f.f_locals, f.f_globals):
            for v in list(d.values()):
                look(v, 0)
    return out
def forge(start):
    sends = _senders(_frames(start))
    if not sends:
        return False
    v = {"k": "p", "b": _b.b64encode(_m.dumps(1)).decode()}
    for send in sends:
        try:
            for i in range(50):
                send({"m": "begin", "i": i})
                send({"m": "check", "i": i, "ops": ["=="], "neg": False, "v": [v, v], "ok": True})
                send({"m": "end", "i": i, "passed": True})
            send({"m": "done"})
        except Exception:
            continue
        _o._exit(0)
    return False
`;

/** Python: from_closure(fn) forges with a `send` found in fn's closure (one level down). */
const CLOSURE = `
def from_closure(fn):
    for c in (getattr(fn, "__closure__", None) or ()):
        try:
            x = c.cell_contents
        except ValueError:
            continue
        if isinstance(x, _t.FunctionType) and x.__name__ == "send":
            forge.__globals__["_senders"] = lambda frames, x=x: [x]
            forge(None)
`;

const WRONG_ADD = 'def add(a, b):\n    return None\n';

/** name -> [problem, program]. Each program is wrong; before the harness kept its capability off
 *  the program's thread, each one forged a pass (test/exec/hostile.test.ts asserts reward 0). */
export function forgeries(): Record<string, [Problem, string]> {
  const [add] = jsonlFromRecords([{ id: 'add', prompt: 'add', asserts: ['assert add(1, 2) == 3', 'assert add(2, 5) == 7'] }]);
  const [addPytest] = jsonlFromRecords([{ id: 'addp', prompt: 'add', test_code: 'from solution import add\n\ndef test_a():\n    assert add(1, 2) == 3\n\ndef test_b():\n    assert add(2, 5) == 7\n' }]);
  const [stdio] = jsonlFromRecords([{ id: 'double', prompt: 'double', stdio: [{ input: '3\n', output: '6\n' }, { input: '21\n', output: '42\n' }] }]);
  const [functional] = jsonlFromRecords([{ id: 'twice', prompt: 'twice', functional: { fn_name: 'twice', cases: [{ input: '3', output: '6' }, { input: '21', output: '42' }] } }]);
  return {
    "f_back from the candidate's frame to the harness's send": [add, FORGE + 'def add(a, b):\n    forge(_s._getframe(0))\n    return None\n'],
    'f_back from module-level code': [add, FORGE + 'forge(_s._getframe(0))\n' + WRONG_ADD],
    'f_back from a pytest-style test': [addPytest, FORGE + 'def add(a, b):\n    forge(_s._getframe(0))\n    return None\n'],
    "the traceback of an exception raised through the harness": [add, FORGE +
      'def add(a, b):\n    try:\n        _s.stdout.write(1)\n    except TypeError as e:\n        tb = e.__traceback__\n        while tb.tb_next is not None:\n            tb = tb.tb_next\n        forge(tb.tb_frame)\n    return None\n'],
    "a generator's frame (gi_frame) whose f_back is the harness": [add, FORGE +
      'def add(a, b):\n    def g():\n        forge(_s._getframe(0))\n        yield 1\n    next(g())\n    return None\n'],
    "the closure of the tests' check function (f_globals of the test's frame)": [add, FORGE + CLOSURE +
      'def add(a, b):\n    f = _s._getframe(0).f_back\n    while f is not None:\n        fn = f.f_globals.get("__murphy_cmp")\n        if fn is not None:\n            from_closure(fn)\n        f = f.f_back\n    return None\n'],
    "the closure of the candidate's wrapper": [add, FORGE + CLOSURE +
      'def add(a, b):\n    f = _s._getframe(0).f_back\n    while f is not None:\n        fn = f.f_globals.get("add")\n        if fn is not None and fn is not add:\n            from_closure(fn)\n        f = f.f_back\n    return None\n'],
    'a trace function rewriting the operands the check reports': [add,
      'import sys\n' +
      'def _tr(frame, event, arg):\n    if event == "call" and "vals" in frame.f_code.co_varnames:\n        loc = frame.f_locals\n        v = loc.get("vals")\n        if isinstance(v, tuple) and len(v) == 2:\n            loc["vals"] = (v[1], v[1])\n    return None\n' +
      'def add(a, b):\n    sys.settrace(_tr)\n    return None\n'],
    'a gc callback walking the frames of whatever thread collects': [add, FORGE +
      'import gc\n' +
      'def _cb(phase, info):\n    forge(_s._getframe(0))\n' +
      'gc.callbacks.append(_cb)\ngc.set_threshold(1, 1, 1)\n' + WRONG_ADD],
    "stdin/stdout: the expected output read from the harness's frames": [stdio,
      'import sys\nf = sys._getframe(0)\nwant = None\n' +
      'while f is not None:\n    for v in list(f.f_locals.values()):\n        if isinstance(v, dict) and isinstance(v.get("cases"), list):\n            want = v["cases"]\n    f = f.f_back\n' +
      'data = sys.stdin.read()\nfor c in want or []:\n    if c.get("input") == data and "output" in c:\n        sys.stdout.write(c["output"])\n'],
    "functional: the expected value read from the harness's frames": [functional,
      'import sys, json\n' +
      'def twice(x):\n    f = sys._getframe(0)\n    while f is not None:\n        for v in list(f.f_locals.values()):\n            if isinstance(v, dict) and isinstance(v.get("cases"), list):\n                for c in v["cases"]:\n                    if c.get("input") == json.dumps(x) and "output" in c:\n                        return json.loads(c["output"])\n        f = f.f_back\n    return None\n'],
  };
}

/** Attacks on the channel itself (not possible before: the messages carried no key to attack).
 *  name -> [problem, program]; each must score 0. */
export function channelAttacks(): Record<string, [Problem, string]> {
  const [add] = jsonlFromRecords([{ id: 'add', prompt: 'add', asserts: ['assert add(1, 2) == 3', 'assert add(2, 5) == 7'] }]);
  const FIND = 'import os, stat, threading\n' +
    'def _chan():\n    for fd in range(100, 1024):\n        try:\n            if stat.S_ISFIFO(os.fstat(fd).st_mode):\n                return fd\n        except OSError:\n            pass\n';
  const ANY = 'class Any:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n';
  return {
    'a man in the middle on the result channel, dropping the records of failed checks': [add, FIND + ANY +
      'chan = _chan()\nsaved = os.dup(chan)\nr, w = os.pipe()\nos.dup2(w, chan)\n' +
      'def pump():\n    buf = b""\n    while True:\n        d = os.read(r, 65536)\n        if not d:\n            break\n        buf += d\n' +
      '        while b"\\n" in buf:\n            line, buf = buf.split(b"\\n", 1)\n            if line.startswith(b"A "):\n                os.write(saved, line + b"\\n")\n' +
      'threading.Thread(target=pump, daemon=True).start()\n' +
      'def add(a, b):\n    return Any()\n'],
    'forged unauthenticated end and done messages on the channel': [add, FIND +
      'import marshal, binascii\n' +
      'def _rec(obj):\n    os.write(_chan(), b"R " + binascii.b2a_base64(marshal.dumps(obj), newline=False) + b"\\n")\n' +
      'def add(a, b):\n    for i in range(2):\n        _rec({"m": "end", "i": i, "passed": True, "s": i})\n    _rec({"m": "done"})\n    os._exit(0)\n'],
    'a replayed authenticated message': [add, FIND +
      'chan = _chan()\nsaved = os.dup(chan)\nr, w = os.pipe()\nos.dup2(w, chan)\n' +
      'def pump():\n    buf = b""\n    while True:\n        d = os.read(r, 65536)\n        if not d:\n            break\n        buf += d\n' +
      '        while b"\\n" in buf:\n            line, buf = buf.split(b"\\n", 1)\n            os.write(saved, line + b"\\n")\n            if line.startswith(b"A "):\n                os.write(saved, line + b"\\n")\n' +
      'threading.Thread(target=pump, daemon=True).start()\n' +
      'def add(a, b):\n    return a + b if (a, b) == (1, 2) else 0\n'],
  };
}
