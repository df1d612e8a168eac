"""murphy-native executor: the warm harness.

One server process per pool worker (this module: the supervisor; planning.py plans the
tests, child.py runs them in the forked child with one runner per test kind, checks.py
classifies and judges reported values, compare.py compares outputs, messages.py names the
child's messages). It reads one JSON request per line on stdin, runs the
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

Results come back over a separate pipe (messages.py): the messages that count are
authenticated with a per-run key that only the child's harness thread holds (child.py); the
program's own exit status and its stdout never count as a pass. A test passes only when the
child's harness thread reports that test's end with its code returned, and a run succeeds only
when it reports that every test ran. The child never receives the expected outputs of
stdin/stdout and functional tests: those are compared here.
"""

import base64
import binascii
import collections
import ctypes
import hashlib
import hmac
import io
import json
import marshal
import os
import resource
import secrets
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

import _signal

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

from checks import WORLD_REF, World, judge  # noqa: E402
import child  # noqa: E402
from child import child_main, compile_tests  # noqa: E402
from common import CHILD_ENV, short as _short  # noqa: E402
from compare import outputs_match, values_match  # noqa: E402
from messages import AUTHENTICATED, RECORDS, Msg  # noqa: E402
from planning import plan  # noqa: E402

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


# --------------------------------------------------------------------------- server side


class Server:
    def __init__(self, args):
        if WORLD_REF[0] is None:
            WORLD_REF[0] = World()
        if child._PREPARED[0] is None:
            child.prepare(WORLD_REF[0])  # once, inherited by every child
        self.args = args
        # The children's environment, set once here (HOME and TMPDIR: each child's own directory,
        # set in the child); the server itself needs none of what it replaces.
        os.environ.clear()
        os.environ.update(CHILD_ENV)
        os.environ["TMPDIR"] = CHILD_ENV["HOME"]
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
        self.prepared = collections.OrderedDict()  # test_key -> (plan, units, compiled tests)

    def prepare_tests(self, req):
        """(plan, units, compiled tests) of the request's problem. Made once per problem and kept
        for the next programs of that problem (rollouts run many samples of each), up to
        PREPARED_MAX problems, the least recently used dropped first."""
        key = test_key(req)
        hit = self.prepared.get(key) if key is not None else None
        if hit is not None:
            self.prepared.move_to_end(key)
            return hit
        pl, units = plan(req)
        hit = (pl, units, compile_tests(req, pl, units))
        if key is not None:
            self.prepared[key] = hit
            if len(self.prepared) > PREPARED_MAX:
                self.prepared.popitem(last=False)
        return hit

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
    def spawn(self, req, pl, units, tests, start, workdir, stdin_data, cfg):
        key = secrets.token_bytes(16)
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
        # high, unguessable-ish fd for the result channel (drawn here: in the child, secrets'
        # code would fault in its pages)
        chan = 200 + secrets.randbelow(700)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
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
                # The server's environment is CHILD_ENV already (Server.__init__); setting it here
                # (os.environ's Python code) cost ~70 copy-on-write faults a child.
                os.environ["HOME"] = workdir
                os.environ["TMPDIR"] = workdir
                tempfile.tempdir = workdir
                sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace", write_through=False)
                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace", write_through=True)
                sys.__stdout__, sys.__stderr__, sys.__stdin__ = sys.stdout, sys.stderr, sys.stdin
                # _signal, not signal: the latter's enum conversions fault in ~25 pages
                _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
                _signal.signal(_signal.SIGINT, _signal.default_int_handler)
                _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
                _signal.signal(_signal.SIGHUP, _signal.SIG_DFL)
                child_main(child_request(req), pl, units, start, chan, key, cfg, tests)
            except BaseException:
                try:
                    os.write(2, traceback.format_exc().encode())
                finally:
                    os._exit(70)
            os._exit(0)
        os.close(w_chan)
        os.close(w_out)
        os.close(w_err)
        return pid, key, r_chan, r_out, r_err

    def run_child(self, req, pl, units, tests, start, workdir, cfg, per_test, deadline, stdin_data=None):
        """Run one child; returns (messages, stdout bytes, stderr bytes, ended_by, cur)."""
        pid, key, r_chan, r_out, r_err = self.spawn(req, pl, units, tests, start, workdir, stdin_data, cfg)
        reader = ChannelReader(key)
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
                        m = reader.read(line)
                        if m is None:
                            continue
                        msgs.append(m)
                        kindm = m.get("m")
                        if kindm == Msg.BEGIN:
                            cur = m["i"]
                            test_deadline = min(time.monotonic() + per_test, deadline)
                        elif kindm == Msg.END:
                            cur = None
                            test_deadline = min(time.monotonic() + per_test, deadline)
                        elif kindm == Msg.READY:
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
            "forged": reader.forged,
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
            pl, units, tests = self.prepare_tests(req)
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
                    r = self.run_child(req, pl, units, tests, i, workdir, cfg, per_test, deadline, stdin_data=case["input"])
                    stderr_all += r["stderr"][: max(0, int(cfg["outBytes"]) - len(stderr_all))]
                    res = {"passed": False}
                    setup_detail = next((m for m in reversed(r["msgs"]) if m["m"] == Msg.DETAIL and m.get("setup")), None)
                    errs = [dict(m, err=m.get("err") or _setup_err(setup_detail)) for m in r["msgs"] if m["m"] in (Msg.SETUP_ERROR, Msg.SYNTAX_ERROR)]
                    done = any(m["m"] == Msg.DONE for m in r["msgs"])
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
                    elif r["forged"]:
                        res.update({"errorType": "Tampering", "message": "the program forged %s on the harness's result channel" % r["forged"]})
                    elif errs:
                        res.update(errs[0]["err"])
                        if errs[0]["m"] == Msg.SYNTAX_ERROR:
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
                    r = self.run_child(req, pl, units, tests, start, workdir, cfg, per_test, deadline)
                    stdout_all += r["stdout"][: max(0, int(cfg["outBytes"]) - len(stdout_all))]
                    stderr_all += r["stderr"][: max(0, int(cfg["outBytes"]) - len(stderr_all))]
                    ready = False
                    done = False
                    values = {}
                    details = {}
                    check_fb = {}
                    setup_detail = None
                    if r["forged"] and not tampered:
                        tampered.append("forged %s on the harness's result channel" % r["forged"])
                    for m in r["msgs"]:
                        k = m["m"]
                        if k == Msg.SYNTAX_ERROR:
                            syntax_error = m["err"]
                        elif k == Msg.SETUP_ERROR:
                            setup_error = m.get("err") or _setup_err(setup_detail)
                        elif k == Msg.DETAIL:
                            if m.get("setup"):
                                setup_detail = m
                            elif isinstance(m.get("i"), int):
                                details[m["i"]] = m
                        elif k == Msg.READY:
                            ready = True
                        elif k == Msg.VALUE:
                            values[m["i"]] = m["v"]
                        elif k == Msg.CHECK or k == Msg.UNTRUSTED:
                            i = m.get("i")
                            if not isinstance(i, int):
                                continue
                            checked.add(i)
                            if k == Msg.CHECK and "actual" in m and i not in check_fb:
                                check_fb[i] = (str(m["actual"]), str(m.get("expected")))
                            if i not in verdicts:
                                v = judge(m) if k == Msg.CHECK else (
                                    "UntrustedValue",
                                    "the candidate returned a %s object whose class (the program's own) defines comparison, "
                                    "truth or arithmetic: return plain data" % _short(str(m.get("type")), 80))
                                if v is not None:
                                    verdicts[i] = v
                        elif k == Msg.TAMPER:
                            if not tampered:
                                tampered.append(_short(str(m.get("what")), 120))
                        elif k == Msg.END:
                            i = m["i"]
                            res = unit_result(m, details.get(i), check_fb.get(i))
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
                        elif k == Msg.DONE:
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


# Problems whose plan and compiled tests a server keeps (Server.prepare_tests).
PREPARED_MAX = 64


def test_key(req):
    """What a problem's tests are made of (the cache key of Server.prepare_tests), or None for the
    kinds with nothing to compile (stdin/stdout and functional cases)."""
    kind = req["kind"]
    if kind == "humaneval":
        return (kind, req["test"], req["entryPoint"])
    if kind == "assert":
        return (kind, tuple(req["asserts"]), req.get("setup") or "", req.get("imports") or "")
    if kind == "pytest":
        return (kind, req["testCode"])
    return None


NOT_RUN = {"passed": False, "status": "notrun", "errorType": "NotRun", "message": "not run: an earlier test timed out"}


def child_request(req):
    """The request as the child sees it: without the expected outputs of stdin/stdout and
    functional tests (compared here), so no code in the child can read them."""
    if req.get("kind") in ("stdio", "functional"):
        req = dict(req)
        req["cases"] = [{"input": c["input"]} for c in req["cases"]]
    return req


class ChannelReader:
    """Parses the child's result channel (messages.py). Authenticated messages must carry a
    valid MAC and the next number; records get the index of the test they arrived in. Anything
    forged on the way (a bad MAC, a gap, a record of an authenticated kind) sets `forged`."""

    def __init__(self, key):
        self.key = key
        self.seq = 0
        self.cur = None
        self.forged = None

    def _payload(self, b):
        m = marshal.loads(binascii.a2b_base64(b))
        return m if type(m) is dict and type(m.get("m")) is str else None

    def read(self, line):
        try:
            if line[:2] == b"A ":
                _, mac, payload = line.split(b" ", 2)
                want = hashlib.blake2b(payload, key=self.key, digest_size=16).hexdigest().encode("ascii")
                if not hmac.compare_digest(want, mac):
                    self.forged = self.forged or "a message with a wrong key"
                    return None
                m = self._payload(payload)
                if m is None or m.get("s") != self.seq or m["m"] not in AUTHENTICATED:
                    self.forged = self.forged or "a message out of sequence"
                    return None
                self.seq += 1
                m["auth"] = True
                if m["m"] == Msg.BEGIN:
                    self.cur = m.get("i")
                elif m["m"] == Msg.END:
                    self.cur = None
                return m
            if line[:2] == b"R ":
                m = self._payload(line[2:])
                if m is None:
                    return None
                if m["m"] not in RECORDS:
                    self.forged = self.forged or "an unauthenticated %s message" % _short(m["m"], 40)
                    return None
                m["auth"] = False
                if type(m.get("i")) is not int:
                    m["i"] = self.cur
                return m
        except (ValueError, TypeError, EOFError, binascii.Error):
            return None
        return None


def _setup_err(detail):
    if not detail:
        return {"errorType": "Error", "message": "the program's module-level code did not finish", "traceback": ""}
    return {k: detail[k] for k in ("errorType", "message", "traceback", "lineno", "text", "file") if k in detail}


def unit_result(m, detail, check_fb):
    """A test's result from its authenticated end, the worker's detail record and the first
    failing == check's feedback."""
    detail = detail or {}
    res = {"passed": bool(m.get("passed")), "ms": detail["ms"] if isinstance(detail.get("ms"), float) else 0.0}
    if "output" in detail:
        res["output"] = str(detail["output"])
    if not res["passed"]:
        for k in ("errorType", "message", "traceback", "lineno", "text", "file", "status"):
            if k in detail:
                res[k] = detail[k]
        res.setdefault("errorType", "Error")
        res.setdefault("message", "the test did not return")
        if res["errorType"] == "AssertionError" and check_fb is not None:
            res["actual"], res["expected"] = check_fb
    return res


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
