//! The blocks the benchmark runs and the data they run against.

use std::sync::Arc;

use anyhow::bail;
use anypath_sandbox::{ExecRequest, Sandbox};
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
    blocks: Vec<(&'static str, Value)>,
    documents: Option<Arc<Value>>,
}

impl Scenario {
    /// The `i`th request of this scenario.
    pub fn request(&self, i: usize) -> anyhow::Result<ExecRequest> {
        let (code, ctx) = &self.blocks[i % self.blocks.len()];
        let mut request = ExecRequest::new(*code).with_ctx(ctx)?;
        if let Some(documents) = &self.documents {
            request = request.with_collection("members", 1, documents.as_ref())?;
        }
        Ok(request)
    }

    /// Runs each block once and checks the status, so the figures measure working code.
    pub async fn check(&self, sandbox: &Sandbox) -> anyhow::Result<()> {
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

/// Every scenario, in the order printed.
pub fn all() -> anyhow::Result<Vec<Scenario>> {
    let by_id = |id: usize| json!({"method": "GET", "path": format!("/members/{id}"), "segments": ["members", id.to_string()]});
    Ok(vec![
        Scenario { name: TRIVIAL, blocks: vec![(TRIVIAL_CODE, json!({}))], documents: None },
        Scenario {
            name: "CRUD, 100-record collection",
            blocks: vec![
                (CREATE, json!({"method": "POST", "path": "/members/", "segments": ["members"], "body_json": {"name": "Alice"}})),
                (READ, by_id(42)),
                (UPDATE, json!({"method": "PATCH", "path": "/members/42", "segments": ["members", "42"], "body_json": {"age": 33}})),
                (DELETE, by_id(7)),
            ],
            documents: Some(members(100)),
        },
        Scenario { name: "get by id, 10,000-record collection", blocks: vec![(READ, by_id(9876))], documents: Some(members(10_000)) },
    ])
}
