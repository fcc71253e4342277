//! The one error type of zklock, [`Error`] (also at the crate root, with [`Result`]), and what
//! its variants carry: why a connect failed ([`ConnectCause`], per server a [`HostFailure`]),
//! and which ACL [`Permission`] a refused call lacked (also in [`acl`](crate::acl)).

use std::fmt;
use std::time::Duration;

/// `Result` with zklock's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in zklock.
///
/// Contention is never an error: a lock that is busy makes `try_lock` and `lock_timeout` return
/// `Ok(None)`. Errors are failures: bad input, an unreachable or misbehaving ensemble, or a lock
/// that was lost.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The lock path is not a valid absolute ZooKeeper path; nothing was sent to the server.
    #[error("invalid lock path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// An argument is out of range (for example a semaphore with zero permits); nothing was
    /// sent to the server.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),

    /// The connect string could not be parsed; nothing was sent to the server.
    #[error("invalid connect string {connect_string:?}: {reason}")]
    InvalidConnectString {
        /// The connect string as given.
        connect_string: String,
        /// What is wrong with it.
        reason: String,
    },

    /// No ZooKeeper server of the connect string granted a session within the connect timeout
    /// (or, with `ClientBuilder::fail_fast_if_refused`, every server refused the connection).
    #[error("could not connect to ZooKeeper at {connect_string:?} after {waited:?} (connect timeout {timeout:?}): {reason}")]
    Connect {
        /// The connect string.
        connect_string: String,
        /// The connect timeout (see `ClientBuilder::connect_timeout`).
        timeout: Duration,
        /// How long connecting was tried, from the call to the error.
        waited: Duration,
        /// What failed, naming each host's cause.
        reason: String,
        /// Each host of the connect string and why it gave no session, as found when the
        /// last attempt failed (empty when that could not be established).
        hosts: Vec<HostFailure>,
    },

    /// The connection to ZooKeeper was down and did not come back before the call's deadline.
    ///
    /// Ownership of nodes is uncertain while disconnected; any node this call created is removed
    /// in the background once the connection returns (or vanishes with the session).
    ///
    /// A timed acquisition returns it only when the connection is down at its deadline: a
    /// request that merely ran into the deadline on a live connection makes it return
    /// `Ok(None)`, as contention does.
    ///
    /// It says what the call knows: acquisitions, fenced writes, inspections and the client's
    /// own reads and writes name their path, their timeout and the server last connected to
    /// (for example `connection to ZooKeeper lost (last server 10.0.0.5:2181) and not restored
    /// within 2s (call on /locks/job)`); [`Client::close`](crate::Client::close) knows none of
    /// them. More fields may be added: match it with `ConnectionLoss { .. }`.
    #[error("{}", connection_loss_message(.path, .server, .timeout))]
    #[non_exhaustive]
    ConnectionLoss {
        /// What the call was about: the lock path (a multi-lock's paths, comma-separated) or
        /// the node read or written; `None` when not known.
        path: Option<String>,
        /// The server the session was last connected to (`host:port` as in the connect
        /// string, with the address dialled when it differs); `None` when not known.
        server: Option<String>,
        /// How long the call was allowed to wait (an acquisition's timeout; the session
        /// timeout for a one-off call); `None` when not known.
        timeout: Option<Duration>,
    },

    /// The ZooKeeper session expired: every ephemeral node of it, held locks included, is gone.
    ///
    /// The [`Client`](crate::Client) opens a new session on the next call, so retrying works.
    #[error("ZooKeeper session expired")]
    SessionExpired,

    /// The lock path has used up ZooKeeper's sequence numbers, so its queue can no longer be
    /// ordered: nothing was queued, and no node is left behind.
    ///
    /// A sequential node's number is its parent's child counter (`cversion`), a signed 32-bit
    /// number that every create and delete below the parent advances: a lock path that is
    /// never empty long enough for the server's container sweep to remove it reaches 2^31
    /// after about a billion acquisitions. ZooKeeper 3.8 then numbers every new node
    /// `2147483647` (and, in bursts, negative numbers), so two contenders could each find
    /// themselves first. zklock refuses to queue there instead. Delete the lock path while no
    /// one holds or waits on it (ZooKeeper's `deleteall`); it is made again, numbering from 0.
    #[error(
        "lock path {path} has used up ZooKeeper's sequence numbers (its child counter reached 2^31); \
         delete it while no one holds or waits on it and it numbers from 0 again"
    )]
    SequenceExhausted {
        /// The lock path.
        path: String,
    },

    /// Another recipe's nodes are at the lock path: a mutex, a read/write lock, an election
    /// and a semaphore on one path would each think they hold it, so a contender refuses to
    /// queue where another recipe's nodes are (its own node is withdrawn first). Each recipe
    /// needs a path of its own; `zklock status` shows what is there.
    #[error(
        "a {theirs} is at {path}: a {ours} cannot queue there (one recipe per lock path; \
         give each recipe its own path)"
    )]
    RecipeConflict {
        /// The lock path.
        path: String,
        /// The recipe that refused to queue: `mutex`, `rwlock`, `election` or `semaphore`.
        ours: &'static str,
        /// The recipe whose nodes are there (a semaphore's `leases` or `locks` child counts
        /// until the server sweeps it, about a minute after the semaphore's last use).
        theirs: &'static str,
    },

    /// ZooKeeper answered a request on `path` with a reply of `size` bytes, larger than the
    /// client reads ([`ClientBuilder::max_reply_size`](crate::ClientBuilder::max_reply_size),
    /// `limit`): typically the listing of a lock path with a very long queue. Only this call
    /// failed: the reply was skipped, and the connection, the session and every other lock of
    /// the client are untouched. An acquisition that met it withdrew its node.
    #[error(
        "the reply from ZooKeeper for {path} is {size} bytes, over this client's limit of \
         {limit} bytes (a very long queue? see ClientBuilder::max_reply_size)"
    )]
    ReplyTooLarge {
        /// The path of the request: the lock path for an acquisition or a listing.
        path: String,
        /// The reply's size in bytes (the frame after its length prefix).
        size: usize,
        /// The client's limit in bytes.
        limit: usize,
    },

    /// The lock was lost while held: the session expired or our node was deleted by someone else.
    /// Whatever the lock protected may already be used by another holder.
    #[error("lock {path} was lost (session expired or node deleted)")]
    LockLost {
        /// The lock path.
        path: String,
    },

    /// The lock path's parent is an ephemeral node, which cannot have children.
    #[error("cannot create lock node under {path}: its parent is an ephemeral node")]
    EphemeralParent {
        /// The path zklock tried to create.
        path: String,
    },

    /// The server refused an operation on `path` for lack of permission (ACL): `identity`
    /// lacks `permission` there.
    ///
    /// With the `digest` scheme a wrong password is not refused when the session
    /// authenticates: ZooKeeper takes it as another identity, which the ACL then refuses. The
    /// message says so when the identity is a digest one.
    #[error(
        "not authorized (ACL): {} refused for identity {identity}{}",
        refused(.path, .permission),
        digest_hint(.identity)
    )]
    NoAuth {
        /// The path of the refused operation, as the server knows it (a chroot of the connect
        /// string included, since that is where the ACL to look at is): the node read,
        /// written, created or deleted (for a lock node, the name it was created with, before
        /// the server appended its sequence number).
        path: String,
        /// The permission the operation needed: on `path` itself, except for
        /// [`Permission::Create`] and [`Permission::Delete`], which ZooKeeper checks on its
        /// parent. `None` when the server did not say which operation of a transaction it
        /// refused.
        permission: Option<Permission>,
        /// Who the session was to ZooKeeper, as configured on its client: `digest:<user>`
        /// (never the password), `sasl:<user>`, `x509:<certificate subject>` (RFC 2253, as
        /// the server names a TLS client, e.g. `x509:CN=svc-a,O=Acme`), another scheme's
        /// name, or `anonymous (world)`; several are comma-separated.
        identity: String,
    },

    /// TLS could not be set up: invalid certificate or key material, or servers that accept
    /// TCP connections but complete no TLS handshake with us (untrusted certificate, wrong
    /// host name, or a port that does not speak TLS).
    #[error("TLS to ZooKeeper failed: {reason}")]
    Tls {
        /// What failed.
        reason: String,
    },

    /// The server rejected the session's credentials. The client cannot be used any more.
    #[error("ZooKeeper authentication failed")]
    AuthFailed,

    /// The [`Client`](crate::Client) is closed.
    #[error("ZooKeeper client closed")]
    Closed,

    /// The acquisition was cancelled through its [`CancelToken`](crate::CancelToken). Its
    /// queued node was deleted (or, with the connection down, is being deleted in the
    /// background).
    #[error("acquisition cancelled")]
    Cancelled,

    /// The node at `path` does not exist.
    #[error("no node at {path}")]
    NoNode {
        /// The missing node.
        path: String,
    },

    /// The connect string's chroot does not exist, and the client was told not to create it
    /// ([`ClientBuilder::require_chroot`](crate::ClientBuilder::require_chroot)): most likely
    /// a typo in the connect string.
    #[error("chroot {chroot} does not exist (a typo in the connect string?); it is not created because the client requires it to exist")]
    NoChroot {
        /// The chroot, as in the connect string.
        chroot: String,
    },

    /// A node already exists at `path`, so it could not be created.
    #[error("a node already exists at {path}")]
    NodeExists {
        /// The node.
        path: String,
    },

    /// The node at `path` has children, so it could not be deleted.
    #[error("node {path} has children")]
    NotEmpty {
        /// The node.
        path: String,
    },

    /// The node at `path` changed since it was read (its data version differs), so a
    /// conditional operation on it was refused.
    #[error("node {path} changed since it was read")]
    NodeChanged {
        /// The node.
        path: String,
    },

    /// A write was sent, but the connection failed before its reply, or the reply did not come
    /// in time, and the outcome could not be established afterwards: it may or may not have
    /// been applied. For a release ([`LockGuard::unlock`](crate::LockGuard::unlock)), `path` is
    /// the lock node, whose delete goes on in the background.
    #[error("outcome of the write to {path} is unknown (connection lost before the reply)")]
    OutcomeUnknown {
        /// The node written.
        path: String,
    },

    /// This process was forked from one that used zklock, and the [`Client`](crate::Client) was
    /// made before the fork: its background threads did not survive it. A new client made in
    /// the child works.
    #[error("this client was made before a fork; its threads stayed in the parent (make a new client in the child)")]
    Forked,

    /// A local resource zklock needs could not be had: its runtime could not be built or its
    /// thread could not be spawned.
    #[error("zklock could not start: {reason}")]
    Runtime {
        /// What failed.
        reason: String,
    },

    /// Any other error reported by ZooKeeper, with its numeric error code (as in the Java
    /// client's `KeeperException.Code`).
    #[error("ZooKeeper error {code} on {path}: {message}")]
    ZooKeeper {
        /// ZooKeeper's error code (for example -101 for NoNode).
        code: i32,
        /// The path of the failed operation ("" when not tied to one).
        path: String,
        /// The transport's description of the error (`wire::Error`).
        message: String,
    },
}

impl Error {
    /// A [`Error::ConnectionLoss`] that knows nothing more; callers that know the call's path,
    /// server or timeout add them with [`Error::during`].
    pub(crate) fn connection_loss() -> Error {
        Error::ConnectionLoss {
            path: None,
            server: None,
            timeout: None,
        }
    }

    /// Adds to a [`Error::ConnectionLoss`] what the call knows and the error does not say yet:
    /// its `path`, the `server` it was last connected to and its `timeout`. Other errors are
    /// returned unchanged.
    pub(crate) fn during(
        mut self,
        call_path: &str,
        last_server: impl FnOnce() -> Option<String>,
        call_timeout: Option<Duration>,
    ) -> Error {
        if let Error::ConnectionLoss {
            path,
            server,
            timeout,
        } = &mut self
        {
            path.get_or_insert_with(|| call_path.to_owned());
            if server.is_none() {
                *server = last_server();
            }
            *timeout = timeout.or(call_timeout);
        }
        self
    }
}

/// [`Error::ConnectionLoss`]'s message: as much of where and how long as it knows.
fn connection_loss_message(
    path: &Option<String>,
    server: &Option<String>,
    timeout: &Option<Duration>,
) -> String {
    let mut message = String::from("connection to ZooKeeper lost");
    if let Some(server) = server {
        message += &format!(" (last server {server})");
    }
    match timeout {
        Some(timeout) => message += &format!(" and not restored within {timeout:?}"),
        None => message += " and not restored within the deadline",
    }
    if let Some(path) = path {
        message += &format!(" (call on {path})");
    }
    message
}

/// A ZooKeeper ACL permission, as a refused operation needed it (see [`Error::NoAuth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Permission {
    /// Read a node's data or list its children (also checked by a transaction's version
    /// check).
    Read,
    /// Write a node's data.
    Write,
    /// Create a child: checked on the parent of the node created.
    Create,
    /// Delete a child: checked on the parent of the node deleted.
    Delete,
    /// Change a node's ACL.
    Admin,
}

impl fmt::Display for Permission {
    /// ZooKeeper's name of the permission, as in `ZooDefs.Perms`: `READ`, `CREATE`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Permission::Read => "READ",
            Permission::Write => "WRITE",
            Permission::Create => "CREATE",
            Permission::Delete => "DELETE",
            Permission::Admin => "ADMIN",
        })
    }
}

/// What [`Error::NoAuth`] says was refused: the permission and the node whose ACL lacks it.
fn refused(path: &str, permission: &Option<Permission>) -> String {
    match permission {
        None => format!("an operation of a transaction on {path}"),
        // Creating and deleting a node are rights over its parent: that is the ACL to look at.
        Some(p @ (Permission::Create | Permission::Delete)) => {
            let parent = match path.rfind('/') {
                Some(0) | None => "/",
                Some(at) => &path[..at],
            };
            let verb = if *p == Permission::Create {
                "create"
            } else {
                "delete"
            };
            format!("{p} on {parent} (to {verb} {path})")
        }
        Some(p) => format!("{p} on {path}"),
    }
}

/// What [`Error::NoAuth`] adds for a digest identity: that a wrong password shows up here, not
/// when the session authenticates.
fn digest_hint(identity: &str) -> &'static str {
    if identity.split(", ").any(|id| id.starts_with("digest:")) {
        " (ZooKeeper's digest scheme takes a wrong password as another identity, refused \
         here rather than at login: check the password too)"
    } else {
        ""
    }
}

/// Why one host of the connect string gave no session, as found out when connecting failed
/// (see [`Error::Connect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectCause {
    /// The host name did not resolve (the resolver's message).
    Dns(String),
    /// The TCP connection was refused: nothing listens on that port.
    Refused,
    /// The TCP connection got no answer in time (a host that is down, or packets dropped by a
    /// firewall).
    TimedOut,
    /// The host or its network is unreachable, or the TCP connect failed otherwise (the
    /// system's message).
    Unreachable(String),
    /// The host accepts TCP connections but completed no TLS handshake with us (untrusted
    /// certificate, a certificate not valid for the host name, or a port that does not speak
    /// TLS).
    Tls,
    /// The host accepts TCP connections but granted no session (a server still starting, one
    /// that lost its quorum, or one refusing this client).
    NoSession,
}

impl fmt::Display for ConnectCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectCause::Dns(why) => write!(f, "DNS lookup failed ({why})"),
            ConnectCause::Refused => f.write_str("connection refused (nothing listens there)"),
            ConnectCause::TimedOut => f.write_str("TCP connect timed out"),
            ConnectCause::Unreachable(why) => write!(f, "unreachable ({why})"),
            ConnectCause::Tls => f.write_str("accepts TCP but completed no TLS handshake"),
            ConnectCause::NoSession => f.write_str("accepts TCP but granted no session"),
        }
    }
}

/// One host of the connect string and why it gave no session (see [`Error::Connect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostFailure {
    /// The host as written in the connect string.
    pub host: String,
    /// What the last attempt on it found.
    pub cause: ConnectCause,
}

impl fmt::Display for HostFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.host, self.cause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_send_sync_static() {
        fn check<E: std::error::Error + Send + Sync + 'static>() {}
        check::<Error>();
    }

    #[test]
    fn no_auth_names_the_permission_the_node_and_the_identity() {
        let refused = |path: &str, permission| Error::NoAuth {
            path: path.into(),
            permission,
            identity: "sasl:alice".into(),
        };
        assert_eq!(
            refused("/locks/job/_c_1-lock-", Some(Permission::Create)).to_string(),
            "not authorized (ACL): CREATE on /locks/job (to create /locks/job/_c_1-lock-) \
             refused for identity sasl:alice"
        );
        assert_eq!(
            refused("/top", Some(Permission::Delete)).to_string(),
            "not authorized (ACL): DELETE on / (to delete /top) refused for identity sasl:alice"
        );
        assert_eq!(
            refused("/locks/job", Some(Permission::Read)).to_string(),
            "not authorized (ACL): READ on /locks/job refused for identity sasl:alice"
        );
        assert_eq!(
            refused("/data", None).to_string(),
            "not authorized (ACL): an operation of a transaction on /data refused for identity \
             sasl:alice"
        );
    }

    #[test]
    fn a_digest_identity_is_told_that_a_wrong_password_is_another_identity() {
        for identity in ["digest:alice", "ldap, digest:alice"] {
            let refused = Error::NoAuth {
                path: "/locks/job".into(),
                permission: Some(Permission::Read),
                identity: identity.into(),
            };
            assert_eq!(
                refused.to_string(),
                format!(
                    "not authorized (ACL): READ on /locks/job refused for identity {identity} \
                     (ZooKeeper's digest scheme takes a wrong password as another identity, \
                     refused here rather than at login: check the password too)"
                )
            );
        }
        for identity in ["anonymous (world)", "sasl:digest:x", "x509:CN=digest:a"] {
            assert_eq!(digest_hint(identity), "", "{identity}");
        }
    }

    #[test]
    fn connection_loss_says_what_it_knows() {
        assert_eq!(
            Error::connection_loss().to_string(),
            "connection to ZooKeeper lost and not restored within the deadline"
        );
        let known = Error::connection_loss().during(
            "/locks/job",
            || Some("127.0.0.1:2181".into()),
            Some(Duration::from_secs(2)),
        );
        assert_eq!(
            known.to_string(),
            "connection to ZooKeeper lost (last server 127.0.0.1:2181) and not restored within \
             2s (call on /locks/job)"
        );
        // What the error says already stays; other errors pass unchanged.
        let again = known.clone().during("/other", || None, None);
        assert_eq!(again, known);
        assert_eq!(
            Error::Closed.during("/a", || Some("x".into()), None),
            Error::Closed
        );
        let path_only = Error::connection_loss().during("/a", || None, None);
        assert_eq!(
            path_only.to_string(),
            "connection to ZooKeeper lost and not restored within the deadline (call on /a)"
        );
    }
}
