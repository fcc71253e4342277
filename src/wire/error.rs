//! What the transport reports: ZooKeeper's error codes, and the client's own conditions.

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

pub(super) type Result<T, E = Error> = std::result::Result<T, E>;

/// A request refused with NoAuth: the permission it needs (a [`perms`](super::perms) bit; ZooKeeper checks
/// CREATE and DELETE on the parent of `path`) and its path, below the handle's chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub perm: i32,
    pub path: String,
}

impl Refused {
    pub(super) fn new(perm: i32, path: &str) -> Refused {
        Refused {
            perm,
            path: path.to_owned(),
        }
    }
}
