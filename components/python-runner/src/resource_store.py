"""`store`: the JSON collections a block may read and change.

The operations run in the host (the `store` import), which holds the
documents, the journal of changes and the read sets: the journal, not the
block, is what the caller applies to durable storage. This module only
carries each call across: the arguments as JSON, the result back as fresh
Python values (so a block changes data only through these methods), and a
failure as the Python exception a block expects.
"""

import json

from componentize_py_types import Err

from json_depth import MAX_DEPTH, too_deep


class NeedsData(BaseException):
    """The block reached past a partial load.

    A BaseException, so `except Exception` in a block does not swallow it;
    the host remembers it too, so even a bare `except:` cannot turn a
    partial view into a wrong answer.
    """


class OutputLimit(BaseException):
    """The journal outgrew the result cap; the host refuses the run whatever the block does."""


_EXCEPTIONS = {
    "TypeError": TypeError,
    "ValueError": ValueError,
    "KeyError": KeyError,
    "LookupError": LookupError,
    "NeedsData": NeedsData,
    "OutputLimit": OutputLimit,
}


def _encode(value, what):
    """`value` as JSON text, or ValueError when it cannot be stored."""
    if too_deep(value):
        raise ValueError(f"{what} nests deeper than {MAX_DEPTH} levels")
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from None


def _id(doc_id):
    """An id as JSON: one the host can type-check, or the TypeError it would give."""
    try:
        return json.dumps(doc_id, allow_nan=False)
    except (TypeError, ValueError):
        raise TypeError(f"id must be an int or a str, not {type(doc_id).__name__}") from None


class Collection:
    """One named collection with the CRUD and query operations of `store`."""

    def __init__(self, name, host, default=False):
        self.name = name
        self._host = host
        # The default collection is named by absence: with no collection
        # loaded at all, the host then answers LookupError.
        self._which = None if default else name

    def _call(self, op, args_json):
        try:
            result = self._host(self._which, op, args_json)
        except Err as failed:
            error = failed.value
            raise _EXCEPTIONS.get(error.kind, RuntimeError)(error.message) from None
        return json.loads(result)

    def get_all(self):
        """Every document, in insertion order."""
        return self._call("get_all", "[]")

    def get(self, doc_id):
        """The document with this id, or None."""
        return self._call("get", f"[{_id(doc_id)}]")

    def insert(self, obj):
        """Add `obj`; assign the next integer id when it has none. Returns the id.

        The id is also set on `obj` itself, so a block can return it as the body.
        """
        stored = self._call("insert", f"[{_encode(obj, 'document')}]")
        obj["id"] = stored["id"]
        return stored["id"]

    def replace(self, doc_id, obj):
        """Replace the whole document; returns it, or None when there is none."""
        return self._call("replace", f"[{_id(doc_id)}, {_encode(obj, 'document')}]")

    def patch(self, doc_id, delta):
        """Merge `delta` into the document (the id never changes); None when absent."""
        return self._call("patch", f"[{_id(doc_id)}, {_encode(delta, 'delta')}]")

    def delete(self, doc_id):
        """Remove the document; True when it existed."""
        return self._call("delete", f"[{_id(doc_id)}]")

    def search(self, filters):
        """Documents matching every filter: `field=value` or `field__op=value`.

        Operators: contains, icontains, gt, gte, lt, lte, ne, in, like. A
        value in the query's form (a one-element list of text) stands for
        that text.
        """
        return self._call("search", f"[{_encode(filters, 'filters')}]")

    def list(self, limit=None, offset=0, sort=None, filters=None, q=None, embed=(), expand=()):
        """A page: {"items": [...], "page": {"limit", "offset", "total"}}.

        `sort` is a field name, "-field" for descending, a comma list of
        those, or [[field, descending], ...]. `filters` are those of `search`
        (a dict), or [[field, op, values], ...]: each must pass, and passes
        when any value does (for `ne`, every value). `q` keeps documents with
        the text in any value, any case. Filters apply before paging (`total`
        counts the matches). `embed` and `expand` are relations,
        {"field", "collection", "key"}: an embed sets `field` to the
        collection's documents whose `key` is the document's id; an expand
        sets it to the collection's document whose id is the document's
        `key`. `limit`, `offset` and `sort` may be given as ctx['query']
        holds them (`['10']`).
        """
        args = {"limit": limit, "offset": offset, "sort": sort, "filters": filters, "q": q, "embed": embed, "expand": expand}
        return self._call("list", _encode(args, "list arguments"))


class Store(Collection):
    """The default collection, plus `store.collection(name)` for the others.

    `host` is the `store` import's `call`; `names` the loaded collections, the default first.
    """

    def __init__(self, names, host):
        super().__init__(names[0] if names else None, host, default=True)
        self._by_name = {name: Collection(name, host) for name in names[1:]}
        if names:
            self._by_name = {names[0]: self, **self._by_name}

    def loaded(self):
        """Every loaded collection, the default first."""
        return list(self._by_name.values())

    def collection(self, name):
        """Another collection the plan loaded."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"collection '{name}' was not loaded for this request") from None

    def names(self):
        """Names of the loaded collections, the default first."""
        return list(self._by_name)
