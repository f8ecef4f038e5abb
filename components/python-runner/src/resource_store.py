"""`store`: the JSON collections a block may read and change.

Documents live in memory for the duration of one execution. Every change is
recorded in a journal; the journal, not the block, is what the caller applies
to durable storage. Reads return copies, so a block can only change data
through these methods.
"""

import json
import re

import document_ids
from json_depth import MAX_DEPTH, too_deep

_OPERATORS = ("contains", "icontains", "gte", "gt", "lte", "lt", "ne", "in", "like")


def _clone(value):
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _check_id(doc_id):
    if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)):
        raise TypeError(f"id must be an int or a str, not {type(doc_id).__name__}")
    return doc_id


def _key(doc_id):
    # Path segments arrive as strings: "7" must find the document with id 7.
    return str(_check_id(doc_id))


def _check_document(obj, what):
    if not isinstance(obj, dict):
        raise TypeError(f"{what} must be a dict, not {type(obj).__name__}")
    if too_deep(obj):
        raise ValueError(f"{what} nests deeper than {MAX_DEPTH} levels")
    try:
        json.dumps(obj, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from None


class NeedsData(BaseException):
    """The block reached past a partial load.

    A BaseException, so `except Exception` in a block does not swallow it; the
    runner also checks `Collection.needs_data` after the block, so even a bare
    `except:` cannot turn a partial view into a wrong answer.
    """


class Loaded:
    """One collection as the caller loaded it (see `collection` in runner.wit)."""

    def __init__(self, name, documents_json, complete=True, absent_ids=(), reserved_id=None):
        self.name = name
        self.documents_json = documents_json
        self.complete = complete
        self.absent_ids = frozenset(absent_ids)
        self.reserved_id = reserved_id


class Collection:
    """One named collection with the CRUD and query operations of `store`.

    It records what the block read (whole-collection scans, looked-up ids),
    so the store can re-check exactly that at commit time.
    """

    def __init__(self, loaded, journal):
        self.name = loaded.name
        self._raw = loaded.documents_json
        self._docs = None
        self._journal = journal
        self._complete = loaded.complete
        self._absent = loaded.absent_ids
        self._reserved = loaded.reserved_id
        self.scanned = False
        self.read_ids = set()
        self.needs_data = None

    def _missing(self, what):
        self.needs_data = f"{what} in '{self.name}' was not loaded"
        raise NeedsData(self.needs_data)

    def _scan(self):
        """All documents, for an operation that depends on the whole collection."""
        if not self._complete:
            self._missing("the whole collection")
        self.scanned = True
        return self._documents()

    def _point(self, doc_id):
        """The documents and the key of `doc_id`, recording the lookup."""
        key = _key(doc_id)
        docs = self._documents()
        if not self._complete and key not in docs and key not in self._absent:
            self._missing(f"id {doc_id!r}")
        self.read_ids.add(key)
        return docs, key

    def _documents(self):
        # Parsed on first use: a block that never touches a collection never pays for it.
        if self._docs is None:
            if self.name is None:
                raise LookupError("no collection was loaded for this request")
            parsed = json.loads(self._raw) if self._raw else []
            if not isinstance(parsed, list):
                raise ValueError(f"collection '{self.name}' is not a JSON array")
            self._docs = {}
            for doc in parsed:
                if isinstance(doc, dict) and "id" in doc:
                    self._docs[_key(doc["id"])] = doc
            self._raw = None
        return self._docs

    def _record(self, op, doc_id, doc):
        self._journal.append((self.name, op, doc_id, None if doc is None else _clone(doc)))

    def get_all(self):
        """Every document, in insertion order."""
        return [_clone(d) for d in self._scan().values()]

    def get(self, doc_id):
        """The document with this id, or None."""
        docs, key = self._point(doc_id)
        doc = docs.get(key)
        return None if doc is None else _clone(doc)

    def insert(self, obj):
        """Add `obj`; assign the next integer id when it has none. Returns the id.

        The id is also set on `obj` itself, so a block can return it as the body.
        """
        _check_document(obj, "document")
        doc_id = obj.get("id")
        if doc_id is None:
            doc_id = self._new_id()
            obj["id"] = doc_id
            docs = self._documents()
        else:
            document_ids.check_new(doc_id)
            docs, key = self._point(doc_id)
            if key in docs:
                raise ValueError(f"id {doc_id!r} already exists in '{self.name}'")
        stored = _clone(obj)
        docs[_key(doc_id)] = stored
        self._record("insert", doc_id, stored)
        return doc_id

    def replace(self, doc_id, obj):
        """Replace the whole document; returns it, or None when there is none."""
        _check_document(obj, "document")
        docs, key = self._point(doc_id)
        current = docs.get(key)
        if current is None:
            return None
        stored = _clone(obj)
        stored["id"] = current["id"]
        docs[key] = stored
        self._record("replace", current["id"], stored)
        return _clone(stored)

    def patch(self, doc_id, delta):
        """Merge `delta` into the document (the id never changes); None when absent."""
        _check_document(delta, "delta")
        docs, key = self._point(doc_id)
        current = docs.get(key)
        if current is None:
            return None
        stored = _clone(current)
        for field, value in delta.items():
            if field != "id":
                stored[field] = _clone(value)
        docs[key] = stored
        self._record("patch", current["id"], stored)
        return _clone(stored)

    def delete(self, doc_id):
        """Remove the document; True when it existed."""
        docs, key = self._point(doc_id)
        current = docs.pop(key, None)
        if current is None:
            return False
        self._record("delete", current["id"], None)
        return True

    def search(self, filters):
        """Documents matching every filter: `field=value` or `field__op=value`.

        Operators: contains, icontains, gt, gte, lt, lte, ne, in. A value in
        the query's form (a one-element list of text) stands for that text.
        """
        if not isinstance(filters, dict):
            raise TypeError("filters must be a dict")
        tests = [_compile_filter(k, v) for k, v in filters.items()]
        return [
            _clone(d)
            for d in self._scan().values()
            if all(test(d) for test in tests)
        ]

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
        limit = _query_value(limit)
        limit = _non_negative(limit, "limit") if limit is not None else None
        offset = _non_negative(_query_value(offset) or 0, "offset")
        keys = _sort_keys(sort)
        if isinstance(filters, dict):
            tests = [_compile_filter(k, v) for k, v in filters.items()]
        else:
            tests = [_compile_any(*f) for f in (filters or ())]
        if q:
            wanted = str(q).casefold()
            tests.append(lambda d: _mentions(d, wanted))
        docs = [d for d in self._scan().values() if all(test(d) for test in tests)]
        # Least significant key first: each sort is stable.
        for field, descending in reversed(keys):
            present = [d for d in docs if d.get(field) is not None]
            missing = [d for d in docs if d.get(field) is None]
            present.sort(key=lambda d: _sort_key(d[field]), reverse=descending)
            docs = present + missing
        end = None if limit is None else offset + limit
        items = [_clone(d) for d in docs[offset:end]]
        for relation in embed or ():
            self._embed(items, _relation(relation))
        for relation in expand or ():
            self._expand(items, _relation(relation))
        return {"items": items, "page": {"limit": limit, "offset": offset, "total": len(docs)}}

    def _related(self, name):
        """Another loaded collection's documents, or none."""
        others = getattr(self, "_siblings", None) or {}
        other = others.get(name)
        return list(other._scan().values()) if other is not None else []

    def _embed(self, items, relation):
        field, collection, key = relation
        # The children grouped by their key once, not searched per item.
        by_parent = {}
        for child in self._related(collection):
            if child.get(key) is not None:
                by_parent.setdefault(str(child[key]), []).append(child)
        for item in items:
            item[field] = [_clone(c) for c in by_parent.get(str(item.get("id")), ())]

    def _expand(self, items, relation):
        field, collection, key = relation
        parents = {str(p.get("id")): p for p in self._related(collection)}
        for item in items:
            found = parents.get(str(item.get(key)))
            if found is not None:
                item[field] = _clone(found)

    def _new_id(self):
        """The reserved id when there is one, else one past the highest integer id."""
        reserved = self._reserved
        if reserved is not None:
            self._reserved = None  # one reservation, one insert
            docs = self._documents()
            if str(reserved) not in docs and str(reserved) not in self.read_ids:
                self.read_ids.add(str(reserved))
                return reserved
        return self._next_id(self._scan())

    def _next_id(self, docs):
        highest = 0
        for doc in docs.values():
            value = doc.get("id")
            if isinstance(value, int) and not isinstance(value, bool) and value > highest:
                highest = value
        candidate = highest + 1
        while str(candidate) in docs:  # a client-supplied string id may hold it
            candidate += 1
        return candidate


class Store(Collection):
    """The default collection, plus `store.collection(name)` for the others."""

    def __init__(self, collections, journal):
        if not collections:
            # A block may still run without data; touching `store` then fails clearly.
            collections = [Loaded(None, None)]
        first, *others = collections
        super().__init__(first, journal)
        self._by_name = {first.name: self}
        for loaded in others:
            self._by_name[loaded.name] = Collection(loaded, journal)
        for collection in self._by_name.values():
            collection._siblings = self._by_name

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


def _query_value(value):
    """A query parameter as the block may pass it: `['10']` (how ctx['query']
    holds it), `'10'` or `10`. An empty list is no value."""
    if isinstance(value, (list, tuple)):
        if len(value) > 1:
            raise ValueError(f"expected one value, got {len(value)}: {list(value)!r}")
        return value[0] if value else None
    return value


def _non_negative(value, what):
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{what} must be an integer, not {value!r}")
    if isinstance(value, str):
        value = value.strip()
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an integer, not {value!r}") from None
    if number < 0:
        raise ValueError(f"{what} must not be negative")
    return number


def _sort_key(value):
    # Numbers before strings before anything else, so mixed fields still sort.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    if isinstance(value, str):
        return (1, 0, value)
    return (2, 0, json.dumps(value, sort_keys=True))


def _sort_keys(sort):
    """[(field, descending)] from "f", "-f", "a,-b" or [[field, descending]]."""
    if isinstance(sort, (list, tuple)) and len(sort) == 1 and isinstance(sort[0], str):
        sort = sort[0]  # as ctx['query'] holds it
    if not sort:
        return []
    if isinstance(sort, str):
        return [(k.lstrip("-"), k.startswith("-")) for k in sort.split(",") if k.strip("-")]
    if isinstance(sort, (list, tuple)) and all(isinstance(k, (list, tuple)) and len(k) == 2 and isinstance(k[0], str) for k in sort):
        return [(k[0], bool(k[1])) for k in sort]
    raise TypeError(f"sort must be a field name, '-field' for descending, or [[field, descending]], not {sort!r}")


def _compile_any(field, op, values):
    """A filter that passes when any of `values` does (every one, for `ne`)."""
    if op not in _TESTS:
        raise ValueError(f"unknown filter operator {op!r}")
    if not isinstance(values, (list, tuple)):
        values = [values]
    if op == "like":
        values = [_pattern(v) for v in values]
    tests = [_compile_filter(f"{field}__{op}" if op != "eq" else field, v) for v in values]
    if op == "ne":
        return lambda d: all(t(d) for t in tests)
    # Any of no values is none: getMany with no ids asks for no record.
    return lambda d: any(t(d) for t in tests)


def _mentions(value, wanted):
    """Whether `wanted` (casefolded) is in any value of `value`, nested too."""
    if isinstance(value, dict):
        return any(_mentions(v, wanted) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, wanted) for v in value)
    if isinstance(value, bool):
        # As json-server reads it: true is the text "true", false is no text.
        return value and wanted in "true"
    if value is None or value == 0:
        return False
    return wanted in str(value).casefold()


def _relation(relation):
    """(field, collection, key) of an embed or expand."""
    if not isinstance(relation, dict) or not all(isinstance(relation.get(k), str) for k in ("field", "collection", "key")):
        raise TypeError(f"a relation is {{'field', 'collection', 'key'}}, not {relation!r}")
    return relation["field"], relation["collection"], relation["key"]


def _pattern(pattern):
    """A `like` value compiled once: a bad pattern is refused before any document is read."""
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(str(pattern), re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {pattern!r} ({exc})") from None


def _like(actual, pattern):
    """json-server's `_like`: a case-insensitive regular expression found anywhere."""
    if actual is None:
        return False
    return _pattern(pattern).search(str(actual)) is not None


def _compile_filter(key, expected):
    field, op = key, "eq"
    if "__" in key:
        head, tail = key.rsplit("__", 1)
        if tail in _OPERATORS:
            field, op = head, tail
    test = _TESTS[op]
    if op != "in" and isinstance(expected, list) and len(expected) == 1 and isinstance(expected[0], str):
        # ctx['query'] passed as it is: each value is a one-element list of text.
        expected = expected[0]

    def matches(doc):
        if field not in doc:
            return op == "ne"
        return test(doc[field], expected)

    return matches


def _coerce(expected, actual):
    """Query values arrive as strings; compare them as the stored value's type."""
    if not isinstance(expected, str) or isinstance(actual, str):
        return expected
    if isinstance(actual, bool):
        lowered = expected.lower()
        return {"true": True, "false": False}.get(lowered, expected)
    if isinstance(actual, (int, float)):
        try:
            return int(expected)
        except ValueError:
            try:
                return float(expected)
            except ValueError:
                return expected
    return expected


def _ordered(op):
    def test(actual, expected):
        expected = _coerce(expected, actual)
        try:
            return op(actual, expected)
        except TypeError:
            return False

    return test


def _contains(actual, expected):
    if isinstance(actual, str):
        return str(expected) in actual
    if isinstance(actual, list):
        return any(_equal(item, expected) for item in actual)
    return False


def _icontains(actual, expected):
    if isinstance(actual, str):
        return str(expected).casefold() in actual.casefold()
    if isinstance(actual, list):
        wanted = str(expected).casefold()
        return any(isinstance(i, str) and i.casefold() == wanted for i in actual)
    return False


def _equal(actual, expected):
    return actual == _coerce(expected, actual)


def _within(actual, expected):
    options = expected.split(",") if isinstance(expected, str) else expected
    try:
        return any(_equal(actual, option) for option in options)
    except TypeError:
        return False


_TESTS = {
    "eq": _equal,
    "ne": lambda a, e: not _equal(a, e),
    "contains": _contains,
    "icontains": _icontains,
    "gt": _ordered(lambda a, e: a > e),
    "gte": _ordered(lambda a, e: a >= e),
    "lt": _ordered(lambda a, e: a < e),
    "lte": _ordered(lambda a, e: a <= e),
    "in": _within,
    "like": _like,
}
