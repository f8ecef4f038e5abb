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

# What `pip` in the shell runs on, so that its instance imports nothing:
# `packaging` from the stdlib zip, `installer` from site-packages (off
# `sys.path` for sessions, so the path is put back as it was).
import packaging.markers  # noqa: E402, F401
import packaging.requirements  # noqa: E402, F401
import packaging.specifiers  # noqa: E402, F401
import packaging.utils  # noqa: E402, F401
import packaging.version  # noqa: E402, F401

sys.path.append("/usr/local/lib/site-packages")
try:
    import installer  # noqa: E402, F401
    import installer.destinations  # noqa: E402, F401
    import installer.sources  # noqa: E402, F401
finally:
    sys.path.remove("/usr/local/lib/site-packages")

# What a session can count on being imported.
NAMED = ["numpy", "pandas", "matplotlib", "matplotlib.pyplot", "seaborn", "cell", "anypath_cell_report"]
MARKER = "\x1eanypath-preimport "
# The pure-Python packages beside the stdlib zip (see compile_site_packages).
SITE_PACKAGES = "/usr/local/lib/site-packages"
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


def compile_site_packages():
    """Writes the bytecode of `site-packages/` (pytest and what it imports,
    for the agent's `run_tests`) beside its sources, which every session
    sees read-only: without it each session compiles pytest anew on its
    first test run (2 s here, a quarter of that with the bytecode). Hash
    pycs that are never checked against their sources: the directory is
    the build's and is replaced whole, with a new image, when its pins
    change. The modules this imports are forgotten again, so the image
    holds what it held before."""
    if not os.path.isdir(SITE_PACKAGES):
        return
    before = set(sys.modules)
    import compileall
    import py_compile

    compiled = compileall.compile_dir(
        SITE_PACKAGES, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    if not compiled:
        raise RuntimeError(f"compiling {SITE_PACKAGES} failed")
    for name in set(sys.modules) - before:
        del sys.modules[name]


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
    """Compiles the site-packages' bytecode, warms the first chart, drops
    what must not outlive the build (the font cache's open font files),
    collects garbage, and prints the summary."""
    compile_site_packages()
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
