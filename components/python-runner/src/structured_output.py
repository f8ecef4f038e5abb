"""Results' data as JSON, for clients that read data rather than pictures
(the E2B face asks for it with the `data` form): a DataFrame's columns, a
list's or dict's JSON (as E2B's JSON formatter gives it), and what a
matplotlib figure plots, in the shape E2B's chart data extractor gives
(`type`, `title`, `elements`, axis labels and units, ticks and scales),
which E2B's SDKs read as `Result.chart`.

It never imports pandas or matplotlib for a cell that did not: a DataFrame
is recognised through `sys.modules`, and the matplotlib parts are imported
only for a figure, which matplotlib made.
"""

import dataclasses
import datetime
import enum
import json
import math
import numbers
import re
import sys
import uuid

COLUMNS_MIME = "application/vnd.anypath.columns+json"
CHART_MIME = "application/vnd.anypath.chart+json"

# The deepest nesting a list's or dict's JSON is made for (as orjson's).
_JSON_DEPTH = 254

# A unit in an axis label: "Time (s)" or "Power [W]".
_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


class TooLarge(Exception):
    """The JSON would not fit the room left, as known before making it."""


def columns(obj, room=math.inf):
    """A DataFrame's columns as JSON text (name -> list of values); None for
    anything else. Raises TooLarge for a frame surely bigger than `room`."""
    pandas = sys.modules.get("pandas")
    if pandas is None or not isinstance(obj, pandas.DataFrame):
        return None
    if 2 * obj.size > room:  # each value takes 2 bytes at least ("1,")
        raise TooLarge
    table = obj.to_dict(orient="list")
    return json.dumps({str(name): [_plain(value) for value in values] for name, values in table.items()}, allow_nan=False)


def json_of(obj, room=math.inf):
    """A list's or dict's JSON text, as E2B's JSON formatter makes it (orjson
    with numpy values and keys that are not text): None for anything else,
    or for one holding what that makes no JSON of. Raises TooLarge for one
    surely bigger than `room`."""
    if not isinstance(obj, (list, dict)):
        return None
    if 2 * len(obj) > room:  # each item takes 2 bytes at least ("1,")
        raise TooLarge
    try:
        return json.dumps(_json_value(obj, 0), allow_nan=False)
    except _NoJson:
        return None


class _NoJson(Exception):
    """A value E2B's JSON formatter makes no JSON of."""


def _json_value(value, depth):
    """`value` as orjson serialises it: NaN and infinities as None, times as
    ISO text, numpy's arrays and scalars, dataclasses, enums and UUIDs."""
    if depth > _JSON_DEPTH:
        raise _NoJson
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise _NoJson
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_json_value(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {_json_key(key): _json_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return _json_value(value.value, depth + 1)
    if isinstance(value, uuid.UUID):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _json_value(getattr(value, field.name), depth + 1) for field in dataclasses.fields(value)}
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic)):
        kind = value.dtype.kind
        if kind == "M":  # times, as datetimes (NaT as None) whatever their unit
            return _json_value(value.astype("datetime64[us]").tolist(), depth + 1)
        if kind in "biuf":  # numbers and booleans; orjson takes no other
            return _json_value(value.tolist(), depth + 1)
    raise _NoJson


def _json_key(key):
    """A key as orjson's non-text keys option writes it."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    if isinstance(key, (int, float)):
        return str(key)
    if isinstance(key, (datetime.date, datetime.time)):
        return key.isoformat()
    if isinstance(key, enum.Enum):
        return _json_key(key.value)
    if isinstance(key, uuid.UUID):
        return str(key)
    raise _NoJson


def _plain(value):
    """`value` as JSON can carry it: numpy scalars as numbers, times as ISO
    text, NaN and NaT as None, anything else JSON lacks as its text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (datetime.date, datetime.time)):
        text = value.isoformat()  # pandas' Timestamp; its NaT says "NaT"
        return None if text == "NaT" else text
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        if isinstance(value, numpy.datetime64):
            if numpy.isnat(value):
                return None
            moment = value.astype("datetime64[us]").item()
            return moment.isoformat() if isinstance(moment, datetime.datetime) else str(value)
        if isinstance(value, numpy.timedelta64) and numpy.isnat(value):
            return None
        item = value.item()
        return _plain(item) if not isinstance(item, type(value)) else str(value)
    pandas = sys.modules.get("pandas")
    if pandas is not None and value is pandas.NA:
        return None
    return str(value)


def chart(figure, room=math.inf):
    """What `figure` plots, as JSON text; None for a blank figure. Raises
    TooLarge when its points surely take more than `room` bytes."""
    axes = figure.get_axes()
    if not any(ax.has_data() for ax in axes):
        return None
    # Each point takes 8 bytes at least (`["", ""]`).
    points = sum(len(line.get_xdata()) for ax in axes for line in ax.get_lines())
    points += sum(len(collection.get_offsets()) for ax in axes for collection in ax.collections)
    if 8 * points > room:
        raise TooLarge
    if len(axes) == 1:
        described = _axes_chart(axes[0])
    else:
        # E2B gives the figure's title as is, "" when it has none.
        described = {"type": "superchart", "title": figure.get_suptitle(), "elements": [_axes_chart(ax) for ax in axes]}
    return json.dumps(described, allow_nan=False)


def _kind(ax):
    """The chart type of one axes, told by the artists it holds (as E2B)."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text

    artists = [artist for artist in ax._children if not isinstance(artist, Text)]
    if all(isinstance(artist, Line2D) for artist in artists):
        return "line"
    if all(isinstance(artist, (PathPatch, Line2D)) for artist in artists):
        return "box_and_whisker"
    artists = [artist for artist in artists if not (isinstance(artist, Line2D) and _is_grid_line(artist))]
    for kind, types in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if artists and all(isinstance(artist, types) for artist in artists):
            return kind
    return "unknown"


def _is_grid_line(line):
    """A straight two-point line across the axes, as a grid or a guide."""
    xs, ys = line.get_xdata(), line.get_ydata()
    return len(xs) == 2 and len(ys) == 2 and (xs[0] == xs[1] or ys[0] == ys[1])


def _axes_chart(ax):
    kind = _kind(ax)
    described = {"type": kind, "title": ax.get_title() or None}
    if kind == "pie":
        described["elements"] = [
            {"label": wedge.get_label(), "angle": _round(abs(wedge.theta2 - wedge.theta1)), "radius": float(wedge.r)}
            for wedge in ax.patches
        ]
        return described
    if kind == "unknown":
        described["elements"] = []
        return described
    for name in ("x", "y"):
        label = getattr(ax, f"get_{name}label")() or None
        unit = _UNIT.search(label) if label else None
        described[f"{name}_label"] = label
        described[f"{name}_unit"] = (unit.group(1) or unit.group(2)) if unit else None
    if kind == "bar":
        described["elements"] = _bars(ax, described)
    elif kind == "box_and_whisker":
        described["elements"] = _boxes(ax, described)
    else:
        described.update(_point_chart(ax, kind))
    return described


def _swap_axes(described):
    """Horizontal bars and boxes: the category axis is the vertical one."""
    for key in ("label", "unit"):
        described[f"x_{key}"], described[f"y_{key}"] = described[f"y_{key}"], described[f"x_{key}"]


def _time_reader(ax, axis):
    """How to read a number on `axis` as ISO time text; None when the axis
    does not hold times."""
    import matplotlib.dates

    converter = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    if type(converter).__name__ == "PeriodConverter":
        # pandas' time series plots: the numbers are period ordinals.
        pandas, freq = sys.modules.get("pandas"), getattr(ax, "freq", None)
        if pandas is None or freq is None:
            return None
        return lambda number: pandas.Period(ordinal=int(round(number)), freq=freq).to_timestamp().isoformat()
    switchable = getattr(matplotlib.dates, "_SwitchableDateConverter", matplotlib.dates.DateConverter)
    if isinstance(converter, (matplotlib.dates.DateConverter, switchable)):
        return lambda number: matplotlib.dates.num2date(number).isoformat()
    return None


def _point_chart(ax, kind):
    """Ticks, scales and the points of a line or scatter chart."""
    described, readers = {}, []
    for name in ("x", "y"):
        axis = getattr(ax, f"{name}axis")
        ticks = list(axis.get_majorticklocs())
        labels = [label.get_text() for label in axis.get_majorticklabels()]
        as_time = _time_reader(ax, axis)
        if as_time is not None:
            scale, values = "datetime", [as_time(tick) for tick in ticks]
        else:
            values, scale = [_plain(float(tick)) for tick in ticks], axis.get_scale()
            # Ticks 0..n-1 named otherwise than their numbers: categories.
            if scale == "linear" and ticks and all(tick == i and str(i) != text for i, (tick, text) in enumerate(zip(ticks, labels))):
                scale = "categorical"
        described.update({f"{name}_ticks": values, f"{name}_tick_labels": labels, f"{name}_scale": scale})
        readers.append(as_time)

    def points(xs, ys):
        return [[_coordinate(x, readers[0]), _coordinate(y, readers[1])] for x, y in zip(xs, ys)]

    elements = []
    if kind == "line":
        for line in ax.get_lines():
            if _is_grid_line(line):
                continue
            label = line.get_label()
            if label.startswith("_child"):
                label = f"Line {label[6:]}"
            elements.append({"label": label, "points": points(line.get_xdata(), line.get_ydata())})
    else:
        for collection in ax.collections:
            offsets = collection.get_offsets()
            elements.append({"label": collection.get_label(), "points": points(offsets[:, 0], offsets[:, 1])})
    described["elements"] = elements
    return described


def _coordinate(value, as_time):
    """One coordinate of a point: numbers as floats (as times on a time axis)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            return None
        return as_time(value) if as_time is not None else float(value)
    return _plain(value)


def _bars(ax, described):
    """One element per bar: its category, its group (the container's label)
    and its length."""
    from matplotlib.container import BarContainer

    elements, lying = [], False
    for container in ax.containers:
        if not isinstance(container, BarContainer):
            continue  # error bars
        group = container.get_label()
        if group.startswith("_container"):
            group = f"Group {group[10:]}"
        orientation = getattr(container, "orientation", None)
        if orientation is None:  # older matplotlib: E2B's guess, bars of one height lie
            heights = [rect.get_height() for rect in container]
            orientation = "horizontal" if heights and all(h == heights[0] for h in heights) else "vertical"
        horizontal = orientation == "horizontal"
        lying |= horizontal
        axis = ax.yaxis if horizontal else ax.xaxis
        for rect in container:
            if horizontal:
                centre, value = rect.get_y() + rect.get_height() / 2, rect.get_width()
            else:
                centre, value = rect.get_x() + rect.get_width() / 2, rect.get_height()
            elements.append({"label": _category(ax, axis, centre), "group": group, "value": _plain(float(value))})
    if lying:
        _swap_axes(described)
    return elements


def _category(ax, axis, centre):
    """What names the bar at `centre`: the nearest tick's label when ticks
    were placed for names (categories, set ticks), else the position."""
    ticks = list(axis.get_majorticklocs())
    if ticks and type(axis.get_major_locator()).__name__ in ("FixedLocator", "StrCategoryLocator"):
        labels = axis.get_majorticklabels()
        nearest = min(range(len(ticks)), key=lambda i: abs(ticks[i] - centre))
        if nearest < len(labels):
            return labels[nearest].get_text()
    as_time = _time_reader(ax, axis)
    return as_time(centre) if as_time is not None else f"{centre:g}"


def _round(number):
    """Rounds as E2B does (8 digits, fewer past the point for larger
    numbers), which also drops float noise, so that values drawn from one
    datum compare equal."""
    number = float(number)
    if number == 0 or not math.isfinite(number):
        return number
    return float(f"{number:.{max(1, 8 - math.floor(math.log10(abs(number))))}g}")


def _boxes(ax, described):
    """Each box's quartiles, whiskers, median and outliers, read from what
    `boxplot(patch_artist=True)` draws: a patch per box, and lines around it
    (two whiskers, two caps, the median, maybe a mean, the outliers)."""
    import matplotlib

    rects = []
    for patch in ax.patches:
        vertices = patch.get_path().vertices
        xs, ys = [_round(x) for x in vertices[:, 0]], [_round(y) for y in vertices[:, 1]]
        rects.append([min(xs), max(xs), min(ys), max(ys)])
    lines = [([_round(x) for x in line.get_xdata()], [_round(y) for y in line.get_ydata()], line) for line in ax.lines]
    upright = _upright(rects, lines)
    if not upright:  # lying boxes: read them as standing ones
        _swap_axes(described)
        rects = [[bottom, top, left, right] for left, right, bottom, top in rects]
        lines = [(ys, xs, line) for xs, ys, line in lines]
    labels = [label.get_text() for label in (ax.xaxis if upright else ax.yaxis).get_majorticklabels()]
    # Until the whiskers say otherwise, the box's patch spans the quartiles.
    boxes = [
        {"label": label, "min": low, "first_quartile": low, "median": None, "third_quartile": high, "max": high, "outliers": []}
        for label, (_, _, low, high) in zip(labels, rects)
    ]

    def box_at(*xs):
        return next((i for i, rect in enumerate(rects[: len(boxes)]) if all(rect[0] <= x <= rect[1] for x in xs)), None)

    mean_marker = matplotlib.rcParams["boxplot.meanprops.marker"]
    whiskers, levels = [[] for _ in boxes], []
    for xs, ys, line in lines:
        if line.get_linestyle() in ("None", "none", "", " "):  # markers alone: outliers, or a mean
            if len(xs) == 1 and line.get_marker() == mean_marker:
                continue
            for x, y in zip(xs, ys):
                if (i := box_at(x)) is not None:
                    boxes[i]["outliers"].append(y)
        elif len(xs) == 2 and (i := box_at(*xs)) is not None:
            if xs[0] == xs[1]:
                whiskers[i].append(sorted(ys))
            elif ys[0] == ys[1]:
                levels.append((boxes[i], ys[0]))  # the median, a cap or a mean line
    for box, pair in zip(boxes, whiskers):
        if len(pair) == 2:  # each whisker runs from a quartile out to its end
            (box["min"], box["first_quartile"]), (box["third_quartile"], box["max"]) = sorted(pair)
    for box, y in levels:
        if not box["first_quartile"] <= y <= box["third_quartile"]:
            continue
        # The first level inside the box, unless it is a cap at a whisker's
        # end (a whisker of no length) and another follows.
        ends = (box["min"], box["max"])
        if box["median"] is None or (box["median"] in ends and y not in ends):
            box["median"] = y
    return boxes


def _upright(rects, lines):
    """Whether the boxes stand: the first box's whiskers leave it upwards or
    downwards; without them, boxes of one height lie (E2B's rule)."""
    if not rects:
        return True
    left, right, bottom, top = rects[0]
    for xs, ys, _ in lines:
        if len(xs) == 2 and xs[0] == xs[1] == _round((left + right) / 2) and (min(ys) < bottom or max(ys) > top):
            return True
        if len(xs) == 2 and ys[0] == ys[1] == _round((bottom + top) / 2) and (min(xs) < left or max(xs) > right):
            return False
    return not (len(rects) > 1 and all(rect[3] - rect[2] == top - bottom for rect in rects))
