//! Runs a Spin application's HTTP components on wasmtime with Spin's
//! semantics: routes (including `/...` and private components), Spin's request
//! headers, service chaining to `*.spin.internal`, key-value on SQLite in
//! Spin's layout, outbound Redis, application variables and
//! `allowed_outbound_hosts`.

pub mod gate;
pub mod ids;
pub mod kv;
pub mod manifest;
pub mod outbound;
pub mod platform;
pub mod redis;
pub mod routes;
pub mod runtime_config;
pub mod variables;
pub mod app;
