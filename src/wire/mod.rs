//! zklock's own ZooKeeper transport: the jute encoding of the requests zklock sends, the
//! connection engine (`conn`: an I/O thread per ZooKeeper session that reads, pings and
//! reconnects; callers write their own requests), and a small handle whose calls each return
//! one [`Completion`](completion::Completion) that a blocked thread or an async task can wait
//! on. It reports the session's protocol state ([`KeeperState`]) and watch events
//! (`events.rs`); what zklock makes of a session (its lease, chroot, retries, our nodes) is
//! the session layer's (`session/`), the one owner of that word above this module.
//!
//! Owning the wire lets zklock guarantee what the recipes need: watches re-armed however many
//! there are, requests pipelined with TCP_NODELAY, a session expiry reported as such, and a
//! broken server answered with a reset connection, never a panic.

mod attempt;
mod completion;
mod conn;
mod error;
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
mod transport;

pub use error::{Error, Refused};
pub use events::{KeeperState, OneshotWatcher, StateWatcher};
/// The one reading of a connect string, for the layers above.
pub(crate) use hosts::{parse as parse_connect_string, ConnectString, Host};
pub use proto::{perms, Acl, CreateMode, EventType, Stat};
pub use transport::{Connector, Transport};

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

/// One operation of a [`Transport::multi`] transaction.
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
