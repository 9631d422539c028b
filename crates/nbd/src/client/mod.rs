//! uraid as an NBD client: an export on another host (or another process) used as a member.
//!
//! - [`uri`]: libnbd's `nbd://` and `nbd+unix://` URIs, and how a member string is told from a
//!   path.

pub mod uri;

pub use uri::{looks_like_nbd_uri, Endpoint, NbdUri, UriError};
