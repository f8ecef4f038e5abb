//! One operation named by text, with JSON arguments: how a block in the
//! sandbox reaches the store (`store.get(7)` becomes `call("get", [7])`).

use serde_json::Value;

use crate::error::OpError;
use crate::list::ListPlan;
use crate::store::{Store, Which};

/// Runs `op` on the collection `which` with `args` (a JSON array of the
/// positional arguments; for `list`, an object of its keyword arguments)
/// and returns its result as JSON.
pub fn call(store: &mut Store, which: Which<'_>, op: &str, args: Value) -> Result<Value, OpError> {
    dispatch(store, which, op, args).map_err(|e| store.note(e))
}

fn dispatch(store: &mut Store, which: Which<'_>, op: &str, args: Value) -> Result<Value, OpError> {
    let arity = |n: usize| -> Result<Vec<Value>, OpError> {
        match &args {
            Value::Array(items) if items.len() == n => Ok(items.clone()),
            _ => Err(OpError::Type(format!("{op}() takes {n} argument{}", if n == 1 { "" } else { "s" }))),
        }
    };
    match op {
        "get_all" => {
            arity(0)?;
            store.get_all(which).map(Value::Array)
        }
        "get" => {
            let [id] = take(arity(1)?);
            store.get(which, &id).map(|d| d.unwrap_or(Value::Null))
        }
        "insert" => {
            let [document] = take(arity(1)?);
            store.insert(which, document)
        }
        "replace" => {
            let [id, document] = take(arity(2)?);
            store.replace(which, &id, document).map(|d| d.unwrap_or(Value::Null))
        }
        "patch" => {
            let [id, delta] = take(arity(2)?);
            store.patch(which, &id, delta).map(|d| d.unwrap_or(Value::Null))
        }
        "delete" => {
            let [id] = take(arity(1)?);
            store.delete(which, &id).map(Value::Bool)
        }
        "search" => {
            let [filters] = take(arity(1)?);
            store.search(which, &filters).map(Value::Array)
        }
        "list" => {
            let Value::Object(kwargs) = &args else { return Err(OpError::Type("list() takes keyword arguments".into())) };
            let plan = ListPlan::from_call(kwargs)?;
            let page = store.list(which, &plan)?;
            serde_json::to_value(page).map_err(|e| OpError::Value(e.to_string()))
        }
        other => Err(OpError::Type(format!("the store has no operation {other:?}"))),
    }
}

fn take<const N: usize>(items: Vec<Value>) -> [Value; N] {
    let mut items = items.into_iter();
    std::array::from_fn(|_| items.next().unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Documents, Loaded};
    use serde_json::json;

    #[test]
    fn operations_are_reached_by_name_with_json_arguments() {
        let loaded = Loaded { name: "m".into(), documents: Documents::Parsed(vec![json!({"id": 1, "a": 2})]), complete: true, absent_ids: vec![], reserved_id: None };
        let mut store = Store::new(vec![loaded]);
        assert_eq!(call(&mut store, Which::Default, "get", json!(["1"])).unwrap(), json!({"id": 1, "a": 2}));
        assert_eq!(call(&mut store, Which::Default, "insert", json!([{"a": 3}])).unwrap(), json!({"id": 2, "a": 3}));
        let page = call(&mut store, Which::Default, "list", json!({"sort": "-a", "limit": ["1"]})).unwrap();
        assert_eq!(page, json!({"items": [{"id": 2, "a": 3}], "page": {"limit": 1, "offset": 0, "total": 2}}));
        assert_eq!(call(&mut store, Which::Default, "search", json!([{"a__gt": "2"}])).unwrap(), json!([{"id": 2, "a": 3}]));
        assert!(matches!(call(&mut store, Which::Default, "get", json!([])), Err(OpError::Type(_))));
        assert!(matches!(call(&mut store, Which::Default, "drop", json!([])), Err(OpError::Type(_))));
        assert_eq!(call(&mut store, Which::Default, "delete", json!([2])).unwrap(), json!(true));
        assert_eq!(store.needs_data(), None);
        let partial = Loaded { name: "p".into(), documents: Documents::Parsed(vec![]), complete: false, absent_ids: vec![], reserved_id: None };
        let mut store = Store::new(vec![partial]);
        assert!(matches!(call(&mut store, Which::Default, "get_all", json!([])), Err(OpError::NeedsData(_))));
        assert!(store.needs_data().is_some(), "remembered even when the caller swallows the error");
    }
}
