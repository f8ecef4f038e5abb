//! Repairs that teach: for each way a plan fails, the smallest correct
//! pattern, sent to the model with the reason. A small model repeats its
//! mistake when told only what went wrong; shown the line to write, it
//! writes it.

use crate::plan_check::PlanError;

const ONE_OBJECT: &str = "Answer one JSON object and nothing else, for example:\n{\"action\": \"get\", \"resource\": \"members\", \"also_loads\": [], \"id\": 1, \"code\": {\"language\": \"python\", \"block\": \"```python\\nobj = store.get(ctx['segments'][1])\\nREPLY = {'status': 200, 'body': obj}\\n```\"}}";
const ONE_BLOCK: &str = "Put all the code in one block: \"block\": \"```python\\n<all the code>\\n```\"";
const ASSIGN_REPLY: &str = "Every branch of the code ends by assigning REPLY, for example:\nif obj is None:\n    REPLY = {'status': 404, 'body': {'error': {'code': 'not_found', 'message': 'no such document'}}}\nelse:\n    REPLY = {'status': 200, 'body': obj}";
const REPLY_IS_A_DICT: &str = "REPLY is a dict, never what a store call returns. For a create:\nnew_id = store.insert(obj)\nREPLY = {'status': 201, 'headers': {'Location': '/' + ctx['segments'][0] + '/' + quote_segment(new_id)}, 'body': obj}";
const HEADER_VALUES: &str = "Header values are plain text; put an id into a path with quote_segment: {'Location': '/' + ctx['segments'][0] + '/' + quote_segment(new_id)}";
const STATUS: &str = "REPLY['status'] is an integer such as 200, 201, 204, 400 or 404.";
const JSON_BODY: &str = "The body must be JSON: dicts, lists, strings, numbers, booleans or None; turn a set into a list with list(...).";
const REPLY_KEYS: &str = "REPLY has only the keys 'status', 'headers' and 'body'.";
const MISSING_KEYS: &str = "The body and documents may lack a key: read it with .get('key'). The id is ctx['segments'][1]; a query value is ctx['query'].get('name', [''])[0].";
const VALUE_TYPES: &str = "Query values are lists of strings: ctx['query'].get('age', [''])[0], then int(...) before comparing numbers. The store takes ids as the path gives them: store.get(ctx['segments'][1]).";
const NAMES: &str = "Only ctx, store, quote_segment and the modules json, re, math, statistics, datetime, itertools, uuid exist; define every variable before using it.";
const STORE_METHODS: &str = "store has get, insert, replace, patch, delete, get_all, search, list and collection(name); documents are dicts.";
const POLICY: &str = "Use only ctx, store and the modules json, re, math, statistics, datetime, itertools, uuid: no open(), no other imports, no names with double underscores.";
const BOUNDED: &str = "Loop only over what the store returns; never while True.";
const SMALL: &str = "Answer only what the request asks for; print nothing.";
const LIST: &str = "A list reads its paging, sorting and filters from ctx['list']['args'], whatever keys the client sent:\nREPLY = {'status': 200, 'body': store.list(**ctx['list']['args'])}";
const LOADED: &str = "Name every collection besides the resource in also_loads, once: \"also_loads\": [\"orders\"].";

/// The pattern that fixes a plan the planner refused.
pub fn for_plan_error(error: &PlanError) -> &'static str {
    match error {
        PlanError::NoJson | PlanError::Schema(_) => ONE_OBJECT,
        PlanError::CodeBlocks(_) => ONE_BLOCK,
        PlanError::NoReply => ASSIGN_REPLY,
    }
}

/// The pattern that fixes a block the sandbox failed: by `kind`, then by the
/// exception's type or the reply check's message.
pub fn for_block_fault(kind: &str, type_name: &str, message: &str) -> &'static str {
    match kind {
        "invalid_reply" if message.contains("did not assign REPLY") => ASSIGN_REPLY,
        "invalid_reply" if message.contains("must be a dict") => REPLY_IS_A_DICT,
        "invalid_reply" if message.contains("header") => HEADER_VALUES,
        "invalid_reply" if message.contains("status") => STATUS,
        "invalid_reply" if message.contains("unknown keys") => REPLY_KEYS,
        "invalid_reply" => JSON_BODY,
        "exception" if message.contains("was not loaded") => LOADED,
        "exception" if message.contains(".list(") => LIST,
        "exception" => match type_name {
            "KeyError" | "IndexError" => MISSING_KEYS,
            "TypeError" | "ValueError" => VALUE_TYPES,
            "NameError" | "UnboundLocalError" => NAMES,
            "AttributeError" => STORE_METHODS,
            _ => ASSIGN_REPLY,
        },
        "policy" => POLICY,
        "fuel_exhausted" | "timeout" => BOUNDED,
        _ => SMALL,
    }
}

const LESSON_MARK: &str = "\nThe correct pattern: ";

/// `problem` followed by the pattern that fixes it.
pub fn teach(problem: &str, lesson: &str) -> String {
    format!("{problem}{LESSON_MARK}{lesson}")
}

/// The problem of a [`teach`]-ed text, without its lesson.
pub fn untaught(text: &str) -> &str {
    text.split_once(LESSON_MARK).map_or(text, |(problem, _)| problem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mistakes_small_models_make_get_their_fix() {
        let dict = for_block_fault("invalid_reply", "", "REPLY must be a dict, not int");
        assert!(dict.contains("REPLY = {'status': 201"), "{dict}");
        assert!(for_block_fault("invalid_reply", "", "the block did not assign REPLY").contains("Every branch"));
        assert!(for_block_fault("exception", "KeyError", "'id'").contains(".get('key')"));
        assert!(for_block_fault("exception", "TypeError", "x").contains("lists of strings"));
        let list = for_block_fault("exception", "TypeError", "Collection.list() got an unexpected keyword argument 'order'");
        assert!(list.contains("store.list(**ctx['list']['args'])"), "{list}");
        assert!(for_block_fault("exception", "KeyError", "collection 'orders' was not loaded").contains("also_loads"));
        assert!(for_plan_error(&PlanError::NoReply).contains("REPLY"));
        assert!(teach("it failed", POLICY).starts_with("it failed\nThe correct pattern: "));
        assert_eq!(untaught(&teach("it failed", POLICY)), "it failed");
        assert_eq!(untaught("plain"), "plain");
    }

    /// The JSON example in a lesson is itself a valid plan.
    #[test]
    fn the_one_object_lesson_parses() {
        let json = ONE_OBJECT.split_once('\n').map(|(_, j)| j).unwrap_or_default();
        assert!(crate::plan_check::parse_plan(json).is_ok(), "{json}");
    }
}
