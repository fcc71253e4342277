//! `Client`: one ZooKeeper session shared by every lock made from it, behind a blocking facade;
//! the session itself, and every request, live in `session.rs`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::Mutex;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::runtime::{block_on, deadline_after, Runtime};
use crate::security::{NodeAcl, Security};
use crate::session::{open_session, Releases, Session};

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
    pub(crate) connect_string: String,
    pub(crate) session_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) security: Security,
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
        crate::recipe::check_data_size(data)?;
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
        let (hosts, chroot) = split_connect_string(&self.connect_string, self.security.is_tls())?;
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

/// Splits `hosts/chroot` and checks every `host:port`, so that malformed input fails at once
/// rather than after the connect timeout (or, for a TLS host rustls cannot name, in a panic of
/// the client crate). As in the Java client, the chroot follows the last host.
fn split_connect_string(connect_string: &str, tls: bool) -> Result<(String, Option<String>)> {
    let invalid = |reason: &str| Error::InvalidConnectString {
        connect_string: connect_string.to_owned(),
        reason: reason.to_owned(),
    };
    let s = connect_string.trim();
    if s.is_empty() {
        return Err(invalid("empty connect string"));
    }
    let (head, last) = s
        .rsplit_once(',')
        .map_or(("", s), |(head, last)| (head, last));
    let (scheme, rest) = split_scheme(last);
    let (last_host, chroot) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(&rest[i..])),
        None => (rest, None),
    };
    let hosts = if head.is_empty() {
        format!("{scheme}{last_host}")
    } else {
        format!("{head},{scheme}{last_host}")
    };
    for entry in hosts.split(',') {
        check_host(entry.trim(), tls)
            .map_err(|reason| invalid(&format!("{reason} in {entry:?}")))?;
    }
    let chroot = match chroot {
        None | Some("/") => None,
        Some(root) => {
            crate::path::validate_lock_path(root)
                .map_err(|e| invalid(&format!("bad chroot: {e}")))?;
            Some(root.to_owned())
        }
    };
    Ok((hosts, chroot))
}

/// `("tcp://", "host:port")` for the client crate's URL forms, `("", entry)` otherwise.
fn split_scheme(entry: &str) -> (&str, &str) {
    for scheme in ["tcp://", "tcp+tls://"] {
        if let Some(rest) = entry.strip_prefix(scheme) {
            return (scheme, rest);
        }
    }
    ("", entry)
}

/// Checks one `[scheme://]host[:port]` entry as the client crate will read it (an empty port
/// means the default, 2181). `tls` says whether entries without a scheme use TLS.
fn check_host(entry: &str, tls: bool) -> std::result::Result<(), &'static str> {
    let (scheme, address) = split_scheme(entry);
    let tls = match scheme {
        "tcp+tls://" => true,
        "tcp://" => false,
        _ => tls,
    };
    if address.contains("://") {
        return Err("unknown scheme (use tcp:// or tcp+tls://)");
    }
    let (host, port, ipv6) = if let Some(bracketed) = address.strip_prefix('[') {
        let (ip, after) = bracketed.split_once(']').ok_or("unclosed '['")?;
        // A zone id (`%eth0`) may follow a link-local address.
        let address = ip.split('%').next().unwrap_or(ip);
        address
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| "bad IPv6 address")?;
        let port = if after.is_empty() {
            None
        } else {
            Some(after.strip_prefix(':').ok_or("junk after ']'")?)
        };
        (ip, port, true)
    } else {
        let (host, port) = address
            .rsplit_once(':')
            .map_or((address, None), |(h, p)| (h, Some(p)));
        (host, port, host.parse::<std::net::Ipv6Addr>().is_ok())
    };
    if port.is_some_and(|p| !p.is_empty() && p.parse::<u16>().map_or(true, |p| p == 0)) {
        return Err("bad port");
    }
    if host.is_empty() {
        return Err("empty host");
    }
    if !ipv6 {
        if host.contains(':') {
            return Err("too many ':' (write IPv6 addresses in brackets)");
        }
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        {
            return Err("invalid character in host");
        }
    }
    if tls && !tls_server_name(host) {
        return Err("a TLS host must be an IP address or a DNS name");
    }
    Ok(())
}

/// Whether rustls can name `host`: zookeeper-client 0.11.2 unwraps that conversion on its
/// session task, so a host it refuses (127.1, 2130706433) must be caught here.
#[cfg(feature = "tls")]
fn tls_server_name(host: &str) -> bool {
    rustls_pki_types::ServerName::try_from(host).is_ok()
}

/// Without the `tls` feature no entry can use TLS.
#[cfg(not(feature = "tls"))]
fn tls_server_name(_: &str) -> bool {
    true
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_forms_ports_and_tls_hosts() {
        assert_eq!(
            split_connect_string("tcp://a:1", false).unwrap(),
            ("tcp://a:1".into(), None)
        );
        assert_eq!(
            split_connect_string("a:1,tcp+tls://b:2/root", false).unwrap(),
            ("a:1,tcp+tls://b:2".into(), Some("/root".into()))
        );
        assert_eq!(
            split_connect_string("[::1]:2181", true).unwrap().0,
            "[::1]:2181"
        );
        assert_eq!(
            split_connect_string("zk-1.example.com", true).unwrap().0,
            "zk-1.example.com"
        );
        for bad in [
            "host:1:2",
            "\0",
            "a b:1",
            "a:70000",
            "a:0",
            "http://a:1",
            "[::1",
            "[::1]x",
        ] {
            assert!(split_connect_string(bad, false).is_err(), "{bad}");
        }
        // As the client crate reads them: empty port = 2181, unbracketed IPv6 + port, zones.
        for good in [
            "a:",
            "[::1]:",
            "fe80::1:2181",
            "[fe80::1%eth0]:2181",
            "zk.example.com.:1",
        ] {
            assert!(split_connect_string(good, false).is_ok(), "{good}");
        }
        #[cfg(feature = "tls")]
        {
            for tls_bad in [
                "127.1:1",
                "2130706433:1",
                "0x7f.1:1",
                "zk.0xab:1",
                "tcp+tls://127.1:2",
            ] {
                assert!(split_connect_string(tls_bad, true).is_err(), "{tls_bad}");
            }
            assert!(
                split_connect_string("tcp+tls://127.1:2", false).is_err(),
                "tls by scheme"
            );
            assert!(
                split_connect_string("tcp://127.1:2", true).is_ok(),
                "plain by scheme"
            );
            assert!(
                split_connect_string("zk_1.example:2", true).is_ok(),
                "rustls accepts it"
            );
        }
        assert!(
            split_connect_string("127.1:2", false).is_ok(),
            "fine without TLS"
        );
    }

    #[test]
    fn splits_hosts_and_chroot() {
        assert_eq!(
            split_connect_string("127.0.0.1:2181", false).unwrap(),
            ("127.0.0.1:2181".into(), None)
        );
        assert_eq!(
            split_connect_string("a:1,b:2/app/x", false).unwrap(),
            ("a:1,b:2".into(), Some("/app/x".into()))
        );
        assert_eq!(
            split_connect_string("a:1/", false).unwrap(),
            ("a:1".into(), None)
        );
        for bad in ["", "  ", "a:1,,b:2", "a:1/bad//chroot", "a:1/trailing/"] {
            assert!(
                matches!(
                    split_connect_string(bad, false),
                    Err(Error::InvalidConnectString { .. })
                ),
                "{bad}"
            );
        }
    }
}
