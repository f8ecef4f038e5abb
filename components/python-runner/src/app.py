"""The runner component: gate a block, run it against `store` and `ctx`, report.

componentize-py executes this module once at build time and snapshots the
result, so everything imported or exercised here is already in memory when an
instance starts. Blocks have no files, network or environment: the component
gets none of them from the host.
"""

import ast
import gc
import json
import linecache
import os
import sys
import traceback

import wit_world
from componentize_py_types import Err
from wit_world.imports import store as host_store
from wit_world.imports import types as wit

import captured_output
import cell
import cell_loop  # noqa: F401  (imported for the snapshot: cells load it on their first `await`)
import cell_stdlib  # noqa: F401  (imported for the snapshot)
import pip_libraries  # noqa: F401  (imported for the snapshot, after the standard library)
import policy_gate
import reply
import resource_store
import restricted_env

_BLOCK_FILENAME = "<block>"
_MISSING = object()
# Deep enough for ordinary code, shallow enough that CPython raises
# RecursionError long before the WebAssembly stack is exhausted.
sys.setrecursionlimit(400)

# Run by the `warm-up` export, whose `store` calls the host serves from its
# fixed `warm` collection.
_WARM_UP_BLOCK = """
import json
rows = store.search({"name__icontains": "a", "age__gte": 1})
page = store.list(limit=1, offset=0, sort="-age")
new_id = store.insert({"name": "warm"})
store.patch(new_id, {"age": 3})
REPLY = {"status": 200, "headers": {"X-Warm": "1"}, "body": {"n": len(rows), "p": page, "c": ctx["path"]}}
"""
# Run at build time, where no import can be called: the same work without `store`.
_BUILD_WARM_UP_BLOCK = """
import json
rows = json.loads(json.dumps([{"id": 1, "name": "ada", "age": 2}], ensure_ascii=False))
REPLY = {"status": 200, "headers": {"X-Warm": "1"}, "body": {"n": len(rows), "p": rows, "c": ctx["path"]}}
"""


class _Failed(Exception):
    def __init__(self, kind):
        self.kind = kind


def _run(code, ctx_json, names, limits, gated, checked):
    """Runs one block. What it changed and read is the host's record, and so
    are the verdicts that depend on it (a partial load, the result cap)."""
    stdout = captured_output.CappedStream(limits.stdout_bytes)
    stderr = captured_output.CappedStream(limits.stderr_bytes)
    try:
        store = resource_store.Store(names, host_store.call)
        result = _execute(code, ctx_json, store, gated, checked, stdout, stderr)
        return wit.Success(reply=result, output=_output(stdout, stderr))
    except _Failed as failed:
        raise Err(wit.Failure(kind=failed.kind, output=_output(stdout, stderr)))


def _gate(code, gated):
    """The checked tree of `code`; a refusal or a parse error fails the block."""
    try:
        tree = ast.parse(code, filename=_BLOCK_FILENAME, mode="exec")
        if gated:
            policy_gate.check(tree)
        return tree
    except policy_gate.PolicyError as refused:
        raise _Failed(wit.FailureKind_Policy(wit.PolicyViolation(
            node=refused.node_type, line=refused.line, column=refused.column, message=refused.message)))
    except SyntaxError as bad:
        raise _Failed(wit.FailureKind_Policy(wit.PolicyViolation(
            node="SyntaxError", line=bad.lineno or 0, column=max((bad.offset or 1) - 1, 0),
            message=f"syntax error: {bad.msg}")))


def _execute(code, ctx_json, store, gated, checked, stdout, stderr):
    # Gated by the host already (`checked`), the source is compiled at once,
    # without the tree as Python objects; otherwise the guest's own gate
    # walks the tree first and the tree is compiled.
    tree = None if checked else _gate(code, gated)
    namespace = restricted_env.block_globals(store, json.loads(ctx_json), gated)
    linecache.cache[_BLOCK_FILENAME] = (len(code), None, code.splitlines(True), _BLOCK_FILENAME)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    try:
        if tree is not None:
            program = compile(tree, _BLOCK_FILENAME, "exec")
        else:
            try:
                program = compile(code, _BLOCK_FILENAME, "exec")
            except SyntaxError:
                # The verdict the guest's gate gives it: a parse error fails
                # the block as refused (raised from here); an error only
                # compiling finds (`return` outside a function) is the
                # block's exception, as when the checked tree is compiled.
                _gate(code, gated)
                raise
        exec(program, namespace)
    except _Failed:
        raise
    except BaseException as exc:  # the block's failure is data, reported to the caller
        raise _Failed(wit.FailureKind_Exception(_exception_info(exc))) from None
    finally:
        sys.stdout, sys.stderr = saved

    try:
        status, headers, body_json = reply.build(namespace, _MISSING)
    except reply.InvalidReply as invalid:
        raise _Failed(wit.FailureKind_InvalidReply(str(invalid)))
    return wit.Reply(status=status, headers=headers, body_json=body_json)


def _exception_info(exc):
    summary = traceback.TracebackException.from_exception(exc, capture_locals=False)
    # Only the block's own frames: the runner's are noise to whoever repairs the block.
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if frame.filename == _BLOCK_FILENAME])
    return wit.ExceptionInfo(
        type_name=type(exc).__name__,
        message=str(exc),
        traceback="".join(summary.format()),
    )


def _output(stdout, stderr):
    return wit.CapturedOutput(
        stdout=stdout.getvalue(),
        stdout_truncated=stdout.truncated,
        stderr=stderr.getvalue(),
        stderr_truncated=stderr.truncated,
    )


class WitWorld(wit_world.WitWorld):
    """Exports of the `runner` world."""

    def warm_up(self):
        _warm_up(_WARM_UP_BLOCK, ["warm"])

    def execute(self, input):
        try:
            return _run(input.code, input.ctx_json, input.collections, input.limits, input.policy_gate,
                        input.policy_gate and input.gate_checked)
        except Err:
            raise
        except Exception as exc:  # a runner bug must come back as data, not a trap
            empty = wit.CapturedOutput(stdout="", stdout_truncated=False, stderr="", stderr_truncated=False)
            raise Err(wit.Failure(kind=wit.FailureKind_Internal(f"{type(exc).__name__}: {exc}"), output=empty))

    def run_cell(self, input):
        return _run_cell(input)


# Whether this instance opened its stdout stream yet (`_claim_stdout`).
_stdout_claimed = False


def _claim_stdout():
    """Opens the host's stdout stream at the start of an instance's first
    cell, whether or not the cell streams. Live output goes out on file
    descriptor 1, and libc keeps the stream's handle in memory: a state image
    carries that number, and the instance it is restored into (whose first
    cell is an empty prologue) must hold the same stream under it. Opened
    only by the first live write, the numbers differed and the restored
    instance's first live write trapped. The byte goes to the host's pipe,
    which drops what no cell asked for."""
    global _stdout_claimed
    if not _stdout_claimed:
        _stdout_claimed = True
        os.write(1, b"\n")


def _run_cell(input):
    _claim_stdout()
    stdout, stderr, error, results = cell.run(
        input.code, dict(input.env), input.stdout_bytes, input.stderr_bytes,
        input.result_bytes, input.figure_formats, input.live)
    info = None
    exit_code = 0
    if error is not None:
        type_name, message, trace, exit_code = error
        info = wit.ExceptionInfo(type_name=type_name, message=message, traceback=trace)
    return wit.CellOutput(output=_output(stdout, stderr), results=[_result(r) for r in results], error=info, exit_code=exit_code)


_ORIGINS = {"value": wit.ResultOrigin.VALUE, "display": wit.ResultOrigin.DISPLAY, "figure": wit.ResultOrigin.FIGURE}


def _result(entry):
    return wit.CellResult(
        origin=_ORIGINS[entry["origin"]], mime=list(entry["mime"].items()),
        truncated=entry["truncated"], error=entry["error"])


def _warm_up(block, names):
    limits = wit.OutputLimits(stdout_bytes=1024, stderr_bytes=1024)
    # Both ways a block is compiled: gated here, and gated by the host.
    for checked in (False, True):
        _run(block, json.dumps({"path": "/warm"}), names, limits, True, checked)


# Exercise the parser, compiler, gate and reply now, so the snapshot holds
# their state; the `store` import cannot be called before an instance runs.
_warm_up(_BUILD_WARM_UP_BLOCK, [])
# An instance serves one request and is then discarded whole, so cyclic
# garbage never needs collecting; the collector would only walk (and dirty)
# the snapshot's pages. The memory cap still bounds what a block allocates.
gc.collect()
gc.freeze()
gc.disable()
