"""Records what CPython's `ast.walk` yields for Python sources, for the
crate's node-by-node comparison (the ignored `trace_matches_cpython` test).

Run it with CPython 3.13 or newer, the interpreter whose tree the gate
mirrors:

    python3.13 crates/block-gate/tests/trace.py DIR_OR_FILE... > trace.json

For each file that parses: the walk in order, each node as
[class, lineno, col_offset, message], where the message is the policy
gate's `PolicyError` for an allowed node (`_check_node`) or null. Leaves
the crate's walk leaves out (constants, contexts, operators, aliases) are
left out here too: they are always allowed and cannot change the order of
the others.
"""

import ast
import collections
import json
import pathlib
import sys
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "components/python-runner/src"))
import policy_gate  # noqa: E402

SILENT = (ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.alias, ast.type_ignore)


def trace(tree):
    entries = []
    todo = collections.deque(ast.iter_child_nodes(tree))
    while todo:
        node = todo.popleft()
        todo.extend(ast.iter_child_nodes(node))
        if isinstance(node, SILENT):
            continue
        message = None
        if isinstance(node, policy_gate._ALLOWED_NODES):
            try:
                policy_gate._check_node(node)
            except policy_gate.PolicyError as refused:
                message = refused.message
        entries.append([type(node).__name__, getattr(node, "lineno", 0) or 0, getattr(node, "col_offset", 0) or 0, message])
    return entries


def main(paths):
    warnings.simplefilter("ignore")
    files = []
    for root in map(pathlib.Path, paths):
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            try:
                # Line breaks as they are: CPython counts a lone `\r` as one.
                with open(path, encoding="utf-8", newline="") as file:
                    source = file.read()
                tree = ast.parse(source)
            except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError):
                continue
            files.append({"path": str(path), "source": source, "trace": trace(tree)})
    json.dump(files, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
