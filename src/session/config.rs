//! What a session is opened with: the options of a [`ClientBuilder`](crate::ClientBuilder)
//! that reach the session layer.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::wire as zk;

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
    /// `ClientBuilder::coalesce_requests`.
    pub(crate) coalesce_requests: bool,
    pub(crate) security: Security,
}

impl SessionConfig {
    /// The connect string, read (by the transport's one reader, `wire/hosts.rs`) before
    /// anything is sent.
    ///
    /// # Errors
    /// [`Error::InvalidConnectString`] with the reason.
    pub(crate) fn read_connect_string(&self) -> Result<zk::ConnectString> {
        zk::parse_connect_string(&self.connect_string, self.security.is_tls()).map_err(|reason| {
            Error::InvalidConnectString {
                connect_string: self.connect_string.clone(),
                reason,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_string_that_does_not_read_is_a_typed_error_naming_it() {
        for bad in [
            "",
            "  ",
            "a:1,,b:2",
            "a:1/bad//chroot",
            "a:1/trailing/",
            "a:70000",
        ] {
            let config = SessionConfig {
                connect_string: bad.to_owned(),
                session_timeout: Duration::from_secs(1),
                connect_timeout: Duration::from_secs(1),
                fail_fast_if_refused: false,
                require_chroot: false,
                max_reply_size: 1 << 20,
                coalesce_requests: true,
                security: Security::default(),
            };
            match config.read_connect_string() {
                Err(Error::InvalidConnectString {
                    connect_string,
                    reason,
                }) => assert!(connect_string == bad && !reason.is_empty(), "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
