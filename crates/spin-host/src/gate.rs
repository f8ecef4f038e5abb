//! The embedder's seam in front of every public request: what runs before a
//! component is instantiated for it. `spin up` has none (its host takes
//! requests as they come); `anypath up` schedules them per tenant there.

use std::future::Future;
use std::pin::Pin;

use crate::app::OutBody;

/// What a gate gives a request it lets through: held until the response's
/// head is answered, then dropped (a slot given back, for example).
pub type Admitted = Box<dyn Send>;

/// A gate's decision, once it is made.
pub type Decision = Pin<Box<dyn Future<Output = Result<Admitted, http::Response<OutBody>>> + Send>>;

/// Decides, before any component runs, whether and when a public request is
/// served: `Ok` lets it through (and holds what it gives until the response
/// begins), `Err` answers it instead. Internal requests (service chaining)
/// never pass it: they are part of a request already through.
pub trait RequestGate: Send + Sync {
    /// Admits `request` (its head; the body is not read) routed to `component`.
    fn admit(&self, component: &str, request: &http::request::Parts) -> Decision;
}
