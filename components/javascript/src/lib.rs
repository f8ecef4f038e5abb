//! The JavaScript runtime: code-interpreter cells run by QuickJS inside
//! WebAssembly.
//!
//! A cell is one call of `run-cell`. Every cell of an instance runs in the
//! same QuickJS context, as a REPL's lines do: top-level declarations, the
//! heap and the working directory persist from cell to cell. The globals a
//! cell finds beside the language's own (`console`, timers, `require` with
//! `fs` and `path`, `process`) are written in JavaScript ([`prelude`]) over
//! a few functions of this crate ([`host`]).

mod cell;
mod engine;
mod fs;
mod host;
mod instance;
mod interrupt;
mod live;
mod output;
mod prelude;
mod rejections;
mod results;
mod timers;


wit_bindgen::generate!({ path: "../../wit", world: "javascript" });

/// The component: its one export runs a cell.
struct Javascript;

impl Guest for Javascript {
    fn run_cell(input: CellInput) -> CellOutput {
        cell::run(input)
    }
}

export!(Javascript);
