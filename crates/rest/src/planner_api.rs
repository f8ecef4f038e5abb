//! The bodies the gateway, the planner and the store exchange about plans:
//! the planner's `POST /plan`, the store's plan cache
//! (`/plan-cache/get|put|evict`) and its `/describe`. One type each, so the
//! side that writes a body and the side that reads it cannot drift apart.

use serde::{Deserialize, Serialize};

use crate::context::RequestContext;
use crate::plan::Plan;

/// `POST /plan`: the request the gateway asks the planner to plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRequest {
    /// The tenant whose plan cache and collections are consulted.
    pub tenant: String,
    /// The request to plan.
    pub ctx: RequestContext,
    /// Earlier answers of this request that failed, with what went wrong.
    #[serde(default)]
    pub repairs: Vec<Repair>,
    /// A cached plan just failed: do not serve it again.
    #[serde(default)]
    pub skip_cache: bool,
}

/// One failed answer of the model and why it failed, to ask for a repair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    /// The model's answer, as it wrote it.
    pub answer: String,
    /// What was wrong with it, as the model is told.
    pub problem: String,
}

/// Where a plan came from; also the `x-anypath-plan` header and log field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanSource {
    /// The seed's rules.
    Rules,
    /// The plan cache: an earlier LLM plan for a request of the same shape.
    Cache,
    /// The LLM, just now.
    Llm,
}

impl PlanSource {
    /// The name on the wire: `rules`, `cache` or `llm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rules => "rules",
            Self::Cache => "cache",
            Self::Llm => "llm",
        }
    }
}

/// LLM use of one planning call, for the gateway's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlanUsage {
    /// Calls made, refused ones included.
    pub llm_calls: u32,
    /// Tokens of the answered ones (`input_tokens`, `output_tokens`).
    #[serde(flatten)]
    pub tokens: anypath_llm::Usage,
}

/// The planner's answer to `POST /plan`. On the wire it is one flat object:
/// `{"ok": true, "source", "plan", "cache_key"?, "answer"?, "usage"}` for a
/// plan, `{"ok": false, "problem", "answer", "usage"}` for a model's answer
/// that is not a valid plan (so the gateway can ask for a repair).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "AnswerBody", try_from = "AnswerBody")]
pub struct PlanAnswer {
    /// A plan, or why the model's answer is not one.
    pub outcome: PlanOutcome,
    /// What the answer cost.
    pub usage: PlanUsage,
}

/// What the planner came up with.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "one per planning call, moved rarely: boxing the plan buys nothing")]
pub enum PlanOutcome {
    /// A plan to run.
    Planned {
        /// Where it came from.
        source: PlanSource,
        /// The plan.
        plan: Plan,
        /// The plan-cache key of the request (cache and LLM plans), under
        /// which the gateway caches a plan that worked or evicts one that failed.
        cache_key: Option<String>,
        /// The model's answer the plan was parsed from (LLM plans), for a repair.
        answer: Option<String>,
    },
    /// The model answered, but not with a valid plan.
    Invalid {
        /// What is wrong with the answer, with the lesson that fixes it.
        problem: String,
        /// The model's answer.
        answer: String,
    },
}

/// The flat wire shape of `PlanAnswer`.
#[derive(Serialize, Deserialize)]
struct AnswerBody {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<PlanSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<Plan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
    #[serde(default)]
    usage: PlanUsage,
}

impl From<PlanAnswer> for AnswerBody {
    fn from(answer: PlanAnswer) -> Self {
        let usage = answer.usage;
        match answer.outcome {
            PlanOutcome::Planned { source, plan, cache_key, answer } => {
                Self { ok: true, source: Some(source), plan: Some(plan), cache_key, answer, problem: None, usage }
            }
            PlanOutcome::Invalid { problem, answer } => {
                Self { ok: false, source: None, plan: None, cache_key: None, answer: Some(answer), problem: Some(problem), usage }
            }
        }
    }
}

impl TryFrom<AnswerBody> for PlanAnswer {
    type Error = String;

    fn try_from(body: AnswerBody) -> Result<Self, String> {
        let outcome = if body.ok {
            PlanOutcome::Planned {
                source: body.source.ok_or("a planned answer has no source")?,
                plan: body.plan.ok_or("a planned answer has no plan")?,
                cache_key: body.cache_key,
                answer: body.answer,
            }
        } else {
            PlanOutcome::Invalid {
                problem: body.problem.ok_or("a failed answer has no problem")?,
                answer: body.answer.ok_or("a failed answer lacks the model's answer")?,
            }
        };
        Ok(Self { outcome, usage: body.usage })
    }
}

/// `POST /plan-cache/get` and `/plan-cache/evict`: which cached plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanCacheKey {
    /// The tenant whose cache it is.
    pub tenant: String,
    /// The request shape's key: 64 hex digits.
    pub key: String,
}

/// `POST /plan-cache/put`: a plan that worked, to cache under `key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanCacheEntry {
    /// The tenant whose cache it is.
    pub tenant: String,
    /// The request shape's key: 64 hex digits.
    pub key: String,
    /// The plan.
    pub plan: Plan,
}

/// The store's answer to `/plan-cache/get`: `{"plan": null}` on a miss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedPlan {
    /// The cached plan, if there is one.
    pub plan: Option<Plan>,
}

/// The store's answer to `/plan-cache/put`: `{"stored": true}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStored {
    /// Always true: a plan the store could not keep is an error instead.
    pub stored: bool,
}

/// The store's answer to `/plan-cache/evict`: `{"evicted": true}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEvicted {
    /// Always true, whether or not there was a plan to evict.
    pub evicted: bool,
}

/// `POST /describe`: the collections of a tenant to summarise for the
/// planner's prompt; the store answers a `prompt::CollectionSummary` each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribeRequest {
    /// The tenant whose collections they are.
    pub tenant: String,
    /// Their names.
    pub collections: Vec<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::context::RawRequest;
    use crate::plan::Code;

    fn plan() -> Plan {
        Plan {
            action: "list".into(),
            resource: "books".into(),
            also_loads: vec![],
            id: None,
            criteria: Default::default(),
            payload: None,
            response_hints: Default::default(),
            code: Code::python("reply(store.all())"),
        }
    }

    fn plan_json() -> Value {
        json!({
            "action": "list", "resource": "books", "id": null, "criteria": {}, "payload": null,
            "response_hints": {"status": null, "location_id": null},
            "code": {"language": "python", "block": "```python\nreply(store.all())\n```"},
        })
    }

    fn usage(llm_calls: u32, input_tokens: u64, output_tokens: u64) -> PlanUsage {
        PlanUsage { llm_calls, tokens: anypath_llm::Usage { input_tokens, output_tokens } }
    }

    /// Serialises `value`, checks the JSON is `expected`, and reads it back.
    fn round_trip<T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug>(value: &T, expected: Value) {
        let written = serde_json::to_value(value).expect("serialises");
        assert_eq!(written, expected);
        let read: T = serde_json::from_value(written).expect("reads back");
        assert_eq!(&read, value);
    }

    #[test]
    fn a_rules_answer_has_no_cache_key_nor_answer() {
        let answer = PlanAnswer {
            outcome: PlanOutcome::Planned { source: PlanSource::Rules, plan: plan(), cache_key: None, answer: None },
            usage: PlanUsage::default(),
        };
        let expected = json!({
            "ok": true, "source": "rules", "plan": plan_json(),
            "usage": {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0},
        });
        round_trip(&answer, expected);
    }

    #[test]
    fn a_cache_answer_has_its_key() {
        let answer = PlanAnswer {
            outcome: PlanOutcome::Planned { source: PlanSource::Cache, plan: plan(), cache_key: Some("ab".repeat(32)), answer: None },
            usage: PlanUsage::default(),
        };
        let expected = json!({
            "ok": true, "source": "cache", "plan": plan_json(), "cache_key": "ab".repeat(32),
            "usage": {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0},
        });
        round_trip(&answer, expected);
    }

    #[test]
    fn an_llm_answer_has_its_key_and_the_models_answer() {
        let answer = PlanAnswer {
            outcome: PlanOutcome::Planned {
                source: PlanSource::Llm,
                plan: plan(),
                cache_key: Some("0f".repeat(32)),
                answer: Some("{\"action\": \"list\"}".into()),
            },
            usage: usage(2, 1200, 80),
        };
        let expected = json!({
            "ok": true, "source": "llm", "plan": plan_json(), "cache_key": "0f".repeat(32),
            "answer": "{\"action\": \"list\"}",
            "usage": {"llm_calls": 2, "input_tokens": 1200, "output_tokens": 80},
        });
        round_trip(&answer, expected);
    }

    #[test]
    fn a_failed_answer_has_the_problem_and_no_plan() {
        let answer = PlanAnswer {
            outcome: PlanOutcome::Invalid { problem: "missing field `code`".into(), answer: "{}".into() },
            usage: usage(1, 900, 3),
        };
        let expected = json!({
            "ok": false, "problem": "missing field `code`", "answer": "{}",
            "usage": {"llm_calls": 1, "input_tokens": 900, "output_tokens": 3},
        });
        round_trip(&answer, expected);
    }

    #[test]
    fn a_planned_answer_without_a_valid_plan_is_refused() {
        let no_plan = json!({"ok": true, "source": "llm", "usage": {"llm_calls": 1, "input_tokens": 1, "output_tokens": 1}});
        let error = serde_json::from_value::<PlanAnswer>(no_plan).expect_err("no plan");
        assert!(error.to_string().contains("no plan"), "{error}");
        let bad_plan = json!({"ok": true, "source": "llm", "plan": {"action": "list"}});
        assert!(serde_json::from_value::<PlanAnswer>(bad_plan).is_err());
        let bad_source = json!({"ok": true, "source": "oracle", "plan": plan_json()});
        assert!(serde_json::from_value::<PlanAnswer>(bad_source).is_err());
    }

    #[test]
    fn an_answer_without_usage_cost_nothing() {
        let answer: PlanAnswer = serde_json::from_value(json!({"ok": true, "source": "rules", "plan": plan_json()})).expect("reads");
        assert_eq!(answer.usage, PlanUsage::default());
    }

    #[test]
    fn a_plan_request_defaults_to_no_repairs_and_the_cache() {
        let headers = vec![];
        let raw = RawRequest { method: "GET", path: "/books/", query: "", headers: &headers, body: b"", client_ip: "" };
        let ctx = RequestContext::build(&raw, "acme").expect("ctx");
        let read: PlanRequest = serde_json::from_value(json!({"tenant": "acme", "ctx": ctx})).expect("reads");
        assert_eq!(read, PlanRequest { tenant: "acme".into(), ctx: ctx.clone(), repairs: vec![], skip_cache: false });
        let request = PlanRequest {
            tenant: "acme".into(),
            ctx: ctx.clone(),
            repairs: vec![Repair { answer: "{}".into(), problem: "invalid plan: no code".into() }],
            skip_cache: true,
        };
        let expected = json!({
            "tenant": "acme", "ctx": ctx,
            "repairs": [{"answer": "{}", "problem": "invalid plan: no code"}], "skip_cache": true,
        });
        round_trip(&request, expected);
    }

    #[test]
    fn plan_cache_bodies() {
        let key = PlanCacheKey { tenant: "acme".into(), key: "ab".repeat(32) };
        round_trip(&key, json!({"tenant": "acme", "key": "ab".repeat(32)}));
        let entry = PlanCacheEntry { tenant: "acme".into(), key: "ab".repeat(32), plan: plan() };
        round_trip(&entry, json!({"tenant": "acme", "key": "ab".repeat(32), "plan": plan_json()}));
        round_trip(&CachedPlan { plan: Some(plan()) }, json!({"plan": plan_json()}));
        round_trip(&CachedPlan { plan: None }, json!({"plan": null}));
        round_trip(&PlanStored { stored: true }, json!({"stored": true}));
        round_trip(&PlanEvicted { evicted: true }, json!({"evicted": true}));
    }

    #[test]
    fn a_describe_request() {
        let request = DescribeRequest { tenant: "acme".into(), collections: vec!["books".into(), "authors".into()] };
        round_trip(&request, json!({"tenant": "acme", "collections": ["books", "authors"]}));
    }
}
