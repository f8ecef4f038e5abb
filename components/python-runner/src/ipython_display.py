"""IPython's display API (`IPython.display`) for cells, which import it as
they would in Jupyter or in E2B's sandbox, where IPython runs the code:
`display`, `update_display`, `clear_output`, the `display_*` functions and
the rich objects (`HTML`, `Markdown`, `Latex`, `Math`, `SVG`, `JSON`,
`Javascript`, `Image`, `Pretty`). What they show becomes the run's results
through the cell's own `display` (`rich_output.Results`).

Neither runtime ships IPython: its kernel machinery has no use in a
sandbox, and without a kernel its `display` only prints. `install` puts this
module in its place: `import IPython` finds `get_ipython()`, which gives
None as in plain Python (so libraries that look for a notebook kernel,
matplotlib's, pandas' or tqdm's, find none), a `version_info` and, for
libraries that use it once IPython is imported, `IPython.lib.pretty`; and
Pillow's `Image.show()` displays the image, as in a notebook, through the
viewer it registers when `IPython.display` imports.
"""

import base64
import contextlib
import io
import json
import os
import sys
import types
import uuid

__all__ = [
    "display", "update_display", "clear_output", "DisplayHandle", "DisplayObject", "TextDisplayObject",
    "HTML", "Markdown", "Latex", "Math", "SVG", "JSON", "Javascript", "Image", "Pretty",
    "display_html", "display_markdown", "display_latex", "display_svg", "display_png", "display_jpeg",
    "display_pdf", "display_json", "display_javascript", "display_pretty",
]

# The cell's `display`, set by `install`.
_display = None


def display(*objs, **options):
    """Shows each object as a result of the run (see `cell.display`)."""
    if _display is None:
        return None
    return _display(*objs, **options)


def update_display(obj, *, display_id, **options):
    """Shows `obj` again: results carry no display ids to update in place."""
    display(obj, **options)


def clear_output(wait=False):
    """Does nothing: results already shown stay in the run's report."""


class DisplayHandle:
    """What `display(..., display_id=...)` returns, to show more under it."""

    def __init__(self, display_id=None):
        self.display_id = display_id or uuid.uuid4().hex

    def __repr__(self):
        return f"<{type(self).__name__} display_id={self.display_id}>"

    def display(self, obj, **options):
        display(obj, **options)

    def update(self, obj, **options):
        update_display(obj, display_id=self.display_id, **options)


class DisplayObject:
    """Data to show, given as is, or read from a file when `data` (or
    `filename`) names one. A URL is kept but never fetched: cells have no
    network."""

    _read_flags = "r"

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if isinstance(data, os.PathLike):
            data = os.fspath(data)
        if isinstance(data, str) and url is None and filename is None:
            if data.startswith(("http://", "https://")):
                url, data = data, None
            elif len(data) < 4096 and "\n" not in data and _is_file(data):
                filename, data = data, None
        self.data = data
        self.url = url
        self.filename = None if filename is None else os.fspath(filename)
        self.metadata = {} if metadata is None else metadata
        self.reload()

    def reload(self):
        """Reads the file again, if the data came from one."""
        if self.filename is not None:
            if "b" in self._read_flags:
                with open(self.filename, "rb") as file:
                    self.data = file.read()
            else:
                with open(self.filename, encoding="utf-8") as file:
                    self.data = file.read()

    def __repr__(self):
        return f"<IPython.core.display.{type(self).__name__} object>"


def _is_file(path):
    try:
        return os.path.isfile(path)
    except (OSError, ValueError):
        return False


class TextDisplayObject(DisplayObject):
    """Text to show in one MIME type."""

    def _text(self):
        data = self.data
        if isinstance(data, (bytes, bytearray)):
            return bytes(data).decode("utf-8", "replace")
        return "" if data is None else str(data)


class HTML(TextDisplayObject):
    def _repr_html_(self):
        return self._text()


class Markdown(TextDisplayObject):
    def _repr_markdown_(self):
        return self._text()


class Latex(TextDisplayObject):
    def _repr_latex_(self):
        return self._text()


class Math(TextDisplayObject):
    """A formula, shown in display style as IPython does."""

    def _repr_latex_(self):
        return "$\\displaystyle " + self._text().strip("$") + "$"


class SVG(DisplayObject):
    _read_flags = "rb"

    def _repr_svg_(self):
        data = self.data
        return bytes(data).decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else data


class Javascript(TextDisplayObject):
    def __init__(self, data=None, url=None, filename=None, lib=None, css=None):
        super().__init__(data=data, url=url, filename=filename)

    def _repr_javascript_(self):
        return self._text()


class Pretty(TextDisplayObject):
    """Text shown as the plain form itself."""

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": self._text()}


class JSON(DisplayObject):
    """A list or dict (or JSON text, parsed) shown as `application/json`."""

    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None, root="root", **kwargs):
        super().__init__(data=data, url=url, filename=filename, metadata=metadata)
        if isinstance(self.data, (str, bytes, bytearray)):
            self.data = json.loads(self.data)

    def _repr_json_(self):
        return self.data


# Picture formats by their first bytes, then by their file name's end.
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8", "jpeg"), (b"GIF8", "gif"), (b"RIFF", "webp"))
_EXTENSIONS = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "jpe": "jpeg", "gif": "gif", "webp": "webp"}


class Image(DisplayObject):
    """A picture from bytes or a file (PNG, JPEG, GIF, WebP), shown under its
    own MIME type; one given by URL alone is shown as an HTML `<img>`."""

    _read_flags = "rb"

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None, height=None,
                 retina=False, unconfined=False, metadata=None, alt=None):
        super().__init__(data=data, url=url, filename=filename, metadata=metadata)
        self.embed = embed if embed is not None else self.data is not None
        self.width, self.height, self.alt = width, height, alt
        self.format = _EXTENSIONS.get(str(format).lower(), str(format).lower()) if format else self._guess_format()

    def _guess_format(self):
        if isinstance(self.data, (bytes, bytearray)):
            for signature, name in _SIGNATURES:
                if bytes(self.data[: len(signature)]) == signature:
                    return name
        name = self.filename or self.url or ""
        return _EXTENSIONS.get(name.rsplit(".", 1)[-1].lower(), "png")

    def _repr_mimebundle_(self, include=None, exclude=None):
        if self.embed and isinstance(self.data, (bytes, bytearray)):
            return {f"image/{self.format}": base64.b64encode(bytes(self.data)).decode("ascii")}
        if self.url is not None:
            return {"text/html": self._img_tag()}
        return None

    def _img_tag(self):
        import html

        attributes = [f'src="{html.escape(self.url)}"']
        for name in ("width", "height", "alt"):
            if getattr(self, name) is not None:
                attributes.append(f'{name}="{html.escape(str(getattr(self, name)))}"')
        return f"<img {' '.join(attributes)}/>"


def _display_as(name, kind):
    """IPython's `display_<name>`: objects shown in that form (and the plain
    one) only, or, `raw`, each taken as that form's data itself."""

    def show(*objs, raw=False, metadata=None):
        if raw:
            for obj in objs:
                display({kind: obj}, raw=True)
        else:
            display(*objs, include=["text/plain", kind])

    show.__name__ = show.__qualname__ = f"display_{name}"
    return show


display_html = _display_as("html", "text/html")
display_markdown = _display_as("markdown", "text/markdown")
display_latex = _display_as("latex", "text/latex")
display_svg = _display_as("svg", "image/svg+xml")
display_png = _display_as("png", "image/png")
display_jpeg = _display_as("jpeg", "image/jpeg")
display_pdf = _display_as("pdf", "application/pdf")
display_json = _display_as("json", "application/json")
display_javascript = _display_as("javascript", "application/javascript")
display_pretty = _display_as("pretty", "text/plain")


class RepresentationPrinter:
    """IPython's pretty printer (`IPython.lib.pretty`) as far as objects'
    `_repr_pretty_` methods call it, for libraries that use it whenever
    IPython is imported (patsy's reprs): it never wraps lines itself; a
    `breakable` writes its separator, a group its brackets, and
    `indentation` counts what the open groups indent."""

    def __init__(self, output=None, verbose=False, max_width=79, newline="\n", max_seq_length=1000):
        self.output = io.StringIO() if output is None else output
        self.max_width, self.newline, self.max_seq_length = max_width, newline, max_seq_length
        self.indentation = 0
        self._open = set()

    def text(self, obj):
        self.output.write(obj)

    def breakable(self, sep=" "):
        self.output.write(sep)

    def break_(self):
        self.output.write(self.newline + " " * self.indentation)

    def begin_group(self, indent=0, open=""):
        self.output.write(open)
        self.indentation += indent

    def end_group(self, dedent=0, close=""):
        self.indentation -= dedent
        self.output.write(close)

    @contextlib.contextmanager
    def group(self, indent=0, open="", close=""):
        self.begin_group(indent, open)
        try:
            yield
        finally:
            self.end_group(indent, close)

    @contextlib.contextmanager
    def indent(self, indent):
        self.indentation += indent
        try:
            yield
        finally:
            self.indentation -= indent

    def flush(self):
        pass

    def pretty(self, obj):
        """Writes `obj`: through its `_repr_pretty_` (told when it is inside
        itself), else its repr."""
        method = getattr(type(obj), "_repr_pretty_", None)
        if isinstance(obj, type) or not callable(method):
            self.text(repr(obj))
            return
        cycle = id(obj) in self._open
        self._open.add(id(obj))
        try:
            method(obj, self, cycle)
        finally:
            if not cycle:
                self._open.discard(id(obj))


def pretty(obj, verbose=False, max_width=79, newline="\n", max_seq_length=1000):
    """`obj`'s text as IPython's `pretty` gives it, on one line."""
    printer = RepresentationPrinter()
    printer.pretty(obj)
    return printer.output.getvalue()


def get_ipython():
    """None: no IPython shell runs the cell."""
    return None


# The IPython release whose display API this follows. Libraries compare it:
# matplotlib skips its workarounds for releases before 8.24.
version_info = (9, 0, 0, "anypath")
__version__ = "9.0.0+anypath"


def install(cell_display):
    """Makes `IPython`, `IPython.display`, `IPython.core.display` and
    `IPython.core.display_functions` import as this module, showing through
    `cell_display`."""
    global _display
    _display = cell_display
    shown = types.ModuleType("IPython.display", __doc__)
    for name in __all__:
        setattr(shown, name, globals()[name])
    printing = types.ModuleType("IPython.lib.pretty", RepresentationPrinter.__doc__)
    printing.pretty, printing.RepresentationPrinter, printing.PrettyPrinter = pretty, RepresentationPrinter, RepresentationPrinter
    package = types.ModuleType("IPython", "IPython's display API for cells (no IPython shell runs them).")
    core, lib = types.ModuleType("IPython.core"), types.ModuleType("IPython.lib")
    # Packages without a folder: any other IPython module fails to import
    # as a missing one would (ModuleNotFoundError).
    package.__path__, core.__path__, lib.__path__ = [], [], []
    package.display, package.get_ipython, package.core, package.lib = shown, get_ipython, core, lib
    package.version_info, package.__version__ = version_info, __version__
    core.display = core.display_functions = shown
    lib.pretty = printing
    sys.modules.update({
        "IPython": package,
        "IPython.display": shown,
        "IPython.core": core,
        "IPython.core.display": shown,
        "IPython.core.display_functions": shown,
        "IPython.lib": lib,
        "IPython.lib.pretty": printing,
    })
