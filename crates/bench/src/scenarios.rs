//! The blocks the benchmark runs and the data they run against.

use std::sync::Arc;

use anyhow::bail;
use anypath_rest::context::RawRequest;
use anypath_rest::{RequestContext, rules};
use anypath_sandbox::{BlockRunner, ExecRequest};
use serde_json::{Value, json};

pub const TRIVIAL: &str = "trivial block";
pub const TRIVIAL_CODE: &str = "REPLY = {'status': 200}";

const CREATE: &str = "obj = dict(ctx['body_json'])\nnew_id = store.insert(obj)\nREPLY = {'status': 201, 'headers': {'Location': f'/members/{new_id}'}, 'body': obj}";
const READ: &str = "obj = store.get(ctx['segments'][1])\nREPLY = {'status': 200, 'body': obj} if obj is not None else {'status': 404, 'body': {'error': 'not found'}}";
const UPDATE: &str = "obj = store.patch(ctx['segments'][1], ctx['body_json'])\nREPLY = {'status': 200, 'body': obj} if obj is not None else {'status': 404}";
const DELETE: &str = "REPLY = {'status': 204} if store.delete(ctx['segments'][1]) else {'status': 404}";

/// One benchmarked workload: blocks used round-robin with shared documents.
#[derive(Clone)]
pub struct Scenario {
    pub name: &'static str,
    blocks: Vec<(String, Value, Load)>,
}

/// What a block gets of the `members` collection.
#[derive(Clone)]
enum Load {
    Nothing,
    Whole(Arc<Value>),
    /// As the app loads for a single-document plan: some documents, a reserved id.
    Partial { documents: Value, reserved_id: Option<i64> },
}

impl Scenario {
    /// The `i`th request of this scenario.
    pub fn request(&self, i: usize) -> anyhow::Result<ExecRequest> {
        let (code, ctx, load) = &self.blocks[i % self.blocks.len()];
        let request = ExecRequest::new(code.as_str()).with_ctx(ctx)?;
        Ok(match load {
            Load::Nothing => request,
            Load::Whole(documents) => request.with_collection("members", 1, documents.as_ref())?,
            Load::Partial { documents, reserved_id } => {
                request.with_partial_collection("members", documents, vec![], *reserved_id)?
            }
        })
    }

    /// Runs each block once and checks the status, so the figures measure working code.
    pub async fn check(&self, sandbox: &BlockRunner) -> anyhow::Result<()> {
        for i in 0..self.blocks.len() {
            let report = sandbox.execute(self.request(i)?).await;
            match report.outcome {
                Ok(success) if success.reply.status < 300 => {}
                Ok(success) => bail!("{}: block {i} answered {}", self.name, success.reply.status),
                Err(failure) => bail!("{}: block {i} failed: {:?}", self.name, failure.error),
            }
        }
        Ok(())
    }
}

fn members(count: usize) -> Arc<Value> {
    let docs: Vec<Value> = (1..=count)
        .map(|i| json!({"id": i, "name": format!("member {i}"), "email": format!("m{i}@example.com"), "age": 20 + i % 50}))
        .collect();
    Arc::new(Value::Array(docs))
}

/// The rule planner's block and context for `method path` with `body`.
fn planned(method: &str, path: &str, body: Option<Value>) -> anyhow::Result<(String, Value)> {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let headers = vec![("content-type".to_string(), "application/json".to_string())];
    let raw = RawRequest { method, path, query: "", headers: &headers, body: body.as_bytes(), client_ip: "127.0.0.1" };
    let ctx = RequestContext::build(&raw, "bench")?;
    let plan = rules::plan(&ctx)?;
    Ok((plan.code.source().to_owned(), serde_json::to_value(&ctx)?))
}

/// Every scenario, in the order printed.
pub fn all() -> anyhow::Result<Vec<Scenario>> {
    let by_id = |id: usize| json!({"method": "GET", "path": format!("/members/{id}"), "segments": ["members", id.to_string()]});
    let whole = |n| Load::Whole(members(n));
    let (get_code, get_ctx) = planned("GET", "/members/9876", None)?;
    let (post_code, post_ctx) = planned("POST", "/members/", Some(json!({"name": "Alice", "age": 31})))?;
    let one = json!([{"id": 9876, "name": "member 9876", "email": "m9876@example.com", "age": 46}]);
    Ok(vec![
        Scenario { name: TRIVIAL, blocks: vec![(TRIVIAL_CODE.into(), json!({}), Load::Nothing)] },
        Scenario {
            name: "CRUD, 100-record collection",
            blocks: vec![
                (CREATE.into(), json!({"method": "POST", "path": "/members/", "segments": ["members"], "body_json": {"name": "Alice"}}), whole(100)),
                (READ.into(), by_id(42), whole(100)),
                (UPDATE.into(), json!({"method": "PATCH", "path": "/members/42", "segments": ["members", "42"], "body_json": {"age": 33}}), whole(100)),
                (DELETE.into(), by_id(7), whole(100)),
            ],
        },
        Scenario { name: "get by id, 10,000 records, all sent", blocks: vec![(READ.into(), by_id(9876), whole(10_000))] },
        Scenario {
            name: "get by id, as the app loads it",
            blocks: vec![(get_code, get_ctx, Load::Partial { documents: one, reserved_id: None })],
        },
        Scenario {
            name: "create, as the app loads it",
            blocks: vec![(post_code, post_ctx, Load::Partial { documents: json!([]), reserved_id: Some(10_001) })],
        },
    ])
}
