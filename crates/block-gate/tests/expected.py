"""Records the verdict of the runner's policy gate on every corpus snippet.

Run it with CPython 3.13 or newer (the grammar the crate targets), from
anywhere; it writes the verdicts next to the corpus:

    python3.13 crates/block-gate/tests/expected.py

Each snippet goes through what the runner does (`app._execute`):
`ast.parse(code, filename="<block>", mode="exec")`, then
`policy_gate.check(tree)` from components/python-runner/src. The verdict is
`allowed`, `refused` (node class, line, column, message, as the runner's
policy violation carries them), `syntax_error` (the runner's own
`SyntaxError` report) or `parse_failure` (anything else `ast.parse` raises,
such as `MemoryError` for a source too complex to parse). `corpus.rs`
compares the crate's `check` with these, and the policy tables recorded
here with the crate's.

The corpus format: a line `=== NAME` starts a snippet, which runs to the
next such line, without its last line break; `=== NAME json` takes the next
line as a JSON string instead. Lines before the first header are comments.
"""

import ast
import json
import pathlib
import platform
import sys
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "components/python-runner/src"))
import policy_gate  # noqa: E402


def read_corpus(directory):
    """(name, source) for every snippet of every `*.txt` file, in order."""
    snippets = []
    for path in sorted(directory.glob("*.txt")):
        with open(path, encoding="utf-8", newline="") as corpus:
            lines = corpus.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        header, body = None, []
        for line in lines + ["=== "]:
            if line.startswith("=== "):
                if header is not None:
                    name, _, flag = header.partition(" ")
                    source = json.loads(body[0]) if flag == "json" else "\n".join(body)
                    if flag == "json" and len(body) != 1:
                        raise ValueError(f"{name}: a json snippet is one line")
                    snippets.append((name, source))
                header, body = line[4:], []
            elif header is not None:
                body.append(line)
    return snippets


def fnv1a64(text):
    """The snippet's fingerprint, which the Rust test recomputes to see
    that these verdicts were recorded for the corpus as it is."""
    digest = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def verdict(source):
    try:
        tree = ast.parse(source, filename="<block>", mode="exec")
    except SyntaxError as bad:
        return {"verdict": "syntax_error", "error": f"{type(bad).__name__}: {bad.msg}"}
    except (ValueError, MemoryError, RecursionError) as failed:
        return {"verdict": "parse_failure", "error": f"{type(failed).__name__}: {failed}"}
    try:
        policy_gate.check(tree)
    except policy_gate.PolicyError as refused:
        return {
            "verdict": "refused",
            "node": refused.node_type,
            "line": refused.line,
            "column": refused.column,
            "message": refused.message,
        }
    return {"verdict": "allowed"}


def main():
    if sys.version_info < (3, 13):
        sys.exit("run this with CPython 3.13 or newer")
    # A block's invalid escape sequences are warnings, not part of the verdict.
    warnings.simplefilter("ignore")
    names = set()
    snippets = {}
    for name, source in read_corpus(HERE / "corpus"):
        if name in names:
            sys.exit(f"duplicate snippet name {name}")
        names.add(name)
        snippets[name] = {"fnv1a64": fnv1a64(source), **verdict(source)}
    policy = {
        "allowed_modules": sorted(policy_gate.ALLOWED_MODULES),
        "denied_names": sorted(policy_gate.DENIED_NAMES),
        "denied_attributes": sorted(policy_gate._DENIED_ATTRIBUTES),
        "allowed_nodes": sorted(node.__name__ for node in policy_gate._ALLOWED_NODES),
    }
    recorded = {
        "recorded_with": f"{platform.python_implementation()} {platform.python_version()}",
        "policy": policy,
        "snippets": snippets,
    }
    with open(HERE / "expected.json", "w", encoding="utf-8") as out:
        json.dump(recorded, out, indent=1, ensure_ascii=False)
        out.write("\n")
    counts = {}
    for entry in snippets.values():
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    print(f"{len(snippets)} snippets: {counts}")


if __name__ == "__main__":
    main()
