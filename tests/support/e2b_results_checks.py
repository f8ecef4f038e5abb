"""Cell results as E2B's Python SDK (`e2b-code-interpreter`) reads them from
anypath's E2B API: the forms IPython's display gives (raw MIME bundles,
`IPython.display`'s objects, `_repr_*_` methods), PIL images, charts' data,
JSON of lists and dicts, and several results of one cell, streamed in order.
The code is what E2B's own tests (e2b-dev/code-interpreter's python/tests)
and notebook users write.

Usage: e2b_results_checks.py API_URL KEY [CHECK ...]

Each check prints `PASS name` or `FAIL name` with its traceback; the exit
status is 1 when any failed.
"""

import base64
import json
import os
import random
import statistics
import struct
import sys

API_URL, KEY = sys.argv[1], sys.argv[2]
os.environ["E2B_API_URL"] = API_URL
os.environ["E2B_SANDBOX_URL"] = API_URL
os.environ["E2B_API_KEY"] = KEY

from e2b_code_interpreter import Sandbox  # noqa: E402
from e2b_code_interpreter.charts import BoxAndWhiskerChart, ChartType  # noqa: E402
from sdk_checks import SANDBOXES, check, run_checks  # noqa: E402


def sandbox():
    """A new sandbox, killed when the checks end."""
    created = Sandbox.create(timeout=300, metadata={"suite": "e2b_results_checks"})
    SANDBOXES.append(created)
    return created


def run(sbx, code, **options):
    """Runs `code`; fails with its error when it raised."""
    execution = sbx.run_code(code, **options)
    assert execution.error is None, execution.error
    return execution


def png_size(encoded):
    """A base64 PNG's width and height, read from its header."""
    data = base64.b64decode(encoded)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


@check
def raw_mime_bundles():
    sbx = sandbox()
    # E2B's test_custom_repr_object, as it is.
    execution = run(sbx, "from IPython.display import display\n\ndisplay({'text/latex': r'\\text{CustomReprObject}'}, raw=True)\n")
    assert len(execution.results) == 1, execution.results
    assert execution.results[0].formats() == ["latex"], execution.results[0].formats()
    assert execution.results[0].latex == "\\text{CustomReprObject}"
    assert execution.results[0].is_main_result is False
    # Several bundles in one call, one result each, in order.
    code = (
        "display({'text/markdown': '# Total\\n**42**'}, {'application/json': {'total': 42, 'parts': [40, 2]}}, raw=True)\n"
        "display({'text/plain': 'plain', 'text/html': '<b>both</b>'}, raw=True)"
    )
    markdown, data, both = run(sbx, code).results
    assert markdown.formats() == ["markdown"] and markdown.markdown == "# Total\n**42**", markdown.formats()
    assert data.formats() == ["json"] and data.json == {"total": 42, "parts": [40, 2]}, (data.formats(), data.json)
    assert both.formats() == ["text", "html"] and (both.text, both.html) == ("plain", "<b>both</b>")
    refused = sbx.run_code("display('not a bundle', raw=True)")
    assert refused.error is not None and refused.error.name == "TypeError", refused.error


@check
def ipython_display_objects():
    sbx = sandbox()
    code = (
        "from IPython.display import HTML, JSON, Latex, Markdown, Math, display\n"
        "display(HTML('<p>hi</p>'), Markdown('*m*'), Latex(r'$\\alpha$'), Math('x^2'), JSON({'k': [1, 2]}))\n"
    )
    html, markdown, latex, math, data = run(sbx, code).results
    assert html.html == "<p>hi</p>" and markdown.markdown == "*m*", (html.formats(), markdown.formats())
    assert latex.latex == "$\\alpha$" and math.latex == "$\\displaystyle x^2$", (latex.latex, math.latex)
    assert data.json == {"k": [1, 2]}, data.formats()
    # No IPython shell runs the code: libraries looking for one find none.
    assert run(sbx, "import IPython\nIPython.get_ipython() is None").results[0].text == "True"


@check
def libraries_work_with_ipython_imported():
    sbx = sandbox()
    # Libraries that look at IPython once it is imported: matplotlib's
    # canvases (its version), patsy's reprs (its pretty printer), tqdm's
    # notebook detection (its shell).
    code = """
import IPython.display
import matplotlib.pyplot as plt
import patsy
from tqdm.auto import tqdm
fig, ax = plt.subplots()
ax.plot([1, 2])
fig.savefig("line.svg")
plt.close(fig)
print(sum(tqdm(range(3), disable=True)), any(kind.__module__ == "tqdm.notebook" for kind in tqdm.__mro__))
patsy.dmatrix("x", {"x": [1.0, 2.0, 3.0]})
"""
    execution = run(sbx, code)
    assert execution.logs.stdout == ["3 False\n"], "tqdm found no notebook kernel: %s" % execution.logs.stdout
    assert sbx.files.read("line.svg").lstrip().startswith("<?xml"), "the SVG was written"
    [matrix] = execution.results
    assert matrix.text.startswith("DesignMatrix with shape (3, 2)") and "Intercept" in matrix.text, matrix.text


@check
def repr_methods_and_mime_bundles():
    sbx = sandbox()
    code = """
class Formula:
    def _repr_latex_(self):
        return r"$\\frac{1}{2}$"

class Bundle:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": "bundle", "application/json": {"from": "bundle"}}
    def _repr_html_(self):
        return "<i>html too</i>"

class Widget:  # an HTML repr reached through a property, as scikit-learn's
    @property
    def _repr_html_(self):
        return lambda: "<div>widget</div>"

display(Formula(), Bundle(), Widget())
import sympy
sympy.Symbol("x") ** 2
"""
    formula, bundle, widget, symbolic = run(sbx, code).results
    assert formula.latex == "$\\frac{1}{2}$" and formula.text.startswith("<__main__.Formula"), formula.formats()
    assert (bundle.text, bundle.json, bundle.html) == ("bundle", {"from": "bundle"}, "<i>html too</i>"), bundle.formats()
    assert widget.html == "<div>widget</div>", widget.formats()
    assert symbolic.is_main_result and symbolic.text == "x**2" and symbolic.latex == "$\\displaystyle x^{2}$", (symbolic.text, symbolic.latex)


@check
def lists_and_dicts_carry_json():
    sbx = sandbox()
    value = run(sbx, "import numpy as np\n{'name': 'run', 'scores': np.array([1.5, 2.0]), 3: None}").results[0]
    assert value.json == {"name": "run", "scores": [1.5, 2.0], "3": None}, value.json
    assert value.text.startswith("{'name': 'run'"), value.text
    listed = run(sbx, "display([1, 'two', {'three': 3.0}])").results[0]
    assert listed.json == [1, "two", {"three": 3.0}] and not listed.is_main_result, listed.json
    assert run(sbx, "(1, 2)").results[0].formats() == ["text"], "a tuple has no JSON form"
    assert run(sbx, "[object()]").results[0].formats() == ["text"], "nor a list JSON cannot carry"


@check
def pil_image_shown():
    sbx = sandbox()
    # E2B's test_show_image.
    code = """
import numpy
from PIL import Image

imarray = numpy.random.rand(16,16,3) * 255
image = Image.fromarray(imarray.astype('uint8')).convert('RGBA')

image.show()
print("Image shown.")
"""
    execution = run(sbx, code)
    assert execution.logs.stdout == ["Image shown.\n"], execution.logs.stdout
    assert len(execution.results) == 1 and png_size(execution.results[0].png) == (16, 16), execution.results
    # In a figure: plt.imshow of a PIL image, then plt.show().
    code = "import matplotlib.pyplot as plt\nfrom PIL import Image\nplt.imshow(Image.new('RGB', (40, 20), (200, 30, 30)))\nplt.show()"
    figure = run(sbx, code).results
    assert len(figure) == 1 and figure[0].png and figure[0].text.startswith("<Figure"), [r.formats() for r in figure]
    width, height = png_size(figure[0].png)
    assert width > 40 and height > 20, (width, height)


@check
def pil_image_displayed():
    sbx = sandbox()
    # E2B's test_image_as_last_command, then an image opened from a file.
    make = "from PIL import Image\nimage = Image.new('RGB', (24, 12), (10, 120, 200))\n"
    last = run(sbx, make + "image").results
    assert len(last) == 1 and last[0].is_main_result and png_size(last[0].png) == (24, 12), [r.formats() for r in last]
    assert last[0].jpeg is None, "one picture is carried once"
    opened = run(sbx, make + "image.save('made.bmp', format='BMP')\ndisplay(Image.open('made.bmp'))").results
    # Saved to a path, the image is shown (as in E2B's sandbox), then the opened one.
    assert [png_size(r.png) for r in opened] == [(24, 12), (24, 12)], [r.formats() for r in opened]
    # E2B's test_get_image_on_save.
    code = """
import numpy
from PIL import Image

imarray = numpy.random.rand(16,16,3) * 255
image = Image.fromarray(imarray.astype('uint8')).convert('RGBA')

image.save("test.png")
print("Image saved.")
"""
    saved = run(sbx, code).results
    assert len(saved) == 1 and png_size(saved[0].png) == (16, 16), saved
    assert sbx.files.read("test.png", format="bytes")[:8] == b"\x89PNG\r\n\x1a\n", "the file is saved too"
    displayed = run(sbx, "from IPython.display import Image\nImage(filename='test.png')").results
    assert len(displayed) == 1 and png_size(displayed[0].png) == (16, 16), displayed


def whiskers(values):
    """A box's numbers as matplotlib draws them: numpy's (linear) quartiles,
    whiskers at the furthest data within 1.5 IQR, the rest outliers."""
    first, median, third = statistics.quantiles(values, n=4, method="inclusive")
    low, high = first - 1.5 * (third - first), third + 1.5 * (third - first)
    inside = [v for v in values if low <= v <= high]
    return {
        "min": min(inside), "first_quartile": first, "median": median, "third_quartile": third, "max": max(inside),
        "outliers": sorted(v for v in values if not low <= v <= high),
    }


@check
def box_and_whiskers_chart():
    sbx = sandbox()
    # E2B's test_box_and_whiskers: `labels=` as matplotlib took it until 3.11.
    generator = random.Random(56)
    data = {name: [generator.randint(60, 100) for _ in range(generator.randint(7, 12))] + extra for name, extra in (("Class A", []), ("Class B", [20]), ("Class C", [150, 5]))}
    code = f"""
import json
import matplotlib.pyplot as plt
import numpy as np

data = {data!r}
print(json.dumps({{name: np.percentile(values, [25, 50, 75]).tolist() for name, values in data.items()}}))
fig, ax = plt.subplots(figsize=(10, 6))
ax.set_title('Exam Scores Distribution')
ax.set_xlabel('Class')
ax.set_ylabel('Score')
ax.boxplot(data.values(), labels=data.keys(), patch_artist=True)
plt.tight_layout()
plt.show()
"""
    execution = run(sbx, code)
    numpys = json.loads(execution.logs.stdout[0])
    chart = execution.results[0].chart
    assert isinstance(chart, BoxAndWhiskerChart) and chart.type == ChartType.BOX_AND_WHISKER, execution.results[0].formats()
    assert (chart.title, chart.x_label, chart.y_label, chart.x_unit, chart.y_unit) == ("Exam Scores Distribution", "Class", "Score", None, None)
    assert [box.label for box in chart.elements] == list(data), [box.label for box in chart.elements]
    for box, (name, values) in zip(chart.elements, data.items()):
        expected = whiskers(values)
        quartiles = [box.first_quartile, box.median, box.third_quartile]
        assert all(abs(got - want) < 1e-6 for got, want in zip(quartiles, numpys[name])), (name, quartiles, numpys[name])
        got = {key: getattr(box, key) for key in expected}
        got["outliers"] = sorted(got["outliers"])
        assert all(abs(got[key] - expected[key]) < 1e-6 for key in expected if key != "outliers"), (name, got, expected)
        assert got["outliers"] == expected["outliers"], (name, got, expected)
    # Lying boxes: the categories are on the vertical axis.
    code = "import matplotlib.pyplot as plt\nplt.boxplot([[1, 2, 3, 4, 5], [2, 4, 6, 8, 30]], tick_labels=['a', 'b'], orientation='horizontal', patch_artist=True)\nplt.xlabel('Value [ms]')\nplt.show()"
    lying = run(sbx, code).results[0].chart
    assert lying.type == ChartType.BOX_AND_WHISKER and lying.y_label == "Value [ms]" and lying.y_unit == "ms", vars(lying)
    assert [(b.label, b.median, b.outliers) for b in lying.elements] == [("a", 3, []), ("b", 6, [30])], [(b.label, b.median, b.outliers) for b in lying.elements]


@check
def dataframes_and_several_results_stream_in_order():
    sbx = sandbox()
    streamed = []
    code = """
import pandas as pd
import matplotlib.pyplot as plt
frame = pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [4.5, 19.0]})
display(frame, "between")
plt.bar(frame["city"], frame["temp"])
plt.show()
frame.describe()
"""
    results = run(sbx, code, on_result=streamed.append).results
    assert [r.formats() for r in streamed] == [r.formats() for r in results], "streamed as the report lists them"
    table, between, bars, described = results
    assert table.data == {"city": ["Oslo", "Lima"], "temp": [4.5, 19.0]} and "<table" in table.html and not table.is_main_result, table.formats()
    assert between.text == "between" and between.formats() == ["text"], between.formats()
    assert bars.chart.type == ChartType.BAR and [e.value for e in bars.chart.elements] == [4.5, 19.0], bars.formats()
    assert described.is_main_result and described.data["temp"][0] == 2.0, described.data


def main():
    run_checks(sys.argv[3:])

main()
