//! Ruff's AST seen as CPython's: the node kinds `ast.walk` yields, with the
//! children `ast.iter_child_nodes` gives each, in CPython's `_fields` order.
//!
//! Ruff's tree is shaped for a linter, not for CPython's ASDL, so the view
//! maps it node by node:
//!
//! - one Ruff node, several CPython classes: `FunctionDef`/`AsyncFunctionDef`,
//!   `For`/`AsyncFor`, `With`/`AsyncWith`, `Try`/`TryStar`, and every literal
//!   (string, bytes, number, bool, `None`, `...`) is a `Constant`;
//! - Ruff's flat `elif`/`else` clauses are CPython's `If` nested in `orelse`,
//!   one level deeper per `elif`, which matters to a breadth-first walk;
//! - an f-string, with all the parts of an implicit concatenation, is one
//!   `JoinedStr` whose children are a `FormattedValue` per replacement field;
//!   a format spec is a `JoinedStr` again; t-strings likewise are a
//!   `TemplateStr` of `Interpolation`s;
//! - `arguments` is split differently: CPython lists the parameters, then
//!   the keyword-only defaults, then the other defaults, and a lambda without
//!   parameters still has an empty `arguments` node;
//! - a call's positional arguments come before its keywords, whatever the
//!   source order, and a dict's keys before its values.
//!
//! Leaves that are always allowed and have nothing to check (`Constant`,
//! `alias`, `expr_context`, operators, `type_ignore`) are not yielded at all:
//! they cannot change which node is the first offender, only slow the walk.

use ruff_python_ast::{
    Comprehension, ElifElseClause, ExceptHandler, Expr, FStringPart, InterpolatedElement,
    InterpolatedStringElement, InterpolatedStringElements, InterpolatedStringFormatSpec, Keyword,
    MatchCase, Parameter, Parameters, Pattern, Stmt, TypeParam, TypeParams, WithItem,
};
use ruff_text_size::{Ranged, TextSize};

/// A node of CPython's tree, as a reference into Ruff's.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Node<'a> {
    Stmt(&'a Stmt),
    Expr(&'a Expr),
    /// The `If` CPython makes of an `elif` clause: the clause and the ones
    /// after it, which become its `orelse`.
    Elif(&'a [ElifElseClause]),
    Handler(&'a ExceptHandler),
    /// `arguments`; `None` for a lambda without parameters.
    Arguments(Option<&'a Parameters>),
    Arg(&'a Parameter),
    Keyword(&'a Keyword),
    Comprehension(&'a Comprehension),
    /// A format spec, a `JoinedStr` of its own; with the nesting level of
    /// its replacement fields.
    FormatSpec(&'a InterpolatedStringFormatSpec, u8),
    /// A replacement field of an f-string, with its nesting level (1 for a
    /// field of the f-string itself, 2 for one in that field's format spec).
    FormattedValue(&'a InterpolatedElement, u8),
    Interpolation(&'a InterpolatedElement, u8),
    TypeParam(&'a TypeParam),
    WithItem(&'a WithItem),
    MatchCase(&'a MatchCase),
    Pattern(&'a Pattern),
}

/// Ruff parsed something CPython's tree has no certain equivalent for (an
/// IPython escape, a construct newer than the target version, an invalid
/// context left by error recovery): the block is left to the guest.
#[derive(Debug)]
pub(crate) struct Unmappable;

/// The replacement-field nesting CPython refuses within one f-string: its
/// tokenizer reports "f-string: expressions nested too deeply" for a field in
/// the format spec of a field in the format spec of a field in a format
/// spec, which Ruff accepts.
const MAX_FIELD_NESTING: u8 = 3;

impl<'a> Node<'a> {
    /// CPython's class name for the node.
    pub(crate) fn kind(self) -> Result<&'static str, Unmappable> {
        Ok(match self {
            Node::Stmt(stmt) => match stmt {
                Stmt::FunctionDef(f) if f.is_async => "AsyncFunctionDef",
                Stmt::FunctionDef(_) => "FunctionDef",
                Stmt::ClassDef(_) => "ClassDef",
                Stmt::Return(_) => "Return",
                Stmt::Delete(_) => "Delete",
                Stmt::TypeAlias(_) => "TypeAlias",
                Stmt::Assign(_) => "Assign",
                Stmt::AugAssign(_) => "AugAssign",
                Stmt::AnnAssign(_) => "AnnAssign",
                Stmt::For(f) if f.is_async => "AsyncFor",
                Stmt::For(_) => "For",
                Stmt::While(_) => "While",
                Stmt::If(_) => "If",
                Stmt::With(w) if w.is_async => "AsyncWith",
                Stmt::With(_) => "With",
                Stmt::Match(_) => "Match",
                Stmt::Raise(_) => "Raise",
                Stmt::Try(t) if t.is_star => "TryStar",
                Stmt::Try(_) => "Try",
                Stmt::Assert(_) => "Assert",
                // `lazy import` is Python 3.15 syntax, newer than the target.
                Stmt::Import(i) if i.is_lazy => return Err(Unmappable),
                Stmt::Import(_) => "Import",
                Stmt::ImportFrom(i) if i.is_lazy => return Err(Unmappable),
                Stmt::ImportFrom(_) => "ImportFrom",
                Stmt::Global(_) => "Global",
                Stmt::Nonlocal(_) => "Nonlocal",
                Stmt::Expr(_) => "Expr",
                Stmt::Pass(_) => "Pass",
                Stmt::Break(_) => "Break",
                Stmt::Continue(_) => "Continue",
                Stmt::IpyEscapeCommand(_) => return Err(Unmappable),
            },
            Node::Expr(expr) => match expr {
                Expr::BoolOp(_) => "BoolOp",
                Expr::Named(_) => "NamedExpr",
                Expr::BinOp(_) => "BinOp",
                Expr::UnaryOp(_) => "UnaryOp",
                Expr::Lambda(_) => "Lambda",
                Expr::If(_) => "IfExp",
                Expr::Dict(_) => "Dict",
                Expr::Set(_) => "Set",
                Expr::ListComp(_) => "ListComp",
                Expr::SetComp(_) => "SetComp",
                Expr::DictComp(_) => "DictComp",
                Expr::Generator(_) => "GeneratorExp",
                Expr::Await(_) => "Await",
                Expr::Yield(_) => "Yield",
                Expr::YieldFrom(_) => "YieldFrom",
                Expr::Compare(_) => "Compare",
                Expr::Call(_) => "Call",
                Expr::FString(_) => "JoinedStr",
                Expr::TString(_) => "TemplateStr",
                Expr::StringLiteral(_)
                | Expr::BytesLiteral(_)
                | Expr::NumberLiteral(_)
                | Expr::BooleanLiteral(_)
                | Expr::NoneLiteral(_)
                | Expr::EllipsisLiteral(_) => "Constant",
                Expr::Attribute(_) => "Attribute",
                Expr::Subscript(_) => "Subscript",
                Expr::Starred(_) => "Starred",
                Expr::Name(_) => "Name",
                Expr::List(_) => "List",
                Expr::Tuple(_) => "Tuple",
                Expr::Slice(_) => "Slice",
                Expr::IpyEscapeCommand(_) => return Err(Unmappable),
            },
            Node::Elif(_) => "If",
            Node::Handler(_) => "ExceptHandler",
            Node::Arguments(_) => "arguments",
            Node::Arg(_) => "arg",
            Node::Keyword(_) => "keyword",
            Node::Comprehension(_) => "comprehension",
            Node::FormatSpec(..) => "JoinedStr",
            Node::FormattedValue(..) => "FormattedValue",
            Node::Interpolation(..) => "Interpolation",
            Node::TypeParam(TypeParam::TypeVar(_)) => "TypeVar",
            Node::TypeParam(TypeParam::TypeVarTuple(_)) => "TypeVarTuple",
            Node::TypeParam(TypeParam::ParamSpec(_)) => "ParamSpec",
            Node::WithItem(_) => "withitem",
            Node::MatchCase(_) => "match_case",
            Node::Pattern(pattern) => match pattern {
                Pattern::MatchValue(_) => "MatchValue",
                Pattern::MatchSingleton(_) => "MatchSingleton",
                Pattern::MatchSequence(_) => "MatchSequence",
                Pattern::MatchMapping(_) => "MatchMapping",
                Pattern::MatchClass(_) => "MatchClass",
                Pattern::MatchStar(_) => "MatchStar",
                Pattern::MatchAs(_) => "MatchAs",
                Pattern::MatchOr(_) => "MatchOr",
            },
        })
    }

    /// Where Ruff's range for the node starts, when that is where CPython
    /// puts the node; `None` for the nodes CPython gives no position
    /// (`arguments`, `comprehension`, `withitem`, `match_case`) and for the
    /// ones `position` must find otherwise (decorated definitions).
    pub(crate) fn start(self) -> Option<TextSize> {
        match self {
            Node::Stmt(stmt) => Some(stmt.start()),
            Node::Expr(expr) => Some(expr.start()),
            Node::Elif(clauses) => clauses.first().map(Ranged::start),
            Node::Handler(handler) => Some(handler.start()),
            // Ruff's parameter range includes the `*` or `**`; CPython's
            // `arg` starts at the name.
            Node::Arg(parameter) => Some(parameter.name.start()),
            Node::Keyword(keyword) => Some(keyword.start()),
            Node::FormatSpec(spec, _) => Some(spec.start()),
            Node::FormattedValue(element, _) | Node::Interpolation(element, _) => {
                Some(element.start())
            }
            Node::TypeParam(param) => Some(param.start()),
            Node::Pattern(pattern) => Some(pattern.start()),
            Node::Arguments(_)
            | Node::Comprehension(_)
            | Node::WithItem(_)
            | Node::MatchCase(_) => None,
        }
    }

    /// Calls `push` with each child CPython's `iter_child_nodes` yields, in
    /// its order, leaving out the silent leaves (see the module docs). Fails
    /// on what has no certain CPython equivalent.
    pub(crate) fn children(self, push: &mut impl FnMut(Node<'a>)) -> Result<(), Unmappable> {
        match self {
            Node::Stmt(stmt) => stmt_children(stmt, push),
            Node::Expr(expr) => expr_children(expr, push),
            Node::Elif(clauses) => {
                let Some((clause, rest)) = clauses.split_first() else {
                    return Err(Unmappable);
                };
                let Some(test) = &clause.test else {
                    return Err(Unmappable);
                };
                expr(test, push);
                stmts(&clause.body, push);
                orelse(rest, push)
            }
            Node::Handler(ExceptHandler::ExceptHandler(handler)) => {
                opt_expr(handler.type_.as_deref(), push);
                stmts(&handler.body, push);
                Ok(())
            }
            Node::Arguments(None) => Ok(()),
            Node::Arguments(Some(parameters)) => {
                // posonlyargs, args, vararg, kwonlyargs, kw_defaults, kwarg, defaults.
                for p in parameters.posonlyargs.iter().chain(&parameters.args) {
                    push(Node::Arg(&p.parameter));
                }
                if let Some(vararg) = &parameters.vararg {
                    push(Node::Arg(vararg));
                }
                for p in &parameters.kwonlyargs {
                    push(Node::Arg(&p.parameter));
                }
                for p in &parameters.kwonlyargs {
                    opt_expr(p.default.as_deref(), push);
                }
                if let Some(kwarg) = &parameters.kwarg {
                    push(Node::Arg(kwarg));
                }
                for p in parameters.posonlyargs.iter().chain(&parameters.args) {
                    opt_expr(p.default.as_deref(), push);
                }
                Ok(())
            }
            Node::Arg(parameter) => {
                opt_expr(parameter.annotation.as_deref(), push);
                Ok(())
            }
            Node::Keyword(keyword) => {
                expr(&keyword.value, push);
                Ok(())
            }
            Node::Comprehension(comprehension) => {
                expr(&comprehension.target, push);
                expr(&comprehension.iter, push);
                exprs(&comprehension.ifs, push);
                Ok(())
            }
            Node::FormatSpec(spec, level) => {
                fields(&spec.elements, level, Node::FormattedValue, push)
            }
            Node::FormattedValue(element, level) => {
                expr(&element.expression, push);
                if let Some(spec) = &element.format_spec {
                    push(Node::FormatSpec(spec, level.saturating_add(1)));
                }
                Ok(())
            }
            Node::Interpolation(element, level) => {
                expr(&element.expression, push);
                if let Some(spec) = &element.format_spec {
                    push(Node::FormatSpec(spec, level.saturating_add(1)));
                }
                Ok(())
            }
            Node::TypeParam(param) => {
                match param {
                    TypeParam::TypeVar(var) => {
                        opt_expr(var.bound.as_deref(), push);
                        opt_expr(var.default.as_deref(), push);
                    }
                    TypeParam::TypeVarTuple(var) => opt_expr(var.default.as_deref(), push),
                    TypeParam::ParamSpec(spec) => opt_expr(spec.default.as_deref(), push),
                }
                Ok(())
            }
            Node::WithItem(item) => {
                expr(&item.context_expr, push);
                opt_expr(item.optional_vars.as_deref(), push);
                Ok(())
            }
            Node::MatchCase(case) => {
                push(Node::Pattern(&case.pattern));
                opt_expr(case.guard.as_deref(), push);
                stmts(&case.body, push);
                Ok(())
            }
            Node::Pattern(pattern) => {
                match pattern {
                    Pattern::MatchValue(p) => expr(&p.value, push),
                    Pattern::MatchSingleton(_) | Pattern::MatchStar(_) => {}
                    Pattern::MatchSequence(p) => patterns(&p.patterns, push),
                    Pattern::MatchMapping(p) => {
                        exprs(&p.keys, push);
                        patterns(&p.patterns, push);
                    }
                    Pattern::MatchClass(p) => {
                        // cls, patterns, kwd_attrs (names), kwd_patterns.
                        expr(&p.cls, push);
                        patterns(&p.arguments.patterns, push);
                        for keyword in &p.arguments.keywords {
                            push(Node::Pattern(&keyword.pattern));
                        }
                    }
                    Pattern::MatchAs(p) => {
                        if let Some(inner) = &p.pattern {
                            push(Node::Pattern(inner));
                        }
                    }
                    Pattern::MatchOr(p) => patterns(&p.patterns, push),
                }
                Ok(())
            }
        }
    }
}

fn stmt_children<'a>(stmt: &'a Stmt, push: &mut impl FnMut(Node<'a>)) -> Result<(), Unmappable> {
    match stmt {
        Stmt::FunctionDef(f) => {
            // args, body, decorator_list, returns, type_params.
            push(Node::Arguments(Some(&f.parameters)));
            stmts(&f.body, push);
            for decorator in &f.decorator_list {
                expr(&decorator.expression, push);
            }
            opt_expr(f.returns.as_deref(), push);
            type_params(f.type_params.as_deref(), push);
        }
        Stmt::ClassDef(c) => {
            // bases, keywords, body, decorator_list, type_params.
            if let Some(arguments) = &c.arguments {
                exprs(&arguments.args, push);
                for keyword in &arguments.keywords {
                    push(Node::Keyword(keyword));
                }
            }
            stmts(&c.body, push);
            for decorator in &c.decorator_list {
                expr(&decorator.expression, push);
            }
            type_params(c.type_params.as_deref(), push);
        }
        Stmt::Return(r) => opt_expr(r.value.as_deref(), push),
        Stmt::Delete(d) => exprs(&d.targets, push),
        Stmt::TypeAlias(t) => {
            expr(&t.name, push);
            type_params(t.type_params.as_deref(), push);
            expr(&t.value, push);
        }
        Stmt::Assign(a) => {
            exprs(&a.targets, push);
            expr(&a.value, push);
        }
        Stmt::AugAssign(a) => {
            expr(&a.target, push);
            expr(&a.value, push);
        }
        Stmt::AnnAssign(a) => {
            expr(&a.target, push);
            expr(&a.annotation, push);
            opt_expr(a.value.as_deref(), push);
        }
        Stmt::For(f) => {
            expr(&f.target, push);
            expr(&f.iter, push);
            stmts(&f.body, push);
            stmts(&f.orelse, push);
        }
        Stmt::While(w) => {
            expr(&w.test, push);
            stmts(&w.body, push);
            stmts(&w.orelse, push);
        }
        Stmt::If(i) => {
            expr(&i.test, push);
            stmts(&i.body, push);
            return orelse(&i.elif_else_clauses, push);
        }
        Stmt::With(w) => {
            for item in &w.items {
                push(Node::WithItem(item));
            }
            stmts(&w.body, push);
        }
        Stmt::Match(m) => {
            expr(&m.subject, push);
            for case in &m.cases {
                push(Node::MatchCase(case));
            }
        }
        Stmt::Raise(r) => {
            opt_expr(r.exc.as_deref(), push);
            opt_expr(r.cause.as_deref(), push);
        }
        Stmt::Try(t) => {
            stmts(&t.body, push);
            for handler in &t.handlers {
                push(Node::Handler(handler));
            }
            stmts(&t.orelse, push);
            stmts(&t.finalbody, push);
        }
        Stmt::Assert(a) => {
            expr(&a.test, push);
            opt_expr(a.msg.as_deref(), push);
        }
        Stmt::Expr(e) => expr(&e.value, push),
        Stmt::Import(_)
        | Stmt::ImportFrom(_)
        | Stmt::Global(_)
        | Stmt::Nonlocal(_)
        | Stmt::Pass(_)
        | Stmt::Break(_)
        | Stmt::Continue(_) => {}
        Stmt::IpyEscapeCommand(_) => return Err(Unmappable),
    }
    Ok(())
}

fn expr_children<'a>(node: &'a Expr, push: &mut impl FnMut(Node<'a>)) -> Result<(), Unmappable> {
    match node {
        Expr::BoolOp(e) => exprs(&e.values, push),
        Expr::Named(e) => {
            expr(&e.target, push);
            expr(&e.value, push);
        }
        Expr::BinOp(e) => {
            expr(&e.left, push);
            expr(&e.right, push);
        }
        Expr::UnaryOp(e) => expr(&e.operand, push),
        Expr::Lambda(e) => {
            push(Node::Arguments(e.parameters.as_deref()));
            expr(&e.body, push);
        }
        Expr::If(e) => {
            expr(&e.test, push);
            expr(&e.body, push);
            expr(&e.orelse, push);
        }
        Expr::Dict(e) => {
            // All the keys (a `**` entry has none), then all the values.
            for item in &e.items {
                opt_expr(item.key.as_ref(), push);
            }
            for item in &e.items {
                expr(&item.value, push);
            }
        }
        Expr::Set(e) => exprs(&e.elts, push),
        Expr::ListComp(e) => comprehension(&e.elt, &e.generators, push),
        Expr::SetComp(e) => comprehension(&e.elt, &e.generators, push),
        Expr::Generator(e) => comprehension(&e.elt, &e.generators, push),
        Expr::DictComp(e) => {
            // `{**d for d in ds}` (no key) is Python 3.15 syntax.
            let Some(key) = &e.key else {
                return Err(Unmappable);
            };
            expr(key, push);
            expr(&e.value, push);
            for generator in &e.generators {
                push(Node::Comprehension(generator));
            }
        }
        Expr::Await(e) => expr(&e.value, push),
        Expr::Yield(e) => opt_expr(e.value.as_deref(), push),
        Expr::YieldFrom(e) => expr(&e.value, push),
        Expr::Compare(e) => {
            expr(&e.left, push);
            exprs(&e.comparators, push);
        }
        Expr::Call(e) => {
            expr(&e.func, push);
            exprs(&e.arguments.args, push);
            for keyword in &e.arguments.keywords {
                push(Node::Keyword(keyword));
            }
        }
        // The f-string is the `JoinedStr`: all parts of an implicit
        // concatenation together, their literal text as `Constant`s.
        Expr::FString(e) => {
            for part in &e.value {
                if let FStringPart::FString(fstring) = part {
                    fields(&fstring.elements, 1, Node::FormattedValue, push)?;
                }
            }
        }
        Expr::TString(e) => {
            for tstring in &e.value {
                fields(&tstring.elements, 1, Node::Interpolation, push)?;
            }
        }
        Expr::StringLiteral(_)
        | Expr::BytesLiteral(_)
        | Expr::NumberLiteral(_)
        | Expr::BooleanLiteral(_)
        | Expr::NoneLiteral(_)
        | Expr::EllipsisLiteral(_)
        | Expr::Name(_) => {}
        Expr::Attribute(e) => expr(&e.value, push),
        Expr::Subscript(e) => {
            expr(&e.value, push);
            expr(&e.slice, push);
        }
        Expr::Starred(e) => expr(&e.value, push),
        Expr::List(e) => exprs(&e.elts, push),
        Expr::Tuple(e) => exprs(&e.elts, push),
        Expr::Slice(e) => {
            opt_expr(e.lower.as_deref(), push);
            opt_expr(e.upper.as_deref(), push);
            opt_expr(e.step.as_deref(), push);
        }
        Expr::IpyEscapeCommand(_) => return Err(Unmappable),
    }
    Ok(())
}

/// Pushes `node` unless it is a literal: CPython's `Constant`, an
/// always-allowed leaf.
fn expr<'a>(node: &'a Expr, push: &mut impl FnMut(Node<'a>)) {
    if !node.is_literal_expr() {
        push(Node::Expr(node));
    }
}

fn opt_expr<'a>(node: Option<&'a Expr>, push: &mut impl FnMut(Node<'a>)) {
    if let Some(node) = node {
        expr(node, push);
    }
}

fn exprs<'a>(nodes: &'a [Expr], push: &mut impl FnMut(Node<'a>)) {
    for node in nodes {
        expr(node, push);
    }
}

fn stmts<'a>(nodes: &'a [Stmt], push: &mut impl FnMut(Node<'a>)) {
    for node in nodes {
        push(Node::Stmt(node));
    }
}

fn patterns<'a>(nodes: &'a [Pattern], push: &mut impl FnMut(Node<'a>)) {
    for node in nodes {
        push(Node::Pattern(node));
    }
}

fn type_params<'a>(params: Option<&'a TypeParams>, push: &mut impl FnMut(Node<'a>)) {
    if let Some(params) = params {
        for param in params {
            push(Node::TypeParam(param));
        }
    }
}

fn comprehension<'a>(
    elt: &'a Expr,
    generators: &'a [Comprehension],
    push: &mut impl FnMut(Node<'a>),
) {
    expr(elt, push);
    for generator in generators {
        push(Node::Comprehension(generator));
    }
}

/// The `orelse` of an `If` whose remaining clauses are `clauses`: the nested
/// `If` of an `elif`, the body of an `else`, or nothing.
fn orelse<'a>(
    clauses: &'a [ElifElseClause],
    push: &mut impl FnMut(Node<'a>),
) -> Result<(), Unmappable> {
    match clauses.first() {
        None => {}
        Some(clause) if clause.test.is_some() => push(Node::Elif(clauses)),
        Some(clause) => {
            // Ruff accepts clauses after an `else` only with a syntax error.
            if clauses.len() > 1 {
                return Err(Unmappable);
            }
            stmts(&clause.body, push);
        }
    }
    Ok(())
}

/// The replacement fields among `elements`, as `make(field, level)`. Past
/// CPython's nesting limit the block is left to the guest, whose parser
/// refuses it.
fn fields<'a>(
    elements: &'a InterpolatedStringElements,
    level: u8,
    make: fn(&'a InterpolatedElement, u8) -> Node<'a>,
    push: &mut impl FnMut(Node<'a>),
) -> Result<(), Unmappable> {
    for element in elements.iter() {
        if let InterpolatedStringElement::Interpolation(field) = element {
            if level > MAX_FIELD_NESTING {
                return Err(Unmappable);
            }
            push(make(field, level));
        }
    }
    Ok(())
}
