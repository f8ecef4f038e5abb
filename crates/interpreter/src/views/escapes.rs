//! Running a cell that has shell escapes (see [`super::cell_magics`]):
//! its segments in order, the Python on the session's live instance under
//! the run's lock, the commands on its shell beside it, and what each
//! printed merged into the one report a cell gives.

use std::collections::BTreeMap;
use std::sync::Arc;

use anypath_sandbox::{CellRequest, Interrupt};

use crate::error::InterpreterError;
use crate::interpreter::Interpreter;
use crate::views::cell_magics::{self, Segment};

/// A cell with shell escapes, run segment by segment on the session's live
/// instance (under the run's lock) and its shell (beside it): what each
/// printed goes into one report, in order, and the first Python segment
/// that raises ends the cell, as in IPython (a failing command does not).
pub(crate) struct Escapes<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) session_id: &'a str,
    /// The run's environment, also the commands'.
    pub(crate) env: BTreeMap<String, String>,
}

impl Escapes<'_> {
    pub(crate) async fn run(&self, interpreter: &Arc<Interpreter>, live: &mut anypath_sandbox::LiveInstance, segments: Vec<Segment>, cell: CellRequest) -> Result<anypath_sandbox::CellReport, InterpreterError> {
        let mut merged: Option<anypath_sandbox::CellReport> = None;
        let interrupt = cell.interrupt.clone();
        let stopped = || interrupt.as_ref().is_some_and(Interrupt::is_interrupted);
        for segment in segments {
            if stopped() {
                break;
            }
            match segment {
                Segment::Python(code) => {
                    let report = live.run(CellRequest { code, ..cell.clone() }).await;
                    let failed = report.error.is_some();
                    merge(&mut merged, report);
                    if failed {
                        break;
                    }
                }
                Segment::Script(script) => {
                    let ran = self.command(interpreter, script.clone(), &cell, true).await?;
                    add_command(merged.get_or_insert_with(|| empty_report(live)), &ran, true);
                    if ran.exit_code != 0 {
                        let raised = live.run(self.quiet(&cell, cell_magics::failed_script_cell(&script, ran.exit_code))).await;
                        merge(&mut merged, raised);
                        break;
                    }
                }
                Segment::Shell { command, assign } => {
                    let command = if cell_magics::needs_expansion(&command) {
                        let expanded = live.run(self.quiet(&cell, cell_magics::expansion_cell(&command))).await;
                        if expanded.error.is_some() {
                            merge(&mut merged, expanded);
                            break;
                        }
                        expanded.output.stdout
                    } else {
                        command
                    };
                    // `x = !cmd` shows nothing: its output is the value.
                    let shown = assign.is_none();
                    let ran = self.command(interpreter, command, &cell, shown).await?;
                    add_command(merged.get_or_insert_with(|| empty_report(live)), &ran, shown);
                    if let Some(name) = assign {
                        let assigned = live.run(self.quiet(&cell, cell_magics::assignment_cell(&name, &ran.stdout))).await;
                        if assigned.error.is_some() {
                            merge(&mut merged, assigned);
                            break;
                        }
                    }
                }
            }
        }
        Ok(merged.unwrap_or_else(|| empty_report(live)))
    }

    /// Runs `command` in the session's shell under the cell's environment
    /// and interrupt; its output reaches the cell's live stream when `shown`.
    async fn command(&self, interpreter: &Arc<Interpreter>, command: String, cell: &CellRequest, shown: bool) -> Result<anypath_wire::CommandReport, InterpreterError> {
        let output = cell.live.clone().filter(|_| shown).map(|sink| -> anypath_sandbox::shell::OutputSink {
            std::sync::Arc::new(move |stream, bytes| {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let _ = sink.send(match stream {
                    anypath_sandbox::shell::Stream::Stdout => anypath_wire::LiveEvent::Stdout(text),
                    anypath_sandbox::shell::Stream::Stderr => anypath_wire::LiveEvent::Stderr(text),
                });
            })
        });
        let request = anypath_wire::CommandRequest { command, env: self.env.clone(), ..Default::default() };
        let streams = crate::commands::CommandStreams { output, stdin: None, interrupt: cell.interrupt.clone() };
        interpreter.commands().run(self.tenant, self.session_id, request, streams).await
    }

    /// A cell of the host's own in the session: its output is not the user's.
    fn quiet(&self, cell: &CellRequest, code: String) -> CellRequest {
        CellRequest { code, live: None, figure_formats: Vec::new(), result_data: false, ..cell.clone() }
    }
}

/// A command's output and time in the cell's report (its stdout only when `shown`).
fn add_command(report: &mut anypath_sandbox::CellReport, ran: &anypath_wire::CommandReport, shown: bool) {
    if shown {
        report.output.stdout.push_str(&ran.stdout);
    }
    report.output.stderr.push_str(&ran.stderr);
    report.output.stdout_truncated |= ran.stdout_truncated;
    report.output.stderr_truncated |= ran.stderr_truncated;
    report.metrics.duration_us += ran.duration_us;
}

/// `next` after what ran before it in the same cell.
fn merge(merged: &mut Option<anypath_sandbox::CellReport>, next: anypath_sandbox::CellReport) {
    let Some(report) = merged.as_mut() else {
        *merged = Some(next);
        return;
    };
    report.output.stdout.push_str(&next.output.stdout);
    report.output.stderr.push_str(&next.output.stderr);
    report.output.stdout_truncated |= next.output.stdout_truncated;
    report.output.stderr_truncated |= next.output.stderr_truncated;
    report.results.extend(next.results);
    report.metrics.duration_us += next.metrics.duration_us;
    report.metrics.fuel_consumed += next.metrics.fuel_consumed;
    report.metrics.peak_memory_bytes = report.metrics.peak_memory_bytes.max(next.metrics.peak_memory_bytes);
    report.state_reset |= next.state_reset;
    report.quota_exceeded |= next.quota_exceeded;
    if next.error.is_some() {
        report.error = next.error;
        report.traceback = next.traceback;
        report.exit_code = next.exit_code;
    }
    if next.state_note.is_some() {
        report.state_note = next.state_note;
    }
}

/// The report of a cell that was all shell: nothing ran in the instance.
fn empty_report(live: &anypath_sandbox::LiveInstance) -> anypath_sandbox::CellReport {
    anypath_sandbox::CellReport {
        exit_code: 0,
        output: Default::default(),
        results: Vec::new(),
        traceback: None,
        error: None,
        state_reset: false,
        quota_exceeded: false,
        state: if live.is_live() { anypath_wire::StateOrigin::Kept } else { anypath_wire::StateOrigin::Fresh },
        state_note: None,
        metrics: Default::default(),
    }
}
