"""Planning (trusted, in the supervisor): parse the tests and decide the list of test
units; the child only executes unit i. Each unit: {"name", "source", ...}."""

import ast

from common import TEST_FILE, short as _short

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
