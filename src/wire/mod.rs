//! zklock's own ZooKeeper transport: the jute encoding of the requests zklock sends, one
//! session engine (an I/O thread per session that reads, pings and reconnects; callers write
//! their own requests), and a small client handle whose calls each return one [`Completion`]
//! that a blocked thread or an async task can wait on.
//!
//! Owning the wire lets zklock guarantee what the recipes need: watches re-armed however many
//! there are, requests pipelined with TCP_NODELAY, a session expiry reported as such, and a
//! broken server answered with a reset connection, never a panic.

mod attempt;
mod completion;
mod conn;
#[cfg(test)]
mod fuzz_tests;
mod hosts;
mod jute;
mod link;
mod proto;
#[cfg(feature = "sasl")]
mod sasl;
#[cfg(feature = "tls")]
pub(crate) mod tls;
mod watches;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use completion::Completion;
/// The one reading of a connect string's `host:port` entries, for the layers above.
pub(crate) use hosts::parse_address;
pub use proto::{perms, Acl, CreateMode, EventType, Stat};
pub use watches::{OneshotWatcher, SessionState, StateWatcher};

use conn::{Answer, Shared};
use jute::{Reader, Writer};
use proto::op;
use watches::{Kind, Unwatch};

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

    /// Opens a session on one of `hosts` (`host:port,...`, no chroot), trying each once, within
    /// `deadline`.
    pub fn connect(mut self, hosts: &str, deadline: Instant) -> Result<Client> {
        self.config.hosts = hosts::parse(hosts)?;
        let shared = conn::open(self.config, deadline)?;
        Ok(Client {
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

/// A handle to one session; cheap to clone. The session is closed when the last handle is
/// dropped, or by [`close`](Self::close).
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    /// Closes the session when the last clone is dropped.
    _owner: Arc<Owner>,
    chroot: Option<Arc<str>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session_id", &format_args!("{:#x}", self.shared.session_id))
            .field("chroot", &self.chroot)
            .finish()
    }
}

impl Client {
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
    pub fn chroot(&self, root: &str) -> Result<Client> {
        if !root.starts_with('/') || root.len() < 2 || root.ends_with('/') {
            return Err(Error::BadArguments(format!("invalid chroot {root}")));
        }
        let root = match &self.chroot {
            Some(outer) => format!("{outer}{root}"),
            None => root.to_owned(),
        };
        Ok(Client {
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

    fn server_path(&self, path: &str) -> String {
        match &self.chroot {
            None => path.to_owned(),
            Some(root) if path == "/" => root.to_string(),
            Some(root) => format!("{root}{path}"),
        }
    }

    fn chroot_len(&self) -> usize {
        self.chroot.as_ref().map_or(0, |r| r.len())
    }

    /// Creates a node; the reply is its stat and its path (with the sequence number of a
    /// sequential node).
    pub fn create(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions,
    ) -> Completion<(Stat, String)> {
        let server = self.server_path(path);
        let strip = self.chroot_len();
        let mode = options.mode;
        let asked = Refused::new(perms::CREATE, path);
        self.shared.request(
            mode.op(),
            |w| proto::write_create(w, &server, data, options.acls, mode),
            move |err, mut r, _| {
                on_ok(err, asked, || {
                    let created = r.string()?;
                    Ok((Stat::read(&mut r)?, strip_root(&created, strip)))
                })
            },
        )
    }

    /// Deletes a node, if `version` is given only at that data version.
    pub fn delete(&self, path: &str, version: Option<i32>) -> Completion<()> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::DELETE, path);
        self.shared.request(
            op::DELETE,
            |w| {
                w.string(&server).int(version.unwrap_or(-1));
            },
            |err, _, _| Ok(error_for(err, asked).map_or(Ok(()), Err)),
        )
    }

    pub fn get_data(&self, path: &str) -> Completion<(Vec<u8>, Stat)> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::READ, path);
        self.shared.request(
            op::GET_DATA,
            |w| {
                w.string(&server).boolean(false);
            },
            |err, mut r, _| on_ok(err, asked, || read_data(&mut r)),
        )
    }

    /// The node's stat, `None` if it does not exist.
    pub fn check_stat(&self, path: &str) -> Completion<Option<Stat>> {
        let server = self.server_path(path);
        // ZooKeeper checks no permission for exists; READ is what it reads.
        let asked = Refused::new(perms::READ, path);
        self.shared.request(
            op::EXISTS,
            |w| {
                w.string(&server).boolean(false);
            },
            |err, mut r, _| match error_for(err, asked) {
                Some(Error::NoNode) => Ok(Ok(None)),
                Some(e) => Ok(Err(e)),
                None => Ok(Ok(Some(Stat::read(&mut r)?))),
            },
        )
    }

    pub fn list_children(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<Vec<String>>> + Send + 'static {
        let listing = self.get_children(path);
        async move { listing.await.map(|(children, _)| children) }
    }

    /// Children and the node's stat (getChildren2).
    pub fn get_children(&self, path: &str) -> Completion<(Vec<String>, Stat)> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::READ, path);
        self.shared.request(
            op::GET_CHILDREN2,
            |w| {
                w.string(&server).boolean(false);
            },
            |err, mut r, _| on_ok(err, asked, || read_children(&mut r)),
        )
    }

    /// Data and stat, and a watch that fires on the node's next change or deletion.
    pub fn get_and_watch_data(&self, path: &str) -> Completion<(Vec<u8>, Stat, OneshotWatcher)> {
        self.watching(
            op::GET_DATA,
            path,
            Kind::Data,
            read_data,
            |(data, stat), watcher| (data, stat, watcher),
        )
    }

    /// Children and stat, and a watch that fires on the next change of the children.
    pub fn get_and_watch_children(
        &self,
        path: &str,
    ) -> Completion<(Vec<String>, Stat, OneshotWatcher)> {
        self.watching(
            op::GET_CHILDREN2,
            path,
            Kind::Child,
            read_children,
            |(children, stat), watcher| (children, stat, watcher),
        )
    }

    /// A read that sets a watch: the watcher is registered when the reply says the server set
    /// the watch.
    fn watching<T, U: Send + 'static>(
        &self,
        opcode: i32,
        path: &str,
        kind: Kind,
        read: impl FnOnce(&mut Reader<'_>) -> Result<T, jute::Malformed> + Send + 'static,
        combine: impl FnOnce(T, OneshotWatcher) -> U + Send + 'static,
    ) -> Completion<U> {
        let server = self.server_path(path);
        let strip = self.chroot_len();
        let (slot, completion) = completion::pair();
        let key = server.clone();
        let asked = Refused::new(perms::READ, path);
        let owner: std::sync::Weak<dyn Unwatch> = {
            let strong: Arc<dyn Unwatch> = self.shared.clone();
            Arc::downgrade(&strong)
        };
        let session = Arc::downgrade(&self.shared);
        let on_reply: conn::OnReply = Box::new(move |answer| {
            let (err, mut body) = match answer {
                Answer::Lost(e) => {
                    if let Some(shared) = session.upgrade() {
                        shared
                            .watches
                            .lock()
                            .settled(&key, kind, false, strip, &owner);
                    }
                    slot.fill(Err(e));
                    return Ok(());
                }
                Answer::Reply { err, body, .. } => (err, body),
            };
            let Some(shared) = session.upgrade() else {
                slot.fill(Err(Error::ClientClosed));
                return Ok(());
            };
            if let Some(e) = error_for(err, asked) {
                shared
                    .watches
                    .lock()
                    .settled(&key, kind, false, strip, &owner);
                slot.fill(Err(e));
                return Ok(());
            }
            match read(&mut body) {
                Ok(value) => {
                    let watcher = shared
                        .watches
                        .lock()
                        .settled(&key, kind, true, strip, &owner);
                    match watcher {
                        Some(watcher) => slot.fill(Ok(combine(value, watcher))),
                        None => slot.fill(Err(Error::ConnectionLoss)),
                    }
                    Ok(())
                }
                Err(m) => {
                    shared
                        .watches
                        .lock()
                        .settled(&key, kind, false, strip, &owner);
                    slot.fill(Err(Error::ConnectionLoss));
                    Err(m)
                }
            }
        });
        let frame = self.shared.encode(opcode, |w| {
            w.string(&server).boolean(true);
        });
        let sent = {
            // Counted and queued under the registry's lock, so that a removal of the same
            // watch is queued either before this request or not at all (see `unwatch`).
            let mut watches = self.shared.watches.lock();
            watches.setting(&server, kind);
            match frame {
                Ok(frame) => self.shared.enqueue(frame, on_reply, false),
                Err(e) => Err((on_reply, e)),
            }
        };
        self.shared.flush();
        if let Err((on_reply, err)) = sent {
            let _ = on_reply(Answer::Lost(err));
        }
        completion
    }

    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Completion<Stat> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::WRITE, path);
        self.shared.request(
            op::SET_DATA,
            |w| {
                w.string(&server).buffer(data).int(version.unwrap_or(-1));
            },
            |err, mut r, _| on_ok(err, asked, || Stat::read(&mut r)),
        )
    }

    /// Makes the server catch up with the leader on `path`.
    pub fn sync(&self, path: &str) -> Completion<()> {
        self.sync_as(path, false)
    }

    /// A sync that goes out ahead of every request not yet written, for a liveness check: it
    /// must not wait behind bulk traffic, and its order relative to other requests does not
    /// matter (a sync that must order reads after writes is [`sync`](Self::sync)).
    pub fn sync_first(&self, path: &str) -> Completion<()> {
        self.sync_as(path, true)
    }

    fn sync_as(&self, path: &str, urgent: bool) -> Completion<()> {
        let server = self.server_path(path);
        // ZooKeeper checks no permission for sync; READ is what it serves.
        let asked = Refused::new(perms::READ, path);
        self.shared.request_as(
            op::SYNC,
            urgent,
            |w| {
                w.string(&server);
            },
            |err, mut r, _| on_ok(err, asked, || r.string().map(drop)),
        )
    }

    /// Creates `path` and its missing ancestors with `options`; a node that exists already
    /// is what was asked for.
    pub fn mkdir(
        &self,
        path: &str,
        options: &CreateOptions,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let client = self.clone();
        let (path, options) = (path.to_owned(), *options);
        async move {
            // The deepest node first: usually its parent exists and one request does. Each
            // NoNode moves one level up; then the missing levels are created going down.
            let mut missing: Vec<String> = Vec::new();
            let mut at = path;
            while at != "/" && !at.is_empty() {
                match client.create(&at, &[], &options).await {
                    Ok(_) | Err(Error::NodeExists) => break,
                    Err(Error::NoNode) => {
                        let parent = match at.rfind('/') {
                            Some(0) | None => "/".to_owned(),
                            Some(i) => at[..i].to_owned(),
                        };
                        missing.push(std::mem::replace(&mut at, parent));
                    }
                    Err(e) => return Err(e),
                }
            }
            for level in missing.iter().rev() {
                match client.create(level, &[], &options).await {
                    Ok(_) | Err(Error::NodeExists) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
    }

    /// Runs `ops` as one transaction. `Ok(None)` if it committed, `Ok(Some((index, error)))`
    /// if the server refused operation `index` (nothing was applied), `Err` if the request
    /// itself failed.
    pub fn multi(&self, ops: &[TxnRequest]) -> Completion<Option<(usize, Error)>> {
        let asked: Vec<Refused> = ops.iter().map(TxnRequest::asked).collect();
        let ops: Vec<TxnRequest> = ops
            .iter()
            .map(|op| match op.clone() {
                TxnRequest::Check { path, version } => TxnRequest::Check {
                    path: self.server_path(&path),
                    version,
                },
                TxnRequest::Create {
                    path,
                    data,
                    options,
                } => TxnRequest::Create {
                    path: self.server_path(&path),
                    data,
                    options,
                },
                TxnRequest::SetData {
                    path,
                    data,
                    version,
                } => TxnRequest::SetData {
                    path: self.server_path(&path),
                    data,
                    version,
                },
                TxnRequest::Delete { path, version } => TxnRequest::Delete {
                    path: self.server_path(&path),
                    version,
                },
            })
            .collect();
        self.shared.request(
            op::MULTI,
            |w| write_multi(w, &ops),
            move |err, mut r, _| {
                if err != 0 && r.remaining() == 0 {
                    return Ok(Err(proto::error_of(err).unwrap_or(Error::Code(err))));
                }
                let results = proto::read_multi(&mut r)?;
                let failed = results
                    .iter()
                    .enumerate()
                    .find_map(|(i, result)| match result {
                        proto::MultiResult::Error(code) if *code != 0 && *code != -2 => {
                            let asked = asked.get(i).cloned();
                            let error = match asked {
                                Some(asked) => error_for(*code, asked),
                                None => proto::error_of(*code),
                            };
                            Some((i, error.unwrap_or(Error::Code(*code))))
                        }
                        _ => None,
                    });
                match (failed, proto::error_of(err)) {
                    (Some(failed), _) => Ok(Ok(Some(failed))),
                    (None, Some(e)) => Ok(Err(e)),
                    (None, None) => Ok(Ok(None)),
                }
            },
        )
    }
}

fn write_multi(w: &mut Writer, ops: &[TxnRequest]) {
    for op in ops {
        match op {
            TxnRequest::Check { path, version } => {
                w.int(op::CHECK).boolean(false).int(-1);
                w.string(path).int(*version);
            }
            TxnRequest::Create {
                path,
                data,
                options,
            } => {
                w.int(options.mode.op()).boolean(false).int(-1);
                proto::write_create(w, path, data, options.acls, options.mode);
            }
            TxnRequest::SetData {
                path,
                data,
                version,
            } => {
                w.int(op::SET_DATA).boolean(false).int(-1);
                w.string(path).buffer(data).int(*version);
            }
            TxnRequest::Delete { path, version } => {
                w.int(op::DELETE).boolean(false).int(-1);
                w.string(path).int(*version);
            }
        }
    }
    w.int(-1).boolean(true).int(-1);
}

/// A reply's value, read by `read` if the server said OK, else the server's error.
fn on_ok<T>(
    err: i32,
    asked: Refused,
    read: impl FnOnce() -> Result<T, jute::Malformed>,
) -> Result<Result<T, Error>, jute::Malformed> {
    match error_for(err, asked) {
        Some(e) => Ok(Err(e)),
        None => read().map(Ok),
    }
}

/// The error of a reply to the request `asked` describes, `None` for OK: a NoAuth names the
/// request, so that the caller can say who needed what where.
fn error_for(err: i32, asked: Refused) -> Option<Error> {
    match proto::error_of(err)? {
        Error::NoAuth(_) => Some(Error::NoAuth(Some(asked))),
        other => Some(other),
    }
}

/// A getData reply: the data and the stat.
fn read_data(r: &mut Reader<'_>) -> Result<(Vec<u8>, Stat), jute::Malformed> {
    Ok((r.buffer()?.to_vec(), Stat::read(r)?))
}

/// A getChildren2 reply: the children and the parent's stat.
fn read_children(r: &mut Reader<'_>) -> Result<(Vec<String>, Stat), jute::Malformed> {
    Ok((r.strings()?, Stat::read(r)?))
}

/// `path` as the server gave it, with the client's chroot (its first `strip` bytes) removed.
fn strip_root(path: &str, strip: usize) -> String {
    match path.get(strip..) {
        Some("") | None => "/".to_owned(),
        Some(rest) => rest.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chroot_paths_map_both_ways() {
        assert_eq!(
            strip_root("/root/a/lock-0000000001", 5),
            "/a/lock-0000000001"
        );
        assert_eq!(strip_root("/root", 5), "/");
        assert_eq!(strip_root("/a", 0), "/a");
    }

    #[test]
    fn a_multi_is_framed_with_a_closing_header() {
        let mut w = Writer::frame();
        write_multi(
            &mut w,
            &[TxnRequest::Check {
                path: "/l".into(),
                version: -1,
            }],
        );
        let frame = w.finish();
        let mut r = Reader::new(&frame[4..]);
        assert_eq!(r.int().unwrap(), op::CHECK);
        assert!(!r.boolean().unwrap());
        assert_eq!(r.int().unwrap(), -1);
        assert_eq!(r.string().unwrap(), "/l");
        assert_eq!(r.int().unwrap(), -1);
        assert_eq!(
            (r.int().unwrap(), r.boolean().unwrap(), r.int().unwrap()),
            (-1, true, -1)
        );
        assert_eq!(r.remaining(), 0);
    }
}
