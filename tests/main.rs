//! The integration tests: one test binary for every suite, so the shared
//! set-up (`common`) and the host's generic code are compiled and linked
//! once. Each module is one suite; `cargo xtask test` runs them under
//! nextest, each test in a process of its own (select a suite with
//! `cargo nextest run --release -E 'test(/^app_http::/)'`).

mod common;

mod agent_run;
mod api_fuzz;
mod app_http;
mod audit_trail;
mod background_runs;
mod configuration_reference;
mod data_runtime;
mod datasets;
mod docs_examples;
mod e2b_api;
mod e2b_sdk;
mod fair_share;
mod fair_share_kinds;
mod jupyter_api;
mod jupyter_clients;
mod frontend_dialects;
mod frontend_providers;
mod http_api;
mod interpreter_artifacts;
mod interpreter_cells;
mod interpreter_http;
mod interpreter_quota;
mod interpreter_service_edges;
mod javascript_http;
mod javascript_sessions;
mod kubernetes_manifests;
mod kv_group_commit;
mod llm_planner;
mod mcp_clients;
mod open_webui_client;
mod partial_loads;
mod redis_scale_out;
mod rest_contract;
mod rest_flows;
mod sandbox_attacks;
mod sandbox_pool;
mod session_commands;
mod session_snapshots;
mod session_state;
mod shared_forks;
mod shared_images;
mod shared_sessions;
mod small_model;
mod small_model_agent;
mod spin_manifest_rules;
mod store_operations;
mod store_recovery;
mod tenant_naming;
mod up_credentials;
mod worked_examples;
