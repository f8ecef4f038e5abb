//! The code interpreter as a Model Context Protocol server (rmcp): the same
//! tools over stdio (`anypath mcp`) and Streamable HTTP (`/mcp` on the
//! sandbox service).

mod arguments;
mod descriptions;
pub mod http;
mod progress;
pub mod stdio;
mod tool_error;
mod tools;

pub use tools::CodeInterpreterTools;
