//! The sandbox service's own HTTP API, `/v1`, beside E2B's ([`crate::e2b`]),
//! Jupyter's ([`crate::jupyter`]) and MCP ([`crate::mcp`]): the REST blocks
//! ([`blocks`]), the code interpreter's sessions, files and artifacts
//! ([`sessions`]), datasets ([`datasets`]), snapshots ([`snapshots`]) and
//! runs by their id ([`runs`], streamed as [`events`]) and commands in
//! sessions' shells ([`commands`]). Every interpreter
//! handler starts from the [`call::Call`] its request resolves to and answers
//! a failed call in the JSON error envelope ([`error`]).

mod blocks;
mod call;
mod commands;
mod datasets;
mod error;
mod events;
mod runs;
mod sessions;
mod snapshots;

use std::sync::Arc;

use axum::Router;

pub(crate) use self::sessions::signed_download_routes;
use crate::state::AppState;

/// Every `/v1` route (and the signed downloads, `/files/...`).
pub(crate) fn routes(state: &AppState) -> Router<Arc<AppState>> {
    Router::new()
        .merge(blocks::routes())
        .merge(sessions::routes(state))
        .merge(datasets::routes())
        .merge(snapshots::routes())
        .merge(runs::routes())
        .merge(commands::routes())
}
