"""JavaScript through E2B's Python SDK (`e2b-code-interpreter`) against
anypath's E2B API: `run_code(..., language="js")` in the sandbox's default
JavaScript context, contexts made with `language="js"`, a variable kept
across cells, the last value as `text`, `console.log` streamed to
`on_stdout`, an error's name and message, a Python and a JavaScript context
side by side over the same files, a paused sandbox's JavaScript state, and
TypeScript refused with E2B's 400.

Usage: e2b_javascript_checks.py API_URL KEY [CHECK ...]
"""

import os
import sys

API_URL, KEY = sys.argv[1], sys.argv[2]
os.environ["E2B_API_URL"] = API_URL
os.environ["E2B_SANDBOX_URL"] = API_URL
os.environ["E2B_API_KEY"] = KEY

from e2b_code_interpreter import Sandbox  # noqa: E402
from sdk_checks import SANDBOXES, check, run_checks  # noqa: E402


def sandbox():
    """A new sandbox, killed when the checks end."""
    created = Sandbox.create(timeout=300, metadata={"suite": "e2b_javascript_checks"})
    SANDBOXES.append(created)
    return created


def run(sbx, code, **options):
    """Runs `code`; fails with its error when it raised."""
    execution = sbx.run_code(code, **options)
    assert execution.error is None, execution.error
    return execution


@check
def default_javascript_context_keeps_state():
    sbx = sandbox()
    assert run(sbx, "let total = 40; const add = (a, b) => a + b;", language="js").results == []
    execution = run(sbx, "add(total, 2)", language="javascript")
    assert execution.text == "42", execution.text
    assert run(sbx, "total", language="js").text == "40"
    # Python's default context is another kernel: it has no `total`.
    python = sbx.run_code("total")
    assert python.error is not None and python.error.name == "NameError", python.error


@check
def output_streams_to_callbacks():
    sbx = sandbox()
    seen, errors = [], []
    execution = sbx.run_code(
        "for (const n of [1, 2, 3]) console.log('line', n); console.error('careful'); 'end'",
        language="js",
        on_stdout=lambda message: seen.append(message.line),
        on_stderr=lambda message: errors.append(message.line),
    )
    assert execution.error is None, execution.error
    assert "".join(seen) == "line 1\nline 2\nline 3\n", seen
    assert "".join(errors) == "careful\n", errors
    assert execution.logs.stdout == ["line 1\n", "line 2\n", "line 3\n"] or "".join(execution.logs.stdout) == "line 1\nline 2\nline 3\n", execution.logs.stdout
    assert execution.text == "end", execution.text


@check
def errors_have_name_and_message():
    sbx = sandbox()
    execution = sbx.run_code("null.field", language="js")
    assert execution.error is not None and execution.error.name == "TypeError", execution.error
    thrown = sbx.run_code("class QuotaError extends Error { constructor(m) { super(m); this.name = 'QuotaError' } }\nthrow new QuotaError('over the limit')", language="js")
    assert (thrown.error.name, thrown.error.value) == ("QuotaError", "over the limit"), thrown.error
    assert "QuotaError: over the limit" in thrown.error.traceback, thrown.error.traceback
    assert run(sbx, "1 + 1", language="js").text == "2", "the context goes on after an error"


@check
def objects_carry_json():
    sbx = sandbox()
    execution = run(sbx, "({ city: 'Oslo', temps: [4.5, 19] })", language="js")
    assert execution.results[0].json == {"city": "Oslo", "temps": [4.5, 19]}, execution.results[0].formats()
    assert execution.text == "{ city: 'Oslo', temps: [ 4.5, 19 ] }", execution.text


@check
def python_and_javascript_contexts_share_the_files():
    sbx = sandbox()
    js = sbx.create_code_context(language="js")
    py = sbx.create_code_context(language="python")
    assert js.language in ("javascript", "js"), js.language
    run(sbx, "with open('shared.txt', 'w') as f: f.write('from python')", context=py)
    execution = run(sbx, "const fs = require('fs'); fs.writeFileSync('back.txt', 'from js'); fs.readFileSync('shared.txt', 'utf8')", context=js)
    assert execution.text == "from python", execution.text
    assert run(sbx, "open('back.txt').read()", context=py).text == "from js"
    assert sbx.files.read("back.txt") == "from js"
    assert run(sbx, "typeof fs", context=js).text == "object", "the JavaScript context keeps its state"
    languages = sorted(c.language for c in sbx.list_code_contexts())
    assert "javascript" in languages and "python" in languages, languages


@check
def paused_javascript_state_resumes():
    sbx = sandbox()
    run(sbx, "let kept = { n: 41 }; kept.n += 1", language="js")
    sbx.pause()
    resumed = Sandbox.connect(sbx.sandbox_id)
    assert run(resumed, "kept.n", language="js").text == "42"


@check
def typescript_is_refused_with_a_reason():
    sbx = sandbox()
    try:
        sbx.run_code("const x: number = 1", language="ts")
    except Exception as error:  # the SDK raises E2B's 400 as an exception
        assert "TypeScript" in str(error), error
    else:
        raise AssertionError("TypeScript ran")


def main():
    run_checks(sys.argv[3:])

main()
