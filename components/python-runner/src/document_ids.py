"""What a document id may be, and how an id goes into a URL path.

An integer id lies within ±(2^53 - 1), which every JSON reader holds exactly
and which leaves assigned ids room to count on. A string id becomes a path segment (`/things/<id>`), so it must be one that a
path can reach: 1 to 256 characters, no control characters, and not `.`,
`..` or `search` (a URL resolver removes the first two; the third is the
search route). The gateway applies the same rule to request bodies before
anything runs (`anypath_rest::names::document_id`); this check covers ids a
block makes up itself.
"""

from urllib.parse import quote

MAX_ID_CHARS = 256
# The largest integer every JSON reader holds exactly (2^53 - 1).
MAX_INT_ID = 2**53 - 1
RESERVED_IDS = frozenset({".", "..", "search"})


def _is_control(char):
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


def check_new(doc_id):
    """Raise TypeError or ValueError unless `doc_id` may name a new document."""
    if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)):
        raise TypeError(f"id must be an int or a str, not {type(doc_id).__name__}")
    if isinstance(doc_id, int) and abs(doc_id) > MAX_INT_ID:
        raise ValueError(f"id {doc_id} is out of range: an integer id lies within ±(2^53 - 1)")
    if isinstance(doc_id, str) and not reachable(doc_id):
        raise ValueError(
            f"id {doc_id!r} is not allowed: a string id has 1 to {MAX_ID_CHARS} characters, "
            "no control characters, and is not '.', '..' or 'search'"
        )
    return doc_id


def reachable(text):
    """Whether a string id can be named by a path segment."""
    return (
        0 < len(text) <= MAX_ID_CHARS
        and text not in RESERVED_IDS
        and not any(_is_control(c) for c in text)
    )


def quote_segment(value):
    """`value` as one percent-encoded URL path segment: `caf%C3%A9`, `a%2Fb`."""
    return quote(str(value), safe="")
