"""The globals a gated block runs with: restricted builtins and module proxies.

Modules are never handed to a block directly: a real module object carries the
modules it imported (``uuid.os``, ``typing.sys``) and helpers that evaluate
strings (``typing.get_type_hints``). A block gets a namespace holding only the
public, non-module attributes of each allowed module.
"""

import builtins
import collections
import datetime
import functools
import itertools
import json
import math
import re
import statistics
import types
import typing
import uuid

from document_ids import quote_segment
from policy_gate import ALLOWED_MODULES, DENIED_NAMES

_SAFE_BUILTIN_NAMES = (
    "abs all any ascii bin bool bytes callable chr dict divmod enumerate filter "
    "float frozenset hash hex int isinstance issubclass iter len list map max min "
    "next oct ord pow print range repr reversed round set slice sorted str sum "
    "tuple zip "
    "ArithmeticError AssertionError AttributeError Exception IndexError KeyError "
    "LookupError NotImplementedError OverflowError RuntimeError StopIteration "
    "TypeError ValueError ZeroDivisionError"
).split()

# Attributes withheld from a module proxy beyond the generic rules.
_WITHHELD = {
    "typing": {
        "get_type_hints",
        "ForwardRef",
        "evaluate_forward_ref",
        "get_overloads",
        "clear_overloads",
        "no_type_check",
        "no_type_check_decorator",
    },
    "functools": {"update_wrapper", "wraps", "singledispatch", "singledispatchmethod"},
    "uuid": {"getnode"},
}

_MODULES = {
    "collections": collections,
    "datetime": datetime,
    "functools": functools,
    "itertools": itertools,
    "json": json,
    "math": math,
    "re": re,
    "statistics": statistics,
    "typing": typing,
    "uuid": uuid,
}
assert set(_MODULES) == ALLOWED_MODULES


def _proxy(name, module):
    withheld = _WITHHELD.get(name, set())
    exported = {
        attr: value
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and attr not in withheld
        and not isinstance(value, types.ModuleType)
    }
    return types.SimpleNamespace(**exported)


_PROXIES = {name: _proxy(name, module) for name, module in _MODULES.items()}


class ImportRefused(ImportError):
    """Raised when a block imports a module outside the policy at run time."""


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name not in _PROXIES:
        raise ImportRefused(f"import of '{name}' is not allowed")
    return _PROXIES[name]


def _safe_builtins():
    table = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES}
    table["__import__"] = _guarded_import
    assert not DENIED_NAMES & table.keys()
    return table


SAFE_BUILTINS = _safe_builtins()


def block_globals(store, ctx, gated):
    """Fresh globals for one block. Ungated (tests only) gets the real builtins."""
    return {
        "__builtins__": SAFE_BUILTINS if gated else builtins,
        "__name__": "__block__",
        "store": store,
        "ctx": ctx,
        "quote_segment": quote_segment,
    }
