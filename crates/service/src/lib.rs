//! The sandbox service (`anypath sandbox serve`, and the sandbox listener of
//! `anypath up`): the code interpreter and the REST blocks behind one facade
//! that resolves the caller's tenant, admits runs fairly, accounts for them
//! and logs them ([`interpreter_service`], [`admission`]), served over its
//! transports: `/v1` HTTP ([`serve`], [`interpreter_api`], [`dataset_api`],
//! [`run_events`]), MCP ([`mcp`]) and E2B's API ([`e2b`]). A transport maps names and shapes onto
//! the facade; it never runs a session flow of its own.

pub mod admission;
mod answers;
mod cell_text;
pub mod credentials;
pub mod dataset_api;
pub mod e2b;
pub mod envelope;
pub mod interpreter_api;
pub mod interpreter_service;
pub mod jupyter;
pub mod mcp;
pub mod metrics;
pub mod run_env;
pub mod run_events;
pub mod serve;
