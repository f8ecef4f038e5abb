//! The whole walk compared with CPython's, node by node, on any Python
//! sources: `tests/trace.py` records what CPython's `ast.walk` yields for
//! each file (class, position, the gate's message for the node) and the
//! ignored test here walks Ruff's tree the same way and reports every
//! difference. The corpus proves the gate's verdicts; this proves the view
//! of the tree they rest on, on far more code than the corpus holds. When
//! this was written it found no difference on CPython 3.13's standard
//! library and test suite (1707 files, some 2.5 million nodes):
//!
//! ```text
//! python3.13 crates/block-gate/tests/trace.py /usr/lib/python3.13 > trace.json
//! BLOCK_GATE_TRACE=trace.json cargo test -p anypath-block-gate trace -- --ignored --nocapture
//! ```

use std::collections::{BTreeMap, VecDeque};

use ruff_python_ast::Mod;
use ruff_python_parser::{Mode, ParseOptions};

use crate::node::Node;
use crate::{TARGET, policy, position};

/// One node as the walk yields it: class, line, column, gate message.
type Entry = (String, u32, u32, Option<String>);

/// The full breadth-first walk of `source`, without the gate's limits or
/// early stop; `None` if Ruff does not parse it or cannot map it.
fn trace(source: &str) -> Option<Vec<Entry>> {
    let parsed = ruff_python_parser::parse_unchecked(
        source,
        ParseOptions::from(Mode::Module).with_target_version(TARGET),
    );
    if !parsed.errors().is_empty() || !parsed.unsupported_syntax_errors().is_empty() {
        return None;
    }
    let Mod::Module(module) = parsed.syntax() else {
        return None;
    };
    let mut queue: VecDeque<Node<'_>> = module.body.iter().map(Node::Stmt).collect();
    let mut entries = Vec::new();
    while let Some(node) = queue.pop_front() {
        let kind = node.kind().ok()?;
        let message = if policy::allowed_node(kind) {
            policy::check_node(node)
        } else {
            None
        };
        let (line, column) = position(node, source, parsed.tokens()).ok()?;
        entries.push((kind.to_owned(), line, column, message));
        node.children(&mut |child| queue.push_back(child)).ok()?;
    }
    Some(entries)
}

#[test]
#[ignore = "needs BLOCK_GATE_TRACE, a file tests/trace.py wrote"]
fn trace_matches_cpython() {
    let path = std::env::var("BLOCK_GATE_TRACE")
        .expect("BLOCK_GATE_TRACE names the output of tests/trace.py");
    let text = std::fs::read_to_string(&path).expect("the trace file is readable");
    let files: Vec<serde_json::Value> =
        serde_json::from_str(&text).expect("the trace file is JSON");
    let (mut nodes, mut same_files, mut unmapped) = (0usize, 0usize, Vec::new());
    let mut differences: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for file in &files {
        let name = file["path"].as_str().unwrap_or_default();
        let source = file["source"].as_str().unwrap_or_default();
        let expected: Vec<Entry> =
            serde_json::from_value(file["trace"].clone()).expect("trace entries");
        let Some(actual) = trace(source) else {
            unmapped.push(name.to_owned());
            continue;
        };
        nodes += expected.len();
        if actual == expected {
            same_files += 1;
            continue;
        }
        // The first difference of the file, classified by what differs.
        let at = actual
            .iter()
            .zip(&expected)
            .position(|(a, e)| a != e)
            .unwrap_or(actual.len().min(expected.len()));
        let (a, e) = (actual.get(at), expected.get(at));
        let class = match (a, e) {
            (Some(a), Some(e)) if a.0 != e.0 => {
                format!("order/kind: ruff {} vs cpython {}", a.0, e.0)
            }
            (Some(a), Some(e)) if (a.1, a.2) != (e.1, e.2) => format!("position of {}", e.0),
            (Some(a), Some(e)) => format!("message of {}: {:?} vs {:?}", e.0, a.3, e.3),
            _ => "length".to_owned(),
        };
        let entry = differences.entry(class).or_insert((0, String::new()));
        entry.0 += 1;
        if entry.1.is_empty() {
            entry.1 = format!("{name} #{at}: ruff {a:?} cpython {e:?}");
        }
    }
    println!(
        "{} files, {same_files} identical, {nodes} CPython nodes; unmapped: {unmapped:?}",
        files.len()
    );
    for (class, (count, example)) in &differences {
        println!("{count:5} {class}\n      e.g. {example}");
    }
    assert!(differences.is_empty(), "the walks differ");
}
