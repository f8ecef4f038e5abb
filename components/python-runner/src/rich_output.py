"""What a cell shows besides its printed output, as a notebook shows it: the
last expression's value, each `display()` call and every matplotlib figure.

Each becomes one result, a dict the host reads as `CellResult`:
`origin` (`value`, `display` or `figure`), `mime` (a MIME bundle: `text/plain`
always, `text/html`, `text/markdown`, `image/png` as base64, `image/svg+xml`
when the object offers them; with the `data` form asked, a DataFrame's
columns and a figure's chart as JSON, see `structured_output`), `truncated`
and `error` (what a `_repr_*_` method or an extraction raised). Results
share one byte budget, the run's result cap; a `text/plain` is also capped
like stdout.
"""

import base64
import io
import json
import os

import structured_output

# Rich forms asked of an object, beside its repr, and how each is carried.
_RICH_FORMS = (
    ("_repr_html_", "text/html", False),
    ("_repr_markdown_", "text/markdown", False),
    ("_repr_svg_", "image/svg+xml", False),
    ("_repr_png_", "image/png", True),
)

# The data forms (`data` asked): the MIME type and extractor of each.
_DATA_FORMS = {
    "columns": (structured_output.COLUMNS_MIME, structured_output.columns),
    "chart": (structured_output.CHART_MIME, structured_output.chart),
}

# Precedes a live frame on file descriptor 1 (the host's `LiveFrame`).
LIVE_MARK = b"\x1eanypath-live "


class LiveChannel:
    """Sends output to the host while the run goes on: one JSON frame per
    write on file descriptor 1, taken off the stream by the host."""

    def send(self, kind, payload):
        data = memoryview(LIVE_MARK + json.dumps({kind: payload}).encode("utf-8") + b"\n")
        while data:
            data = data[os.write(1, data):]


class Results:
    """The results of one run, in the order they were shown."""

    def __init__(self, budget, text_limit, figure_formats, live=None):
        self.entries = []
        self._room = budget
        self._text_limit = text_limit
        # `data` asks for results' data as JSON too; it is not a picture format.
        self._data = "data" in figure_formats
        self._figure_formats = tuple(form for form in figure_formats if form != "data") or ("png",)
        self._live = live
        # Figures already shown this run: the end-of-cell flush skips them.
        self._shown_figures = set()

    def show(self, obj, origin):
        """Adds `obj` shown as `origin` (`value` or `display`)."""
        figure = _as_figure(obj)
        if figure is not None:
            self.figure(figure, origin)
            return
        mime = {}
        errors = []
        text, truncated = self._plain(obj, errors)
        mime["text/plain"] = text
        for method, kind, binary in _RICH_FORMS:
            render = getattr(type(obj), method, None)
            if render is None:
                continue
            try:
                value = render(obj)
            except Exception as exc:  # a broken repr is reported, never fatal
                errors.append(f"{method} raised {type(exc).__name__}: {exc}")
                continue
            if value is None:
                continue
            if binary:
                if not isinstance(value, (bytes, bytearray)):
                    continue
                value = base64.b64encode(value).decode("ascii")
            elif not isinstance(value, str):
                value = str(value)
            truncated |= not self._take(mime, kind, value)
        if self._data:
            truncated |= self._structured(mime, "columns", obj, errors)
        self._add(origin, mime, truncated, errors)

    def figure(self, figure, origin="figure"):
        """Adds a matplotlib figure, rendered in each asked format."""
        self._shown_figures.add(id(figure))
        errors = []
        text, truncated = self._plain(figure, errors)
        mime = {"text/plain": text}
        for form in self._figure_formats:
            kind = "image/svg+xml" if form == "svg" else "image/png"
            try:
                buffer = io.BytesIO()
                figure.savefig(buffer, format="svg" if form == "svg" else "png", bbox_inches="tight")
            except Exception as exc:
                errors.append(f"rendering the figure as {form} raised {type(exc).__name__}: {exc}")
                continue
            data = buffer.getvalue()
            value = data.decode("utf-8", "replace") if form == "svg" else base64.b64encode(data).decode("ascii")
            truncated |= not self._take(mime, kind, value)
        if self._data:
            truncated |= self._structured(mime, "chart", figure, errors)
        self._add(origin, mime, truncated, errors)

    def _structured(self, mime, form, obj, errors):
        """Adds `obj`'s data as JSON (`columns` of a DataFrame, `chart` of a
        figure) when it has some; True when that did not fit the budget."""
        kind, extract = _DATA_FORMS[form]
        try:
            value = extract(obj, self._room)
        except structured_output.TooLarge:
            return True
        except Exception as exc:  # extracting data never fails the cell
            errors.append(f"extracting the {form} raised {type(exc).__name__}: {exc}")
            return False
        return value is not None and not self._take(mime, kind, value)

    def unshown(self, figures):
        """Those of `figures` not shown yet in this run."""
        return [figure for figure in figures if id(figure) not in self._shown_figures]

    def _plain(self, obj, errors):
        try:
            text = repr(obj)
        except Exception as exc:
            errors.append(f"__repr__ raised {type(exc).__name__}: {exc}")
            text = f"<{type(obj).__name__} object: its repr raised {type(exc).__name__}>"
        limit = min(self._text_limit, self._room)
        data = text.encode("utf-8", "replace")
        truncated = len(data) > limit
        if truncated:
            text = data[:limit].decode("utf-8", "ignore")
        self._room -= len(text.encode("utf-8"))
        return text, truncated

    def _take(self, mime, kind, value):
        """Keeps one rich form if the budget has room for it whole."""
        size = len(value.encode("utf-8")) if not value.isascii() else len(value)
        if size > self._room:
            return False
        self._room -= size
        mime[kind] = value
        return True

    def _add(self, origin, mime, truncated, errors):
        entry = {"origin": origin, "mime": mime, "truncated": truncated, "error": "; ".join(errors) or None}
        self.entries.append(entry)
        if self._live is not None:
            self._live.send("result", entry)


def _as_figure(obj):
    """`obj` when it is a matplotlib figure (shown as a picture), else None."""
    figure_type = _matplotlib_figure_type()
    return obj if figure_type is not None and isinstance(obj, figure_type) else None


def _matplotlib_figure_type():
    import sys
    module = sys.modules.get("matplotlib.figure")
    return None if module is None else getattr(module, "Figure", None)


def open_figures():
    """Every figure pyplot holds open, oldest first; none when pyplot was
    never imported."""
    import sys
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    return [pyplot.figure(number) for number in pyplot.get_fignums()]


def close_figures():
    import sys
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")
