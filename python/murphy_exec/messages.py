"""The messages a child sends its supervisor over the result pipe (one JSON object per line,
{"m": <type>, "t": <the run's token>, ...}). python/murphy_exec/server.py reads them."""


class Msg:
    SYNTAX_ERROR = "syntax_error"  # {err}: the candidate does not compile
    SETUP_ERROR = "setup_error"  # {err}: module-level code failed (or exited) before the tests
    READY = "ready"  # the tests are about to run (the per-test clock restarts)
    BEGIN = "begin"  # {i}: test i starts
    VALUE = "value"  # {i, v}: the JSON value a functional test's call returned
    CHECK = "check"  # {i, ops, neg, v, ok}: an assert's operands, judged again by the supervisor
    UNTRUSTED = "untrusted"  # {i, type}: the candidate returned an object with behaviour of its own
    TAMPER = "tamper"  # {what}: the program changed the interpreter or the harness
    END = "end"  # {i, passed, ...}: test i ended
    DONE = "done"  # every test ran
