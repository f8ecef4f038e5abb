//! The agent endpoint (`POST /run`) as a library, testable natively: the
//! request it accepts, the tools it offers a model, and the loop that lets
//! the model call them against one sandbox session. The Spin component
//! supplies the two sides the loop talks to: the model (through the
//! planner, the only component that reaches the LLM) and the session
//! (through the sandbox host's code-interpreter API).

pub mod agent_loop;
pub mod prompt;
pub mod request;
pub mod text_calls;
pub mod tools;

pub use agent_loop::{AgentError, Model, ModelError, RunOutcome, Step, run};
pub use request::{RequestError, RunRequest};
pub use tools::{FileEntry, ToolFailure, Workspace};
