"""AST allowlist applied to every block before it is compiled.

The gate walks the parsed tree and refuses any node type, name, attribute or
import outside the policy. It never looks at source text, so spacing, string
tricks or comments cannot hide a construct from it.
"""

import ast

#: Modules a block may import. Each is exposed through a filtered proxy (see
#: restricted_env), never as the real module object.
ALLOWED_MODULES = frozenset(
    {
        "json",
        "re",
        "math",
        "statistics",
        "uuid",
        "datetime",
        "itertools",
        "typing",
        "collections",
        "functools",
    }
)

# Node types a block may contain. Everything else is refused by name.
_ALLOWED_NODES = (
    ast.Module,
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.While,
    ast.If,
    ast.Break,
    ast.Continue,
    ast.Pass,
    ast.FunctionDef,
    ast.Return,
    ast.Try,
    ast.ExceptHandler,
    ast.Raise,
    ast.Assert,
    ast.Delete,
    ast.Import,
    ast.ImportFrom,
    ast.alias,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.keyword,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Starred,
    ast.Name,
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.Dict,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.NamedExpr,
    ast.arguments,
    ast.arg,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
)

# Builtins and names whose only use in a block would be to leave the policy.
DENIED_NAMES = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "open",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "dir",
        "breakpoint",
        "input",
        "help",
        "memoryview",
        "type",
        "object",
        "super",
        "classmethod",
        "staticmethod",
        "property",
        "exit",
        "quit",
        "BaseException",
    }
)

# Attribute names that reach interpreter internals without a leading underscore.
_DENIED_ATTRIBUTES = frozenset(
    {
        "format",
        "format_map",
        "mro",
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "tb_frame",
        "tb_next",
        "co_code",
        "func_globals",
        "func_code",
    }
)


class PolicyError(Exception):
    """A block was refused; carries the offending node and its position."""

    def __init__(self, node, message):
        super().__init__(message)
        self.node_type = type(node).__name__
        self.line = getattr(node, "lineno", 0) or 0
        self.column = getattr(node, "col_offset", 0) or 0
        self.message = message


def check(tree):
    """Raise PolicyError for the first node of `tree` outside the policy."""
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise PolicyError(node, f"{type(node).__name__} is not allowed")
        _check_node(node)


def _check_node(node):
    if isinstance(node, ast.Name):
        _check_name(node, node.id)
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("_") or node.attr in _DENIED_ATTRIBUTES:
            raise PolicyError(node, f"attribute '{node.attr}' is not allowed")
        if not isinstance(node.ctx, ast.Load):
            # `store.name = ...` would redirect the journal; blocks only read attributes.
            raise PolicyError(node, f"assigning attribute '{node.attr}' is not allowed")
    elif isinstance(node, ast.Import):
        for alias in node.names:
            _check_module(node, alias.name)
            _check_binding(node, alias.asname)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            raise PolicyError(node, "relative imports are not allowed")
        _check_module(node, node.module or "")
        for alias in node.names:
            if alias.name == "*" or alias.name.startswith("_"):
                raise PolicyError(node, f"importing '{alias.name}' is not allowed")
            _check_binding(node, alias.asname or alias.name)
    elif isinstance(node, ast.FunctionDef):
        if node.decorator_list:
            raise PolicyError(node, "decorators are not allowed")
        _check_name(node, node.name)
    elif isinstance(node, ast.arg):
        _check_name(node, node.arg)
    elif isinstance(node, ast.Try):
        if node.finalbody:
            raise PolicyError(node, "finally blocks are not allowed")
    elif isinstance(node, ast.ExceptHandler):
        _check_handler(node)
    elif isinstance(node, ast.keyword) and node.arg is not None:
        _check_name(node, node.arg)


def _check_name(node, name):
    if name.startswith("__") or name in DENIED_NAMES:
        raise PolicyError(node, f"name '{name}' is not allowed")


def _check_binding(node, name):
    if name is not None:
        _check_name(node, name)


def _check_module(node, name):
    if name not in ALLOWED_MODULES:
        raise PolicyError(node, f"import of '{name}' is not allowed")


def _check_handler(node):
    # A broad handler could swallow the runtime guards, so it must name
    # Exception or something narrower.
    if node.type is None:
        raise PolicyError(node, "a bare 'except:' is not allowed")
