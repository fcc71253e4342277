//! `Client`: one ZooKeeper session shared by every lock made from it, behind a blocking facade.
//!
//! Everything zklock asks of ZooKeeper goes through [`Session`] in this module, so the recipes
//! never see the client crate's types and the transport can be replaced without touching them.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Condvar, Mutex};
use zookeeper_client as zk;

use crate::error::{outcome_unknown, Error, Result};
use crate::runtime::{block_on, deadline_after, Runtime};
use crate::security::{NodeAcl, Security};
use crate::watch::{NodeFlags, NodeWatch, OwnNodeWatch, Signal};

/// Session timeout asked of the server unless [`ClientBuilder::session_timeout`] says otherwise.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`ClientBuilder::connect`] tries unless [`ClientBuilder::connect_timeout`] says
/// otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A handle to a ZooKeeper session, shared by all the locks made from it.
///
/// Cloning is cheap: clones share one session, one connection and one background thread. All
/// methods block the calling thread; none needs an async runtime, and they may be called from
/// any thread, including threads of someone else's async runtime.
///
/// If the server expires the session (for example after a network partition longer than the
/// session timeout), every lock held through it is lost and reported as such by its guard; the
/// next call on the client opens a new session transparently.
///
/// Dropping the last clone waits (bounded by the session timeout) for releases still being
/// retried in the background, then closes the session, which removes any ephemeral node left.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Options for a [`Client`]; made by [`Client::builder`]. Its `Debug` output never shows
/// credentials.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    connect_string: String,
    session_timeout: Duration,
    connect_timeout: Duration,
    security: Security,
}

struct Inner {
    config: ClientBuilder,
    hosts: String,
    chroot: Option<String>,
    /// `None` only while the client is being dropped.
    session: Mutex<Option<Arc<Session>>>,
    /// Held by the one thread replacing an expired session.
    reconnect: Mutex<()>,
    releases: Arc<Releases>,
    /// Threads holding or acquiring each lock path through this client, to refuse reentry.
    holders: Mutex<HashMap<String, Vec<ThreadId>>>,
    // Dropped last: the session's task runs on it.
    runtime: Runtime,
}

impl Client {
    /// Connects with the default options: a [`DEFAULT_SESSION_TIMEOUT`] (10 s) session,
    /// trying for at most [`DEFAULT_CONNECT_TIMEOUT`] (15 s).
    ///
    /// `connect_string` is a comma-separated list of `host:port` pairs with an optional chroot
    /// suffix, as in the Java client: `"zk1:2181,zk2:2181,zk3:2181/app"`. A chroot that does not
    /// exist yet is created (as a container node).
    ///
    /// Blocks until a session is established.
    ///
    /// # Errors
    /// [`Error::InvalidConnectString`] if the string cannot be parsed; [`Error::Connect`] if no
    /// server granted a session in time; [`Error::AuthFailed`], [`Error::NoAuth`] as the server
    /// says.
    pub fn connect(connect_string: &str) -> Result<Client> {
        Client::builder(connect_string).connect()
    }

    /// Starts building a client for `connect_string` (see [`Client::connect`] for its syntax).
    pub fn builder(connect_string: &str) -> ClientBuilder {
        ClientBuilder {
            connect_string: connect_string.to_owned(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            security: Security::default(),
        }
    }

    /// The id of the current session (as in ZooKeeper's logs and the `ephemeralOwner` of the
    /// nodes it creates). It changes when an expired session is replaced.
    pub fn session_id(&self) -> i64 {
        self.inner.session.lock().as_ref().map_or(0, |s| s.id)
    }

    /// The session timeout the server granted (it clamps the requested one to its
    /// `minSessionTimeout`..`maxSessionTimeout`).
    pub fn session_timeout(&self) -> Duration {
        self.inner
            .session
            .lock()
            .as_ref()
            .map_or(Duration::ZERO, |s| s.timeout)
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
        let deadline = Some(self.call_deadline());
        let session = self.session(deadline)?;
        session.put(path, data, deadline)
    }

    /// The current session, replacing it first if the server expired it.
    pub(crate) fn session(&self, deadline: Option<Instant>) -> Result<Arc<Session>> {
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
        let fresh = open_session(
            &self.inner.runtime,
            &self.inner.config,
            &self.inner.hosts,
            self.inner.chroot.as_deref(),
            &self.inner.releases,
            deadline,
        );
        let fresh = match fresh {
            Ok(fresh) => Arc::new(fresh),
            // The caller's deadline, not the connect timeout, ran out: an outage.
            Err(Error::Connect { .. }) if deadline.is_some_and(|d| Instant::now() >= d) => {
                return Err(Error::ConnectionLoss)
            }
            Err(err) => return Err(err),
        };
        *self.inner.session.lock() = Some(fresh.clone());
        drop(reconnecting);
        Ok(fresh)
    }

    /// The deadline of a one-off call: one session timeout (as requested) from now.
    pub(crate) fn call_deadline(&self) -> Instant {
        deadline_after(self.inner.config.session_timeout)
    }

    fn current_session(&self) -> Result<Arc<Session>> {
        let current = self.inner.session.lock().clone().ok_or(Error::Closed)?;
        match current.state() {
            zk::SessionState::AuthFailed => Err(Error::AuthFailed),
            zk::SessionState::Closed => Err(Error::Closed),
            _ => Ok(current),
        }
    }

    /// Registers the calling thread as holder-or-acquirer of `path`; refuses reentry.
    pub(crate) fn enter(&self, path: &str) -> Result<HoldToken> {
        let thread = std::thread::current().id();
        let mut holders = self.inner.holders.lock();
        let threads = holders.entry(path.to_owned()).or_default();
        if threads.contains(&thread) {
            return Err(Error::WouldDeadlock {
                path: path.to_owned(),
            });
        }
        threads.push(thread);
        Ok(HoldToken {
            client: self.clone(),
            path: path.to_owned(),
            thread,
        })
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

/// Marks a thread as holding or acquiring a lock path until dropped (see [`Client::enter`]).
pub(crate) struct HoldToken {
    client: Client,
    path: String,
    thread: ThreadId,
}

impl Drop for HoldToken {
    fn drop(&mut self) {
        let mut holders = self.client.inner.holders.lock();
        if let Some(threads) = holders.get_mut(&self.path) {
            threads.retain(|t| *t != self.thread);
            if threads.is_empty() {
                holders.remove(&self.path);
            }
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
        self.session_timeout = timeout;
        self
    }

    /// How long [`connect`](Self::connect) tries to establish a session before giving up with
    /// [`Error::Connect`]. Also bounds how long a replacement session for an expired one is
    /// tried.
    ///
    /// Defaults to [`DEFAULT_CONNECT_TIMEOUT`] (15 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
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
        self.security
            .auth
            .push((scheme.to_owned(), credential.to_vec()));
        self
    }

    /// Authenticates with SASL DIGEST-MD5 (servers with `SASLAuthenticationProvider` and a
    /// JAAS `Server` section). Unlike the digest scheme, wrong credentials fail the connect
    /// with [`Error::AuthFailed`].
    #[cfg(feature = "sasl")]
    pub fn sasl_digest_md5(mut self, user: &str, password: &str) -> Self {
        self.security.sasl_digest = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// The ACL of every node this client creates (see [`NodeAcl`] for the trade-off). The
    /// creator-only modes need credentials ([`auth_digest`](Self::auth_digest) or SASL).
    ///
    /// Defaults to [`NodeAcl::Open`], ZooKeeper's default.
    pub fn acl(mut self, acl: NodeAcl) -> Self {
        self.security.acl = acl;
        self
    }

    /// Connects over TLS (the servers' `secureClientPort`), trusting the CA certificates in
    /// `ca_pem`; server certificates must name the host of the connect string.
    ///
    /// Defaults to plain TCP.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, ca_pem: &str) -> Self {
        let identity = self.security.tls.take().and_then(|t| t.identity);
        self.security.tls = Some(crate::security::Tls {
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
            .security
            .tls
            .take()
            .map(|t| t.ca_pem)
            .unwrap_or_default();
        self.security.tls = Some(crate::security::Tls {
            ca_pem,
            identity: Some((cert_pem.to_owned(), key_pem.to_owned())),
        });
        self
    }

    /// Connects: blocks until a session is established or the connect timeout runs out.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect(self) -> Result<Client> {
        let (hosts, chroot) = split_connect_string(&self.connect_string)?;
        let runtime = Runtime::start()?;
        let releases = Arc::new(Releases::default());
        let session = open_session(&runtime, &self, &hosts, chroot.as_deref(), &releases, None)?;
        info!(
            "connected to {} (session {:#x}, timeout {:?})",
            self.connect_string, session.id, session.timeout
        );
        Ok(Client {
            inner: Arc::new(Inner {
                config: self,
                hosts,
                chroot,
                session: Mutex::new(Some(Arc::new(session))),
                reconnect: Mutex::new(()),
                releases,
                holders: Mutex::new(HashMap::new()),
                runtime,
            }),
        })
    }
}

/// Splits `hosts/chroot`; the hosts part is parsed by the client crate.
fn split_connect_string(connect_string: &str) -> Result<(String, Option<String>)> {
    let invalid = |reason: &str| Error::InvalidConnectString {
        connect_string: connect_string.to_owned(),
        reason: reason.to_owned(),
    };
    let s = connect_string.trim();
    if s.is_empty() {
        return Err(invalid("empty connect string"));
    }
    let (hosts, chroot) = match s.find('/') {
        Some(i) if s[..i].contains("://") && !s[i..].starts_with("//") => (s, None),
        Some(i) => (&s[..i], Some(&s[i..])),
        None => (s, None),
    };
    if hosts.is_empty() || hosts.split(',').any(|h| h.trim().is_empty()) {
        return Err(invalid("empty host in connect string"));
    }
    let chroot = match chroot {
        None | Some("/") => None,
        Some(root) => {
            crate::path::validate_lock_path(root)
                .map_err(|e| invalid(&format!("bad chroot: {e}")))?;
            Some(root.to_owned())
        }
    };
    Ok((hosts.to_owned(), chroot))
}

fn open_session(
    runtime: &Runtime,
    config: &ClientBuilder,
    hosts: &str,
    chroot: Option<&str>,
    releases: &Arc<Releases>,
    deadline: Option<Instant>,
) -> Result<Session> {
    let connect_deadline = deadline_after(config.connect_timeout);
    let deadline = deadline.map_or(connect_deadline, |d| d.min(connect_deadline));
    let connect_error = |reason: String| Error::Connect {
        connect_string: config.connect_string.clone(),
        timeout: config.connect_timeout,
        reason,
    };
    let connector = config
        .security
        .configure(zk::Client::connector().with_session_timeout(config.session_timeout))?;
    let hosts_owned = hosts.to_owned();
    let secure = config.security.is_tls();
    // Connecting spawns the session task, so it must run on the runtime.
    let task = runtime.handle().spawn(async move {
        #[cfg(feature = "tls")]
        if secure {
            return connector.secure_connect(&hosts_owned).await;
        }
        connector.connect(&hosts_owned).await
    });
    // With TLS, the client crate reports a failed handshake only as a failed connection: if
    // the TCP port answers, the handshake is what failed.
    let connect_error = |reason: String| {
        let tcp_answers = hosts
            .split(',')
            .filter_map(|h| {
                h.trim()
                    .rsplit_once("://")
                    .map_or(Some(h.trim()), |(_, a)| Some(a))
            })
            .any(|addr| {
                std::net::ToSocketAddrs::to_socket_addrs(addr)
                    .ok()
                    .and_then(|mut a| a.next())
                    .is_some_and(|a| {
                        std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok()
                    })
            });
        if secure && tcp_answers {
            Error::Tls {
                reason: format!("servers at {hosts} accept TCP but no TLS session was established ({reason}): is their certificate signed by the configured CA and valid for the host name, and is this their secureClientPort?"),
            }
        } else {
            connect_error(reason)
        }
    };
    let zk = match block_on(task, Some(deadline)) {
        Ok(Ok(Ok(zk))) => zk,
        Ok(Ok(Err(zk::Error::BadArguments(reason)))) => {
            return Err(Error::InvalidConnectString {
                connect_string: config.connect_string.clone(),
                reason: (*reason).to_owned(),
            })
        }
        Ok(Ok(Err(zk::Error::AuthFailed))) => return Err(Error::AuthFailed),
        Ok(Ok(Err(zk::Error::Timeout))) => {
            return Err(connect_error("no server granted a session".into()))
        }
        Ok(Ok(Err(err))) => return Err(connect_error(err.to_string())),
        Ok(Err(join)) => return Err(connect_error(format!("connect task failed: {join}"))),
        Err(task) => {
            task.abort();
            return Err(connect_error("no server granted a session".into()));
        }
    };
    let acl = config.security.acl;
    let zk = match chroot {
        None => zk,
        Some(root) => {
            let mkdir = {
                let zk = zk.clone();
                let root = root.to_owned();
                Box::pin(async move {
                    zk.mkdir(&root, &zk::CreateMode::Container.with_acls(acl.acls()))
                        .await
                })
            };
            match block_on(mkdir, Some(deadline)) {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(Error::from_zk(err, root)),
                Err(_) => return Err(connect_error(format!("could not create chroot {root}"))),
            }
            zk.chroot(root).map_err(|_| Error::InvalidConnectString {
                connect_string: config.connect_string.clone(),
                reason: "bad chroot".into(),
            })?
        }
    };
    let mut state = zk.state_watcher();
    state.state();
    Ok(Session {
        id: zk.session_id().0,
        timeout: zk.session_timeout(),
        zk,
        state,
        acl,
        handle: runtime.handle().clone(),
        releases: releases.clone(),
    })
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(session) = self.session.get_mut().take() else {
            return;
        };
        // Let releases that are being retried finish while the session can still delete.
        let idle = self.releases.wait_idle(Instant::now() + session.timeout);
        if !idle {
            warn!("closing session {:#x} with releases still pending; the server removes their nodes when the session expires", session.id);
        }
        let mut state = session.state.clone();
        // Drop our last handle on the session so the client crate sends CloseSession (which
        // removes our ephemeral nodes at once), and wait briefly for it to go through. With
        // releases still pending the connection is down and their tasks still hold handles:
        // there is nothing to wait for.
        drop(session);
        if idle && !state.peek_state().is_terminated() {
            let closed = Box::pin(async move {
                while !state.state().is_terminated() {
                    state.changed().await;
                }
            });
            let _ = block_on(closed, Some(Instant::now() + Duration::from_secs(2)));
        }
        debug!("zookeeper client for {} closed", self.config.connect_string);
    }
}

/// Pause before retrying a request the server did not answer while the connection stayed up.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The subset of a node's `Stat` that zklock uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeStat {
    /// Zxid of the create: ensemble-wide monotonic, hence a fencing token.
    pub(crate) czxid: i64,
    /// Session id owning an ephemeral node, 0 for persistent ones.
    pub(crate) ephemeral_owner: i64,
    /// Creation time, milliseconds since the epoch (server clock).
    pub(crate) ctime: i64,
    /// Data version: bumped by every setData (Curator's revocation request writes it).
    pub(crate) version: i32,
}

impl From<&zk::Stat> for NodeStat {
    fn from(stat: &zk::Stat) -> Self {
        NodeStat {
            czxid: stat.czxid,
            ephemeral_owner: stat.ephemeral_owner,
            ctime: stat.ctime,
            version: stat.version,
        }
    }
}

/// How the state of a session looks to a lock holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    Connected,
    /// No word from the server for a while (the client crate's connection timeout, 2/5 of the
    /// session timeout) or connection dropped: the session may live, or may be expiring.
    Disconnected,
    /// Terminal: expired, closed or refused.
    Ended,
}

/// One ZooKeeper session of a [`Client`]; replaced when it expires.
pub(crate) struct Session {
    zk: zk::Client,
    pub(crate) id: i64,
    pub(crate) timeout: Duration,
    state: zk::StateWatcher,
    /// The ACL of every node this session creates.
    acl: NodeAcl,
    handle: tokio::runtime::Handle,
    releases: Arc<Releases>,
}

type ZkResult<T> = std::result::Result<T, zk::Error>;
/// The replies to a pipelined create (node name, stat) and listing.
type CreateAndList = (ZkResult<(String, NodeStat)>, ZkResult<Vec<String>>);
type Op<T> = std::pin::Pin<Box<dyn std::future::Future<Output = ZkResult<T>> + Send>>;

/// Outcome of [`Session::create_lock_node`].
pub(crate) enum Create {
    /// Created; the listing of the lock path taken right after, when it could be read.
    Created {
        name: String,
        stat: NodeStat,
        children: Option<Vec<String>>,
    },
    /// The connection dropped before the reply: the node may or may not exist.
    Unknown,
    /// The deadline passed first. The request is still pending; a background task deletes the
    /// node if it appears.
    TimedOut,
    /// The lock path does not exist (yet, or any more).
    ParentMissing,
}

impl Session {
    pub(crate) fn liveness(&self) -> Liveness {
        match self.state() {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                Liveness::Connected
            }
            zk::SessionState::Disconnected => Liveness::Disconnected,
            _ => Liveness::Ended,
        }
    }

    fn state(&self) -> zk::SessionState {
        self.state.peek_state()
    }

    fn ended_error(&self) -> Error {
        match self.state() {
            zk::SessionState::AuthFailed => Error::AuthFailed,
            zk::SessionState::Closed => Error::Closed,
            _ => Error::SessionExpired,
        }
    }

    /// Blocks until the session is connected, the session ends (error) or `deadline` passes
    /// ([`Error::ConnectionLoss`]).
    pub(crate) fn wait_connected(&self, deadline: Option<Instant>) -> Result<()> {
        let mut state = self.state.clone();
        loop {
            // Check before waiting: `changed()` never returns once the state is terminal.
            match state.state() {
                s if s.is_terminated() => return Err(self.ended_error()),
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    return Ok(())
                }
                _ => {}
            }
            if block_on(Box::pin(state.changed()), deadline).is_err() {
                return Err(Error::ConnectionLoss);
            }
        }
    }

    /// Blocks until the session is no longer connected (`true`) or `deadline` passes (`false`).
    pub(crate) fn wait_disconnected(&self, deadline: Option<Instant>) -> bool {
        let mut state = self.state.clone();
        loop {
            // Consume the current state first, so no change between check and wait is missed.
            let current = state.state();
            if !matches!(
                current,
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
            ) {
                return true;
            }
            if block_on(Box::pin(state.changed()), deadline).is_err() {
                return false;
            }
        }
    }

    /// Runs a read, retrying across reconnects until `deadline`.
    fn read<T: Send + 'static>(
        &self,
        path: &str,
        deadline: Option<Instant>,
        op: impl Fn(zk::Client, String) -> Op<T>,
    ) -> Result<T> {
        loop {
            match block_on(op(self.zk.clone(), path.to_owned()), deadline) {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) if outcome_unknown(&err) => {
                    debug!("request on {path} failed without an answer ({err}); retrying");
                    if self.liveness() == Liveness::Connected {
                        // Throttled, or a transient fault the connection survived: back off.
                        std::thread::sleep(RETRY_PAUSE);
                    }
                    self.wait_connected(deadline)?;
                }
                Ok(Err(err)) => return Err(Error::from_zk(err, path)),
                Err(_) => return Err(Error::ConnectionLoss),
            }
        }
    }

    /// The children of `path`; `NoNode` as an error.
    pub(crate) fn list(&self, path: &str, deadline: Option<Instant>) -> Result<Vec<String>> {
        self.read(path, deadline, |zk, p| {
            Box::pin(async move { zk.list_children(&p).await })
        })
    }

    /// Data and stat of `path`, `None` if it does not exist.
    pub(crate) fn get_data(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<(Vec<u8>, NodeStat)>> {
        self.read(path, deadline, |zk, p| {
            Box::pin(async move {
                match zk.get_data(&p).await {
                    Ok((data, stat)) => Ok(Some((data, NodeStat::from(&stat)))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
    }

    /// Creates `path` and its missing ancestors as container nodes (the server removes them
    /// once they are empty, so lock parents do not pile up).
    pub(crate) fn ensure_path(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        let acl = self.acl;
        self.read(path, deadline, move |zk, p| {
            Box::pin(async move {
                zk.mkdir(&p, &zk::CreateMode::Container.with_acls(acl.acls()))
                    .await
            })
        })
    }

    /// Deletes `path` only if it still has data version `version`: `Ok(false)` if it is gone,
    /// [`Error::ZooKeeper`] with code -103 (BadVersion) if it changed.
    pub(crate) fn delete_if_unchanged(
        &self,
        path: &str,
        version: i32,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        self.read(path, deadline, move |zk, p| {
            Box::pin(async move {
                match zk.delete(&p, Some(version)).await {
                    Ok(()) => Ok(true),
                    Err(zk::Error::NoNode) => Ok(false),
                    Err(err) => Err(err),
                }
            })
        })
    }

    /// Writes `data` into `path` if it exists: `Ok(false)` if it does not.
    pub(crate) fn set_existing(
        &self,
        path: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let data = data.to_vec();
        self.read(path, deadline, move |zk, p| {
            let data = data.clone();
            Box::pin(async move {
                match zk.set_data(&p, &data, None).await {
                    Ok(_) => Ok(true),
                    Err(zk::Error::NoNode) => Ok(false),
                    Err(err) => Err(err),
                }
            })
        })
    }

    /// Watches our lock node `path`, in the background, for the revocation marker and for its
    /// deletion by someone else.
    pub(crate) fn watch_own_node(&self, path: &str) -> OwnNodeWatch {
        let flags = Arc::new(NodeFlags::default());
        let (zk, path, raise) = (self.zk.clone(), path.to_owned(), flags.clone());
        let mut state = self.state_watcher();
        let task = self.handle.spawn(async move {
            loop {
                match zk.get_and_watch_data(&path).await {
                    Ok((data, _, watcher)) => {
                        if data == crate::recipe::REVOKE_MESSAGE {
                            info!("revocation requested for {path}");
                            raise.raise_revocation();
                            return;
                        }
                        match watcher.changed().await.event_type {
                            zk::EventType::NodeDataChanged => {}
                            zk::EventType::NodeDeleted => {
                                warn!("lock node {path} was deleted by someone else: lock lost");
                                raise.raise_deleted();
                                return;
                            }
                            _ => return, // The session ended: the guard sees that itself.
                        }
                    }
                    Err(err) if outcome_unknown(&err) => {
                        if !retry_pause_async(&mut state).await {
                            return;
                        }
                    }
                    Err(zk::Error::NoNode) => {
                        raise.raise_deleted();
                        return;
                    }
                    Err(_) => return,
                }
            }
        });
        OwnNodeWatch::new(flags, task)
    }

    /// Creates or overwrites a persistent node.
    fn put(&self, path: &str, data: &[u8], deadline: Option<Instant>) -> Result<()> {
        let (data, acl) = (data.to_vec(), self.acl);
        self.read(path, deadline, move |zk, p| {
            let data = data.clone();
            Box::pin(async move {
                let options = zk::CreateMode::Persistent.with_acls(acl.acls());
                match zk.set_data(&p, &data, None).await {
                    Err(zk::Error::NoNode) => {}
                    other => return other.map(drop),
                }
                if let Some(parent) = crate::path::parent(&p) {
                    zk.mkdir(parent, &options).await?;
                }
                match zk.create(&p, &data, &options).await {
                    Err(zk::Error::NodeExists) => zk.set_data(&p, &data, None).await.map(drop),
                    other => other.map(drop),
                }
            })
        })
    }

    /// Creates the ephemeral sequential node `prefix` + sequence and, pipelined behind it on the
    /// same session, lists `lock_path`. ZooKeeper executes one session's requests in order, so
    /// the listing contains our node and every node created before it.
    pub(crate) fn create_lock_node(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Create> {
        let (zk, acl) = (self.zk.clone(), self.acl);
        let (node_prefix, list_path, data) = (
            format!("{lock_path}/{prefix}"),
            lock_path.to_owned(),
            data.to_vec(),
        );
        let op: Op<CreateAndList> = Box::pin(async move {
            let options = zk::CreateMode::EphemeralSequential.with_acls(acl.acls());
            // Both requests are sent here, before the first await.
            let create = zk.create(&node_prefix, &data, &options);
            let list = zk.list_children(&list_path);
            let created = create.await.map(|(stat, seq)| {
                (
                    format!("{}{seq}", &node_prefix[list_path.len() + 1..]),
                    NodeStat::from(&stat),
                )
            });
            Ok((created, list.await))
        });
        match block_on(op, deadline) {
            Ok(Ok((Ok((name, stat)), listing))) => Ok(Create::Created {
                name,
                stat,
                children: listing.ok(),
            }),
            Ok(Ok((Err(err), _))) if outcome_unknown(&err) => Ok(Create::Unknown),
            Ok(Ok((Err(zk::Error::NoNode), _))) => Ok(Create::ParentMissing),
            Ok(Ok((Err(err), _))) => Err(Error::from_zk(err, lock_path)),
            Ok(Err(err)) => Err(Error::from_zk(err, lock_path)),
            Err(pending) => {
                // The create may still execute after the connection returns.
                let zk = self.zk.clone();
                let (lock_path, prefix) = (lock_path.to_owned(), prefix.to_owned());
                self.spawn_release(async move {
                    match pending.await {
                        Ok((Ok((name, _)), _)) => {
                            delete_until_gone(&zk, &format!("{lock_path}/{name}")).await
                        }
                        Ok((Err(err), _)) if outcome_unknown(&err) => {
                            sweep(&zk, &lock_path, &prefix).await
                        }
                        _ => {}
                    }
                });
                Ok(Create::TimedOut)
            }
        }
    }

    /// Sets a watch on `path` (getData-and-watch: an exists watch on a node deleted meanwhile
    /// would never fire) that signals `signal` on a change or deletion, and on every session
    /// state change. `None` if the node does not exist.
    pub(crate) fn watch_node(
        &self,
        path: &str,
        signal: &Arc<Signal>,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeWatch>> {
        let watcher = self.read(path, deadline, |zk, p| {
            Box::pin(async move {
                match zk.get_and_watch_data(&p).await {
                    Ok((_, _, watcher)) => Ok(Some(watcher)),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })?;
        Ok(watcher.map(|watcher| {
            NodeWatch::spawn(&self.handle, watcher, self.state_watcher(), signal.clone())
        }))
    }

    /// Lists `path` and sets a child watch that signals `signal` (like [`watch_node`]
    /// (Self::watch_node) does for one node).
    pub(crate) fn watch_children(
        &self,
        path: &str,
        signal: &Arc<Signal>,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, NodeWatch)> {
        let (children, watcher) = self.read(path, deadline, |zk, p| {
            Box::pin(async move {
                zk.get_and_watch_children(&p)
                    .await
                    .map(|(children, _, watcher)| (children, watcher))
            })
        })?;
        Ok((
            children,
            NodeWatch::spawn(&self.handle, watcher, self.state_watcher(), signal.clone()),
        ))
    }

    /// A state watcher positioned at the current state, for waits on session changes.
    pub(crate) fn state_watcher(&self) -> zk::StateWatcher {
        let mut state = self.state.clone();
        state.state();
        state
    }

    /// Deletes our node `path`: waits for the reply up to `wait`, then, if the connection is
    /// down or slow, keeps retrying in the background until the node is gone or the session
    /// has ended. `Ok(true)` if the node was deleted, `Ok(false)` if it was already gone.
    pub(crate) fn delete_node(&self, path: &str, wait: Duration) -> Result<bool> {
        if self.liveness() == Liveness::Ended {
            return Err(self.ended_error());
        }
        let zk = self.zk.clone();
        let target = path.to_owned();
        let op: Op<()> = Box::pin(async move { zk.delete(&target, None).await });
        let deadline = if self.liveness() == Liveness::Connected {
            Instant::now() + wait
        } else {
            Instant::now()
        };
        let pending = match block_on(op, Some(deadline)) {
            Ok(Ok(())) => return Ok(true),
            Ok(Err(zk::Error::NoNode)) => return Ok(false),
            Ok(Err(err)) if !outcome_unknown(&err) => return Err(Error::from_zk(err, path)),
            Ok(Err(_)) => None,
            Err(pending) => Some(pending),
        };
        warn!(
            "delete of {path} (session {:#x}) not confirmed; retrying in the background",
            self.id
        );
        let zk = self.zk.clone();
        let target = path.to_owned();
        self.spawn_release(async move {
            if let Some(pending) = pending {
                match pending.await {
                    Ok(()) | Err(zk::Error::NoNode) => return,
                    Err(err) if !outcome_unknown(&err) => return,
                    Err(_) => {}
                }
            }
            delete_until_gone(&zk, &target).await;
        });
        Err(Error::ConnectionLoss)
    }

    /// Deletes every child of `lock_path` whose name starts with `prefix`, in the background,
    /// once the connection allows (used after a create whose outcome is unknown was abandoned).
    pub(crate) fn sweep_in_background(&self, lock_path: &str, prefix: &str) {
        let zk = self.zk.clone();
        let (lock_path, prefix) = (lock_path.to_owned(), prefix.to_owned());
        self.spawn_release(async move { sweep(&zk, &lock_path, &prefix).await });
    }

    fn spawn_release(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let token = self.releases.begin();
        self.handle.spawn(async move {
            task.await;
            drop(token);
        });
    }
}

/// Retries `delete(path)` until it succeeds, the node is gone, or the session ends.
async fn delete_until_gone(zk: &zk::Client, path: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.delete(path, None).await {
            Ok(()) => {
                debug!("deleted {path} in the background");
                return;
            }
            Err(zk::Error::NoNode) => return,
            Err(err) if outcome_unknown(&err) => {
                if !retry_pause_async(&mut state).await {
                    return;
                }
            }
            Err(err) => {
                // Expired or closed: the server removes the ephemeral node itself.
                debug!("background delete of {path} stopped: {err}");
                return;
            }
        }
    }
}

/// Deletes the children of `lock_path` starting with `prefix`, retrying across reconnects.
async fn sweep(zk: &zk::Client, lock_path: &str, prefix: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.list_children(lock_path).await {
            Ok(children) => {
                for child in children.iter().filter(|c| c.starts_with(prefix)) {
                    warn!("deleting {lock_path}/{child}, left by an abandoned create");
                    delete_until_gone(zk, &format!("{lock_path}/{child}")).await;
                }
                return;
            }
            Err(err) if outcome_unknown(&err) => {
                if !retry_pause_async(&mut state).await {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// Before retrying a request that failed without an answer: pauses briefly if still connected
/// (throttled), else waits until connected. `false` if the session ended.
async fn retry_pause_async(state: &mut zk::StateWatcher) -> bool {
    if matches!(
        state.peek_state(),
        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
    ) {
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    loop {
        match state.state() {
            s if s.is_terminated() => return false,
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => return true,
            _ => {
                state.changed().await;
            }
        }
    }
}

/// Counts background releases so that closing a client can wait for them.
#[derive(Default)]
struct Releases {
    pending: Mutex<usize>,
    idle: Condvar,
}

struct ReleaseToken(Arc<Releases>);

impl Releases {
    fn begin(self: &Arc<Self>) -> ReleaseToken {
        *self.pending.lock() += 1;
        ReleaseToken(self.clone())
    }

    /// Waits until no release is pending; `false` if `deadline` passed first.
    fn wait_idle(&self, deadline: Instant) -> bool {
        let mut pending = self.pending.lock();
        while *pending > 0 {
            if self.idle.wait_until(&mut pending, deadline).timed_out() {
                return *pending == 0;
            }
        }
        true
    }
}

impl Drop for ReleaseToken {
    fn drop(&mut self) {
        let mut pending = self.0.pending.lock();
        *pending -= 1;
        if *pending == 0 {
            self.0.idle.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_hosts_and_chroot() {
        assert_eq!(
            split_connect_string("127.0.0.1:2181").unwrap(),
            ("127.0.0.1:2181".into(), None)
        );
        assert_eq!(
            split_connect_string("a:1,b:2/app/x").unwrap(),
            ("a:1,b:2".into(), Some("/app/x".into()))
        );
        assert_eq!(split_connect_string("a:1/").unwrap(), ("a:1".into(), None));
        for bad in ["", "  ", "a:1,,b:2", "a:1/bad//chroot", "a:1/trailing/"] {
            assert!(
                matches!(
                    split_connect_string(bad),
                    Err(Error::InvalidConnectString { .. })
                ),
                "{bad}"
            );
        }
    }
}
