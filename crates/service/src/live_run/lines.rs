//! Output a line at a time, for the transports whose clients show it so
//! (E2B's NDJSON, Jupyter's `stream` messages): complete lines go out as
//! soon as they are written, a partial line once [`PARTIAL_LINE_WAIT`]
//! passes without its end, and whatever waits goes out before a result and
//! at the end of the run.

use std::time::Duration;

use anypath_wire::LiveEvent;

use super::LiveRun;

/// How long a partial line of output waits for its end before it is sent
/// (a kernel sends `print`'s text and its newline as one message).
const PARTIAL_LINE_WAIT: Duration = Duration::from_millis(50);

/// A run's output not yet sent: what each stream wrote after its last newline.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    stdout: String,
    stderr: String,
    /// The run's events have ended.
    ended: bool,
}

/// What [`Lines::next`] gives.
#[derive(Debug)]
pub(crate) enum Lined {
    /// Output (complete lines, or what waited) and results to send, in
    /// order; possibly none.
    Send(Vec<LiveEvent>),
    /// Nothing came for the quiet time, and nothing waits.
    Quiet,
}

impl Lines {
    /// Whether the run's events have ended and all its output was given out.
    pub fn has_ended(&self) -> bool {
        self.ended
    }

    /// What to send after the run's next event, or after a wait: a partial
    /// line waits [`PARTIAL_LINE_WAIT`] for its end; with nothing waiting,
    /// [`Lined::Quiet`] after `quiet` (never, without one). None once the
    /// run's events have ended and all was given out.
    pub async fn next(&mut self, run: &mut LiveRun, quiet: Option<Duration>) -> Option<Lined> {
        if self.ended {
            return None;
        }
        let waiting = !(self.stdout.is_empty() && self.stderr.is_empty());
        let wait = async move {
            match (waiting, quiet) {
                (true, _) => tokio::time::sleep(PARTIAL_LINE_WAIT).await,
                (false, Some(quiet)) => tokio::time::sleep(quiet).await,
                (false, None) => std::future::pending().await,
            }
        };
        tokio::select! {
            event = run.next_event() => Some(Lined::Send(match event {
                Some(event) => self.take(event),
                None => {
                    self.ended = true;
                    self.flush()
                }
            })),
            () = wait => Some(if waiting { Lined::Send(self.flush()) } else { Lined::Quiet }),
        }
    }

    /// What a live event lets go out: the complete lines of its stream, or
    /// everything waiting and then the result.
    fn take(&mut self, event: LiveEvent) -> Vec<LiveEvent> {
        match event {
            LiveEvent::Stdout(text) => {
                self.stdout.push_str(&text);
                complete_lines(&mut self.stdout).map(LiveEvent::Stdout).into_iter().collect()
            }
            LiveEvent::Stderr(text) => {
                self.stderr.push_str(&text);
                complete_lines(&mut self.stderr).map(LiveEvent::Stderr).into_iter().collect()
            }
            LiveEvent::Result(result) => {
                let mut sent = self.flush();
                sent.push(LiveEvent::Result(result));
                sent
            }
        }
    }

    /// Everything waiting, partial lines too: stdout's, then stderr's.
    fn flush(&mut self) -> Vec<LiveEvent> {
        let stdout = Some(std::mem::take(&mut self.stdout)).filter(|t| !t.is_empty()).map(LiveEvent::Stdout);
        let stderr = Some(std::mem::take(&mut self.stderr)).filter(|t| !t.is_empty()).map(LiveEvent::Stderr);
        stdout.into_iter().chain(stderr).collect()
    }
}

/// The complete lines at the front of `buffer`, taken off it.
fn complete_lines(buffer: &mut String) -> Option<String> {
    let end = buffer.rfind('\n')? + 1;
    let rest = buffer.split_off(end);
    Some(std::mem::replace(buffer, rest))
}

#[cfg(test)]
mod tests {
    use anypath_wire::{CellResult, ResultOrigin};

    use super::*;

    #[test]
    fn output_goes_out_a_line_at_a_time() {
        let mut buffer = String::from("a\nb\nc");
        assert_eq!(complete_lines(&mut buffer).as_deref(), Some("a\nb\n"));
        assert_eq!(buffer, "c");
        assert_eq!(complete_lines(&mut buffer), None, "a partial line waits");
    }

    fn texts(sent: &[LiveEvent]) -> Vec<String> {
        sent.iter()
            .map(|event| match event {
                LiveEvent::Stdout(text) => format!("out:{text}"),
                LiveEvent::Stderr(text) => format!("err:{text}"),
                LiveEvent::Result(_) => "result".to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_result_goes_out_after_the_output_waiting_before_it() {
        let mut lines = Lines::default();
        assert_eq!(texts(&lines.take(LiveEvent::Stdout("a\nb".into()))), ["out:a\n"]);
        assert!(lines.take(LiveEvent::Stderr("e".into())).is_empty(), "a partial line waits");
        let result = CellResult::from_bundle(ResultOrigin::Value, [("text/plain".to_owned(), "1".to_owned())].into(), false, None);
        assert_eq!(texts(&lines.take(LiveEvent::Result(result))), ["out:b", "err:e", "result"]);
        assert!(lines.flush().is_empty());
    }
}
