//! The sandbox service (`anypath sandbox serve`, and the sandbox listener of
//! `anypath up`): the code interpreter and the REST blocks behind one facade
//! that resolves the caller's tenant, admits runs fairly, accounts for them
//! and logs them ([`interpreter_service`], [`admission`]), served over its
//! transports, a folder each: the service's own HTTP API, `/v1` (`v1`), MCP
//! ([`mcp`]), E2B's API ([`e2b`]) and Jupyter's ([`jupyter`]). A transport
//! maps names and shapes onto the facade; it never runs a session flow of
//! its own.
//!
//! Beside the transports is the core they share, and it imports none of
//! them ([`serve`] alone assembles them): what every route shares
//! ([`state::AppState`], built from [`serve::ServeOptions`]), the caller and
//! the error every transport names (`caller`, `service_error`), credentials,
//! admission, metrics, health, the run-environment policy ([`run_env`]), a
//! run with its output live (`live_run`), the runs tracked by their id
//! ([`background_runs`], which the facade hands the function that starts a
//! run, so it knows neither the facade nor `AppState`), the error envelope
//! ([`envelope`]), the audit of refusals, the sweeper and the shutdown.
//! Every request goes by the id one layer decides (`request_id`), and every
//! error answers in its transport's shape.

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
mod tracked_commands;
mod v1;
