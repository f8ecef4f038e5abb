"""An iterative nesting check, run before json.dumps sees a value.

json.dumps recurses in C; a value nested deeply enough would exhaust the
WebAssembly stack and trap. Walking it here, without recursion, turns that
into an ordinary error.
"""

#: Deepest nesting of lists and dicts accepted in a reply or a document.
MAX_DEPTH = 100


def too_deep(value, limit=MAX_DEPTH):
    """True when `value` nests lists/dicts more than `limit` levels."""
    pending = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        if isinstance(current, dict):
            children = current.values()
        elif isinstance(current, (list, tuple)):
            children = current
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
