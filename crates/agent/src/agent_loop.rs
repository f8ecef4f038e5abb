//! The loop: the model answers, the tools it asks for run, their
//! observations go back, until the model calls `final_answer` or answers
//! without a tool call, the turn limit is reached (then a clear answer says
//! so and the model is not called again), or the run's deadline passes.
//!
//! Every turn asks for a tool call (`tool_choice: required`, which servers
//! such as llama.cpp enforce with a grammar); a call the model wrote as
//! text instead is recovered from it and marked so in its step.

use anypath_llm::{ChatAnswer, ChatRequest, Message, ToolCall, ToolChoice};
use serde::Serialize;
use serde_json::Value;

pub use crate::prompt::SYSTEM_PROMPT;
use crate::text_calls;
use crate::tools::{self, FINAL_ANSWER, Workspace};

/// The model side of the loop (the component asks the planner).
pub trait Model {
    /// One completion of `chat`.
    fn complete(&mut self, chat: &ChatRequest) -> Result<ChatAnswer, ModelError>;
}

/// Why the model gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The LLM (or the planner in front of it) failed; the reason says how.
    #[error("{0}")]
    Failed(String),
    /// No answer within the time left.
    #[error("{0}")]
    Timeout(String),
    /// No LLM is configured: a setting to fix on the server, not a bad gateway.
    #[error("{0}")]
    Unconfigured(String),
}

/// Why a run ended without an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    #[error("the LLM failed: {0}")]
    Llm(String),
    #[error("the run passed its deadline after {turns} model turns")]
    Deadline { turns: u32 },
    #[error("the agent is unavailable: {0}")]
    Unavailable(String),
}

impl AgentError {
    /// HTTP status and envelope code.
    pub fn status_and_code(&self) -> (u16, &'static str) {
        match self {
            Self::Llm(_) => (502, "llm_failed"),
            Self::Deadline { .. } => (504, "run_timeout"),
            Self::Unavailable(_) => (503, "agent_unavailable"),
        }
    }
}

/// One tool call and what it observed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// What the model said along with the call, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
    pub tool: String,
    pub input: Value,
    pub observation: String,
    /// The model wrote this call as text, not as a tool call.
    #[serde(skip_serializing_if = "is_false")]
    pub recovered: bool,
    /// The tool refused the call (unknown tool, bad arguments, a path out
    /// of the session); the observation says why.
    #[serde(skip_serializing_if = "is_false")]
    pub refused: bool,
}

impl Step {
    /// A step that is neither recovered nor refused.
    pub fn plain(tool: impl Into<String>, input: Value, observation: impl Into<String>) -> Self {
        Self { thought: None, tool: tool.into(), input, observation: observation.into(), recovered: false, refused: false }
    }
}

fn is_false(flag: &bool) -> bool {
    !flag
}

/// A finished run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    pub output: String,
    pub steps: Vec<Step>,
    /// Model turns taken.
    pub turns: u32,
    /// Calls of the working tools (`final_answer` is not one).
    pub tool_calls: u32,
    /// Of those, the calls the model wrote as text.
    pub recovered_calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The turn limit ended the run.
    pub limit_reached: bool,
}

/// Runs `input` for at most `max_turns` model turns; `expired` says when
/// the run's deadline has passed (checked before every model turn).
pub fn run(
    input: &str,
    max_turns: u32,
    model: &mut dyn Model,
    workspace: &mut dyn Workspace,
    expired: &dyn Fn() -> bool,
) -> Result<RunOutcome, AgentError> {
    let mut chat = ChatRequest::new(SYSTEM_PROMPT, vec![Message::user(input)]).with_tools(tools::specs());
    chat.tool_choice = Some(ToolChoice::Required);
    let mut outcome = RunOutcome {
        output: String::new(),
        steps: Vec::new(),
        turns: 0,
        tool_calls: 0,
        recovered_calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        limit_reached: false,
    };
    // Once per run, a text answer that did nothing, or that left a failure
    // standing, is sent back with a nudge to act instead.
    let mut nudged = false;
    let mut failure_standing = false;
    let mut previous: Option<Vec<(String, Value)>> = None;
    while outcome.turns < max_turns {
        if expired() {
            return Err(AgentError::Deadline { turns: outcome.turns });
        }
        let reply = model.complete(&chat).map_err(|e| match e {
            ModelError::Timeout(_) if expired() => AgentError::Deadline { turns: outcome.turns },
            ModelError::Unconfigured(reason) => AgentError::Unavailable(reason),
            other => AgentError::Llm(other.to_string()),
        })?;
        outcome.turns += 1;
        outcome.input_tokens += reply.usage.input_tokens;
        outcome.output_tokens += reply.usage.output_tokens;
        let (calls, recovered) = calls_of(&reply);
        if calls.is_empty() {
            if !nudged && (outcome.tool_calls == 0 || failure_standing) {
                nudged = true;
                chat.messages.push(Message::assistant(reply.text()));
                chat.messages.push(Message::user(nudge(outcome.tool_calls == 0)));
                continue;
            }
            outcome.output = ending(reply.text(), &outcome);
            return Ok(outcome);
        }
        let signature: Vec<(String, Value)> = calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        if previous.as_ref() == Some(&signature) {
            // The same calls again change nothing: a small model's way of not finishing.
            outcome.output = format!(
                "Stopped: the model repeated its previous call ({}) instead of finishing. {} tool calls were made; see the steps for what was done.",
                signature.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(", "),
                outcome.tool_calls
            );
            return Ok(outcome);
        }
        previous = Some(signature);
        // A recovered call's text is the call itself: not a thought.
        let said = if recovered { String::new() } else { reply.text().to_owned() };
        let thought = (!said.trim().is_empty()).then(|| said.clone());
        chat.messages.push(Message::Assistant { content: said, tool_calls: calls.clone() });
        let mut finished = None;
        for call in &calls {
            let (observation, is_error) = tools::dispatch(call, workspace);
            chat.messages.push(Message::Tool { tool_call_id: call.id.clone(), content: observation.clone(), is_error });
            if call.name == FINAL_ANSWER && !is_error {
                finished = Some(observation);
                continue;
            }
            outcome.tool_calls += 1;
            outcome.recovered_calls += u32::from(recovered);
            if matches!(call.name.as_str(), "run_python" | "run_tests") && !is_error {
                failure_standing = shows_failure(&observation);
            }
            let step = Step { thought: thought.clone(), tool: call.name.clone(), input: call.arguments.clone(), observation, recovered, refused: is_error };
            outcome.steps.push(step);
        }
        if let Some(answer) = finished {
            outcome.output = ending(&answer, &outcome);
            return Ok(outcome);
        }
    }
    outcome.limit_reached = true;
    outcome.output = format!(
        "Stopped: the model used all {max_turns} of its turns (max_iterations) without a final answer. \
         {} tool calls were made; see the steps for what was done.",
        outcome.tool_calls
    );
    Ok(outcome)
}

/// The calls of a reply: its tool calls, else the calls written in its
/// text (then `true`).
fn calls_of(reply: &ChatAnswer) -> (Vec<ToolCall>, bool) {
    if !reply.tool_calls.is_empty() {
        return (reply.tool_calls.clone(), false);
    }
    let recovered = text_calls::recover(reply.text(), &tools::NAMES);
    let any = !recovered.is_empty();
    (recovered, any)
}

/// What the model is told when it answered in words where work was due.
fn nudge(nothing_done: bool) -> &'static str {
    if nothing_done {
        "Nothing has been done yet: no tool was called. Do the task now by calling the tools, for example write_file or run_python. Answer with the tool call only."
    } else {
        "The last result shows a failure. Fix it with the tools (read_file, then write_file), run it again, then call final_answer."
    }
}

/// Whether a run's output shows failing tests or an uncaught exception.
fn shows_failure(observation: &str) -> bool {
    observation.contains("FAILED") || observation.contains("Traceback (most recent call last)")
}

/// The run's answer: the model's, said to have used no tool when it used none.
fn ending(answer: &str, outcome: &RunOutcome) -> String {
    if outcome.tool_calls > 0 {
        return answer.to_owned();
    }
    format!("No tool was used: the model answered without calling any tool, so nothing in the session was changed or checked. Its answer: {answer}")
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use anypath_llm::{ToolCall, Usage};
    use serde_json::json;

    use super::*;
    use crate::tools::{FileEntry, ToolFailure};

    /// A scripted model: each turn takes the next reply; records what it saw.
    struct Scripted {
        replies: VecDeque<ChatAnswer>,
        seen: Vec<ChatRequest>,
        forever: Option<ChatAnswer>,
    }

    impl Model for Scripted {
        fn complete(&mut self, chat: &ChatRequest) -> Result<ChatAnswer, ModelError> {
            self.seen.push(chat.clone());
            self.replies.pop_front().or_else(|| self.forever.clone()).ok_or_else(|| ModelError::Failed("script ended".into()))
        }
    }

    fn scripted(replies: Vec<ChatAnswer>) -> Scripted {
        Scripted { replies: replies.into(), seen: Vec::new(), forever: None }
    }

    fn calls(calls: &[(&str, Value)]) -> ChatAnswer {
        let tool_calls = calls.iter().enumerate().map(|(i, (name, arguments))| ToolCall { id: format!("c{i}"), name: (*name).into(), arguments: arguments.clone() }).collect();
        ChatAnswer { tool_calls, usage: Usage { input_tokens: 10, output_tokens: 2 }, ..ChatAnswer::default() }
    }

    fn answer(text: &str) -> ChatAnswer {
        ChatAnswer { content: Some(text.into()), ..ChatAnswer::default() }
    }

    /// Files in memory; `run_tests` passes once `calc.py` has the fix.
    #[derive(Default)]
    struct Files(BTreeMap<String, String>);

    impl Workspace for Files {
        fn write_file(&mut self, path: &str, content: &str) -> Result<String, ToolFailure> {
            self.0.insert(path.into(), content.into());
            Ok(format!("wrote {} bytes to {path}", content.len()))
        }
        fn read_file(&mut self, path: &str) -> Result<String, ToolFailure> {
            self.0.get(path).cloned().ok_or_else(|| ToolFailure(format!("no file {path}")))
        }
        fn list_files(&mut self) -> Result<Vec<FileEntry>, ToolFailure> {
            Ok(self.0.iter().map(|(path, text)| FileEntry { path: path.clone(), size_bytes: text.len() as u64 }).collect())
        }
        fn run_python(&mut self, _code: &str) -> Result<String, ToolFailure> {
            Ok("ran".into())
        }
        fn run_command(&mut self, _command: &str) -> Result<String, ToolFailure> {
            Ok("exit_code: 0".into())
        }
        fn run_tests(&mut self) -> Result<String, ToolFailure> {
            Ok(if self.0.get("calc.py").is_some_and(|c| c.contains("a + b")) {
                "OK: 1 passed, 0 failed, 0 errors, 0 skipped".into()
            } else {
                "FAILED: 0 passed, 1 failed, 0 errors, 0 skipped".into()
            })
        }
    }

    #[test]
    fn a_write_then_an_answer_leaves_the_file_and_reports_the_step() {
        let mut model = scripted(vec![calls(&[("write_file", json!({"filePath": "hello.txt", "content": "Hello"}))]), answer("Wrote hello.txt")]);
        let mut files = Files::default();
        let outcome = run("Write hello.txt", 6, &mut model, &mut files, &|| false).expect("run");
        assert_eq!((outcome.output.as_str(), outcome.turns, outcome.tool_calls), ("Wrote hello.txt", 2, 1));
        assert_eq!(files.0.get("hello.txt").map(String::as_str), Some("Hello"));
        assert_eq!(outcome.steps[0].tool, "write_file");
        let second = &model.seen[1].messages;
        assert!(matches!(&second[2], Message::Tool { content, is_error: false, .. } if content.contains("wrote 5 bytes")), "{second:?}");
    }

    #[test]
    fn a_failing_test_is_read_fixed_and_rerun() {
        let mut model = scripted(vec![
            calls(&[("write_file", json!({"filePath": "calc.py", "content": "def add(a, b):\n    return a - b\n"})), ("write_file", json!({"filePath": "test_calc.py", "content": "..."}))]),
            calls(&[("run_tests", json!({}))]),
            calls(&[("write_file", json!({"filePath": "calc.py", "content": "def add(a, b):\n    return a + b\n"}))]),
            calls(&[("run_tests", json!({}))]),
            answer("Fixed add; the tests pass."),
        ]);
        let outcome = run("Write and test add", 6, &mut model, &mut Files::default(), &|| false).expect("run");
        let observations: Vec<&str> = outcome.steps.iter().filter(|s| s.tool == "run_tests").map(|s| s.observation.as_str()).collect();
        assert_eq!(observations, ["FAILED: 0 passed, 1 failed, 0 errors, 0 skipped", "OK: 1 passed, 0 failed, 0 errors, 0 skipped"]);
        assert_eq!((outcome.turns, outcome.limit_reached), (5, false));
    }

    #[test]
    fn a_model_that_never_stops_ends_at_the_limit_without_another_call() {
        let mut model = scripted(vec![calls(&[("read_file", json!({"filePath": "a.txt"}))]), calls(&[("list_files", json!({}))])]);
        model.forever = Some(calls(&[("read_file", json!({"filePath": "b.txt"}))]));
        let outcome = run("loop", 3, &mut model, &mut Files::default(), &|| false).expect("run");
        assert!(outcome.limit_reached && outcome.output.contains("all 3 of its turns"), "{}", outcome.output);
        assert_eq!((model.seen.len(), outcome.tool_calls), (3, 3));
    }

    #[test]
    fn tool_errors_go_back_to_the_model_and_the_loop_goes_on() {
        let mut model = scripted(vec![
            calls(&[("read_file", json!({"filePath": "../../etc/passwd"})), ("format_disk", json!({})), ("write_file", json!("{broken"))]),
            answer("I cannot do that."),
        ]);
        let outcome = run("escape", 6, &mut model, &mut Files::default(), &|| false).expect("run");
        let observations: Vec<&str> = outcome.steps.iter().map(|s| s.observation.as_str()).collect();
        assert!(observations[0].contains("path escapes the sandbox: ../../etc/passwd"), "{observations:?}");
        assert!(observations[1].contains("unknown tool") && observations[2].contains("not a JSON object"), "{observations:?}");
        assert_eq!(outcome.output, "I cannot do that.");
    }

    #[test]
    fn a_call_written_as_text_is_run_and_marked_recovered() {
        let fenced = "```json\n{\"name\": \"write_file\", \"arguments\": {\"filePath\": \"hello.txt\", \"content\": \"Hi\"}}\n```";
        let mut model = scripted(vec![answer(fenced), calls(&[(FINAL_ANSWER, json!({"text": "Wrote hello.txt"}))])]);
        let mut files = Files::default();
        let outcome = run("Write hello.txt", 6, &mut model, &mut files, &|| false).expect("run");
        assert_eq!(files.0.get("hello.txt").map(String::as_str), Some("Hi"), "the recovered call wrote the file");
        assert_eq!((outcome.tool_calls, outcome.recovered_calls, outcome.turns), (1, 1, 2));
        assert!(outcome.steps[0].recovered && !outcome.steps[0].refused && outcome.steps[0].thought.is_none(), "{:?}", outcome.steps);
        assert_eq!(outcome.output, "Wrote hello.txt");
        let second = &model.seen[1].messages;
        assert!(matches!(&second[1], Message::Assistant { content, tool_calls } if content.is_empty() && tool_calls.len() == 1), "{second:?}");
        assert!(model.seen.iter().all(|chat| chat.tool_choice == Some(ToolChoice::Required)), "every turn asks for a tool call");
    }

    #[test]
    fn final_answer_ends_the_run_after_the_calls_beside_it() {
        let mut model = scripted(vec![calls(&[
            ("write_file", json!({"filePath": "a.txt", "content": "A"})),
            (FINAL_ANSWER, json!({"text": "Done."})),
        ])]);
        model.forever = Some(calls(&[("list_files", json!({}))]));
        let mut files = Files::default();
        let outcome = run("Write a.txt", 6, &mut model, &mut files, &|| false).expect("run");
        assert_eq!((outcome.output.as_str(), outcome.turns, outcome.tool_calls, model.seen.len()), ("Done.", 1, 1, 1));
        assert_eq!(outcome.steps.iter().map(|s| s.tool.as_str()).collect::<Vec<_>>(), ["write_file"], "final_answer is the ending, not a step");
        assert!(files.0.contains_key("a.txt"));
    }

    #[test]
    fn a_run_that_used_no_tool_says_so() {
        let mut model = scripted(vec![answer("Sure, I created hello.txt for you."), answer("Done, hello.txt exists.")]);
        let outcome = run("Create hello.txt", 6, &mut model, &mut Files::default(), &|| false).expect("run");
        assert!(outcome.output.starts_with("No tool was used") && outcome.output.ends_with("Done, hello.txt exists."), "{}", outcome.output);
        assert!(matches!(model.seen[1].messages.last(), Some(Message::User { content }) if content.contains("no tool was called")), "nudged once");
        let mut model = scripted(vec![calls(&[(FINAL_ANSWER, json!({"text": "Done."}))])]);
        let outcome = run("Create hello.txt", 6, &mut model, &mut Files::default(), &|| false).expect("run");
        assert!(outcome.output.starts_with("No tool was used"), "finishing at once is no work either: {}", outcome.output);
    }

    #[test]
    fn a_refused_call_is_a_step_marked_refused() {
        let mut model = scripted(vec![calls(&[("read_file", json!({"filePath": "../../etc/passwd"}))]), answer("That file is outside the session.")]);
        let outcome = run("read ../../etc/passwd", 6, &mut model, &mut Files::default(), &|| false).expect("run");
        assert!(outcome.steps[0].refused && outcome.steps[0].observation.contains("path escapes the sandbox"), "{:?}", outcome.steps);
        let wire = serde_json::to_value(&outcome.steps[0]).expect("json");
        assert_eq!((&wire["refused"], wire.get("recovered")), (&json!(true), None), "only what is true is written: {wire}");
    }

    #[test]
    fn words_after_a_failing_test_are_sent_back_once_to_act_on() {
        let mut model = scripted(vec![
            calls(&[("run_tests", json!({}))]),
            answer("The bug is that add subtracts."),
            calls(&[("write_file", json!({"filePath": "calc.py", "content": "def add(a, b):\n    return a + b\n"}))]),
            calls(&[("run_tests", json!({}))]),
            calls(&[(FINAL_ANSWER, json!({"text": "Fixed."}))]),
        ]);
        let mut files = Files::default();
        files.0.insert("calc.py".into(), "def add(a, b):\n    return a - b\n".into());
        let outcome = run("fix calc.py", 6, &mut model, &mut files, &|| false).expect("run");
        assert_eq!((outcome.output.as_str(), outcome.turns), ("Fixed.", 5));
        assert!(files.0["calc.py"].contains("a + b"));
        let nudged = &model.seen[2].messages;
        assert!(matches!(nudged.last(), Some(Message::User { content }) if content.contains("shows a failure")), "{nudged:?}");
    }

    #[test]
    fn the_same_calls_twice_end_the_run() {
        let write = calls(&[("write_file", json!({"filePath": "a.txt", "content": "A"}))]);
        let mut model = scripted(vec![write.clone(), write]);
        model.forever = Some(calls(&[("list_files", json!({}))]));
        let outcome = run("write a.txt", 6, &mut model, &mut Files::default(), &|| false).expect("run");
        assert_eq!((outcome.turns, outcome.tool_calls, outcome.limit_reached), (2, 1, false));
        assert!(outcome.output.starts_with("Stopped: the model repeated its previous call (write_file)"), "{}", outcome.output);
    }

    #[test]
    fn model_failures_and_deadlines_are_errors() {
        let mut model = scripted(vec![]);
        assert_eq!(run("x", 6, &mut model, &mut Files::default(), &|| false).map_err(|e| e.status_and_code()), Err((502, "llm_failed")));
        let mut model = scripted(vec![answer("never asked")]);
        let error = run("x", 6, &mut model, &mut Files::default(), &|| true).expect_err("deadline");
        assert_eq!((error.status_and_code(), model.seen.len()), ((504, "run_timeout"), 0));
    }
}
