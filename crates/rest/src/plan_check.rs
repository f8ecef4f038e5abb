//! Turns a model's text into a [`Plan`], or a precise reason it cannot.
//!
//! Models wrap JSON in prose or fences; that is tolerated. Anything that
//! breaks the schema, names a bad collection, or does not carry exactly one
//! Python block that assigns `REPLY` is refused, and the reason goes back to
//! the model in the repair loop.

use serde_json::Value;

use crate::RequestContext;
use crate::names;
use crate::plan::{Code, MAX_ALSO_LOADS, Plan};

/// Actions a plan may name; `custom` is anything beyond CRUD.
pub const ACTIONS: &[&str] = &["create", "get", "list", "replace", "patch", "delete", "search", "custom"];

/// Why a model's answer is not a usable plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the answer holds no JSON object")]
    NoJson,
    #[error("the plan breaks the schema: {0}")]
    Schema(String),
    #[error("the plan must carry exactly one Python code block, found {0}")]
    CodeBlocks(usize),
    #[error("the code never assigns REPLY")]
    NoReply,
}

/// Parses and checks a plan from `text`.
pub fn parse_plan(text: &str) -> Result<Plan, PlanError> {
    let mut value = find_object(text).ok_or(PlanError::NoJson)?;
    check_shape(&value)?;
    // Optional fields given as null mean "none".
    if let Some(object) = value.as_object_mut() {
        object.retain(|key, v| !(v.is_null() && matches!(key.as_str(), "criteria" | "also_loads" | "response_hints")));
    }
    let mut plan: Plan = serde_json::from_value(value).map_err(|e| PlanError::Schema(e.to_string()))?;
    normalise(&mut plan);
    names::collection(&plan.resource).map_err(|e| PlanError::Schema(format!("resource: {e}")))?;
    if plan.also_loads.len() > MAX_ALSO_LOADS {
        return Err(PlanError::Schema(format!("also_loads names more than {MAX_ALSO_LOADS} collections")));
    }
    for name in &plan.also_loads {
        names::collection(name).map_err(|e| PlanError::Schema(format!("also_loads: {e}")))?;
    }
    if !ACTIONS.contains(&plan.action.as_str()) {
        return Err(PlanError::Schema(format!("action {:?} is not one of {}", plan.action, ACTIONS.join("|"))));
    }
    if !plan.code.language.eq_ignore_ascii_case("python") {
        return Err(PlanError::Schema(format!("code.language is {:?}, not python", plan.code.language)));
    }
    let source = single_block(&plan.code.block)?;
    if !source.contains("REPLY") {
        return Err(PlanError::NoReply);
    }
    plan.code = Code::python(&source);
    Ok(plan)
}

/// Repairs what a model gets wrong in form but not in meaning, as the rules
/// would have written it: `/members` or `members.json` for `members`, an
/// action in capitals, the resource (or a name twice) in `also_loads`, an id
/// given as a string of digits for the integer the store keys by.
fn normalise(plan: &mut Plan) {
    let bare = |name: &str| name.trim().trim_matches('/').trim_end_matches(".json").to_owned();
    plan.resource = bare(&plan.resource);
    plan.action = plan.action.trim().to_ascii_lowercase();
    let mut seen = vec![plan.resource.clone()];
    plan.also_loads = std::mem::take(&mut plan.also_loads)
        .into_iter()
        .map(|name| bare(&name))
        .filter(|name| {
            let fresh = !seen.contains(name);
            seen.push(name.clone());
            fresh
        })
        .collect();
    if let Some(Value::String(text)) = &plan.id
        && let Ok(number) = text.parse::<i64>() {
            // Only the canonical spelling: "007" stays a string id.
            if number.to_string() == *text {
                plan.id = Some(Value::from(number));
            }
        }
}

/// Holds a CRUD plan on a CRUD path (`/c/` or `/c/<id>`) to the collection
/// that path names: a small model copies the collection of a worked example.
/// A custom action, or a longer path, may name any collection.
pub fn bind_to_path(plan: &mut Plan, ctx: &RequestContext) {
    let crud = ACTIONS.iter().take(ACTIONS.len() - 1).any(|a| *a == plan.action);
    if let (true, [first] | [first, _]) = (crud, ctx.segments.as_slice())
        && plan.resource != *first && names::collection(first).is_ok() {
            plan.also_loads.retain(|name| name != first);
            plan.resource = first.clone();
        }
}

/// The first JSON object in `text` that looks like a plan: the whole text,
/// else the first `{` from which a complete object parses.
fn find_object(text: &str) -> Option<Value> {
    if let Ok(value @ Value::Object(_)) = serde_json::from_str(text.trim()) {
        return Some(value);
    }
    let mut fallback = None;
    for (i, _) in text.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(value @ Value::Object(_))) = stream.next() {
            if value.get("action").is_some() {
                return Some(value);
            }
            fallback.get_or_insert(value);
        }
    }
    fallback
}

/// Field types, checked before deserialising so the reason names the field.
fn check_shape(value: &Value) -> Result<(), PlanError> {
    let field = |name: &str| value.get(name);
    let require = |name: &str, ok: bool, what: &str| {
        if ok { Ok(()) } else { Err(PlanError::Schema(format!("{name} must be {what}"))) }
    };
    require("action", field("action").is_some_and(Value::is_string), "a string")?;
    require("resource", field("resource").is_some_and(Value::is_string), "a string")?;
    require(
        "id",
        field("id").is_none_or(|v| v.is_null() || v.is_string() || v.is_i64() || v.is_u64()),
        "a string, an integer or null",
    )?;
    require("criteria", field("criteria").is_none_or(|v| v.is_null() || v.is_object()), "an object")?;
    require(
        "also_loads",
        field("also_loads").is_none_or(|v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string))),
        "a list of collection names",
    )?;
    let code = field("code").ok_or_else(|| PlanError::Schema("code is missing".into()))?;
    require("code.language", code.get("language").is_some_and(Value::is_string), "a string")?;
    require("code.block", code.get("block").is_some_and(Value::is_string), "a string")?;
    Ok(())
}

/// The one Python block in `block`: fenced once, or unfenced code.
fn single_block(block: &str) -> Result<String, PlanError> {
    let fences = block.matches("```").count();
    match fences {
        0 => Ok(block.trim_matches('\n').to_owned()),
        2 => Ok(Code { language: "python".into(), block: block.trim().to_owned() }.source().to_owned()),
        n => Err(PlanError::CodeBlocks(n.div_ceil(2))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"{"action": "get", "resource": "members", "id": "1", "criteria": {}, "payload": null,
        "response_hints": {"status": 200}, "code": {"language": "python", "block": "```python\nREPLY = {'status': 200}\n```"}}"#;

    #[test]
    fn clean_json_parses() {
        let plan = parse_plan(PLAN).unwrap();
        assert_eq!((plan.action.as_str(), plan.resource.as_str()), ("get", "members"));
        assert_eq!(plan.code.source(), "REPLY = {'status': 200}");
    }

    #[test]
    fn json_inside_prose_and_fences_parses() {
        let wrapped = format!("Sure! Here is the plan:\n```json\n{PLAN}\n```\nLet me know if you need more.");
        assert_eq!(parse_plan(&wrapped).unwrap().resource, "members");
    }

    #[test]
    fn unfenced_code_is_accepted() {
        let text = PLAN.replace(r"```python\nREPLY = {'status': 200}\n```", "REPLY = {'status': 201}");
        assert_eq!(parse_plan(&text).unwrap().code.source(), "REPLY = {'status': 201}");
    }

    #[test]
    fn each_defect_has_its_own_reason() {
        assert_eq!(parse_plan("no plan here"), Err(PlanError::NoJson));
        let wrong_type = PLAN.replace(r#""resource": "members""#, r#""resource": 7"#);
        assert_eq!(parse_plan(&wrong_type), Err(PlanError::Schema("resource must be a string".into())));
        let bad_action = PLAN.replace(r#""action": "get""#, r#""action": "drop_table""#);
        assert!(matches!(parse_plan(&bad_action), Err(PlanError::Schema(m)) if m.contains("drop_table")));
        let escape = PLAN.replace(r#""resource": "members""#, r#""resource": "../x""#);
        assert!(matches!(parse_plan(&escape), Err(PlanError::Schema(m)) if m.starts_with("resource")));
        let two = PLAN.replace(
            r"```python\nREPLY = {'status': 200}\n```",
            r"```python\nx = 1\n```\n```python\nREPLY = {'status': 200}\n```",
        );
        assert_eq!(parse_plan(&two), Err(PlanError::CodeBlocks(2)));
        let no_reply = PLAN.replace("REPLY = {'status': 200}", "x = 1");
        assert_eq!(parse_plan(&no_reply), Err(PlanError::NoReply));
        let no_code = r#"{"action": "get", "resource": "members"}"#;
        assert_eq!(parse_plan(no_code), Err(PlanError::Schema("code is missing".into())));
    }

    #[test]
    fn custom_actions_may_load_more_collections() {
        let text = PLAN.replace(r#""action": "get""#, r#""action": "custom", "also_loads": ["orders"]"#);
        let plan = parse_plan(&text).unwrap();
        assert_eq!(plan.collections(), vec!["members", "orders"]);
    }

    #[test]
    fn form_is_normalised_as_the_rules_write_it() {
        let text = PLAN
            .replace(r#""action": "get""#, r#""action": " GET ""#)
            .replace(r#""resource": "members""#, r#""resource": "/members.json", "also_loads": ["members", "orders", "orders/"]"#)
            .replace(r#""id": "1""#, r#""id": "12""#);
        let plan = parse_plan(&text).unwrap();
        assert_eq!((plan.action.as_str(), plan.resource.as_str()), ("get", "members"));
        assert_eq!(plan.also_loads, vec!["orders".to_string()], "the resource and repeats are dropped");
        assert_eq!(plan.id, Some(Value::from(12)));
        let padded = parse_plan(&PLAN.replace(r#""id": "1""#, r#""id": "007""#)).unwrap();
        assert_eq!(padded.id, Some(Value::from("007")), "only canonical digits become an integer");
    }

    #[test]
    fn crud_plans_use_the_collection_of_their_path() {
        use crate::context::RawRequest;
        let raw = RawRequest { method: "GET", path: "/members/1", query: "", headers: &[], body: b"", client_ip: "" };
        let ctx = RequestContext::build(&raw, "t").unwrap();
        let mut copied = parse_plan(&PLAN.replace(r#""resource": "members""#, r#""resource": "books", "also_loads": ["members"]"#)).unwrap();
        bind_to_path(&mut copied, &ctx);
        assert_eq!((copied.resource.as_str(), copied.also_loads.len()), ("members", 0));
        let mut custom = parse_plan(&PLAN.replace(r#""action": "get""#, r#""action": "custom""#).replace("members", "books")).unwrap();
        bind_to_path(&mut custom, &ctx);
        assert_eq!(custom.resource, "books", "a custom action may use another collection");
    }
}
