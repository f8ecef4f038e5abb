//! The policy gate for Python blocks, on the native host.
//!
//! The runner refuses a block whose AST leaves an allowlist
//! (`components/python-runner/src/policy_gate.py`). That check needs no
//! sandbox, so the host applies it first with [`check`]: a refused block is
//! answered without starting an instance at all. The answer must be the one
//! the runner would give, so [`check`] parses with Ruff's parser, views
//! Ruff's tree as CPython's (node classes, field order, positions; see
//! `node`), walks it breadth-first as `ast.walk` does and applies the
//! Python module's checks in the same order. What it cannot answer exactly
//! it leaves to the guest ([`Verdict::Unparsed`]).
//!
//! The verdicts are held to CPython's by the corpus under `tests/`, whose
//! expected answers `tests/expected.py` records from the Python module
//! itself.

mod node;
mod policy;
#[cfg(test)]
mod trace;

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};

use ruff_python_ast::token::{Token, TokenKind};
use ruff_python_ast::{Expr, Mod, PythonVersion, Stmt};
use ruff_python_parser::{Mode, ParseOptions, Parsed};
use ruff_text_size::{Ranged, TextSize};

use node::{Node, Unmappable};

/// What the runner's policy gate would make of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The gate lets the block through; it may still fail when it runs.
    Allowed,
    /// The gate refuses the block, exactly as the runner's would.
    Refused(Refusal),
    /// No answer from the host: the source does not parse (the guest then
    /// reports CPython's own `SyntaxError`, message and all), or it uses
    /// something this crate cannot map to CPython's tree with certainty.
    /// The block goes to the guest, whose gate decides.
    Unparsed,
}

/// The first node outside the policy, as the runner reports it in a policy
/// violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// CPython's AST class name of the node, such as `Name` or `ClassDef`.
    pub node: String,
    /// CPython's `lineno`, 1-based; 0 for a node CPython gives no position.
    pub line: u32,
    /// CPython's `col_offset`: UTF-8 bytes from the start of the line; 0 for
    /// a node CPython gives no position.
    pub column: u32,
    /// The `PolicyError` message, word for word.
    pub message: String,
}

/// The grammar the gate parses: that of the CPython the expected verdicts
/// are recorded with. Newer syntax (t-strings, `except A, B:`, lazy imports)
/// is then a Ruff "unsupported syntax" error, so [`Verdict::Unparsed`], and
/// the guest, whatever its version, answers for it.
const TARGET: PythonVersion = PythonVersion::PY313;

/// The deepest tree (in CPython's nodes, the module's statements at depth 1)
/// the gate answers for. CPython gives up on deep nesting with a
/// `MemoryError` ("too complex to parse", some 6000 parser frames, which a
/// bracketed lambda spends in under 200 levels) or a `RecursionError`
/// building the tree, and a runner in WebAssembly may have less stack than
/// that; a block nested anywhere near this deep is left to it.
const MAX_DEPTH: u32 = 80;

/// The deepest bracket nesting the gate answers for (parentheses, brackets,
/// braces, f-strings). CPython's tokenizer refuses 200 levels ("too many
/// nested parentheses"), which Ruff parses without complaint, and each level
/// costs CPython's parser some 30 frames of the 6000 it allows.
const MAX_BRACKETS: u32 = 40;

/// The longest decimal integer literal, in digits, the gate answers for.
/// CPython refuses one past `sys.get_int_max_str_digits()` (4300 by
/// default, but set per interpreter) with a `SyntaxError` Ruff does not
/// give; 640, `sys.int_info.str_digits_check_threshold`, is the lowest value
/// that limit can take.
const MAX_INT_DIGITS: usize = 640;

/// The stack dropping Ruff's tree may take, per byte of source, when the
/// gate did not see all of the tree within `MAX_DEPTH`. The destructor
/// recurses once per level of nesting, and a source can nest about a level
/// per byte (`-` or `[` repeated); Ruff's parser grows its own stack as it
/// recurses, the destructor cannot. A debug build takes about 200 bytes a
/// level; this leaves twice that.
const DROP_STACK_PER_BYTE: usize = 512;
const DROP_STACK_BASE: usize = 64 << 10;

/// The verdict the runner's policy gate would give `source`:
/// `policy_gate.check(ast.parse(source))` under CPython. Never panics.
pub fn check(source: &str) -> Verdict {
    // CPython refuses these before parsing ("source code string cannot
    // contain null bytes", "invalid non-printable character U+FEFF"); Ruff
    // accepts them.
    // (Two searches for one character each: both run as `memchr`, where one
    // search for either character would decode the source char by char.)
    if source.contains('\0') || source.contains('\u{feff}') {
        return Verdict::Unparsed;
    }
    let parsed = ruff_python_parser::parse_unchecked(
        source,
        ParseOptions::from(Mode::Module).with_target_version(TARGET),
    );
    // A bug in the parser or here must not take the host down: the guest
    // answers instead.
    let verdict =
        catch_unwind(AssertUnwindSafe(|| verdict(source, &parsed))).unwrap_or(Verdict::Unparsed);
    if verdict == Verdict::Unparsed {
        // The tree may be as deep as the source is long: drop it on a stack
        // that can take that. A verdict either way means the walk saw the
        // whole tree within MAX_DEPTH, which any stack can drop.
        let stack =
            DROP_STACK_BASE.saturating_add(source.len().saturating_mul(DROP_STACK_PER_BYTE));
        stacker::maybe_grow(stack, stack, move || drop(parsed));
    }
    verdict
}

fn verdict(source: &str, parsed: &Parsed<Mod>) -> Verdict {
    if !parsed.errors().is_empty() || !parsed.unsupported_syntax_errors().is_empty() {
        return Verdict::Unparsed;
    }
    if !within_token_limits(source, parsed.tokens()) {
        return Verdict::Unparsed;
    }
    gate(source, parsed).unwrap_or(Verdict::Unparsed)
}

/// `ast.walk` with the gate's checks: breadth-first, each node checked as it
/// is reached, first its class, then `_check_node`. The walk goes on past
/// the first offender to the end of the tree, as CPython's parser reads all
/// of it first: a tree past the limits would fail there instead.
fn gate(source: &str, parsed: &Parsed<Mod>) -> Result<Verdict, Unmappable> {
    let Mod::Module(module) = parsed.syntax() else {
        return Err(Unmappable);
    };
    let mut queue: VecDeque<(Node<'_>, u32)> = VecDeque::with_capacity(64);
    queue.extend(module.body.iter().map(|stmt| (Node::Stmt(stmt), 1)));
    let mut offender: Option<(Node<'_>, &'static str, String)> = None;
    while let Some((node, depth)) = queue.pop_front() {
        if depth > MAX_DEPTH {
            return Err(Unmappable);
        }
        let kind = node.kind()?;
        if offender.is_none() {
            if !policy::allowed_node(kind) {
                offender = Some((node, kind, format!("{kind} is not allowed")));
            } else if let Some(message) = policy::check_node(node) {
                offender = Some((node, kind, message));
            }
        }
        node.children(&mut |child| queue.push_back((child, depth + 1)))?;
    }
    let Some((node, kind, message)) = offender else {
        return Ok(Verdict::Allowed);
    };
    let (line, column) = position(node, source, parsed.tokens())?;
    Ok(Verdict::Refused(Refusal {
        node: kind.to_owned(),
        line,
        column,
        message,
    }))
}

/// CPython's `lineno` and `col_offset` of `node`.
fn position(node: Node<'_>, source: &str, tokens: &[Token]) -> Result<(u32, u32), Unmappable> {
    let start = match node {
        // A decorated definition starts at its first decorator in Ruff, at
        // its `def`, `async` or `class` keyword in CPython.
        Node::Stmt(Stmt::FunctionDef(f)) if !f.decorator_list.is_empty() => {
            definition_keyword(tokens, f.name.start(), TokenKind::Def, f.is_async)?
        }
        Node::Stmt(Stmt::ClassDef(c)) if !c.decorator_list.is_empty() => {
            definition_keyword(tokens, c.name.start(), TokenKind::Class, false)?
        }
        // A generator that is a call's only argument takes the call's
        // parentheses as its own in CPython; Ruff's range starts inside.
        Node::Expr(Expr::Generator(generator)) if !generator.parenthesized => {
            previous_token(tokens, generator.start(), TokenKind::Lpar)?
        }
        // CPython's format spec starts at the colon before it.
        Node::FormatSpec(spec, _) => {
            let colon = spec
                .start()
                .checked_sub(TextSize::from(1))
                .ok_or(Unmappable)?;
            if source.as_bytes().get(usize::from(colon)) != Some(&b':') {
                return Err(Unmappable);
            }
            colon
        }
        _ => match node.start() {
            Some(start) => start,
            None => return Ok((0, 0)),
        },
    };
    Ok(line_column(source, start))
}

/// The start of the `def`/`class` keyword (or of the `async` before it)
/// that precedes the definition's name. Only comments and line breaks could
/// come between, and neither can: they would end the statement.
fn definition_keyword(
    tokens: &[Token],
    name: TextSize,
    keyword: TokenKind,
    is_async: bool,
) -> Result<TextSize, Unmappable> {
    let at_name = tokens.partition_point(|token| token.start() < name);
    let keyword_at = at_name.checked_sub(1).ok_or(Unmappable)?;
    let found = tokens.get(keyword_at).ok_or(Unmappable)?;
    if found.kind() != keyword {
        return Err(Unmappable);
    }
    if !is_async {
        return Ok(found.start());
    }
    let async_token = tokens
        .get(keyword_at.checked_sub(1).ok_or(Unmappable)?)
        .ok_or(Unmappable)?;
    if async_token.kind() != TokenKind::Async {
        return Err(Unmappable);
    }
    Ok(async_token.start())
}

/// The start of the last token before `offset` other than comments and
/// line breaks inside brackets, which must be of kind `kind`.
fn previous_token(
    tokens: &[Token],
    offset: TextSize,
    kind: TokenKind,
) -> Result<TextSize, Unmappable> {
    let before = tokens.partition_point(|token| token.start() < offset);
    let token = tokens[..before]
        .iter()
        .rev()
        .find(|token| {
            !matches!(
                token.kind(),
                TokenKind::Comment | TokenKind::NonLogicalNewline
            )
        })
        .ok_or(Unmappable)?;
    if token.kind() != kind {
        return Err(Unmappable);
    }
    Ok(token.start())
}

/// 1-based line and UTF-8 byte column of `offset`. Lines end at `\n`,
/// `\r\n` or a lone `\r`, as CPython's tokenizer reads a string source.
fn line_column(source: &str, offset: TextSize) -> (u32, u32) {
    let bytes = source.as_bytes();
    let end = usize::from(offset).min(bytes.len());
    let mut line: u32 = 1;
    let mut line_start = 0;
    let mut i = 0;
    while i < end {
        match bytes[i] {
            b'\n' => {
                line = line.saturating_add(1);
                line_start = i + 1;
            }
            b'\r' => {
                if i + 1 < end && bytes[i + 1] == b'\n' {
                    i += 1;
                }
                line = line.saturating_add(1);
                line_start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    (line, u32::try_from(end - line_start).unwrap_or(u32::MAX))
}

/// Whether the tokens stay within what CPython's tokenizer accepts and the
/// gate answers for: bracket nesting and integer literal length (see the
/// limits above).
fn within_token_limits(source: &str, tokens: &[Token]) -> bool {
    let mut nesting: u32 = 0;
    for token in tokens {
        match token.kind() {
            TokenKind::Lpar
            | TokenKind::Lsqb
            | TokenKind::Lbrace
            | TokenKind::FStringStart
            | TokenKind::TStringStart => {
                nesting += 1;
                if nesting > MAX_BRACKETS {
                    return false;
                }
            }
            TokenKind::Rpar
            | TokenKind::Rsqb
            | TokenKind::Rbrace
            | TokenKind::FStringEnd
            | TokenKind::TStringEnd => {
                nesting = nesting.saturating_sub(1);
            }
            TokenKind::Int if usize::from(token.range().len()) > MAX_INT_DIGITS => {
                let Some(text) = source.get(token.range().to_std_range()) else {
                    return false;
                };
                let prefixed = text.len() > 1
                    && matches!(text.as_bytes()[1], b'x' | b'X' | b'o' | b'O' | b'b' | b'B');
                if !prefixed && text.bytes().filter(u8::is_ascii_digit).count() > MAX_INT_DIGITS {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(source: &str) -> (String, u32, u32, String) {
        match check(source) {
            Verdict::Refused(r) => (r.node, r.line, r.column, r.message),
            other => panic!("{source:?}: {other:?}"),
        }
    }

    /// The tables are `policy_gate.py`'s, as `tests/expected.py` recorded
    /// them with the corpus verdicts.
    #[test]
    fn the_policy_tables_are_the_python_modules() {
        let recorded: serde_json::Value =
            serde_json::from_str(include_str!("../tests/expected.json")).expect("JSON");
        let table = |key: &str| -> Vec<String> {
            let names = recorded["policy"][key]
                .as_array()
                .expect("a recorded table");
            names
                .iter()
                .map(|name| name.as_str().expect("a name").to_owned())
                .collect()
        };
        let sorted = |names: &[&str]| -> Vec<String> {
            let mut names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
            names.sort();
            names
        };
        assert_eq!(table("allowed_modules"), sorted(policy::ALLOWED_MODULES));
        assert_eq!(table("denied_names"), sorted(policy::DENIED_NAMES));
        assert_eq!(
            table("denied_attributes"),
            sorted(policy::DENIED_ATTRIBUTES)
        );
        // The abstract classes stand for leaves the walk leaves out.
        let abstract_leaves = ["boolop", "cmpop", "expr_context", "operator", "unaryop"];
        let nodes: Vec<String> = table("allowed_nodes")
            .into_iter()
            .filter(|n| !abstract_leaves.contains(&n.as_str()))
            .collect();
        assert_eq!(nodes, sorted(policy::ALLOWED_NODES));
        for (lookup, names) in [
            (
                policy::allowed_module as fn(&str) -> bool,
                policy::ALLOWED_MODULES,
            ),
            (policy::denied_name, policy::DENIED_NAMES),
            (policy::denied_attribute, policy::DENIED_ATTRIBUTES),
            (policy::allowed_node, policy::ALLOWED_NODES),
        ] {
            assert!(names.iter().all(|name| lookup(name)));
        }
    }

    #[test]
    fn a_plain_block_is_allowed() {
        assert_eq!(check("REPLY = {'status': 200}"), Verdict::Allowed);
    }

    #[test]
    fn the_first_offender_in_breadth_first_order_is_reported() {
        // `eval` is one level nearer the module than `_x`.
        assert_eq!(refused("f(g(a._x), eval)").3, "name 'eval' is not allowed");
    }

    #[test]
    fn columns_are_utf8_bytes() {
        assert_eq!(
            refused("x = 'é'; eval(1)"),
            ("Name".into(), 1, 10, "name 'eval' is not allowed".into())
        );
    }

    #[test]
    fn lines_end_at_lone_carriage_returns_too() {
        assert_eq!(refused("x = 1\reval(1)").1, 2);
        assert_eq!(refused("x = 1\r\neval(1)").1, 2);
    }

    #[test]
    fn a_decorated_definition_is_at_its_keyword() {
        assert_eq!(refused("@d\n@e\ndef f():\n    pass").1, 3);
        let async_def = refused("@d\nasync  def f():\n    pass");
        assert_eq!(
            async_def,
            (
                "AsyncFunctionDef".into(),
                2,
                0,
                "AsyncFunctionDef is not allowed".into()
            )
        );
    }
}
