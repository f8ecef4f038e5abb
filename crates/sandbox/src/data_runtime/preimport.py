"""Pre-initialises the data runtime: imports the stack an analysis starts
with and warms what its first chart would otherwise build, then reports what
the image holds. Run once by `anypath sandbox preinit-data` in a scratch
instance whose memory becomes every session's starting image; never in a
session.
"""

import gc
import io
import json
import os
import sys

# The Agg backend before pyplot picks one.
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy  # noqa: E402, F401
import pandas  # noqa: E402
import seaborn  # noqa: E402, F401
from matplotlib import font_manager  # noqa: E402

# What a session can count on being imported.
NAMED = ["numpy", "pandas", "matplotlib", "matplotlib.pyplot", "seaborn", "cell", "anypath_cell_report"]
MARKER = "\x1eanypath-preimport "
# Descriptors looked at past the first free one: far more than an import opens.
DESCRIPTOR_SPAN = 256


def first_chart():
    """Draws and renders one small chart in memory: the font lookup, the
    text layout and the PNG writer load their tables now, not in a session's
    first chart."""
    frame = pandas.DataFrame({"x": [1, 2, 3], "y": [2.0, 1.0, 3.0]})
    figure, axes = plt.subplots()
    frame.plot(x="x", y="y", ax=axes, title="warm-up")
    axes.set_xlabel("x")
    figure.savefig(io.BytesIO(), format="png")
    plt.close("all")


def open_descriptors(first_free):
    """Descriptors still open from `first_free` on: an image must hold none,
    since a session's instance would not have them."""
    found = []
    for fd in range(first_free, first_free + DESCRIPTOR_SPAN):
        try:
            os.fstat(fd)
        except OSError:
            continue
        found.append(fd)
    return found


def finish(first_free):
    """Warms the first chart, drops what must not outlive the build (the
    font cache's open font files), collects garbage, and prints the summary."""
    first_chart()
    # Cached FT2Font objects keep their font files open.
    font_manager._get_font.cache_clear()
    gc.collect()
    summary = {
        "preimported": [name for name in NAMED if name in sys.modules],
        "module_count": len(sys.modules),
        "open_descriptors": open_descriptors(first_free),
    }
    sys.stdout.write(MARKER + json.dumps(summary) + "\n")
    sys.stdout.flush()
