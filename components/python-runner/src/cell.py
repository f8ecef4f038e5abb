"""Code-interpreter cells: general Python run in a session's live instance.

Unlike a REST block, a cell has no policy gate and no `store`: the boundary
is the WebAssembly instance alone (no network, no host files but the session
directory at /mnt/data, no environment but what the run passes). Its globals
persist from one cell to the next for as long as the host keeps the instance.
"""

import builtins
import gc
import linecache
import os
import sys
import traceback

import captured_output

SESSION_DIR = "/mnt/data"
# Set by the host, with no code, just before it saves the session's state:
# open file objects hold host handles that a restored instance would not
# have, so they are closed first and their names reported on stderr.
PARK_MARK = "ANYPATH_STATE_PARK"
_namespace = None
_cells_run = 0


def _session_namespace():
    """The globals every cell of this instance shares, made on first use."""
    global _namespace
    if _namespace is None:
        _namespace = {"__name__": "__main__", "__builtins__": builtins}
        # The snapshot disables the collector for one-shot REST instances; a
        # session lives long, so its cyclic garbage must be collected.
        gc.enable()
        try:
            os.chdir(SESSION_DIR)
        except OSError:
            pass  # a session without files still runs code
    return _namespace


def run(code, env, stdout_limit, stderr_limit):
    """Runs `code`; returns (stdout, stderr, error) where error is None or
    (type name, message, traceback of the cell's own frames, exit code)."""
    global _cells_run
    namespace = _session_namespace()
    env = dict(env)
    if env.pop(PARK_MARK, None):
        closed = captured_output.CappedStream(stderr_limit)
        closed.write("".join(name + "\n" for name in _close_open_files()))
        return captured_output.CappedStream(stdout_limit), closed, None
    _cells_run += 1
    filename = f"<cell-{_cells_run}>"
    # Kept for the session: tracebacks through functions of earlier cells show their lines.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    os.environ.clear()
    os.environ.update(env)
    stdout = captured_output.CappedStream(stdout_limit)
    stderr = captured_output.CappedStream(stderr_limit)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    error = None
    try:
        exec(compile(code, filename, "exec"), namespace)
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        if status != 0:
            error = ("SystemExit", str(exit.code), "", status)
    except BaseException as exc:  # the cell's failure is data, reported to the caller
        error = (type(exc).__name__, str(exc), _cell_traceback(exc), 1)
    finally:
        sys.stdout, sys.stderr = saved
    return stdout, stderr, error


def _close_open_files():
    """Closes every open file object past stdio; returns their names."""
    import io
    # Outermost first: a text wrapper flushes into its buffer, the buffer
    # into the raw file, before that one closes.
    import itertools
    kinds = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom, io.BufferedReader, io.FileIO)
    wanted = frozenset(kinds).__contains__
    objects = gc.get_objects()
    # Filtered without a Python-level loop: a large session holds many objects.
    found = list(itertools.compress(objects, map(wanted, map(type, objects))))
    del objects
    found.sort(key=lambda obj: kinds.index(type(obj)))
    closed = set()
    for obj in found:
        try:
            if obj.closed or obj.fileno() <= 2:
                continue
        except (OSError, ValueError):
            continue
        closed.add(str(getattr(obj, "name", "?")))
        try:
            obj.close()
        except OSError:
            pass
    return sorted(closed)


def _cell_traceback(exc):
    summary = traceback.TracebackException.from_exception(exc, capture_locals=False)
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if frame.filename.startswith("<cell-")])
    return "".join(summary.format())
