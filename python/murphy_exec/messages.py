"""The messages a child sends its supervisor over the result pipe, one per line.

- "A <mac> <payload>": authenticated, from the harness thread only (child.py). payload is
  base64(marshal(dict)); mac is blake2b(payload, key=the run's key, 16 bytes) in hex. Each
  carries "s", its number: 0, 1, 2, ... with no gap (a dropped or replayed message is seen).
- "R <payload>": a record, unauthenticated, from worker threads (the program could write it
  too). Records can only make a test fail or add feedback; they never make one pass.

python/murphy_exec/server.py reads them and attributes records to the test between the
authenticated begin and end around them."""


class Msg:
    # authenticated
    SYNTAX_ERROR = "syntax_error"  # {err}: the candidate does not compile
    SETUP_ERROR = "setup_error"  # {err?}: module-level code failed (or exited) before the tests (details: a detail record)
    READY = "ready"  # the tests are about to run (the per-test clock restarts)
    BEGIN = "begin"  # {i}: test i starts
    END = "end"  # {i, passed, ms}: test i ended; passed: its code returned (the generator's state)
    DONE = "done"  # every test ran
    # records (and TAMPER also authenticated)
    VALUE = "value"  # {v}: the JSON value a functional test's call returned
    CHECK = "check"  # {ops, neg, v, ok, actual?, expected?}: an assert's operands, judged again by the supervisor
    UNTRUSTED = "untrusted"  # {type}: the candidate returned an object with behaviour of its own
    DETAIL = "detail"  # {output, errorType?, message?, traceback?, status?, setup?}: feedback on a test or the setup
    TAMPER = "tamper"  # {what}: the program changed the interpreter or the harness


AUTHENTICATED = frozenset((Msg.SYNTAX_ERROR, Msg.SETUP_ERROR, Msg.READY, Msg.BEGIN, Msg.END, Msg.DONE, Msg.TAMPER))
RECORDS = frozenset((Msg.VALUE, Msg.CHECK, Msg.UNTRUSTED, Msg.DETAIL, Msg.TAMPER))
