//! What a session is opened with: the options of a [`ClientBuilder`](crate::ClientBuilder)
//! that reach the session layer.

use std::time::Duration;

use super::security::Security;

/// What a session is opened with; [`ClientBuilder`](crate::ClientBuilder) fills it in.
#[derive(Debug, Clone)]
pub(crate) struct SessionConfig {
    pub(crate) connect_string: String,
    pub(crate) session_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    /// Give up at once when every host refuses the TCP connection (first connect only).
    pub(crate) fail_fast_if_refused: bool,
    /// A missing chroot is an error instead of being created (`ClientBuilder::require_chroot`).
    pub(crate) require_chroot: bool,
    /// The largest reply read (`ClientBuilder::max_reply_size`).
    pub(crate) max_reply_size: usize,
    pub(crate) security: Security,
}
