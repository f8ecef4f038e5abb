//! The host's policy gate against the guest's: every block of the gate's
//! corpus (allowed code, every kind of refusal, the repository's planner
//! blocks and attack blocks) is run through the runner twice, once gated
//! by the host first (as every binary runs it) and once by the guest's own
//! CPython gate alone, and must be refused the same way, to the node,
//! position and message, or allowed by both. The boundary this proves: the
//! gate's move out of the guest changed no verdict of the CPython the
//! runner really embeds.
//!
//! Needs the runner component: `cargo xtask test` sets `ANYPATH_RUNNER`.

use std::path::Path;

use crate::request::PolicyGate;
use crate::wasm_layer_tests::{runtime, sandbox};
use crate::{ExecError, ExecRequest, LimitOverrides};

#[allow(dead_code)]
#[path = "../../block-gate/tests/support/mod.rs"]
mod gate_corpus;

/// The policy verdict of a run: the refusal, or `None` when the block got
/// past the gate (whatever it did then).
fn refusal(gate: PolicyGate, code: &str) -> Option<(String, u32, u32, String)> {
    let mut request = ExecRequest::new(code);
    // Past the gate, a block only has to start: loops end soon.
    request.limits = LimitOverrides {
        timeout_ms: Some(300),
        ..LimitOverrides::default()
    };
    match runtime()
        .block_on(sandbox().execute_gated(request, gate))
        .outcome
    {
        Err(failure) => match failure.error {
            ExecError::Policy {
                node,
                line,
                column,
                message,
            } => Some((node, line, column, message)),
            _ => None,
        },
        Ok(_) => None,
    }
}

#[test]
fn the_host_gate_refuses_exactly_what_the_guest_gate_refuses() {
    let corpus = gate_corpus::corpus_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../block-gate/tests/corpus"),
    );
    assert!(
        corpus.len() > 900,
        "the corpus is read: {} snippets",
        corpus.len()
    );
    let mut differing = Vec::new();
    let mut refused = 0;
    for (name, code) in &corpus {
        let host = refusal(PolicyGate::Enforced, code);
        let guest = refusal(PolicyGate::GuestOnly, code);
        refused += usize::from(guest.is_some());
        if host != guest {
            differing.push(format!("{name}: host {host:?}, guest {guest:?}"));
        }
    }
    assert!(refused > 500, "most of the corpus is refused: {refused}");
    assert_eq!(
        differing,
        Vec::<String>::new(),
        "{} of {} blocks differ",
        differing.len(),
        corpus.len()
    );
}
