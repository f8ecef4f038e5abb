//! `GET /metrics`: the sandbox service in the Prometheus text format, made
//! with `prometheus-client`. Runs and REST executions are counted as they
//! end; sessions, sweeps, artifacts and admission are read at each scrape.
//!
//! Tenant labels are bounded: the first [`MAX_TENANT_LABELS`] tenants seen
//! keep their name, later ones share the label `other`, so a service with
//! many tenants cannot grow the label set without end.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};

use anypath_interpreter::Interpreter;
use anypath_wire::ExecError;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::admission::Admission;

/// Tenants named in labels; the rest are `other`.
pub const MAX_TENANT_LABELS: usize = 100;

/// What ran: a REST block (`/v1/exec`) or a code-interpreter run.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum Kind {
    Block,
    Session,
}

impl Kind {
    /// The label value.
    fn as_str(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::Session => "session",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    tenant: String,
    reason: &'static str,
}

/// The service's metrics: the families updated as things happen, and the
/// registry that also reads the interpreter and admission at each scrape.
pub struct ServiceMetrics {
    registry: Registry,
    runs: Family<RunLabels, Counter>,
    durations: Family<KindLabels, Histogram>,
    refused: Family<RefusedLabels, Counter>,
    tenants: Arc<TenantLabels>,
}

impl ServiceMetrics {
    /// Registers every metric; `interpreter` and `admission` are read at
    /// each scrape (held weakly: the metrics never keep them alive).
    pub fn new(interpreter: Option<&Arc<Interpreter>>, admission: &Arc<Admission>) -> Self {
        let mut registry = Registry::with_prefix("anypath");
        let runs = Family::<RunLabels, Counter>::default();
        registry.register("runs", "Executions that ended, by kind (block: a REST block; session: a code-interpreter run) and outcome", runs.clone());
        let durations = Family::<KindLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.0005, 2.0, 16)));
        registry.register_with_unit("run_duration", "How long executions took, by kind", prometheus_client::registry::Unit::Seconds, durations.clone());
        let refused = Family::<RefusedLabels, Counter>::default();
        registry.register("admission_refused", "Executions refused before they ran, by tenant and reason", refused.clone());
        let tenants = Arc::new(TenantLabels::default());
        registry.register_collector(Box::new(Scraped {
            interpreter: interpreter.map(Arc::downgrade),
            admission: Arc::downgrade(admission),
            tenants: tenants.clone(),
        }));
        Self { registry, runs, durations, refused, tenants }
    }

    /// Counts an execution that ran, with its outcome and duration.
    pub fn record_run(&self, kind: Kind, error: Option<&ExecError>, quota_exceeded: bool, duration_us: u64) {
        let (kind, outcome) = (kind.as_str(), outcome(error, quota_exceeded));
        self.runs.get_or_create(&RunLabels { kind, outcome }).inc();
        self.durations.get_or_create(&KindLabels { kind }).observe(duration_us as f64 / 1e6);
    }

    /// Counts an execution refused before it ran (`reason`: the refusal's code).
    pub fn record_refusal(&self, tenant: &str, reason: &'static str) {
        self.refused.get_or_create(&RefusedLabels { tenant: self.tenants.label(tenant), reason }).inc();
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// The outcome label of a run: `ok`, or what ended it.
fn outcome(error: Option<&ExecError>, quota_exceeded: bool) -> &'static str {
    match error {
        None if quota_exceeded => "quota",
        None => "ok",
        Some(e) => match e.kind() {
            "exception" => "exception",
            "fuel_exhausted" => "fuel",
            "timeout" => "timeout",
            "memory_limit" => "memory",
            "output_limit" => "output",
            "policy" => "policy",
            "interrupted" => "interrupted",
            _ if quota_exceeded => "quota",
            _ => "error",
        },
    }
}

/// The tenant names labels may carry: the first ones seen, then `other`.
#[derive(Debug, Default)]
struct TenantLabels {
    named: Mutex<HashSet<String>>,
}

impl TenantLabels {
    fn label(&self, tenant: &str) -> String {
        let mut named = self.named.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if named.contains(tenant) {
            return tenant.to_owned();
        }
        if named.len() < MAX_TENANT_LABELS {
            named.insert(tenant.to_owned());
            return tenant.to_owned();
        }
        "other".to_owned()
    }
}

/// Read at each scrape: the interpreter's sessions, sweeps and artifacts,
/// and admission's slots per tenant.
#[derive(Debug)]
struct Scraped {
    interpreter: Option<Weak<Interpreter>>,
    admission: Weak<Admission>,
    tenants: Arc<TenantLabels>,
}

impl Collector for Scraped {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(interpreter) = self.interpreter.as_ref().and_then(Weak::upgrade) {
            let stats = interpreter.stats();
            let gauges = [
                ("sessions_live", "Sessions whose instance holds Python state now", stats.sessions_live),
                (
                    "sessions_live_bytes",
                    "Memory the live sessions' instances hold of their own (the pages they wrote), which the memory budget counts",
                    stats.sessions_live_bytes,
                ),
                ("sessions_hibernated", "Sessions whose state waits in a saved image", stats.sessions_hibernated),
                ("sessions_open", "Sessions the service holds (live, hibernated or not started)", stats.sessions_open),
            ];
            for (name, help, value) in gauges {
                let gauge = ConstGauge::new(value as i64);
                gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
            }
            let counters = [
                ("sessions_created", "Sessions created", stats.sessions_created),
                ("sessions_started_ahead", "New sessions that took an instance started ahead of them", stats.sessions_started_ahead),
                ("sessions_closed", "Sessions closed by their clients", stats.sessions_closed),
                ("sessions_expired", "Sessions (and leftover directories) the cleanup sweeps removed as expired", stats.sessions_expired),
                ("cleanup_sweeps", "Cleanup sweeps run", stats.sweeps),
                ("artifacts_kept", "Artifacts kept from runs", stats.artifacts_kept),
                ("artifact_bytes_kept", "Bytes of the artifacts kept from runs", stats.artifact_bytes_kept),
            ];
            for (name, help, value) in counters {
                let counter = ConstCounter::new(value);
                counter.encode(encoder.encode_descriptor(name, help, None, counter.metric_type())?)?;
            }
            // A shared store's figures: what this host wrote and read, and
            // what the last sweep found (gauges: a sweep's are not cumulative).
            for (name, help, value) in interpreter.store_metrics() {
                let gauge = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(&name, help, None, gauge.metric_type())?)?;
            }
        }
        if let Some(admission) = self.admission.upgrade() {
            let (running, queued, tenants) = admission.snapshot();
            for (name, help, value) in [("running", "Executions running now", running), ("queued", "Executions waiting for a slot", queued)] {
                let gauge = ConstGauge::new(value as i64);
                gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
            }
            let mut per_tenant: std::collections::BTreeMap<String, (i64, i64)> = std::collections::BTreeMap::new();
            for (tenant, counts) in &tenants {
                let entry = per_tenant.entry(self.tenants.label(tenant)).or_default();
                entry.0 += counts.running as i64;
                entry.1 += counts.queued as i64;
            }
            for (name, help, pick) in [
                ("tenant_running", "Executions running now, by tenant", 0usize),
                ("tenant_queued", "Executions waiting for a slot, by tenant", 1usize),
            ] {
                let mut family = encoder.encode_descriptor(name, help, None, prometheus_client::metrics::MetricType::Gauge)?;
                for (tenant, values) in &per_tenant {
                    let value = if pick == 0 { values.0 } else { values.1 };
                    let gauge = ConstGauge::new(value);
                    gauge.encode(family.encode_family(&TenantLabel { tenant: tenant.clone() })?)?;
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_labels_stop_growing_at_their_bound() {
        let labels = TenantLabels::default();
        for i in 0..MAX_TENANT_LABELS {
            assert_eq!(labels.label(&format!("t{i}")), format!("t{i}"));
        }
        assert_eq!(labels.label("one-too-many"), "other");
        assert_eq!(labels.label("t0"), "t0", "a named tenant keeps its name");
    }

    #[test]
    fn outcomes_name_what_ended_a_run() {
        assert_eq!(outcome(None, false), "ok");
        assert_eq!(outcome(None, true), "quota");
        let timeout = ExecError::Timeout { timeout_ms: 1 };
        assert_eq!(outcome(Some(&timeout), false), "timeout");
    }
}
