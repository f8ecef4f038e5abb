//! Boundary: who may name a tenant on the sandbox service. Only a caller
//! holding a token (the service's `--token`, or the one `anypath up` makes
//! for its components) acts for the tenant it names in `x-anypath-tenant`;
//! anyone else is the tenant of its API key, or `default`. Attacked with a
//! real HTTP client against `anypath sandbox serve` and `anypath up`'s
//! sandbox listener: the REST exec, the session API, downloads and MCP.

use crate::common;

use common::app::{App, json_of, temp_kv};
use common::fake_llm::{FakeLlm, Reply, tools};
use common::service::Service;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};

const SECRET: &str = "the victim's secret 41c9";

/// An outside caller naming `tenant`, with no token.
fn naming(request: RequestBuilder, tenant: &str) -> RequestBuilder {
    request.header("x-anypath-tenant", tenant)
}

/// `tools/call` of `tool` on `/mcp`, naming `tenant`; the structured result or the error text.
fn mcp_call(base: &str, tenant: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let response = naming(Client::new().post(format!("{base}/mcp")), tenant)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body)
        .send()
        .expect("the MCP endpoint answers");
    response.json().unwrap_or(Value::Null)
}

/// The victim's agent session (tenant `victim`, session `notes`) holds a
/// secret file, written through the app; an outside caller on the sandbox
/// listener naming `victim` finds none of it by any route.
#[test]
fn anypath_ups_listener_ignores_a_tenant_named_without_the_token() {
    let fake = FakeLlm::start(vec![
        tools(&[("write_file", json!({"filePath": "secret.txt", "content": SECRET}))]),
        Reply::Text("Saved.".into()),
    ]);
    let env = fake.env("openai", "rules");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = App::start_with(&temp_kv("tenant-naming-up"), "spin.toml", &pairs);
    let run = app.send_as("POST", "/run", Some(json!({"input": "Save the secret", "session_id": "notes"})), &[("x-session-id", "victim")]);
    let (status, body) = json_of(run);
    assert_eq!(status, 200, "{body}");
    let sandbox = format!("http://{}", app.sandbox);

    let client = Client::new();
    let listing = naming(client.get(format!("{sandbox}/v1/sessions/notes/files")), "victim").send().expect("answers");
    let listing = listing.text().unwrap_or_default();
    assert!(!listing.contains("secret.txt"), "the session API listed the victim's file: {listing}");
    let download = naming(client.get(format!("{sandbox}/v1/sessions/notes/files/secret.txt")), "victim").send().expect("answers");
    let download_status = download.status().as_u16();
    assert!(download_status == 404 && !download.text().unwrap_or_default().contains(SECRET), "the download route served the victim's file ({download_status})");
    let artifact = naming(client.get(format!("{sandbox}/v1/sessions/notes/artifacts/secret.txt")), "victim").send().expect("answers");
    assert!(!artifact.text().unwrap_or_default().contains(&base64_of(SECRET)), "the artifact route read the victim's file");
    let over_mcp = mcp_call(&sandbox, "victim", "list_files", json!({"session_id": "notes"}));
    assert!(!over_mcp.to_string().contains("secret.txt"), "MCP listed the victim's file: {over_mcp}");
    let read = mcp_call(&sandbox, "victim", "read_artifact", json!({"session_id": "notes", "path": "secret.txt"}));
    assert!(!read.to_string().contains(SECRET) && !read.to_string().contains(&base64_of(SECRET)), "MCP read the victim's file: {read}");

    // The REST exec runs, but for `default`, whatever the caller names.
    let exec = naming(client.post(format!("{sandbox}/v1/exec")), "victim")
        .header("x-request-id", "named-exec-1")
        .json(&json!({"code": "REPLY = {'status': 200}"}))
        .send()
        .expect("answers");
    assert_eq!(exec.status(), 200);
    let line = app.process.wait_for_log(|l| l.contains("named-exec-1") && l.contains("\"message\":\"exec\"")).expect("the exec's log line");
    assert!(line.contains("\"tenant\":\"default\""), "the exec ran for the named tenant: {line}");
}

/// `anypath sandbox serve` with no token and no keys: naming a tenant counts
/// for nothing (two callers naming different tenants share `default`); with
/// `--token`, the holder acts for the tenant it names and nobody else may.
#[test]
fn sandbox_serve_lets_only_a_token_holder_name_a_tenant() {
    let dir = temp_kv("tenant-naming-serve");
    let open = Service::start_open(&dir.with_file_name("open"), &[]);
    let client = Client::new();
    let upload = |service: &Service, tenant: &str, bearer: Option<&str>| {
        let mut request = naming(client.post(format!("{}/v1/sessions/shared/files", service.base)), tenant);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        request.json(&json!({"filename": "note.txt", "content_base64": base64_of(SECRET)})).send().expect("answers")
    };
    assert_eq!(upload(&open, "alice", None).status(), 201);
    let seen = naming(client.get(format!("{}/v1/sessions/shared/files", open.base)), "mallory").send().expect("answers");
    assert!(seen.text().unwrap_or_default().contains("note.txt"), "both callers are `default` on an open service");

    let guarded = Service::start_open(&dir.with_file_name("guarded"), &["--token", "serve-token"]);
    assert_eq!(upload(&guarded, "alice", Some("serve-token")).status(), 201);
    let theirs = naming(client.get(format!("{}/v1/sessions/shared/files", guarded.base)), "alice").send().expect("answers");
    assert_eq!(theirs.status(), 401, "no token, no tenant");
    let own = naming(client.get(format!("{}/v1/sessions/shared/files", guarded.base)), "alice").bearer_auth("serve-token").send().expect("answers");
    assert!(own.text().unwrap_or_default().contains("note.txt"), "the token holder acts for the tenant it names");
    let other = naming(client.get(format!("{}/v1/sessions/shared/files", guarded.base)), "bob").bearer_auth("serve-token").send().expect("answers");
    assert!(!other.text().unwrap_or_default().contains("note.txt"), "tenants stay apart for the token holder too");
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}
