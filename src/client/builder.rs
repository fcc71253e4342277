//! `ClientBuilder`: the options of a [`Client`], and connecting with them.

use std::sync::Arc;
use std::time::Duration;

use log::info;
use parking_lot::Mutex;

use crate::core::held::DEFAULT_RELEASE_TIMEOUT;
use crate::error::Result;
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::Runtime;
use crate::session::blocking;
use crate::session::config::SessionConfig;
use crate::session::open::open_session;
use crate::session::releases::Releases;
use crate::session::security::{NodeAcl, ParentAcl, Security};
use crate::wire as zk;

use super::hub::{Hub, Listener, Observe};
use super::state::StateChange;
use super::{Client, Inner};

/// Session timeout asked of the server unless [`ClientBuilder::session_timeout`] says otherwise.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`ClientBuilder::connect`] tries unless [`ClientBuilder::connect_timeout`] says
/// otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest reply a client reads unless [`ClientBuilder::max_reply_size`] says otherwise:
/// 16 MiB.
const DEFAULT_MAX_REPLY_SIZE: usize = 16 << 20;

/// The least [`ClientBuilder::max_reply_size`] takes: every notification and every reply to
/// zklock's small requests fits with room to spare.
const MIN_MAX_REPLY_SIZE: usize = 64 << 10;

/// Options for a [`Client`]; made by [`Client::builder`]. Its `Debug` output never shows
/// credentials.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    config: SessionConfig,
    observe: Observe,
    release_timeout: Duration,
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
    /// [`Error::InvalidConnectString`](crate::Error::InvalidConnectString) if the string cannot be parsed; [`Error::Connect`](crate::Error::Connect) if no
    /// server granted a session in time; [`Error::NoChroot`](crate::Error::NoChroot) if the chroot is missing and
    /// [required](ClientBuilder::require_chroot); [`Error::AuthFailed`](crate::Error::AuthFailed), [`Error::NoAuth`](crate::Error::NoAuth) as
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
                max_reply_size: DEFAULT_MAX_REPLY_SIZE,
                coalesce_requests: true,
                security: Security::default(),
            },
            observe: Observe::default(),
            release_timeout: DEFAULT_RELEASE_TIMEOUT,
        }
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
    /// [`Error::Connect`](crate::Error::Connect). Also bounds how long a replacement session for an expired one is
    /// tried.
    ///
    /// Defaults to [`DEFAULT_CONNECT_TIMEOUT`] (15 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// The largest reply from ZooKeeper this client reads, in bytes: the client side of
    /// ZooKeeper's `jute.maxbuffer`. A request answered with a larger reply fails alone, at
    /// once, with [`Error::ReplyTooLarge`](crate::Error::ReplyTooLarge), which names its path
    /// and the reply's size: the reply is skipped, and the connection, the session and every
    /// other lock of the client go on untouched. An acquisition that meets it withdraws its
    /// node.
    ///
    /// ZooKeeper bounds the requests it *accepts* by its `jute.maxbuffer` (by default 0xfffff
    /// bytes, just under 1 MiB), but not the replies it *sends*: a lock path's listing grows
    /// with its queue, by 59 bytes per Curator-named node (`_c_<uuid>-lock-<sequence>`, as
    /// zklock and Curator name them). 20,000 queued nodes make a listing of 1,180,088 bytes;
    /// 100,000 make one of 5.9 MB. The default reads the listing of a queue of some 280,000
    /// such nodes, several times what one lock's waiters reach in practice, and still bounds
    /// what one reply can make the client hold (a listing is held as the reply's bytes, then as
    /// names: about twice its size, for as long as it is read). Raise it for longer queues or
    /// larger node data; lower it to cap memory. Values below 64 KiB are taken as 64 KiB.
    ///
    /// Defaults to 16 MiB.
    pub fn max_reply_size(mut self, bytes: usize) -> Self {
        self.config.max_reply_size = bytes.max(MIN_MAX_REPLY_SIZE);
        self
    }

    /// Whether this client's lock-node creates and deletes (acquisitions, releases, withdrawn
    /// waiters) that wait while the connection is busy go out together, as one ZooKeeper
    /// `multi`: the server then pays its per-write costs once for all of them, which raises
    /// the throughput of many locks on one client (see
    /// [`guide::performance`](crate::guide::performance)). Nothing waits on an idle
    /// connection, and each call's outcome is what its own request would have had: a `multi`
    /// that fails is sent again one request at a time, ahead of every later write of a related
    /// node. A create goes into a `multi` only under a lock path the client has seen exist
    /// lately, or while the lock paths it uses for the first time mostly exist already. Reads
    /// that set no watch (the listings of lock paths) and go out back to back go as one
    /// `multiRead` (ZooKeeper 3.6 and later; with an older server, as soon as it refuses one,
    /// one by one again): an error in one is its caller's alone, and a batch answered with more
    /// than [`max_reply_size`](Self::max_reply_size) is sent again read by read.
    ///
    /// Defaults to true.
    pub fn coalesce_requests(mut self, on: bool) -> Self {
        self.config.coalesce_requests = on;
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
    /// which then gets [`Error::NoAuth`](crate::Error::NoAuth) on nodes protected against it.
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
    /// with [`Error::AuthFailed`](crate::Error::AuthFailed).
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
        self.config.security.tls = Some(crate::session::security::Tls {
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
        self.config.security.tls = Some(crate::session::security::Tls {
            ca_pem,
            identity: Some((cert_pem.to_owned(), key_pem.to_owned())),
        });
        self
    }

    /// Gives up connecting at once, with [`Error::Connect`](crate::Error::Connect), when every host of the connect
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

    /// Makes a missing chroot (the `/app` of `"zk1:2181/app"`) an error, [`Error::NoChroot`](crate::Error::NoChroot),
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

    /// Calls `listener` with every change of the client's [`SessionState`](crate::client::SessionState)
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
    /// To reach the client from the listener, capture a [`WeakClient`](crate::client::WeakClient) ([`Client::downgrade`])
    /// and [`upgrade`](crate::client::WeakClient::upgrade) it for each call, not a [`Client`]: a listener
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
        crate::rt::runtime::on_thread("zklock-connect", move || self.connect()).await?
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
        let zk::ConnectString { hosts, chroot } = config.read_connect_string()?;
        let runtime = Runtime::shared()?;
        let releases = Arc::new(Releases::default());
        let closed = CancelToken::for_client();
        let session = blocking(open_session(
            &runtime,
            &config,
            &hosts,
            chroot.as_deref(),
            &releases,
            None,
            None,
        ))?
        .closed_by(&closed);
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
            renewal: Default::default(),
            releases: releases.clone(),
            closed,
            close_outcome: Mutex::new(None),
            observe,
            release_timeout,
            hub: hub.clone(),
            cohorts: Default::default(),
            runtime,
        });
        // The state thread holds the client only while it looks, so dropping ends it; a closed
        // client has no current session.
        let client = Arc::downgrade(&inner);
        let current = move || {
            let client = Client {
                inner: client.upgrade()?,
            };
            client.current()
        };
        hub.start(current, releases, listener, session_id);
        Ok(Client { inner })
    }
}
