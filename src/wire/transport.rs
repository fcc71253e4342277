//! The transport's handle of one session: how the session is opened ([`Connector`]), what the handle tells
//! of it, and the chroot the handle's paths are under. Its requests are in `requests.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::{self, Shared};
use super::error::{Error, Result};
use super::events::StateWatcher;
use super::hosts;
use super::proto::MAX_FRAME;
#[cfg(feature = "tls")]
use super::tls;

/// How to open a session.
#[derive(Clone)]
pub struct Connector {
    config: conn::Config,
}

impl Default for Connector {
    fn default() -> Self {
        Connector::new()
    }
}

impl Connector {
    pub fn new() -> Connector {
        Connector {
            config: conn::Config {
                hosts: Vec::new(),
                resolver: Arc::new(hosts::SystemResolver),
                session_timeout: Duration::from_secs(6),
                max_reply: MAX_FRAME,
                coalesce: true,
                auth: Vec::new(),
                #[cfg(feature = "tls")]
                tls: None,
                #[cfg(feature = "sasl")]
                sasl: None,
            },
        }
    }

    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.config.session_timeout = timeout;
        self
    }

    /// The largest reply read (the frame after its length prefix); a request answered with a
    /// larger one fails with [`Error::ReplyTooLarge`], and the connection lives on. Defaults
    /// to ZooKeeper's own `jute.maxbuffer` with room for headers.
    pub fn max_reply_size(mut self, bytes: usize) -> Self {
        self.config.max_reply = bytes;
        self
    }

    /// Whether lock-node creates and deletes of our own nodes that wait while the connection
    /// is busy go out together in one `multi`. Defaults to true.
    pub fn coalesce_requests(mut self, on: bool) -> Self {
        self.config.coalesce = on;
        self
    }

    /// Sends this credential (an auth packet) on every connection.
    pub fn auth(mut self, scheme: &str, credential: &[u8]) -> Self {
        self.config
            .auth
            .push((scheme.to_owned(), credential.to_vec()));
        self
    }

    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: Arc<tls::TlsConfig>) -> Self {
        self.config.tls = Some(tls);
        self
    }

    #[cfg(feature = "sasl")]
    pub fn sasl_digest_md5(mut self, user: &str, password: &str) -> Self {
        self.config.sasl = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Opens a session on one of `hosts` (a connect string's, read by
    /// [`parse_connect_string`](super::parse_connect_string)), trying each once, within
    /// `deadline`.
    pub fn connect(mut self, hosts: &[hosts::Host], deadline: Instant) -> Result<Transport> {
        if hosts.is_empty() {
            return Err(Error::BadArguments("no host in the connect string".into()));
        }
        self.config.hosts = hosts.to_vec();
        let shared = conn::open(self.config, deadline)?;
        Ok(Transport {
            _owner: Arc::new(Owner(shared.clone())),
            shared,
            chroot: None,
        })
    }
}

/// Closes the session when the last handle is dropped.
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The transport's handle of one ZooKeeper session (the public [`Client`](crate::Client) holds
/// one per session it opens); cheap to clone. The session is closed when the last handle is
/// dropped, or by [`close`](Self::close).
#[derive(Clone)]
pub struct Transport {
    pub(super) shared: Arc<Shared>,
    /// Closes the session when the last clone is dropped.
    _owner: Arc<Owner>,
    chroot: Option<Arc<str>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("session_id", &format_args!("{:#x}", self.shared.session_id))
            .field("chroot", &self.chroot)
            .finish()
    }
}

impl Transport {
    pub fn session_id(&self) -> i64 {
        self.shared.session_id
    }

    /// The timeout the server granted (on the latest connection: a reconnect may be granted
    /// another).
    pub fn session_timeout(&self) -> Duration {
        self.shared.timeout()
    }

    pub fn state_watcher(&self) -> StateWatcher {
        StateWatcher::new(self.shared.state.clone())
    }

    /// The server the session is, or was last, connected to: the connect string's host, with
    /// the address dialled when that differs.
    pub fn server(&self) -> String {
        self.shared.server()
    }

    /// A handle on the same session whose paths are under `root`.
    pub fn chroot(&self, root: &str) -> Result<Transport> {
        if !root.starts_with('/') || root.len() < 2 || root.ends_with('/') {
            return Err(Error::BadArguments(format!("invalid chroot {root}")));
        }
        let root = match &self.chroot {
            Some(outer) => format!("{outer}{root}"),
            None => root.to_owned(),
        };
        Ok(Transport {
            chroot: Some(root.into()),
            ..self.clone()
        })
    }

    /// Calls `hook` (on the I/O thread: it must not block) with the send time of every
    /// handshake that takes the session back after a reconnect.
    pub fn on_session_proof(&self, hook: impl Fn(Instant, Duration) + Send + Sync + 'static) {
        self.shared.on_proof(Arc::new(hook));
    }

    /// Closes the session now, for every handle.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Waits (until `deadline`) for the session's I/O thread to end once the session is over;
    /// `true` if it has.
    pub fn join_io(&self, deadline: Instant) -> bool {
        self.shared.join_io(deadline)
    }

    /// Whether the server confirmed the close (else the session lives on there until it
    /// expires).
    pub fn close_confirmed(&self) -> bool {
        self.shared.close_confirmed()
    }

    pub(super) fn server_path(&self, path: &str) -> String {
        match &self.chroot {
            None => path.to_owned(),
            Some(root) if path == "/" => root.to_string(),
            Some(root) => format!("{root}{path}"),
        }
    }

    pub(super) fn chroot_len(&self) -> usize {
        self.chroot.as_ref().map_or(0, |r| r.len())
    }
}
