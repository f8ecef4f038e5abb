//! Tool calls a model wrote as text. Small models asked for native tool
//! calls often answer with the call in their text instead: a JSON object
//! with the tool's name and its arguments, bare, in a ```json fence or
//! inside `<tool_call>` tags, sometimes several in one answer. Such a call
//! is taken as the call it means, when it names one of the offered tools.

use anypath_llm::ToolCall;
use serde_json::{Map, Value};

/// The calls written in `text` of tools named in `known`, in the order
/// they appear; none when the text holds no such call.
pub fn recover(text: &str, known: &[&str]) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find('{') {
        let start = at + offset;
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => {
                let end = start + values.byte_offset();
                if let Some(call) = as_call(value, known, calls.len()) {
                    calls.push(call);
                    at = end;
                    continue;
                }
                // Not a call itself: one may still be nested inside it.
                at = start + 1;
            }
            _ => at = start + 1,
        }
    }
    calls
}

/// `value` as a call of a known tool: `{"name", "arguments"}`, with
/// `parameters` or `args` for `arguments`, `tool` for `name`, the
/// arguments as an object or as a string of one, or the OpenAI wire form
/// `{"function": {"name", "arguments"}}`.
fn as_call(value: Value, known: &[&str], index: usize) -> Option<ToolCall> {
    let Value::Object(mut object) = value else { return None };
    if let Some(Value::Object(function)) = object.remove("function") {
        object = function;
    }
    let name = match object.remove("name").or_else(|| object.remove("tool")) {
        Some(Value::String(name)) if known.contains(&name.as_str()) => name,
        _ => return None,
    };
    let arguments = ["arguments", "parameters", "args", "input"].iter().find_map(|key| object.remove(*key));
    let arguments = match arguments {
        None => Value::Object(Map::new()),
        Some(Value::String(text)) => serde_json::from_str(&text).ok().filter(Value::is_object)?,
        Some(Value::Object(fields)) => Value::Object(fields),
        Some(_) => return None,
    };
    Some(ToolCall { id: format!("text-call-{index}"), name, arguments })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KNOWN: [&str; 3] = ["write_file", "run_tests", "final_answer"];

    fn names_and_arguments(text: &str) -> Vec<(String, Value)> {
        recover(text, &KNOWN).into_iter().map(|c| (c.name, c.arguments)).collect()
    }

    #[test]
    fn a_fenced_call_is_the_call() {
        let text = "I will create the file.\n```json\n{\"name\": \"write_file\", \"arguments\": {\"filePath\": \"hello.txt\", \"content\": \"Hi {there}\"}}\n```";
        assert_eq!(names_and_arguments(text), [("write_file".into(), json!({"filePath": "hello.txt", "content": "Hi {there}"}))]);
    }

    #[test]
    fn tagged_and_bare_calls_are_taken_in_order() {
        let text = "<tool_call>\n{\"name\": \"write_file\", \"arguments\": \"{\\\"filePath\\\": \\\"a.py\\\", \\\"content\\\": \\\"x = 1\\\"}\"}\n</tool_call>\n\
                    then {\"tool\": \"run_tests\", \"parameters\": {}} and {\"function\": {\"name\": \"final_answer\", \"arguments\": {\"text\": \"done\"}}}";
        let calls = recover(text, &KNOWN);
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["write_file", "run_tests", "final_answer"]);
        assert_eq!(calls[0].arguments, json!({"filePath": "a.py", "content": "x = 1"}));
        assert_eq!(calls[2].arguments, json!({"text": "done"}));
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["text-call-0", "text-call-1", "text-call-2"], "each call has its own id");
    }

    #[test]
    fn json_that_is_not_a_known_call_is_only_text() {
        for text in [
            "The answer is 42.",
            "Use a dict like {\"name\": \"Alice\"} in Python.",
            "{\"name\": \"format_disk\", \"arguments\": {}}",
            "{\"name\": \"write_file\", \"arguments\": [1, 2]}",
            "{\"name\": \"write_file\", \"arguments\": {\"filePath\": ",
        ] {
            assert!(recover(text, &KNOWN).is_empty(), "{text}");
        }
    }

    #[test]
    fn a_call_nested_in_a_wrapper_object_is_found() {
        let text = "{\"tool_calls\": [{\"name\": \"run_tests\", \"arguments\": {}}]}";
        assert_eq!(names_and_arguments(text), [("run_tests".into(), json!({}))]);
    }
}
