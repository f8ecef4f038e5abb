//! A run's live events as they are sent on: text pieces already waiting
//! behind one another merged, up to [`MERGED_TEXT_BYTES`]; nothing waits to
//! be batched.

use anypath_wire::LiveEvent;
use tokio::sync::mpsc::UnboundedReceiver;

/// Text events merge waiting pieces up to this size.
const MERGED_TEXT_BYTES: usize = 4 << 10;

/// The receiving end of a run's live sink.
pub(crate) struct LiveEvents {
    events: UnboundedReceiver<LiveEvent>,
    /// An event taken ahead (the first, or one that did not merge into the
    /// one before it).
    held: Option<LiveEvent>,
}

impl LiveEvents {
    pub(crate) fn new(events: UnboundedReceiver<LiveEvent>) -> Self {
        Self { events, held: None }
    }

    /// Waits for the run's first event and holds it, unmerged, for
    /// [`Self::next`]; None when the run let go of its sink without one.
    pub(super) async fn take_first(&mut self) -> Option<()> {
        let first = self.events.recv().await?;
        self.held = Some(first);
        Some(())
    }

    /// The next event; None once the run has ended and all were read.
    pub(crate) async fn next(&mut self) -> Option<LiveEvent> {
        let first = match self.held.take() {
            Some(event) => event,
            None => self.events.recv().await?,
        };
        Some(self.merged(first))
    }

    /// `first` with the text pieces of the same stream already waiting
    /// behind it.
    fn merged(&mut self, first: LiveEvent) -> LiveEvent {
        let (mut text, stdout) = match first {
            LiveEvent::Stdout(text) => (text, true),
            LiveEvent::Stderr(text) => (text, false),
            result @ LiveEvent::Result(_) => return result,
        };
        while text.len() < MERGED_TEXT_BYTES {
            match self.events.try_recv() {
                Ok(LiveEvent::Stdout(more)) if stdout => text.push_str(&more),
                Ok(LiveEvent::Stderr(more)) if !stdout => text.push_str(&more),
                Ok(other) => {
                    self.held = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        if stdout { LiveEvent::Stdout(text) } else { LiveEvent::Stderr(text) }
    }
}
