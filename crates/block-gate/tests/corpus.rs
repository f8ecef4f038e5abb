//! Every corpus snippet's verdict against CPython's, as `expected.py`
//! recorded it from the runner's own policy gate.

#[allow(dead_code, reason = "each test binary uses part of it")]
mod support;

use std::collections::BTreeMap;

use anypath_block_gate::{Refusal, Verdict, check};
use serde_json::Value;

/// Snippets CPython parses that the gate leaves to the guest, each with the
/// reason: the gate's own limits, which no real block comes near, and the one
/// construct found (in the corpus and in CPython's own test suite) that Ruff
/// refuses and CPython 3.13 accepts.
const UNPARSED_ON_PURPOSE: &[(&str, &str)] = &[
    (
        "unparsed/fstring-line-break-in-format-spec",
        "Ruff refuses a line break in a single-quoted f-string's format spec",
    ),
    (
        "unparsed/fstring-line-break-in-empty-format-spec",
        "Ruff refuses a line break in a single-quoted f-string's format spec",
    ),
    (
        "limits/bracket-nesting-past-gate-limit",
        "bracket nesting past MAX_BRACKETS",
    ),
    (
        "limits/tree-depth-past-gate-limit",
        "tree deeper than MAX_DEPTH",
    ),
    (
        "limits/unary-chain-past-gate-limit",
        "tree deeper than MAX_DEPTH",
    ),
    (
        "limits/integer-past-gate-digit-limit",
        "an integer literal longer than MAX_INT_DIGITS",
    ),
    (
        "limits/offender-then-tree-past-gate-limit",
        "tree deeper than MAX_DEPTH, though the offender comes first",
    ),
];

#[test]
fn every_snippet_gets_cpythons_verdict() {
    let expected: Value =
        serde_json::from_str(include_str!("expected.json")).expect("expected.json is JSON");
    let recorded = expected["snippets"].as_object().expect("snippets");
    let corpus = support::corpus();
    let names: Vec<&str> = corpus.iter().map(|(name, _)| name.as_str()).collect();
    let recorded_names: Vec<&str> = recorded.keys().map(String::as_str).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted, recorded_names,
        "expected.json is out of date: run tests/expected.py"
    );

    let on_purpose: BTreeMap<&str, &str> = UNPARSED_ON_PURPOSE.iter().copied().collect();
    let mut failures = Vec::new();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for (name, source) in &corpus {
        let entry = &recorded[name.as_str()];
        assert_eq!(
            entry["fnv1a64"],
            support::fnv1a64(source),
            "{name} changed since expected.json was recorded: run tests/expected.py"
        );
        let actual = check(source);
        let cpython = entry["verdict"].as_str().unwrap_or_default();
        *tally
            .entry(format!("{cpython} -> {}", label(&actual)))
            .or_default() += 1;
        let ok = match (cpython, &actual) {
            ("allowed", Verdict::Allowed) => true,
            ("refused", Verdict::Refused(refusal)) => *refusal == expected_refusal(entry),
            ("syntax_error" | "parse_failure", Verdict::Unparsed) => true,
            ("allowed" | "refused", Verdict::Unparsed) => on_purpose.contains_key(name.as_str()),
            _ => false,
        };
        if !ok {
            failures.push(format!("{name}: CPython {entry}, crate {actual:?}"));
        }
    }
    for (name, _) in UNPARSED_ON_PURPOSE {
        let source = &corpus
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is in the corpus"))
            .1;
        assert_eq!(
            check(source),
            Verdict::Unparsed,
            "{name} is listed as unparsed on purpose"
        );
        assert!(
            matches!(
                recorded[*name]["verdict"].as_str(),
                Some("allowed" | "refused")
            ),
            "{name}: CPython parses it"
        );
    }
    println!("{} snippets; CPython -> crate: {tally:?}", corpus.len());
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn expected_refusal(entry: &Value) -> Refusal {
    let number = |key: &str| {
        entry[key]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(u32::MAX)
    };
    Refusal {
        node: entry["node"].as_str().unwrap_or_default().to_owned(),
        line: number("line"),
        column: number("column"),
        message: entry["message"].as_str().unwrap_or_default().to_owned(),
    }
}

fn label(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Allowed => "allowed",
        Verdict::Refused(_) => "refused",
        Verdict::Unparsed => "unparsed",
    }
}
