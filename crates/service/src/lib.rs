//! The sandbox service (`anypath sandbox serve`, and the sandbox listener of
//! `anypath up`): the code interpreter and the REST blocks behind one facade
//! that resolves the caller's tenant, admits runs fairly, accounts for them
//! and logs them ([`interpreter_service`], [`admission`]), served over its
//! transports: `/v1` HTTP ([`serve`], [`interpreter_api`], [`dataset_api`],
//! [`run_events`]), MCP ([`mcp`]), E2B's API ([`e2b`]) and Jupyter's ([`jupyter`]). A transport maps names and shapes onto
//! the facade; it never runs a session flow of its own. What every route
//! shares is [`state::AppState`]; every request goes by the id one layer
//! decides (`request_id`), and every error answers in its transport's shape.

pub mod admission;
pub mod background_runs;
mod caller;
mod cell_text;
mod cors;
pub mod credentials;
pub mod e2b;
pub mod envelope;
mod health;
pub mod interpreter_service;
pub mod jupyter;
mod live_run;
pub mod mcp;
pub mod metrics;
mod options;
mod refusal_audit;
mod request_id;
pub mod run_env;
pub mod serve;
mod service_error;
mod shutdown;
pub mod state;
mod sweeper;
mod v1;
