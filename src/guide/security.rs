//! Authentication, ACLs and TLS.
//!
//! By default zklock creates its nodes with ZooKeeper's default open ACL, so any client that
//! reaches the ensemble can delete a holder's node and walk into its lock. In production,
//! authenticate and restrict the nodes to your identity:
//!
//! ```no_run
//! use zklock::acl::NodeAcl;
//! use zklock::{Client, DistributedMutex};
//!
//! fn main() -> zklock::Result<()> {
//!     let password = std::env::var("ZK_PASSWORD").unwrap_or_default();
//!     let client = Client::builder("zk1:2181,zk2:2181,zk3:2181")
//!         .auth_digest("orders-service", &password) // or .sasl_digest_md5(..), feature "sasl"
//!         .acl(NodeAcl::CreatorOnlyAnyoneRead) // others may look, not touch
//!         .connect()?;
//!     let mutex = DistributedMutex::new(&client, "/locks/orders")?;
//!     let _guard = mutex.lock()?;
//!     Ok(())
//! }
//! ```
//!
//! - [`NodeAcl::CreatorOnly`] gives every permission to the authenticated identity only;
//!   [`NodeAcl::CreatorOnlyAnyoneRead`] adds READ for everyone so operators and `zklock status`
//!   can still inspect. ZooKeeper checks the parent's ACL to create or delete a child, so a lock
//!   path created creator-only cannot be joined, released or broken by another identity
//!   ([`Error::NoAuth`]): all processes sharing a lock must share its identity. The error
//!   names the identity refused (never a password), the permission and the node whose ACL
//!   lacks it: `not authorized (ACL): CREATE on /locks/orders (to create
//!   /locks/orders/_c_…-lock-) refused for identity digest:billing`.
//! - Parents created on the way to a lock path (and the chroot) are not made creator-only: by
//!   default ([`ParentAcl::Shared`]) anyone may read them and create children in them, and only
//!   the creating identity may change or delete them, so one service's `/shared/a` does not lock
//!   every other identity out of `/shared/b`.
//!   [`.parent_acl(ParentAcl::SameAsLocks)`](crate::ClientBuilder::parent_acl) gives parents
//!   the lock's own ACL instead (stricter: the first identity owns the whole subtree). Fenced
//!   writes create missing parents the same way.
//! - The digest scheme ([`ClientBuilder::auth_digest`]; any other scheme through
//!   [`ClientBuilder::auth`]) never rejects a password (a wrong one is just another identity,
//!   which then meets `NoAuth`); SASL DIGEST-MD5 (`ClientBuilder::sasl_digest_md5`, feature
//!   `sasl`) on a server that enforces SASL rejects it with [`Error::AuthFailed`].
//! - TLS (feature `tls`): `.tls(ca_pem)` and, for servers that require client certificates,
//!   `.tls_identity(cert_pem, key_pem)`; server certificates must name the host. An untrusted
//!   server certificate is [`Error::Tls`], not a hang or a generic connect error.
//! - Credentials never appear in `Debug` output or logs.
//!
//! The command-line tool takes the same options as flags: see
//! [`cli`, "Security"](super::cli#security-credentials-acls-tls).
//!
//! # ZooKeeper releases
//!
//! ZooKeeper 3.9 changed one answer that locks with restricted ACLs meet: `exists` on a node
//! whose ACL denies READ to the caller answers NoAuth, where 3.8 (and 3.6) answer with the node's
//! stat. (`getChildren` and `getData` need READ on every release.) The server checks READ only
//! on a node that is there, so zklock reads that NoAuth as "it exists", and these give the same
//! answer on every release:
//!
//! - [`ClientBuilder::require_chroot`] through a chroot that denies READ connects (before, on
//!   3.9.5: `not authorized (ACL): READ on /…/chroot`);
//! - fenced writes create a missing node below a parent that allows CREATE but not READ
//!   (`world:anyone:cdw`), as `Client::set_data` does (before, on 3.9.5: NoAuth READ).
//!
//! On a lock whose nodes are another identity's and creator-only, every call gives the same typed
//! [`Error::NoAuth`] on 3.9.5 and 3.8.0, at once and leaving nothing behind: queueing
//! (`try_lock`, timed and untimed waits, semaphores, read/write locks, elections) is refused
//! CREATE on the lock path; listing and inspection (`contenders`, `Client::inspect`,
//! `current_leader`, `zklock status`) READ; `break_*` DELETE and revocation WRITE. With
//! [`NodeAcl::CreatorOnlyAnyoneRead`] others see the holder (never "free"). `tests/security.rs`
//! (`acls_on_each_release`) runs each of these on a server of each release.
//!
//! # Trying it locally
//!
//! `scripts/start-zk.sh --sasl` starts a server that requires SASL (users `alice`/`alice-secret`
//! and `bob`/`bob-secret`), and `scripts/start-zk.sh --tls` one with a TLS port
//! (`ZK_SECURE_PORT`, default `ZK_PORT`+1000) whose CA, client certificate and key it writes to
//! the directory it prints; give each a `ZK_PORT` of its own, e.g.
//! `ZK_PORT=2196 scripts/start-zk.sh --tls` serves TLS on 127.0.0.1:3196 and needs `openssl`
//! (see the script's header). `tests/security_tls_sasl.rs` runs against such servers.
//!
//! [`NodeAcl::CreatorOnly`]: crate::acl::NodeAcl::CreatorOnly
//! [`NodeAcl::CreatorOnlyAnyoneRead`]: crate::acl::NodeAcl::CreatorOnlyAnyoneRead
//! [`ParentAcl::Shared`]: crate::acl::ParentAcl::Shared
//! [`ClientBuilder::auth_digest`]: crate::ClientBuilder::auth_digest
//! [`ClientBuilder::require_chroot`]: crate::ClientBuilder::require_chroot
//! [`ClientBuilder::auth`]: crate::ClientBuilder::auth
//! [`Error::NoAuth`]: crate::Error::NoAuth
//! [`Error::AuthFailed`]: crate::Error::AuthFailed
//! [`Error::Tls`]: crate::Error::Tls
