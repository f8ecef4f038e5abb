//! The data operations of the REST face, implemented once.
//!
//! A request the rules plan is executed by these operations directly, in
//! the store; a block that a model wrote reaches the same operations from
//! inside the sandbox through the runner's `store` import ([`call`]). Both
//! keep the same journal of changes and read sets, which the store checks
//! before anything reaches durable storage.
//!
//! Semantics follow the Python `store` blocks were written against
//! ([`python`]): ids `7` and `"7"` name one document, query text compares as
//! the stored value's type, sorts put numbers before text and missing
//! values last.

mod call;
mod error;
mod filter;
pub mod ids;
mod list;
pub mod python;
mod store;

pub use call::call;
pub use error::OpError;
pub use filter::{AnyOf, Filter, OPERATORS};
pub use list::{Filters, ListArgs, ListPlan, Relation};
pub use store::{MAX_DEPTH, Page, PageInfo, Store, Which};
/// A collection as loaded for a request, the type the store's load answers
/// are made of too; it lives with the other shared types in `anypath-wire`.
pub use anypath_wire::{Documents, Loaded};
