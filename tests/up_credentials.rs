//! Boundary: one authentication for every listener of `anypath up`. With
//! the app's `auth_token` or `api_keys` set, the sandbox listener (the
//! interpreter's HTTP API, MCP, REST blocks, Jupyter) and E2B's listener
//! refuse a caller without those credentials, each in its protocol's error
//! shape with a request id, and take one with them; the app's own
//! components still reach the sandbox through its listener.

use crate::common;

use common::app::{App, temp_kv};
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{Value, json};

const TOKEN: &str = "app-t0ken-3f9a";
const KEY: &str = "key-up-77c2";

/// Asserts a refusal: 401, a request id header, and the body's shape.
fn refused(response: Response, shape: impl Fn(&Value) -> bool, what: &str) {
    assert_eq!(response.status().as_u16(), 401, "{what}");
    let id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert!(id.is_some_and(|id| !id.is_empty()), "{what}: every refusal names its request");
    let body: Value = response.json().unwrap_or(Value::Null);
    assert!(shape(&body), "{what}: {body}");
}

/// `/v1`'s envelope, `{"error": {"code", "message", "request_id"}}`.
fn envelope(body: &Value) -> bool {
    body["error"]["code"] == "unauthorized" && body["error"]["request_id"].is_string()
}

/// Jupyter's (tornado's) `{"message", "reason"}`.
fn jupyter(body: &Value) -> bool {
    body["message"].is_string() && body["reason"] == "Unauthorized"
}

/// E2B's `{"code": 401, "message"}`.
fn e2b(body: &Value) -> bool {
    body["code"] == 401 && body["message"].is_string()
}

fn mcp_list(sandbox: &str) -> RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_files", "arguments": {"session_id": "guarded"}}});
    Client::new()
        .post(format!("{sandbox}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body)
}

fn new_sandbox(e2b: &str) -> RequestBuilder {
    Client::new().post(format!("{e2b}/v2/sandboxes")).json(&json!({"templateID": "code-interpreter-v1", "timeout": 60}))
}

#[test]
fn the_apps_token_guards_every_listener() {
    let app = App::start_with(&temp_kv("up-token"), "spin.toml", &[("SPIN_VARIABLE_AUTH_TOKEN", TOKEN)]);
    let sandbox = format!("http://{}", app.sandbox);
    let e2b_url = format!("http://{}", app.e2b.as_deref().expect("E2B's listener"));
    let client = Client::new();
    let files = format!("{sandbox}/v1/sessions/guarded/files");
    let exec = || client.post(format!("{sandbox}/v1/exec")).json(&json!({"code": "REPLY = {'status': 200}"}));

    refused(client.get(&files).send().expect("answers"), envelope, "the session API without a token");
    refused(client.get(&files).bearer_auth("wrong").send().expect("answers"), envelope, "the session API with a wrong token");
    refused(exec().send().expect("answers"), envelope, "a REST block without a token");
    refused(mcp_list(&sandbox).send().expect("answers"), envelope, "MCP without a token");
    refused(client.get(format!("{sandbox}/api/kernels")).send().expect("answers"), jupyter, "Jupyter without a token");
    refused(new_sandbox(&e2b_url).header("x-api-key", "e2b_wrong").send().expect("answers"), e2b, "E2B with a wrong key");

    let upload = json!({"filename": "mine.txt", "content_base64": "bWluZQ=="});
    assert_eq!(client.post(&files).bearer_auth(TOKEN).json(&upload).send().expect("answers").status().as_u16(), 201);
    assert_eq!(client.get(&files).bearer_auth(TOKEN).send().expect("answers").status().as_u16(), 200);
    assert_eq!(exec().bearer_auth(TOKEN).send().expect("answers").status().as_u16(), 200);
    assert_eq!(mcp_list(&sandbox).bearer_auth(TOKEN).send().expect("answers").status().as_u16(), 200);
    let kernels = client.get(format!("{sandbox}/api/kernels")).header("authorization", format!("token {TOKEN}")).send().expect("answers");
    assert_eq!(kernels.status().as_u16(), 200);
    let created = new_sandbox(&e2b_url).header("x-api-key", format!("e2b_{TOKEN}")).send().expect("answers");
    assert_eq!(created.status().as_u16(), 201, "E2B's SDKs present the token as their key");

    // The app's own components still run blocks on the guarded listener.
    let note = app.send_as("POST", "/notes/", Some(json!({"text": "through the gateway"})), &[("authorization", &format!("Bearer {TOKEN}"))]);
    assert_eq!(note.status().as_u16(), 201);
    let listed = app.send_as("GET", "/notes/", None, &[("authorization", &format!("Bearer {TOKEN}"))]);
    assert_eq!(listed.status().as_u16(), 200);
}

#[test]
fn the_apps_keys_guard_every_listener_and_name_the_tenant() {
    let app = App::start_with(&temp_kv("up-keys"), "spin.toml", &[("SPIN_VARIABLE_API_KEYS", &format!("{KEY}:uptenant"))]);
    let sandbox = format!("http://{}", app.sandbox);
    let e2b_url = format!("http://{}", app.e2b.as_deref().expect("E2B's listener"));
    let client = Client::new();
    let files = format!("{sandbox}/v1/sessions/guarded/files");

    refused(client.get(&files).send().expect("answers"), envelope, "the session API without a key");
    refused(client.get(&files).header("x-api-key", "key-unknown").send().expect("answers"), envelope, "an unknown key");
    refused(client.post(format!("{sandbox}/v1/exec")).json(&json!({"code": "REPLY = {'status': 200}"})).send().expect("answers"), envelope, "a REST block without a key");
    refused(mcp_list(&sandbox).send().expect("answers"), envelope, "MCP without a key");
    refused(client.get(format!("{sandbox}/api/kernels")).send().expect("answers"), jupyter, "Jupyter without a key");
    refused(new_sandbox(&e2b_url).header("x-api-key", "e2b_unknown").send().expect("answers"), e2b, "E2B with an unknown key");

    let upload = json!({"filename": "mine.txt", "content_base64": "bWluZQ=="});
    let uploaded = client.post(&files).header("x-api-key", KEY).header("x-request-id", "keyed-upload").json(&upload).send().expect("answers");
    assert_eq!(uploaded.status().as_u16(), 201);
    let line = app.process.wait_for_log(|l| l.contains("\"keyed-upload\"") && l.contains("anypath::audit")).expect("the upload's audit line");
    let entry: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(entry["tenant"], "uptenant", "the tenant is the key's: {entry}");
    assert_eq!(mcp_list(&sandbox).header("x-api-key", KEY).send().expect("answers").status().as_u16(), 200);
    let kernels = client.get(format!("{sandbox}/api/kernels?token={KEY}")).send().expect("answers");
    assert_eq!(kernels.status().as_u16(), 200, "a key is a Jupyter token");
    assert_eq!(new_sandbox(&e2b_url).header("x-api-key", format!("e2b_{KEY}")).send().expect("answers").status().as_u16(), 201);

    // Through the gateway: the key's tenant, blocks run on the guarded listener.
    let note = app.send_as("POST", "/notes/", Some(json!({"text": "keyed"})), &[("x-api-key", KEY)]);
    assert_eq!(note.status().as_u16(), 201);
}
