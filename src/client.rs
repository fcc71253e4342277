//! `Client`: one ZooKeeper session shared by every lock made from it, behind a blocking facade;
//! the session itself, and every request, live in `session.rs`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::wire as zk;
use log::{debug, info, warn};
use parking_lot::Mutex;

use crate::cancel::{self, CancelToken, Watching};
use crate::connect::split_connect_string;
use crate::error::{Error, Result};
use crate::runtime::{deadline_after, Runtime};
use crate::security::{NodeAcl, ParentAcl, Security};
use crate::session::{open_session, Releases, Session, SessionConfig};
use crate::state::{Hub, Listener, Observe, StateChange, LISTENER_STOP_WAIT};

/// Session timeout asked of the server unless [`ClientBuilder::session_timeout`] says otherwise.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`ClientBuilder::connect`] tries unless [`ClientBuilder::connect_timeout`] says
/// otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long dropping a guard waits for the server to confirm its release unless
/// [`ClientBuilder::release_timeout`] says otherwise.
pub const DEFAULT_RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

/// A handle to a ZooKeeper session, shared by all the locks made from it.
///
/// Cloning is cheap: clones share one session, one connection and one background thread. The
/// blocking methods block the calling thread and need no async runtime; async code uses the
/// `_async` calls instead (see the crate docs' "Async"), never a blocking one on a runtime's
/// worker thread.
///
/// If the server expires the session (for example after a network partition longer than the
/// session timeout), every lock held through it is lost and reported as such by its guard; the
/// next call on the client opens a new session transparently.
///
/// Dropping the last clone waits for releases still being retried in the background (at most
/// the [release timeout](ClientBuilder::release_timeout), one second by default), then closes
/// the session, which removes any ephemeral node left (waiting up to two seconds for the
/// server's confirmation when nothing was pending), and ends the client's threads (see
/// [`ClientBuilder::on_state_change`] for the listener's).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Options for a [`Client`]; made by [`Client::builder`]. Its `Debug` output never shows
/// credentials.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    config: SessionConfig,
    observe: Observe,
    release_timeout: Duration,
}

struct Inner {
    config: SessionConfig,
    hosts: String,
    chroot: Option<String>,
    /// `None` only while the client is being dropped.
    session: Mutex<Option<Arc<Session>>>,
    /// Held by the one thread replacing an expired session.
    reconnect: Mutex<()>,
    releases: Arc<Releases>,
    /// Cancelled by [`Client::close`]: every call in progress on any clone watches it.
    closed: CancelToken,
    /// The outcome of the first [`Client::close`], which later ones report.
    close_outcome: Mutex<Option<Result<()>>>,
    observe: Observe,
    /// How long a dropped guard waits for its release (see `ClientBuilder::release_timeout`).
    release_timeout: Duration,
    /// Shared with the client's state thread (`state.rs`).
    hub: Arc<Hub>,
    // Dropped last: the session's task runs on it.
    runtime: Arc<Runtime>,
}

impl Client {
    /// Connects with the default options: a [`DEFAULT_SESSION_TIMEOUT`] (10 s) session,
    /// trying for at most [`DEFAULT_CONNECT_TIMEOUT`] (15 s).
    ///
    /// `connect_string` is a comma-separated list of `host:port` pairs with an optional chroot
    /// suffix, as in the Java client: `"zk1:2181,zk2:2181,zk3:2181/app"`. A chroot that does not
    /// exist yet is created (as a persistent node), unless
    /// [`ClientBuilder::require_chroot`] says it must exist already.
    ///
    /// Blocks until a session is established.
    ///
    /// # Errors
    /// [`Error::InvalidConnectString`] if the string cannot be parsed; [`Error::Connect`] if no
    /// server granted a session in time; [`Error::NoChroot`] if the chroot is missing and
    /// [required](ClientBuilder::require_chroot); [`Error::AuthFailed`], [`Error::NoAuth`] as
    /// the server says.
    pub fn connect(connect_string: &str) -> Result<Client> {
        Client::builder(connect_string).connect()
    }

    /// Starts building a client for `connect_string` (see [`Client::connect`] for its syntax).
    pub fn builder(connect_string: &str) -> ClientBuilder {
        ClientBuilder {
            config: SessionConfig {
                connect_string: connect_string.to_owned(),
                session_timeout: DEFAULT_SESSION_TIMEOUT,
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                fail_fast_if_refused: false,
                require_chroot: false,
                security: Security::default(),
            },
            observe: Observe::default(),
            release_timeout: DEFAULT_RELEASE_TIMEOUT,
        }
    }

    /// The id of the current session (as in ZooKeeper's logs and the `ephemeralOwner` of the
    /// nodes it creates). It changes when an expired session is replaced.
    pub fn session_id(&self) -> i64 {
        self.inner.session.lock().as_ref().map_or(0, |s| s.id)
    }

    /// The session timeout the server granted (it clamps the requested one to its
    /// `minSessionTimeout`..`maxSessionTimeout`), on the latest connection: a reconnect to a
    /// server with other settings may be granted another, and the lease follows it.
    pub fn session_timeout(&self) -> Duration {
        self.inner
            .session
            .lock()
            .as_ref()
            .map_or(Duration::ZERO, |s| s.lease.timeout())
    }

    /// Reads the data of the node at `path`, or `None` if there is no such node.
    ///
    /// A small convenience for keeping state next to a lock (see `examples/counter.rs`).
    /// Blocks for one round trip, waiting for a lost connection to return for at most the
    /// session timeout.
    ///
    /// # Errors
    /// [`Error::InvalidPath`], [`Error::ConnectionLoss`], [`Error::SessionExpired`],
    /// [`Error::NoAuth`], or another [`Error::ZooKeeper`].
    pub fn get_data(&self, path: &str) -> Result<Option<Vec<u8>>> {
        crate::path::validate_lock_path(path)?;
        let deadline = Some(self.call_deadline());
        let session = self.session(deadline)?;
        Ok(session.get_data(path, deadline)?.map(|(data, _)| data))
    }

    /// The names of the children of the node at `path` (in no particular order), or `None` if
    /// there is no such node.
    ///
    /// For tools that look around a lock tree (`zklock status` on a parent of locks). Blocks
    /// for one round trip, waiting for a lost connection to return for at most the session
    /// timeout.
    ///
    /// # Errors
    /// As [`Client::get_data`].
    pub fn children(&self, path: &str) -> Result<Option<Vec<String>>> {
        crate::path::validate_lock_path(path)?;
        let deadline = Some(self.call_deadline());
        let session = self.session(deadline)?;
        match session.list(path, deadline) {
            Ok(children) => Ok(Some(children)),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Writes `data` to the node at `path`, creating it (and missing parents, as persistent
    /// nodes) when absent. The write is unconditional: call it under a lock when several
    /// processes update the same node.
    ///
    /// Blocks for one or two round trips, waiting for a lost connection to return for at most
    /// the session timeout. Like every ZooKeeper write, if it fails with
    /// [`Error::ConnectionLoss`] it may or may not have been applied.
    ///
    /// # Errors
    /// As [`Client::get_data`], plus [`Error::EphemeralParent`].
    pub fn set_data(&self, path: &str, data: &[u8]) -> Result<()> {
        crate::path::validate_lock_path(path)?;
        crate::layout::check_data_size(data)?;
        let deadline = Some(self.call_deadline());
        let session = self.session(deadline)?;
        session.put(path, data, deadline)
    }

    /// The current session for a call, replacing it first if the server expired it.
    pub(crate) fn session(&self, deadline: Option<Instant>) -> Result<Call> {
        let watching = cancel::watch([&self.inner.closed]);
        let session = self.current_or_renewed(deadline)?;
        Ok(Call {
            session,
            _watching: watching,
        })
    }

    /// As [`session`](Self::session), awaited. Replacing an expired session means opening a
    /// connection, which blocks: it runs on a short-lived thread of its own, so no async
    /// runtime's worker waits for it.
    pub(crate) async fn session_async(&self, deadline: Option<Instant>) -> Result<Arc<Session>> {
        let current = self.current_session()?;
        if current.state() != zk::SessionState::Expired {
            return Ok(current);
        }
        let client = self.clone();
        crate::runtime::on_thread("zklock-renew", move || {
            let _watching = client.watch_close();
            client.current_or_renewed(deadline)
        })
        .await?
    }

    fn current_or_renewed(&self, deadline: Option<Instant>) -> Result<Arc<Session>> {
        let current = self.current_session()?;
        if current.state() != zk::SessionState::Expired {
            return Ok(current);
        }
        // One thread reconnects; the others wait for it, each within its own deadline. The
        // session slot itself stays free, so inspecting the client never blocks on a connect.
        let reconnecting = match deadline {
            None => self.inner.reconnect.lock(),
            Some(deadline) => self
                .inner
                .reconnect
                .try_lock_until(deadline)
                .ok_or(Error::ConnectionLoss)?,
        };
        let current = self.current_session()?;
        if current.state() != zk::SessionState::Expired {
            return Ok(current); // Replaced while we waited.
        }
        info!(
            "zookeeper session {:#x} expired; opening a new one",
            current.id
        );
        // Failing fast is for the first connect: a replacement waits out a restarting server.
        let config = SessionConfig {
            fail_fast_if_refused: false,
            ..self.inner.config.clone()
        };
        let fresh = open_session(
            &self.inner.runtime,
            &config,
            &self.inner.hosts,
            self.inner.chroot.as_deref(),
            &self.inner.releases,
            deadline,
        );
        let fresh = match fresh {
            Ok(fresh) if self.is_closed() => {
                fresh.close(); // Closed while we connected.
                return Err(Error::Closed);
            }
            Ok(fresh) => Arc::new(fresh),
            // The caller's deadline, not the connect timeout, ran out: an outage.
            Err(_) if self.is_closed() => return Err(Error::Closed),
            Err(Error::Connect { .. }) if deadline.is_some_and(|d| Instant::now() >= d) => {
                return Err(Error::ConnectionLoss)
            }
            Err(err) => return Err(err),
        };
        let mut slot = self.inner.session.lock();
        if slot.is_none() {
            fresh.close(); // Closed while we connected.
            return Err(Error::Closed);
        }
        *slot = Some(fresh.clone());
        drop(slot);
        drop(reconnecting);
        self.inner.hub.notify();
        Ok(fresh)
    }

    /// The deadline of a one-off call: one session timeout (as requested) from now.
    pub(crate) fn call_deadline(&self) -> Instant {
        deadline_after(self.inner.config.session_timeout)
    }

    fn current_session(&self) -> Result<Arc<Session>> {
        let current = self.inner.session.lock().clone().ok_or(Error::Closed)?;
        current.check_process()?;
        match current.state() {
            zk::SessionState::AuthFailed => Err(Error::AuthFailed),
            zk::SessionState::Closed => Err(Error::Closed),
            _ => Ok(current),
        }
    }

    /// Ends the session now: ZooKeeper's closeSession removes every ephemeral node of the
    /// session at once (held locks, queued waiters, leases), instead of after the session
    /// timeout.
    ///
    /// Every thread blocked in a call on this client or any clone of it returns
    /// [`Error::Closed`] promptly (within milliseconds); every guard turns
    /// [`LockState::Lost`](crate::LockState::Lost); later calls on any clone return
    /// [`Error::Closed`]. Guards dropped afterwards do nothing and never block. Idempotent.
    ///
    /// Blocks until the server confirmed the close, at most about two seconds, then for the
    /// state listener to be told `Closed`, at most one second more (see
    /// [`ClientBuilder::on_state_change`]).
    ///
    /// The shutdown recipe for a service: on SIGTERM, cancel the acquisitions you own
    /// ([`CancelToken`]) or call `close()`, join your threads, exit. Dropping the last clone of
    /// a client closes it too, but `std::process::exit` runs no destructors: call `close()`
    /// before it.
    ///
    /// # Errors
    /// [`Error::ConnectionLoss`] if the server could not be told (the connection is down): the
    /// session then ends on the server after its timeout. The client is closed either way.
    pub fn close(&self) -> Result<()> {
        self.close_within(CLOSE_WAIT, None)
    }

    /// As [`close`](Self::close), blocking at most `timeout` in all (monotonic clock, from the
    /// call): for the server's confirmation, for a concurrent `close` to finish, and for the
    /// state listener. For a process that must exit within a bound whatever the servers do
    /// (`zklock run` closes its client this way).
    ///
    /// # Errors
    /// As [`close`](Self::close), as a future: the client is closed at once (every call on it
    /// returns [`Error::Closed`] from then on), and the future waits, without blocking the
    /// executor's thread, for the server's confirmation and the state listener (on a
    /// short-lived thread, as [`close`](Self::close) would wait). Dropping the future stops
    /// only the waiting.
    ///
    /// # Errors
    /// As [`close`](Self::close).
    pub async fn close_async(&self) -> Result<()> {
        // Marked closed here, before the first await, so that the caller's next call sees it.
        self.inner.closed.cancel();
        let client = self.clone();
        crate::runtime::on_thread("zklock-close", move || client.close()).await?
    }

    /// As [`close`](Self::close); [`Error::ConnectionLoss`] also when the confirmation (or a
    /// concurrent close's outcome) did not come within `timeout`. The client is closed either
    /// way.
    pub fn close_timeout(&self, timeout: Duration) -> Result<()> {
        self.close_within(timeout, Some(deadline_after(timeout)))
    }

    /// Closes, waiting `confirm` for the server's confirmation; with a `deadline`, never past
    /// it.
    fn close_within(&self, confirm: Duration, deadline: Option<Instant>) -> Result<()> {
        if let Some(session) = self.inner.session.lock().as_ref() {
            // A forked child's copy has no connection to close; the parent's stays open.
            session.check_process()?;
        }
        // Concurrent and later closes wait for the first and report its outcome.
        let mut outcome = match deadline {
            None => self.inner.close_outcome.lock(),
            Some(deadline) => match self.inner.close_outcome.try_lock_until(deadline) {
                Some(outcome) => outcome,
                None => {
                    self.inner.closed.cancel(); // Closed either way, as documented.
                    return Err(Error::ConnectionLoss);
                }
            },
        };
        if let Some(outcome) = outcome.as_ref() {
            return outcome.clone();
        }
        self.inner.closed.cancel();
        let session = self.inner.session.lock().take();
        let closed = match session {
            None => Ok(()),
            Some(session) => {
                info!("closing zookeeper session {:#x}", session.id);
                session.close();
                self.inner.hub.notify();
                if session.wait_ended(Instant::now() + confirm) {
                    Ok(())
                } else {
                    warn!(
                        "session {:#x} closed without the server's confirmation; it expires there after its timeout",
                        session.id
                    );
                    Err(Error::ConnectionLoss)
                }
            }
        };
        // The state thread tells the listener `Closed` on its way out; the listener's thread
        // is given a bounded time to tell it and end.
        self.inner.hub.shutdown();
        let listener_wait = deadline.map_or(LISTENER_STOP_WAIT, |d| {
            d.saturating_duration_since(Instant::now())
                .min(LISTENER_STOP_WAIT)
        });
        self.inner.hub.stop_listener(listener_wait);
        *outcome = Some(closed.clone());
        closed
    }

    /// A handle that does not keep the client alive: for a state listener (see
    /// [`ClientBuilder::on_state_change`]) or any other long-lived callback that must reach the
    /// client without keeping its session open after the application dropped it. Never
    /// blocks.
    pub fn downgrade(&self) -> WeakClient {
        WeakClient {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Makes the calling thread's waits end when the client is closed, until dropped (for
    /// calls that reach the session without [`Client::session`], such as releases).
    pub(crate) fn watch_close(&self) -> Watching {
        cancel::watch([&self.inner.closed])
    }

    /// The token [`close`](Self::close) cancels.
    pub(crate) fn close_token(&self) -> &CancelToken {
        &self.inner.closed
    }

    /// Whether [`close`](Self::close) was called on this client or a clone.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// The current session; `None` once the client is closed.
    pub(crate) fn current(&self) -> Option<Arc<Session>> {
        if self.is_closed() {
            return None;
        }
        self.inner.session.lock().clone()
    }

    pub(crate) fn hub(&self) -> &Hub {
        &self.inner.hub
    }

    pub(crate) fn observe(&self) -> &Observe {
        &self.inner.observe
    }

    /// How long dropping a guard may wait for its release (see
    /// [`ClientBuilder::release_timeout`]).
    pub(crate) fn release_timeout(&self) -> Duration {
        self.inner.release_timeout
    }
}

/// A [`Client`] that does not keep the client alive, made by [`Client::downgrade`].
///
/// Once every [`Client`] clone is dropped (and the last drop has closed the session),
/// [`upgrade`](Self::upgrade) returns `None`. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct WeakClient {
    inner: std::sync::Weak<Inner>,
}

impl WeakClient {
    /// The client, if any clone of it is still alive. The clone returned keeps it alive while
    /// held: drop it when done (in a listener, before returning). Never blocks.
    pub fn upgrade(&self) -> Option<Client> {
        self.inner.upgrade().map(|inner| Client { inner })
    }
}

impl fmt::Debug for WeakClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakClient")
            .field("alive", &(self.inner.strong_count() > 0))
            .finish()
    }
}

/// How long closing waits for the server to confirm.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The session for one call on a client. While it lives, the calling thread watches the
/// client's close token, so that [`Client::close`] on any clone stops the call's waits.
pub(crate) struct Call {
    session: Arc<Session>,
    _watching: Watching,
}

impl std::ops::Deref for Call {
    type Target = Arc<Session>;

    fn deref(&self) -> &Arc<Session> {
        &self.session
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let session = self.inner.session.lock();
        f.debug_struct("Client")
            .field("connect_string", &self.inner.config.connect_string)
            .field(
                "session_id",
                &format_args!("{:#x}", session.as_ref().map_or(0, |s| s.id)),
            )
            .field("state", &session.as_ref().map(|s| s.state()))
            .finish()
    }
}

impl ClientBuilder {
    /// The session timeout to ask of the server. The server clamps it to its configured range
    /// (by default 2 to 20 ticks). A holder that loses contact with the ensemble for this long
    /// loses its locks; a crashed holder's locks are freed after this long.
    ///
    /// Defaults to [`DEFAULT_SESSION_TIMEOUT`] (10 s).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.config.session_timeout = timeout;
        self
    }

    /// How long [`connect`](Self::connect) tries to establish a session before giving up with
    /// [`Error::Connect`]. Also bounds how long a replacement session for an expired one is
    /// tried.
    ///
    /// Defaults to [`DEFAULT_CONNECT_TIMEOUT`] (15 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// How long dropping a guard ([`LockGuard`](crate::LockGuard) and the guards built on it,
    /// a [`Permit`](crate::Permit), a [`MultiGuard`](crate::MultiGuard) in all) may block,
    /// waiting for the server to confirm the delete of its nodes. A release not confirmed by
    /// then is retried in the background until the node is gone or the session has ended
    /// (which removes it too), so a frozen or slow server cannot hold up the dropping thread
    /// for the connection's detection time, let alone the session timeout. The node may
    /// outlive the drop by that much: until then, the next contender still waits.
    ///
    /// [`LockGuard::unlock`](crate::LockGuard::unlock) waits up to the session timeout instead
    /// (it reports the outcome); [`LockGuard::unlock_timeout`](crate::LockGuard::unlock_timeout)
    /// takes its own bound. Dropping the last clone of the client waits for background
    /// releases for at most this long too.
    ///
    /// Defaults to [`DEFAULT_RELEASE_TIMEOUT`] (1 s).
    pub fn release_timeout(mut self, timeout: Duration) -> Self {
        self.release_timeout = timeout;
        self
    }

    /// Authenticates the session with ZooKeeper's `digest` scheme as `user` (the Java client's
    /// `addAuth("digest", "user:password")`). Combine with [`acl`](Self::acl) to keep other
    /// identities away from the lock nodes.
    ///
    /// Note that the digest scheme never fails: a wrong password is simply another identity,
    /// which then gets [`Error::NoAuth`] on nodes protected against it.
    pub fn auth_digest(self, user: &str, password: &str) -> Self {
        self.auth("digest", format!("{user}:{password}").as_bytes())
    }

    /// Adds credentials for any authentication scheme the servers support (the Java client's
    /// `addAuth(scheme, credential)`). Defaults to none.
    pub fn auth(mut self, scheme: &str, credential: &[u8]) -> Self {
        self.config
            .security
            .auth
            .push((scheme.to_owned(), credential.to_vec()));
        self
    }

    /// Authenticates with SASL DIGEST-MD5 (servers with `SASLAuthenticationProvider` and a
    /// JAAS `Server` section). Unlike the digest scheme, wrong credentials fail the connect
    /// with [`Error::AuthFailed`].
    #[cfg(feature = "sasl")]
    pub fn sasl_digest_md5(mut self, user: &str, password: &str) -> Self {
        self.config.security.sasl_digest = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// The ACL of every node this client creates (see [`NodeAcl`] for the trade-off). The
    /// creator-only modes need credentials ([`auth_digest`](Self::auth_digest) or SASL).
    ///
    /// Defaults to [`NodeAcl::Open`], ZooKeeper's default.
    pub fn acl(mut self, acl: NodeAcl) -> Self {
        self.config.security.acl = acl;
        self
    }

    /// The ACL of the parents zklock creates on the way to a lock path, and of the chroot
    /// (see [`ParentAcl`] for the trade-off). Matters only with a creator-only
    /// [`acl`](Self::acl).
    ///
    /// Defaults to [`ParentAcl::Shared`]: any identity may create locks below a parent.
    pub fn parent_acl(mut self, acl: ParentAcl) -> Self {
        self.config.security.parent_acl = acl;
        self
    }

    /// Connects over TLS (the servers' `secureClientPort`), trusting the CA certificates in
    /// `ca_pem`; server certificates must name the host of the connect string.
    ///
    /// Defaults to plain TCP.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, ca_pem: &str) -> Self {
        let identity = self.config.security.tls.take().and_then(|t| t.identity);
        self.config.security.tls = Some(crate::security::Tls {
            ca_pem: ca_pem.to_owned(),
            identity,
        });
        self
    }

    /// A client certificate and its private key (PEM) for servers that require one. Needs
    /// [`tls`](Self::tls).
    #[cfg(feature = "tls")]
    pub fn tls_identity(mut self, cert_pem: &str, key_pem: &str) -> Self {
        let ca_pem = self
            .config
            .security
            .tls
            .take()
            .map(|t| t.ca_pem)
            .unwrap_or_default();
        self.config.security.tls = Some(crate::security::Tls {
            ca_pem,
            identity: Some((cert_pem.to_owned(), key_pem.to_owned())),
        });
        self
    }

    /// Gives up connecting at once, with [`Error::Connect`], when every host of the connect
    /// string refuses the TCP connection outright (nothing listens on its port), instead of
    /// trying again until the connect timeout. For a client that should fail quickly when
    /// ZooKeeper is simply not running, e.g. a command-line tool or a test.
    ///
    /// Only hosts that actively refuse count: a host that does not answer, cannot be resolved
    /// or accepts the connection keeps the connect trying. Applies to
    /// [`connect`](Self::connect) only; a session opened later, to replace an expired one, is
    /// tried for as long as the call that needs it allows (a restarting server refuses
    /// connections for a while). Do not use it behind a load balancer or virtual IP that may
    /// refuse connections while it starts.
    ///
    /// Defaults to `false`: keep trying until the connect timeout.
    pub fn fail_fast_if_refused(mut self, fail_fast: bool) -> Self {
        self.config.fail_fast_if_refused = fail_fast;
        self
    }

    /// Makes a missing chroot (the `/app` of `"zk1:2181/app"`) an error, [`Error::NoChroot`],
    /// instead of creating it. A typo in the chroot then fails the connect rather than
    /// silently opening a second, empty lock namespace beside the real one, where every lock
    /// is free. Use it for read-only tools (a status display, a monitoring probe) and for
    /// deployments whose chroot is provisioned beforehand; the `zklock` command-line tool uses
    /// it for `status`, `break` and `revoke`.
    ///
    /// Checked whenever a session opens: by [`connect`](Self::connect), and again when a
    /// session replaces an expired one. (A chroot deleted while a session is open is still
    /// created again by the next write that needs it, as without this option.)
    ///
    /// Defaults to `false`: a missing chroot, and its missing ancestors, are created as
    /// persistent nodes.
    pub fn require_chroot(mut self, require: bool) -> Self {
        self.config.require_chroot = require;
        self
    }

    /// Calls `listener` with every change of the client's [`SessionState`](crate::SessionState)
    /// (see [`Client::state`]), in order, starting from `Connected` after the connect.
    ///
    /// The listener runs on a thread of its own (`zklock-listener`, one per client), never on
    /// zklock's network thread, so it may block or call the client; a slow listener only
    /// delays the changes told after it. Changes are found by the client's state thread as
    /// they happen (a lease running out included, on that thread's clock); a flap shorter than
    /// it takes to notice may be missed.
    ///
    /// The listener's thread ends with the client: [`Client::close`] and the drop of the last
    /// clone tell it the last change (to `Closed`) and wait up to one second for it to return;
    /// a listener still busy after that is left to finish on its own thread, with a warning
    /// in the log (zklock cannot interrupt it), and the thread ends when it returns.
    ///
    /// To reach the client from the listener, capture a [`WeakClient`] ([`Client::downgrade`])
    /// and [`upgrade`](WeakClient::upgrade) it for each call, not a [`Client`]: a listener
    /// holding a clone of its client keeps the client, its session and its threads alive
    /// until [`Client::close`] is called, since dropping the application's clones then never
    /// drops the last one.
    ///
    /// A listener that panics is told the next change all the same. To be told on a thread of
    /// your own, send the changes to a channel:
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// let (changes, received) = std::sync::mpsc::channel();
    /// let client = zklock::Client::builder("127.0.0.1:2181")
    ///     .on_state_change(move |change| {
    ///         let _ = changes.send(change.clone());
    ///     })
    ///     .connect()?;
    /// for change in received {
    ///     println!("session {:#x}: {} -> {}", change.session_id, change.from, change.to);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Defaults to no listener. A second call replaces the first listener.
    pub fn on_state_change(
        mut self,
        listener: impl Fn(&StateChange) + Send + Sync + 'static,
    ) -> Self {
        self.observe.listener = Some(Listener(Arc::new(listener)));
        self
    }

    /// Adds the lock path as a `path` label to the per-lock metrics (wait, hold, acquisitions,
    /// locks lost; for a multi-lock its paths joined by commas). Each lock path then makes
    /// time series of its own: turn it on only for a bounded set of paths.
    ///
    /// Defaults to `false`.
    #[cfg(feature = "metrics")]
    pub fn metrics_path_label(mut self, on: bool) -> Self {
        self.observe.path_label = on;
        self
    }

    /// As [`connect`](Self::connect), as a future, for async callers: never blocks the
    /// executor's thread.
    ///
    /// Opening a session (name lookups, TCP and TLS handshakes, the session handshake) is
    /// blocking I/O, so it runs on a short-lived thread of its own, which the future waits
    /// for. Dropping the future does not stop that thread: a client it connects after the
    /// drop is closed at once.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub async fn connect_async(self) -> Result<Client> {
        crate::runtime::on_thread("zklock-connect", move || self.connect()).await?
    }

    /// Connects: blocks until a session is established or the connect timeout runs out.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect(self) -> Result<Client> {
        let (config, mut observe, release_timeout) =
            (self.config, self.observe, self.release_timeout);
        // Given to the state thread, not kept by the client: see `Hub::start`.
        let listener = observe.listener.take();
        let (hosts, chroot) =
            split_connect_string(&config.connect_string, config.security.is_tls())?;
        let runtime = Runtime::shared()?;
        let releases = Arc::new(Releases::default());
        let session = open_session(
            &runtime,
            &config,
            &hosts,
            chroot.as_deref(),
            &releases,
            None,
        )?;
        info!(
            "connected to {} (session {:#x}, timeout {:?})",
            config.connect_string, session.id, session.timeout
        );
        let (session_id, hub) = (session.id, Hub::new());
        let inner = Arc::new(Inner {
            config,
            hosts,
            chroot,
            session: Mutex::new(Some(Arc::new(session))),
            reconnect: Mutex::new(()),
            releases: releases.clone(),
            closed: CancelToken::for_client(),
            close_outcome: Mutex::new(None),
            observe,
            release_timeout,
            hub: hub.clone(),
            runtime,
        });
        // The state thread holds the client only while it looks, so dropping ends it.
        let client = Arc::downgrade(&inner);
        let find = move || client.upgrade().map(|inner| Client { inner });
        hub.start(find, releases, listener, session_id);
        Ok(Client { inner })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.hub.shutdown();
        self.close_session();
        self.hub.stop_listener(LISTENER_STOP_WAIT);
    }
}

impl Inner {
    /// The last clone's part of the drop: lets background releases finish, then closes the
    /// session.
    fn close_session(&mut self) {
        let Some(session) = self.session.get_mut().take() else {
            return;
        };
        if session.check_process().is_err() {
            // A forked child: the runtime thread and the connection belong to the parent.
            // Nothing can be waited for here, and the parent's session must not be touched.
            std::mem::forget(session);
            return;
        }
        // Let releases that are being retried finish while the session can still delete, for
        // no longer than a dropped guard would wait: closing the session removes their nodes
        // too (at once if the server hears of it, else when the session expires), and a drop
        // must not hang on a silent server.
        let idle = self
            .releases
            .wait_idle(Instant::now() + self.release_timeout);
        if !idle {
            warn!("closing session {:#x} with releases still pending; the server removes their nodes when the session expires", session.id);
        }
        // CloseSession removes our ephemeral nodes at once. With releases still pending the
        // connection is down: there is nothing to wait for.
        session.close();
        if idle {
            session.wait_ended(Instant::now() + CLOSE_WAIT);
        }
        debug!("zookeeper client for {} closed", self.config.connect_string);
    }
}
