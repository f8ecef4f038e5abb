//! The policy of `components/python-runner/src/policy_gate.py`, table for
//! table and check for check.
//!
//! The Python module is the reference: the runner still applies it to every
//! block the host lets through, so any difference here would show as the
//! host refusing a block the guest allows (or the other way round). The
//! crate's tests compare these tables with the ones the reference script
//! records from the Python module.

use ruff_python_ast::{ExceptHandler, ExprContext, Stmt};

use crate::node::Node;

/// One table of `policy_gate.py` as a constant (the tests compare it with
/// the Python module's) and as a `match`, which is what a check runs: a few
/// length and byte comparisons rather than a scan of the whole table.
macro_rules! table {
    ($(#[$doc:meta])* $table:ident, $lookup:ident: [$($name:literal),* $(,)?]) => {
        $(#[$doc])*
        #[cfg_attr(not(test), allow(dead_code))]
        pub(crate) const $table: &[&str] = &[$($name),*];

        $(#[$doc])*
        pub(crate) fn $lookup(name: &str) -> bool {
            matches!(name, $($name)|*)
        }
    };
}

table! {
    /// `ALLOWED_MODULES`: the modules a block may import.
    ALLOWED_MODULES, allowed_module: [
        "json", "re", "math", "statistics", "uuid", "datetime", "itertools", "typing", "collections", "functools",
    ]
}

table! {
    /// `DENIED_NAMES`: builtins and names whose only use in a block would be
    /// to leave the policy.
    DENIED_NAMES, denied_name: [
        "exec", "eval", "compile", "open", "getattr", "setattr", "delattr", "globals", "locals", "vars", "dir",
        "breakpoint", "input", "help", "memoryview", "type", "object", "super", "classmethod", "staticmethod",
        "property", "exit", "quit", "BaseException",
    ]
}

table! {
    /// `_DENIED_ATTRIBUTES`: attribute names that reach interpreter internals
    /// without a leading underscore.
    DENIED_ATTRIBUTES, denied_attribute: [
        "format", "format_map", "mro", "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "ag_frame",
        "ag_code", "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame", "tb_next", "co_code",
        "func_globals", "func_code",
    ]
}

table! {
    /// `_ALLOWED_NODES`, by CPython class name. The abstract classes in the
    /// Python tuple (`expr_context`, `operator`, `unaryop`, `cmpop`,
    /// `boolop`) cover leaf nodes that are always allowed and have nothing to
    /// check; the walk never yields them (see `node`), so they need no entry.
    ALLOWED_NODES, allowed_node: [
        "Module", "Expr", "Assign", "AugAssign", "AnnAssign", "For", "While", "If", "Break", "Continue", "Pass",
        "FunctionDef", "Return", "Try", "ExceptHandler", "Raise", "Assert", "Delete", "Import", "ImportFrom",
        "alias", "BoolOp", "BinOp", "UnaryOp", "Compare", "IfExp", "Call", "keyword", "Attribute", "Subscript",
        "Slice", "Starred", "Name", "Constant", "List", "Tuple", "Set", "Dict", "ListComp", "SetComp", "DictComp",
        "GeneratorExp", "comprehension", "JoinedStr", "FormattedValue", "NamedExpr", "arguments", "arg",
    ]
}

/// `_check_node`: the message of the `PolicyError` it raises for `node`, if
/// any. Only called on nodes whose kind is allowed, as `check` does.
pub(crate) fn check_node(node: Node<'_>) -> Option<String> {
    match node {
        Node::Expr(ruff_python_ast::Expr::Name(name)) => check_name(name.id.as_str()),
        Node::Expr(ruff_python_ast::Expr::Attribute(attribute)) => {
            let attr = attribute.attr.as_str();
            if attr.starts_with('_') || denied_attribute(attr) {
                return Some(format!("attribute '{attr}' is not allowed"));
            }
            if attribute.ctx != ExprContext::Load {
                // `store.name = ...` would redirect the journal; blocks only read attributes.
                return Some(format!("assigning attribute '{attr}' is not allowed"));
            }
            None
        }
        Node::Stmt(Stmt::Import(import)) => import.names.iter().find_map(|alias| {
            check_module(alias.name.as_str()).or_else(|| {
                alias
                    .asname
                    .as_ref()
                    .and_then(|asname| check_name(asname.as_str()))
            })
        }),
        Node::Stmt(Stmt::ImportFrom(import)) => {
            if import.level > 0 {
                return Some("relative imports are not allowed".to_owned());
            }
            if let Some(message) =
                check_module(import.module.as_ref().map_or("", |module| module.as_str()))
            {
                return Some(message);
            }
            import.names.iter().find_map(|alias| {
                let name = alias.name.as_str();
                if name == "*" || name.starts_with('_') {
                    return Some(format!("importing '{name}' is not allowed"));
                }
                check_name(alias.asname.as_ref().map_or(name, |asname| asname.as_str()))
            })
        }
        Node::Stmt(Stmt::FunctionDef(function)) => {
            if !function.decorator_list.is_empty() {
                return Some("decorators are not allowed".to_owned());
            }
            check_name(function.name.as_str())
        }
        Node::Arg(parameter) => check_name(parameter.name.as_str()),
        Node::Stmt(Stmt::Try(try_stmt)) if !try_stmt.finalbody.is_empty() => {
            Some("finally blocks are not allowed".to_owned())
        }
        // A broad handler could swallow the runtime guards, so it must name
        // Exception or something narrower.
        Node::Handler(ExceptHandler::ExceptHandler(handler)) if handler.type_.is_none() => {
            Some("a bare 'except:' is not allowed".to_owned())
        }
        Node::Keyword(keyword) => keyword
            .arg
            .as_ref()
            .and_then(|arg| check_name(arg.as_str())),
        _ => None,
    }
}

/// `_check_name`.
fn check_name(name: &str) -> Option<String> {
    (name.starts_with("__") || denied_name(name)).then(|| format!("name '{name}' is not allowed"))
}

/// `_check_module`.
fn check_module(name: &str) -> Option<String> {
    (!allowed_module(name)).then(|| format!("import of '{name}' is not allowed"))
}
