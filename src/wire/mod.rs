//! zklock's own ZooKeeper transport: the jute encoding of the requests zklock sends, one
//! session engine (an I/O thread per session that reads, pings and reconnects; callers write
//! their own requests), and a small client handle whose calls each return one
//! [`Completion`](completion::Completion) that a blocked thread or an async task can wait on.
//!
//! Owning the wire lets zklock guarantee what the recipes need: watches re-armed however many
//! there are, requests pipelined with TCP_NODELAY, a session expiry reported as such, and a
//! broken server answered with a reset connection, never a panic.

mod attempt;
mod client;
mod completion;
mod conn;
mod events;
#[cfg(test)]
mod fuzz_tests;
mod hosts;
mod jute;
mod link;
#[cfg(all(test, feature = "tls"))]
mod openssl;
mod proto;
mod requests;
#[cfg(feature = "sasl")]
mod sasl;
#[cfg(feature = "tls")]
pub(crate) mod subject;
#[cfg(feature = "tls")]
pub(crate) mod tls;

pub use client::{Client, Connector};
pub use events::{KeeperState, OneshotWatcher, StateWatcher};
/// The one reading of a connect string's `host:port` entries, for the layers above.
pub(crate) use hosts::parse_address;
pub use proto::{perms, Acl, CreateMode, EventType, Stat};

/// An ACL list.
pub type Acls = &'static [Acl];

/// Anyone may do anything.
pub static OPEN_ACL: [Acl; 1] = [Acl::new(perms::ALL, "world", "anyone")];
/// Only the creator's authenticated identities may do anything.
pub static CREATOR_ALL_ACL: [Acl; 1] = [Acl::new(perms::ALL, "auth", "")];

/// How to create a node: its mode and ACL.
#[derive(Debug, Clone, Copy)]
pub struct CreateOptions {
    pub mode: CreateMode,
    pub acls: Acls,
}

impl CreateMode {
    pub fn with_acls(self, acls: Acls) -> CreateOptions {
        CreateOptions { mode: self, acls }
    }
}

/// What the transport reports: ZooKeeper's error codes, and the client's own conditions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("connection loss")]
    ConnectionLoss,
    #[error("marshalling error")]
    Marshalling,
    #[error("unimplemented")]
    Unimplemented,
    #[error("operation timeout")]
    Timeout,
    #[error("bad arguments: {0}")]
    BadArguments(String),
    #[error("no node")]
    NoNode,
    /// The request the server refused, when known (not for a transaction refused whole).
    #[error("not authorized")]
    NoAuth(Option<Refused>),
    #[error("bad version")]
    BadVersion,
    #[error("ephemeral nodes may not have children")]
    NoChildrenForEphemerals,
    #[error("node exists")]
    NodeExists,
    #[error("node not empty")]
    NotEmpty,
    #[error("session expired")]
    SessionExpired,
    #[error("invalid ACL")]
    InvalidAcl,
    #[error("authentication failed")]
    AuthFailed,
    #[error("session moved")]
    SessionMoved,
    #[error("not a read-only call")]
    NotReadOnly,
    #[error("no such watcher")]
    NoWatcher,
    #[error("reconfiguration disabled")]
    ReconfigDisabled,
    #[error("quota exceeded")]
    QuotaExceeded,
    #[error("throttled by the server")]
    Throttled,
    #[error("ZooKeeper error code {0}")]
    Code(i32),
    #[error("client closed")]
    ClientClosed,
    #[error("no session: {0}")]
    NoSession(String),
    /// The server answered, but with a reply of `size` bytes, over the client's `limit`: the
    /// reply was skipped, the connection lives on.
    #[error("a reply of {size} bytes, over the client's limit of {limit}")]
    ReplyTooLarge { size: usize, limit: usize },
}

impl Error {
    /// ZooKeeper's numeric code (`KeeperException.Code`).
    pub fn code(&self) -> i32 {
        match self {
            Error::ConnectionLoss | Error::NoSession(_) => -4,
            Error::Marshalling => -5,
            Error::Unimplemented => -6,
            Error::Timeout => -7,
            Error::BadArguments(_) => -8,
            Error::NoNode => -101,
            Error::NoAuth(_) => -102,
            Error::BadVersion => -103,
            Error::NoChildrenForEphemerals => -108,
            Error::NodeExists => -110,
            Error::NotEmpty => -111,
            Error::SessionExpired => -112,
            Error::InvalidAcl => -114,
            Error::AuthFailed => -115,
            Error::SessionMoved => -118,
            Error::NotReadOnly => -119,
            Error::NoWatcher => -121,
            Error::ReconfigDisabled => -123,
            Error::QuotaExceeded => -125,
            Error::Throttled => -127,
            Error::Code(code) => *code,
            Error::ClientClosed => -1,
            // No code of ZooKeeper's: its Java client drops the connection over such a reply.
            Error::ReplyTooLarge { .. } => -5,
        }
    }
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// A request refused with NoAuth: the permission it needs (a [`perms`] bit; ZooKeeper checks
/// CREATE and DELETE on the parent of `path`) and its path, below the handle's chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub perm: i32,
    pub path: String,
}

impl Refused {
    fn new(perm: i32, path: &str) -> Refused {
        Refused {
            perm,
            path: path.to_owned(),
        }
    }
}

/// One operation of a [`Client::multi`] transaction.
#[derive(Debug, Clone)]
pub enum TxnRequest {
    Check {
        path: String,
        version: i32,
    },
    Create {
        path: String,
        data: Vec<u8>,
        options: CreateOptions,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    Delete {
        path: String,
        version: i32,
    },
}

impl TxnRequest {
    /// What the operation asks of the ACLs, should the server refuse it.
    fn asked(&self) -> Refused {
        match self {
            // A version check reads the node.
            TxnRequest::Check { path, .. } => Refused::new(perms::READ, path),
            TxnRequest::Create { path, .. } => Refused::new(perms::CREATE, path),
            TxnRequest::SetData { path, .. } => Refused::new(perms::WRITE, path),
            TxnRequest::Delete { path, .. } => Refused::new(perms::DELETE, path),
        }
    }
}
