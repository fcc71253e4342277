//! What a session is opened with.

use std::sync::Arc;
use std::time::Duration;

use crate::wire::hosts::{Host, Resolve};

/// What a session is opened with.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) hosts: Vec<Host>,
    pub(crate) resolver: Arc<dyn Resolve>,
    pub(crate) session_timeout: Duration,
    /// The largest reply read; a larger one fails its request alone (see
    /// [`Frames::skip_oversized`](crate::wire::link::Frames::skip_oversized)).
    pub(crate) max_reply: usize,
    /// Whether waiting deletes of our own nodes go out together in one `multi` (see
    /// [`coalesce`](super::coalesce)).
    pub(crate) coalesce: bool,
    /// `(scheme, credential)` pairs sent as auth packets on every connection.
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<crate::wire::tls::TlsConfig>>,
    #[cfg(feature = "sasl")]
    pub(crate) sasl: Option<(String, String)>,
}
