"""What a cell shows besides its printed output, as a notebook shows it: the
last expression's value, each `display()` call and every matplotlib figure.

Each becomes one result, a dict the host reads as `CellResult`:
`origin` (`value`, `display` or `figure`), `mime` (a MIME bundle, made as
IPython's formatters make it: `text/plain` (the repr), then each form the
object offers through `_repr_mimebundle_` or its `_repr_*_` methods:
`text/html`, `text/markdown`, `image/svg+xml`, `image/png`,
`application/pdf`, `image/jpeg` (only for an object that offers no PNG: one
picture is carried once), `text/latex`, `application/json`,
`application/javascript`; pictures and PDF as base64, JSON as its text; a
raw display gives its bundle as it is), `truncated` and `error` (what a
`_repr_*_` method or an extraction raised). A figure is rendered in the
asked picture formats.

With the `data` form asked (E2B's face), results also carry what E2B's
sandbox adds to IPython's forms: a DataFrame's columns and a figure's chart
as JSON (see `structured_output`), a list's or dict's JSON, and a PIL image
saved to a file path is shown too (`shows_saved_images`).

Results share one byte budget, the run's result cap; a `text/plain` is also
capped like stdout.
"""

import base64
import io
import json
import os
import types

import structured_output

# IPython's formatters after the plain one, in its order: the MIME type and
# the method that makes it.
_RICH_FORMS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("application/pdf", "_repr_pdf_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
)

# MIME types carried as text although not `text/*`; every other non-text
# type is binary data, carried as base64.
_TEXT_FORMS = ("image/svg+xml", "application/javascript", "application/xml")

# The data forms (`data` asked): the MIME type and extractor of each.
_DATA_FORMS = {
    "columns": (structured_output.COLUMNS_MIME, structured_output.columns),
    "chart": (structured_output.CHART_MIME, structured_output.chart),
    "json": ("application/json", structured_output.json_of),
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
        # As E2B's sandbox, whose forms `data` asks for: a PIL image saved
        # to a file path is shown as well.
        self.shows_saved_images = self._data
        self._figure_formats = tuple(form for form in figure_formats if form != "data") or ("png",)
        self._live = live
        # Figures already shown this run: the end-of-cell flush skips them.
        self._shown_figures = set()

    def show(self, obj, origin, include=None, exclude=None):
        """Adds `obj` shown as `origin` (`value` or `display`), in the forms
        `include` names (all when None) but those `exclude` names."""
        figure = _as_figure(obj)
        if figure is not None:
            self.figure(figure, origin)
            return
        errors = []
        itself = _real_method(obj, "_ipython_display_")
        if itself is not None:
            try:
                itself()  # the object displays itself, through display()
                return
            except Exception as exc:  # then it is shown as any other
                errors.append(f"_ipython_display_ raised {type(exc).__name__}: {exc}")

        def wanted(kind):
            return (not include or kind in include) and not (exclude and kind in exclude)

        forms = {kind: value for kind, value in _mimebundle(obj, include, exclude, errors).items() if wanted(kind)}
        if wanted("text/plain") and "text/plain" not in forms:
            forms["text/plain"] = _repr(obj, errors)
        for kind, method in _RICH_FORMS:
            if kind in forms or not wanted(kind) or (kind == "image/jpeg" and "image/png" in forms):
                continue
            value = _call(obj, method, errors)
            if value is not None:
                forms[kind] = value
        mime, truncated = self._bundle(forms, errors)
        if self._data:
            for form in ("columns", "json"):
                kind = _DATA_FORMS[form][0]
                if kind not in mime and wanted(kind):
                    truncated |= self._structured(mime, form, obj, errors)
        if mime:
            self._add(origin, mime, truncated, errors)

    def show_raw(self, bundle, origin):
        """Adds a MIME bundle as it is (IPython's `display(bundle, raw=True)`)."""
        if not isinstance(bundle, dict):
            raise TypeError(f"a raw display takes a MIME bundle, a dict of MIME type to data, not {type(bundle).__name__}")
        errors = []
        mime, truncated = self._bundle({str(kind): value for kind, value in bundle.items()}, errors)
        if mime:
            self._add(origin, mime, truncated, errors)

    def _bundle(self, forms, errors):
        """The MIME bundle of `forms` (MIME type to the value made for it),
        each carried as text, within the budget: the plain text first, capped
        like stdout; then each other form whole or not at all. Returns the
        bundle and whether a form was cut or left out."""
        mime, truncated = {}, False
        if "text/plain" in forms:
            text = forms["text/plain"]
            mime["text/plain"], truncated = self._capped(text if isinstance(text, str) else str(text))
        for kind, value in forms.items():
            if kind == "text/plain":
                continue
            try:
                carried = _carried(kind, value)
            except (TypeError, ValueError) as exc:
                errors.append(f"the {kind} form cannot be carried: {exc}")
                continue
            truncated |= not self._take(mime, kind, carried)
        return mime, truncated

    def figure(self, figure, origin="figure"):
        """Adds a matplotlib figure, rendered in each asked format."""
        self._shown_figures.add(id(figure))
        errors = []
        text, truncated = self._capped(_repr(figure, errors))
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
        figure, `json` of a list or dict) when it has some; True when that
        did not fit the budget."""
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

    def _capped(self, text):
        """`text` within the plain text's cap and the budget; it is charged
        to the budget. Returns it and whether it was cut."""
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


def _repr(obj, errors):
    """`repr(obj)`, or a stand-in naming what its repr raised."""
    try:
        return repr(obj)
    except Exception as exc:
        errors.append(f"__repr__ raised {type(exc).__name__}: {exc}")
        return f"<{type(obj).__name__} object: its repr raised {type(exc).__name__}>"


def _real_method(obj, name):
    """`obj`'s method `name` as IPython looks for it: callable, not a
    class's plain function, not found on an object that claims to have
    every attribute."""
    try:
        if getattr(obj, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None
        method = getattr(obj, name, None)
    except Exception:  # a failing attribute is no method
        return None
    if isinstance(obj, type) and not isinstance(method, types.MethodType):
        return None
    return method if callable(method) else None


def _call(obj, name, errors, *args, **kwargs):
    """What `obj`'s `_repr_*_` method `name` gives (the data of a `(data,
    metadata)` pair); None when it has none or it raised."""
    method = _real_method(obj, name)
    if method is None:
        return None
    try:
        value = method(*args, **kwargs)
    except Exception as exc:  # a broken repr is reported, never fatal
        errors.append(f"{name} raised {type(exc).__name__}: {exc}")
        return None
    if isinstance(value, tuple) and len(value) == 2:
        value = value[0]
    return value


def _mimebundle(obj, include, exclude, errors):
    """The forms `obj`'s `_repr_mimebundle_` gives, which take precedence
    over its `_repr_*_` methods."""
    bundle = _call(obj, "_repr_mimebundle_", errors, include=include, exclude=exclude)
    if bundle is not None and not isinstance(bundle, dict):
        errors.append(f"_repr_mimebundle_ gave a {type(bundle).__name__}, not a dict")
        return {}
    return {str(kind): value for kind, value in (bundle or {}).items() if value is not None}


def _carried(kind, value):
    """`value` made for `kind` as the bundle carries it, as text: binary data
    as base64 (a string is taken as already encoded), a JSON type's list or
    dict as JSON text. Raises TypeError or ValueError for what it cannot be."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        if _is_text(kind):
            return bytes(value).decode("utf-8", "replace")
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind.endswith("json"):
        return json.dumps(value, allow_nan=False)
    raise TypeError(f"{type(value).__name__} is neither text nor bytes")


def _is_text(kind):
    return kind.startswith("text/") or kind in _TEXT_FORMS or kind.endswith(("json", "+xml"))


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
