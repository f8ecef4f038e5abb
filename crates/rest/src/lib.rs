//! The REST side of anypath, shared by the gateway, planner and store
//! components and testable natively: the request context a block sees, the
//! rule-based planner, the planner's prompt and the plan's schema (asked of
//! an LLM through `anypath-llm`), the bodies of the planner's and the plan
//! cache's calls, name rules, how a mutation journal is applied, and which
//! sandbox host of the pool serves a request or a session.

pub mod caller;
pub mod conflict_retry;
pub mod context;
pub mod cors;
pub mod direct;
pub mod error;
pub mod examples;
pub mod journal;
pub mod lessons;
pub mod list_answer;
pub mod list_query;
pub mod names;
pub mod plan;
pub mod plan_check;
pub mod plan_schema;
pub mod planner_api;
pub mod prompt;
pub mod reply;
pub mod rules;
pub mod settings;
pub mod sandbox_pool;
pub mod shape;
pub mod store_error;
pub mod store_keys;
pub mod stored_index;
pub mod surface;

pub use context::RequestContext;
pub use error::{ErrorEnvelope, RestError};
pub use journal::{Index, JournalError, MutationRecord, ReadCheck};
pub use stored_index::{Layout, Lock, StoredIndex};
pub use plan::Plan;
pub use planner_api::{
    CachedPlan, DescribeRequest, PlanAnswer, PlanCacheEntry, PlanCacheKey, PlanEvicted, PlanOutcome, PlanRequest, PlanSource, PlanStored,
    PlanUsage, Repair,
};
pub use sandbox_pool::{PoolError, SandboxPool};
