"""Code-interpreter cells: general Python run in a session's live instance.

Unlike a REST block, a cell has no policy gate and no `store`: the boundary
is the WebAssembly instance alone (no network, no host files but the session
directory at /mnt/data, no environment but what the run passes). Its globals
persist from one cell to the next for as long as the host keeps the instance.
"""

import ast
import builtins
import gc
import linecache
import os
import signal
import sys
import traceback

import captured_output
import ipython_display
import rich_output

SESSION_DIR = "/mnt/data"
# Where a cell's own modules import from, first to last: the session's
# folder, then its `src/`.
MODULE_FOLDERS = (SESSION_DIR, SESSION_DIR + "/src")
# Where `pip install` (a command, in another instance) puts packages: pip's
# user site, in the session's files, so they hibernate, fork and move with
# it. Last on `sys.path`, as in CPython: the runtime's own packages win.
USER_SITE = "%s/.local/lib/python%d.%d/site-packages" % (SESSION_DIR, *sys.version_info[:2])
# Set by the host, with no code, just before it saves the session's state:
# open file objects hold host handles that a restored instance would not
# have, so they are closed first and their names reported on stderr.
PARK_MARK = "ANYPATH_STATE_PARK"
# Set by the host, with no code, as the first call of an instance a saved
# state is about to be restored (or mapped) into: the state refers to the
# host handles a first cell takes (the stdout the caller claimed, then the
# preopened directories entering the session's directory takes) by number,
# so they are taken in that order, and nothing else is done: the state
# replaces the rest of memory, and a whole empty cell would only write
# pages (about 2 MiB) that it throws away.
PROLOGUE_MARK = "ANYPATH_STATE_PROLOGUE"
_namespace = None
_cells_run = 0
# The run's results while it goes on: `display()` and `plt.show()` add to it.
_results = None
# The event loop cells with top-level `await` run on, made on first use.
_loop = None
# The environment the last run was given, and `os.environ`'s own data right
# after it was applied: a run given the same one, in an environment no cell
# changed since, keeps it as it is.
_env_applied = None


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
        # As in Jupyter and plain Python run from a folder: a module written
        # next to the code (or in its `src/`) imports.
        for folder in reversed(MODULE_FOLDERS):
            if folder not in sys.path:
                sys.path.insert(0, folder)
        if USER_SITE not in sys.path:
            sys.path.append(USER_SITE)
        # Their compiled copies would land beside them, in the session's
        # files (and among a run's artifacts).
        sys.dont_write_bytecode = True
        # As in IPython, `display` needs no import, in cells and in the
        # modules they load; `IPython.display` imports too.
        builtins.display = display
        ipython_display.install(display)
        # No one can type into a sandbox: input() says so at once, instead
        # of reading an empty stdin or waiting for a line that never comes.
        builtins.input = _no_input
        # As in a notebook kernel, SIGINT raises KeyboardInterrupt: the host
        # interrupts a run by tripping it, and the session keeps its state.
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        except (OSError, ValueError):
            pass  # then an interrupt resets the session instead
    return _namespace


class StdinNotImplementedError(EOFError):
    """`input()` in a session, which has no stdin (named as in IPython; an
    EOFError, so code that handles end of input still does)."""


def _no_input(prompt=""):
    raise StdinNotImplementedError("input() is not available: this session has no stdin; pass values in the code, a file or an environment variable")


def display(*objects, include=None, exclude=None, metadata=None, transient=None, display_id=None, raw=False, clear=False, **_options):
    """Shows each object as a result of the run, in order, as IPython's
    `display`: in the MIME types `include` names (all when None) but those
    `exclude` names; with `raw`, each object is a MIME bundle (a dict of MIME
    type to data) shown as it is. With a `display_id`, returns a handle to
    show more under it."""
    if _results is not None:
        for obj in objects:
            if raw:
                _results.show_raw(obj, "display")
            else:
                _results.show(obj, "display", include, exclude)
    if display_id:
        return ipython_display.DisplayHandle(None if display_id is True else display_id)
    return None


def _show_figures(*_args, **_kwargs):
    """`plt.show()` in a cell: every open figure becomes a result, then closes."""
    if _results is None:
        return
    for figure in rich_output.open_figures():
        _results.figure(figure)
    rich_output.close_figures()


def _flush_figures():
    """At a cell's end, as a notebook's inline backend: the figures still
    open and not shown yet become results; all are closed."""
    for figure in _results.unshown(rich_output.open_figures()):
        _results.figure(figure)
    rich_output.close_figures()


def run(code, env, stdout_limit, stderr_limit, result_limit=0, figure_formats=("png",), stream=False):
    """Runs `code`; returns (stdout, stderr, error, results) where error is
    None or (type name, message, traceback of the cell's own frames, exit
    code) and results the run's `rich_output` entries. With `stream`, output
    and results also reach the host as they are made."""
    global _cells_run, _results
    namespace = _session_namespace()
    env = dict(env)
    if env.pop(PROLOGUE_MARK, None):
        return captured_output.CappedStream(stdout_limit), captured_output.CappedStream(stderr_limit), None, []
    if env.pop(PARK_MARK, None):
        closed = captured_output.CappedStream(stderr_limit)
        closed.write("".join(name + "\n" for name in _close_open_files()))
        return captured_output.CappedStream(stdout_limit), closed, None, []
    _cells_run += 1
    # A module an earlier cell (or an upload) wrote since the last import
    # attempt is found: the import system caches its folders' listings.
    # Only theirs are dropped: `importlib.invalidate_caches()` would visit
    # every finder on every cell.
    for folder in MODULE_FOLDERS:
        finder = sys.path_importer_cache.get(folder)
        if finder is not None:
            finder.invalidate_caches()
    # The user site: also when an import found it missing (cached as None),
    # since `pip` may have made it since.
    finder = sys.path_importer_cache.get(USER_SITE, False)
    if finder is None:
        del sys.path_importer_cache[USER_SITE]
    elif finder is not False:
        finder.invalidate_caches()
    filename = f"<cell-{_cells_run}>"
    # Kept for the session: tracebacks through functions of earlier cells show their lines.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    _apply_env(env)
    live = rich_output.LiveChannel() if stream else None
    stdout = captured_output.CappedStream(stdout_limit, live, "stdout")
    stderr = captured_output.CappedStream(stderr_limit, live, "stderr")
    results = rich_output.Results(result_limit, stdout_limit, figure_formats, live)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    _results = results
    _take_over_libraries()
    error = None
    try:
        value = _execute(code, filename, namespace)
        if value is not None:
            namespace["_"] = value
            results.show(value, "value")
        _flush_figures()
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        if status != 0:
            error = ("SystemExit", str(exit.code), "", status)
    except BaseException as exc:  # the cell's failure is data, reported to the caller
        error = (type(exc).__name__, str(exc), _cell_traceback(exc), 1)
    finally:
        sys.stdout, sys.stderr = saved
        _results = None
    if error is not None:
        # A failed cell leaves no figure behind for the next one.
        rich_output.close_figures()
    return stdout, stderr, error, results.entries


def _apply_env(env):
    """Makes `env` the run's whole environment, as if cleared and set anew.
    Clearing and setting calls `unsetenv` and `putenv` per variable, a good
    part of a one-line cell's instructions, so a run given the environment
    the last one was, which no cell has changed since, is left as it is."""
    global _env_applied
    data = getattr(os.environ, "_data", None)
    if data is not None and _env_applied is not None and _env_applied[0] == env and _env_applied[1] == data:
        return
    os.environ.clear()
    os.environ.update(env)
    _env_applied = (env, dict(data)) if data is not None else None


def _execute(code, filename, namespace):
    """Runs the cell as a notebook does; returns its last expression's value
    (None when its last statement is not an expression or ends with `;`)."""
    try:
        tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as exc:
        magic = _magic_refusal(exc, code)
        if magic is not None:
            raise magic from None
        raise
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not _silenced(code, tree.body[-1]):
        last = ast.Expression(tree.body.pop().value)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    _run_code(compile(tree, filename, "exec", flags), namespace)
    if last is None:
        return None
    return _run_code(compile(last, filename, "eval", flags), namespace)


def _run_code(compiled, namespace):
    """Evaluates a compiled cell part; one with top-level `await` runs to
    its end on the session's event loop."""
    if compiled.co_flags & _CO_COROUTINE:
        return _event_loop().run_until_complete(eval(compiled, namespace))
    return eval(compiled, namespace)


_CO_COROUTINE = 0x0080


def _event_loop():
    global _loop
    if _loop is None:
        import cell_loop
        _loop = cell_loop.CellLoop()
    return _loop


def _silenced(code, node):
    """A trailing `;` after the last expression keeps its value from showing."""
    lines = code.splitlines()
    rest = [lines[node.end_lineno - 1][node.end_col_offset:]] + lines[node.end_lineno:]
    return any(";" in line.split("#", 1)[0] for line in rest)


def _take_over_libraries():
    """Once their modules are imported: points pyplot's `show` at the cell's
    own, shows a PIL image saved to a path when the run's results ask for
    it (E2B's sandbox does), and lets `boxplot` take the name its tick
    labels had until matplotlib 3.11 (`labels`), which code written for
    earlier releases (E2B's sandbox has 3.10) passes."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None and pyplot.show is not _show_figures:
        pyplot.show = _show_figures
    pil_image = sys.modules.get("PIL.Image")
    if pil_image is not None and not getattr(pil_image.Image.save, "_anypath_shows", False):
        pil_image.Image.save = _showing_save(pil_image.Image.save)
    axes = sys.modules.get("matplotlib.axes")
    for owner in (axes and axes.Axes, pyplot):
        if owner is not None and not getattr(owner.boxplot, "_anypath_labels", False):
            owner.boxplot = _old_boxplot_labels(owner.boxplot)


def _showing_save(save):
    """PIL's `Image.save`, showing the image first when saved to a path
    given as text, as E2B's sandbox does, if the run's results ask for it."""

    def showing_save(image, fp, format=None, **params):
        if isinstance(fp, str) and _results is not None and _results.shows_saved_images:
            _results.show(image, "display")
        return save(image, fp, format, **params)

    showing_save.__doc__, showing_save.__wrapped__, showing_save._anypath_shows = save.__doc__, save, True
    return showing_save


def _old_boxplot_labels(boxplot):
    """`boxplot` also taking its tick labels as `labels`, unless the
    installed matplotlib still takes that name itself."""
    import inspect

    try:
        if "labels" in inspect.signature(boxplot).parameters:
            return boxplot
    except (TypeError, ValueError):
        return boxplot

    def renamed(*args, labels=None, **kwargs):
        if labels is not None:
            if kwargs.get("tick_labels") is not None:
                raise TypeError("boxplot() takes the tick labels once: as tick_labels or as labels, not both")
            kwargs["tick_labels"] = labels
        return boxplot(*args, **kwargs)

    renamed.__name__, renamed.__qualname__, renamed.__doc__ = boxplot.__name__, boxplot.__qualname__, boxplot.__doc__
    renamed.__wrapped__, renamed._anypath_labels = boxplot, True
    return renamed


class UnsupportedMagic(SyntaxError):
    """An IPython magic or shell escape: cells are plain Python."""


# What to write instead of each magic a model reaches for.
_MAGIC_ADVICE = {
    "pip": None,  # filled in with what is installed
    "conda": None,
    "matplotlib": "figures are shown without it: call plt.show(), or leave them open at the end of the cell",
    "time": "use time.perf_counter() before and after the code",
    "timeit": "use the timeit module: timeit.timeit(lambda: ..., number=100)",
    "cd": "use os.chdir(path)",
    "ls": "use os.listdir(path)",
    "pwd": "use os.getcwd()",
    "env": "use os.environ",
    "who": "use dir()",
    "whos": "use dir()",
    "run": "use exec(open(path).read())",
    "load": "use open(path).read()",
    "writefile": "use open(path, 'w').write(text)",
    "reset": "use del on the names, or start a new session",
    "capture": "use contextlib.redirect_stdout(io.StringIO())",
}


def _magic_refusal(exc, code):
    """The error for a line that is an IPython magic (`%pip`) or a shell
    escape (`!ls`), naming the Python to write instead; None otherwise."""
    lines = code.splitlines()
    if not exc.lineno or exc.lineno > len(lines):
        return None
    line = lines[exc.lineno - 1].strip()
    if line.startswith("!"):
        return UnsupportedMagic(f"shell commands cannot run in a cell ({line}): there are no processes here; use Python's os, shutil and pathlib")
    if not line.startswith("%"):
        return None
    name = line.lstrip("%").split(None, 1)[0] if line.lstrip("%") else ""
    advice = _MAGIC_ADVICE.get(name, "IPython magics are not available: write plain Python")
    if advice is None:
        advice = "packages cannot be installed; these are available: " + ", ".join(_available_packages())
    return UnsupportedMagic(f"%{name} is not available in a cell: {advice}")


def _available_packages():
    """The importable packages beyond the standard library."""
    import pkgutil
    own = {"app", "cell", "cell_loop", "cell_stdlib", "captured_output", "ipython_display", "rich_output", "structured_output", "anypath_cell_report",
           "policy_gate", "reply", "resource_store", "restricted_env", "document_ids", "json_depth", "preimport",
           "componentize_py_runtime", "componentize_py_types", "componentize_py_async_support", "poll_loop", "wit_world",
           "pip_libraries", "anypath_pip"}
    found = set()
    for module in pkgutil.iter_modules():
        name = module.name
        if name.startswith("_") or name in own or name in sys.stdlib_module_names:
            continue
        found.add(name)
    return sorted(found) or ["the standard library only"]


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
