//! `Session`: one ZooKeeper session and every request zklock makes through it.
//!
//! Everything zklock asks of ZooKeeper goes through this module, so the recipes never see the
//! client crate's types and the transport can be replaced without touching them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::wire as zk;
use log::{debug, warn};
use parking_lot::{Condvar, Mutex};

use crate::error::{outcome_unknown, Error, Result};
use crate::lease::Lease;
use crate::relay::io_log;
use crate::runtime::{block_on, deadline_after, Abort, Handle, JoinHandle, Runtime};
use crate::security::{NodeAcl, Security};
use crate::watch::{retry_pause_async, NodeFlags, OwnNodeWatch, RETRY_PAUSE};

/// What a session is opened with; [`ClientBuilder`](crate::ClientBuilder) fills it in.
#[derive(Debug, Clone)]
pub(crate) struct SessionConfig {
    pub(crate) connect_string: String,
    pub(crate) session_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    /// Give up at once when every host refuses the TCP connection (first connect only).
    pub(crate) fail_fast_if_refused: bool,
    /// A missing chroot is an error instead of being created (`ClientBuilder::require_chroot`).
    pub(crate) require_chroot: bool,
    pub(crate) security: Security,
}

pub(crate) fn open_session(
    runtime: &Runtime,
    config: &SessionConfig,
    hosts: &str,
    chroot: Option<&str>,
    releases: &Arc<Releases>,
    deadline: Option<Instant>,
) -> Result<Session> {
    let started = Instant::now();
    let connect_deadline = deadline_after(config.connect_timeout);
    let deadline = deadline.map_or(connect_deadline, |d| d.min(connect_deadline));
    // The session exists no earlier than the connect request: the lease starts from there.
    let (zk, connect_sent) = crate::dial::dial(config, hosts, deadline)?;
    let acl = config.security.acl;
    let parent_acl = config.security.parents();
    let (zk, chroot) = match chroot {
        None => (zk, None),
        Some(root) => {
            let chroot = Chroot {
                path: root.to_owned(),
                root: zk.clone(),
            };
            let made = if config.require_chroot {
                let exists = Box::pin(chroot.root.check_stat(root));
                block_on(exists, Some(deadline))
                    .map(|found| match found {
                        Ok(None) => Err(Error::NoChroot {
                            chroot: root.to_owned(),
                        }),
                        Ok(Some(_)) => Ok(()),
                        Err(err) => Err(Error::from_zk(err, root)),
                    })
                    .map_err(drop)
            } else {
                block_on(chroot.create(parent_acl), Some(deadline))
                    .map(|made| made.map_err(|err| Error::from_zk(err, root)))
                    .map_err(drop)
            };
            match made {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(err),
                Err(()) => {
                    let reason = format!("could not create chroot {root}");
                    return Err(crate::dial::gave_up(config, started, reason, Vec::new()));
                }
            }
            let zk = zk.chroot(root).map_err(|_| Error::InvalidConnectString {
                connect_string: config.connect_string.clone(),
                reason: "bad chroot".into(),
            })?;
            (zk, Some(chroot))
        }
    };
    let mut state = zk.state_watcher();
    state.state();
    let session = Session {
        id: zk.session_id(),
        timeout: zk.session_timeout(),
        lease: Arc::new(Lease::new(connect_sent, zk.session_timeout())),
        tasks: Mutex::new(Vec::new()),
        release_tasks: Mutex::new(Vec::new()),
        closed: AtomicBool::new(false),
        closing: Mutex::new(None),
        handles: Mutex::new(Some(Handles { zk, chroot })),
        state,
        acl,
        parent_acl,
        pid: std::process::id(),
        handle: runtime.handle().clone(),
        releases: releases.clone(),
        creating: Default::default(),
    };
    // A reconnect's handshake proves the session alive as a sync would (the leader validates
    // a session that moves), so holders read Held again without waiting behind other traffic.
    let lease = session.lease.clone();
    session.zk()?.on_session_proof(move |sent, timeout| {
        lease.set_timeout(timeout);
        lease.renew(sent);
    });
    let keepalive = keep_alive(
        session.zk()?,
        session.lease.clone(),
        session.state_watcher(),
    );
    session.spawn(keepalive);
    Ok(session)
}

/// What keeps the session open: the client crate closes it once every handle is dropped.
struct Handles {
    zk: zk::Client,
    chroot: Option<Chroot>,
}

/// The connect string's chroot, and a handle on the same session outside it, so that the
/// chroot can be created again if someone deletes it.
#[derive(Clone)]
struct Chroot {
    path: String,
    root: zk::Client,
}

impl Chroot {
    /// Creates the chroot and its missing ancestors. They are persistent nodes, never
    /// containers: once the server swept an empty container chroot, a client inside it could
    /// not create anything any more (every request would fail with NoNode).
    fn create(&self, acl: zk::Acls) -> Op<()> {
        let (zk, path) = (self.root.clone(), self.path.clone());
        Box::pin(async move {
            zk.mkdir(&path, &zk::CreateMode::Persistent.with_acls(acl))
                .await
        })
    }
}

/// Renews `lease` whenever a third of the session timeout passes without an answered request,
/// with a cheap read. It runs on the runtime thread on purpose: if that thread stalls, the
/// lease is not renewed and holders read "not held" in time, on their own threads.
async fn keep_alive(zk: zk::Client, lease: Arc<Lease>, mut state: zk::StateWatcher) {
    loop {
        let due = lease.renewal_due();
        if Instant::now() < due {
            crate::runtime::sleep_until(due).await;
            continue;
        }
        if !retry_pause_async(&mut state).await {
            return; // The session ended.
        }
        let sent = Instant::now();
        // A sync, not a read: a follower answers reads itself, even when it is cut off from
        // the leader that decides expiry, but it must pass a sync on to the leader.
        // Ahead of the requests still queued (after a reconnect, thousands of waiters may be
        // re-listing at once), so the answer waits for a bounded number of others.
        if proves_alive(&zk.sync_first("/").await) {
            lease.renew(sent);
        }
    }
}

/// Whether a request's outcome is an answer from a server that still serves our session.
fn proves_alive<T>(outcome: &ZkResult<T>) -> bool {
    use zk::Error as E;
    match outcome {
        Ok(_) => true,
        Err(E::NoNode | E::NoAuth | E::BadVersion | E::NodeExists | E::NotEmpty) => true,
        Err(E::NoChildrenForEphemerals | E::InvalidAcl) => true,
        Err(_) => false,
    }
}

/// Who has seen a request once it is answered, which decides whether the answer renews the
/// lease. The leader tracks session expiry; a follower answers reads by itself, also while it
/// is cut off from the leader (until its own sync limit), so a read's answer does not prove
/// that the session is alive where it counts. Writes and syncs pass through the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Reads: the server we are connected to answers them alone.
    ByServer,
    /// Writes and syncs: the leader processed them.
    ByLeader,
}

/// How many times [`Session::ensure_path`] recreates a parent that the container sweep removed
/// again before the lock path could be created in it.
const PARENT_SWEPT_RETRIES: u32 = 3;

/// The error of a wait that ended without an answer: the caller's cancellation or its client's
/// closing if that is what stopped it, else the deadline during an outage.
fn gave_up_waiting() -> Error {
    crate::cancel::interruption().unwrap_or(Error::ConnectionLoss)
}

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

/// A node's data and stat.
pub(crate) type NodeData = (Vec<u8>, NodeStat);

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
    /// `None` once closed: every request then fails with [`Error::Closed`].
    handles: Mutex<Option<Handles>>,
    /// Set by [`close`](Self::close).
    closed: AtomicBool,
    /// The handle [`close`](Self::close) closed, to learn whether the server confirmed it.
    closing: Mutex<Option<zk::Client>>,
    /// Tasks on the runtime that hold a handle on the session (keepalive, own-node watches),
    /// aborted when this value is dropped or the session closed, so that the session can
    /// close.
    tasks: Mutex<Vec<Abort>>,
    /// Background releases: aborted only when the session is closed (which removes their
    /// nodes anyway).
    release_tasks: Mutex<Vec<Abort>>,
    pub(crate) id: i64,
    pub(crate) timeout: Duration,
    /// Until when the server cannot have expired this session, renewed by every answer.
    pub(crate) lease: Arc<Lease>,
    pub(crate) state: zk::StateWatcher,
    /// The ACL of the lock paths and lock nodes this session creates.
    acl: NodeAcl,
    /// The ACL of the parents (and chroot) this session creates on the way to a lock path.
    parent_acl: zk::Acls,
    /// The process that opened the session: after a fork, the child has no runtime thread.
    pid: u32,
    handle: Handle,
    releases: Arc<Releases>,
    /// Lock-node creates in flight: while others are, a create does not pipeline a listing
    /// of its own but shares one (see `listing.rs`).
    creating: std::sync::atomic::AtomicUsize,
}

type ZkResult<T> = std::result::Result<T, zk::Error>;
/// The replies to a pipelined create (node name, stat) and listing.
type CreateAndList = (
    ZkResult<(String, NodeStat)>,
    ZkResult<(Vec<String>, NodeStat)>,
);
type Op<T> = std::pin::Pin<Box<dyn std::future::Future<Output = ZkResult<T>> + Send>>;

/// Outcome of [`Session::create_lock_node`].
pub(crate) enum Create {
    /// Created; the listing of the lock path taken right after, and the lock path's own stat
    /// from the same reply, when it could be read.
    Created {
        name: String,
        stat: NodeStat,
        children: Option<Vec<String>>,
        parent: Option<NodeStat>,
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
        if self.check_process().is_err() || self.closed.load(Ordering::SeqCst) {
            return Liveness::Ended;
        }
        match self.state() {
            zk::SessionState::SyncConnected => Liveness::Connected,
            zk::SessionState::Disconnected => Liveness::Disconnected,
            _ => Liveness::Ended,
        }
    }

    pub(crate) fn state(&self) -> zk::SessionState {
        self.state.peek_state()
    }

    pub(crate) fn ended_error(&self) -> Error {
        if let Err(forked) = self.check_process() {
            return forked;
        }
        if self.closed.load(Ordering::SeqCst) {
            return Error::Closed;
        }
        match self.state() {
            zk::SessionState::AuthFailed => Error::AuthFailed,
            zk::SessionState::Closed => Error::Closed,
            _ => Error::SessionExpired,
        }
    }

    /// Waits until the session is connected, the session ends (error) or `deadline` passes
    /// ([`Error::ConnectionLoss`]).
    pub(crate) async fn wait_connected_async(&self, deadline: Option<Instant>) -> Result<()> {
        self.check_process()?;
        let mut state = self.state.clone();
        loop {
            // Check before waiting: `changed()` never returns once the state is terminal.
            match state.state() {
                s if s.is_terminated() => return Err(self.ended_error()),
                zk::SessionState::SyncConnected => return Ok(()),
                _ => {}
            }
            if until(Box::pin(state.changed()), deadline).await.is_err() {
                return Err(gave_up_waiting());
            }
        }
    }

    /// Waits until the session is no longer connected (`true`) or `deadline` passes (`false`).
    pub(crate) async fn wait_disconnected_async(&self, deadline: Option<Instant>) -> bool {
        if self.check_process().is_err() {
            return true;
        }
        let mut state = self.state.clone();
        loop {
            // Consume the current state first, so no change between check and wait is missed.
            let current = state.state();
            if !matches!(current, zk::SessionState::SyncConnected) {
                return true;
            }
            if until(Box::pin(state.changed()), deadline).await.is_err() {
                return false;
            }
        }
    }

    /// A handle to send requests with; [`Error::Closed`] once the session is closed.
    fn zk(&self) -> Result<zk::Client> {
        self.check_process()?;
        let handles = self.handles.lock();
        handles.as_ref().map(|h| h.zk.clone()).ok_or(Error::Closed)
    }

    fn chroot(&self) -> Option<Chroot> {
        self.handles.lock().as_ref().and_then(|h| h.chroot.clone())
    }

    /// Runs `task` on the runtime, aborted when the session closes.
    fn spawn(
        &self,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> JoinHandle<()> {
        let handle = self.handle.spawn(task);
        let mut tasks = self.tasks.lock();
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle.abort_handle());
        handle
    }

    fn abort_tasks(&self, releases_too: bool) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
        if releases_too {
            for task in self.release_tasks.lock().drain(..) {
                task.abort();
            }
        }
    }

    /// Closes the session: from now on every request fails with [`Error::Closed`], and
    /// CloseSession goes to the server at once, which removes the session's ephemeral nodes.
    /// Returns without waiting for the answer; see [`wait_ended`](Self::wait_ended).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.abort_tasks(true);
        if let Some(handles) = self.handles.lock().take() {
            handles.zk.close();
            *self.closing.lock() = Some(handles.zk);
        }
    }

    /// Waits until the session has ended or `deadline`; `true` if it has, and, when it ended by
    /// [`close`](Self::close), only if the server confirmed the close (else it lives on there
    /// until it expires).
    pub(crate) fn wait_ended(&self, deadline: Instant) -> bool {
        let mut state = self.state_watcher();
        let ended = Box::pin(async move {
            while !state.state().is_terminated() {
                state.changed().await;
            }
        });
        if !crate::cancel::shielded(|| block_on(ended, Some(deadline)).is_ok()) {
            return false;
        }
        let closing = self.closing.lock().clone();
        // The session's thread ends right after: wait for it, so that no thread outlives a
        // closed client.
        if let Some(zk) = &closing {
            zk.join_io(deadline);
        }
        match (self.state(), closing) {
            (zk::SessionState::Closed, Some(zk)) => zk.close_confirmed(),
            _ => true,
        }
    }

    /// `Err(Error::Forked)` in a child forked after the session was opened: its runtime thread
    /// did not survive the fork, so no request could ever be answered.
    pub(crate) fn check_process(&self) -> Result<()> {
        if std::process::id() == self.pid {
            Ok(())
        } else {
            Err(Error::Forked)
        }
    }

    /// Runs `op` until the server answers it, retrying across reconnects until `deadline`.
    ///
    /// Only for requests that may run more than once: reads, and the writes whose doc says why
    /// a repeat is harmless. Any other write must handle an unknown outcome itself.
    fn retry<T: Send + 'static>(
        &self,
        path: &str,
        deadline: Option<Instant>,
        seen: Seen,
        op: impl Fn(zk::Client, String) -> Op<T>,
    ) -> Result<T> {
        blocking(self.retry_async(path, deadline, seen, op))
    }

    /// As [`retry`](Self::retry), awaited.
    async fn retry_async<T: Send + 'static>(
        &self,
        path: &str,
        deadline: Option<Instant>,
        seen: Seen,
        op: impl Fn(zk::Client, String) -> Op<T>,
    ) -> Result<T> {
        self.check_process()?;
        loop {
            let sent = Instant::now();
            let outcome = until(op(self.zk()?, path.to_owned()), deadline).await;
            if let (Ok(answer), Seen::ByLeader) = (&outcome, seen) {
                self.answered(sent, answer);
            }
            match outcome {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) if outcome_unknown(&err) => {
                    debug!("request on {path} failed without an answer ({err}); retrying");
                    self.pause_before_retry_async(deadline).await?;
                }
                Ok(Err(err)) => return Err(Error::from_zk(err, path)),
                Err(_) => return Err(gave_up_waiting()),
            }
        }
    }

    /// Renews the lease if `outcome`, of a request sent at `sent` that the leader processes
    /// (a write or a sync; see [`Seen`]), is the server's answer.
    fn answered<T>(&self, sent: Instant, outcome: &ZkResult<T>) {
        if proves_alive(outcome) {
            self.lease.renew(sent);
        }
    }

    /// Before repeating a request that got no answer: back off briefly if the connection
    /// survived (throttled, or a transient fault), then wait for it to be up.
    async fn pause_before_retry_async(&self, deadline: Option<Instant>) -> Result<()> {
        if self.liveness() == Liveness::Connected {
            crate::runtime::sleep(RETRY_PAUSE).await;
        }
        self.wait_connected_async(deadline).await
    }

    /// Makes the server we are connected to catch up with the leader on `path`, so that a
    /// read after it sees every write committed before it (ours from an earlier connection,
    /// in particular: a follower we reconnected to may lag). A read; retried.
    pub(crate) async fn sync_async(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.retry_async(path, deadline, Seen::ByLeader, |zk, p| {
            Box::pin(async move { zk.sync(&p).await })
        })
        .await
    }

    /// The children of `path` and its stat (getChildren2); `NoNode` as an error.
    pub(crate) async fn list_with_stat_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, NodeStat)> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                zk.get_children(&p)
                    .await
                    .map(|(children, stat)| (children, NodeStat::from(&stat)))
            })
        })
        .await
    }

    /// The children of `path`; `NoNode` as an error.
    pub(crate) fn list(&self, path: &str, deadline: Option<Instant>) -> Result<Vec<String>> {
        blocking(self.list_async(path, deadline))
    }

    /// As [`list`](Self::list), awaited.
    pub(crate) async fn list_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Vec<String>> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move { zk.list_children(&p).await })
        })
        .await
    }

    /// Whether `path` exists (needs no permission on it, unlike reading its data).
    pub(crate) async fn exists_async(&self, path: &str, deadline: Option<Instant>) -> Result<bool> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move { zk.check_stat(&p).await.map(|stat| stat.is_some()) })
        })
        .await
    }

    /// Data and stat of `path`, `None` if it does not exist.
    pub(crate) fn get_data(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeData>> {
        blocking(self.get_data_async(path, deadline))
    }

    /// As [`get_data`](Self::get_data), awaited.
    pub(crate) async fn get_data_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeData>> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_data(&p).await {
                    Ok((data, stat)) => Ok(Some((data, NodeStat::from(&stat)))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
        .await
    }

    /// Data and stat of each of `paths` under `parent` (`None` for a missing one). The reads
    /// are sent back to back and awaited together: one round trip, not one per node.
    pub(crate) fn get_data_many(
        &self,
        parent: &str,
        names: &[&str],
        deadline: Option<Instant>,
    ) -> Result<Vec<Option<NodeData>>> {
        let paths: Vec<String> = names
            .iter()
            .map(|name| format!("{parent}/{name}"))
            .collect();
        self.retry(parent, deadline, Seen::ByServer, move |zk, _| {
            let paths = paths.clone();
            Box::pin(async move {
                let replies: Vec<_> = paths.iter().map(|p| zk.get_data(p)).collect();
                let mut found = Vec::with_capacity(replies.len());
                for reply in replies {
                    found.push(match reply.await {
                        Ok((data, stat)) => Some((data, NodeStat::from(&stat))),
                        Err(zk::Error::NoNode) => None,
                        Err(err) => return Err(err),
                    });
                }
                Ok(found)
            })
        })
    }

    /// Creates the lock path `path` and its missing ancestors as container nodes (the server
    /// removes them once they are empty, so lock parents do not pile up). The lock path gets
    /// the lock ACL; the ancestors the parent ACL, so that one identity's creator-only lock
    /// does not close a shared parent to every other identity.
    ///
    /// Retry rule: repeated freely. It only creates what is missing, and a node that exists
    /// already is what was asked for.
    pub(crate) async fn ensure_path_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let Some(parent) = crate::path::parent(path) else {
            let acl = self.acl.acls();
            return self
                .mkdir_async(path, zk::CreateMode::Container, acl, deadline)
                .await;
        };
        let acl = self.acl;
        let mut swept = 0;
        loop {
            self.mkdir_async(parent, zk::CreateMode::Container, self.parent_acl, deadline)
                .await?;
            // The lock path alone, not `mkdir -p`: had the sweep removed the parent again in
            // between, `mkdir -p` would recreate it with the lock's ACL.
            let created = self
                .retry_async(path, deadline, Seen::ByLeader, move |zk, p| {
                    Box::pin(async move {
                        let options = zk::CreateMode::Container.with_acls(acl.acls());
                        match zk.create(&p, &[], &options).await {
                            Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                            Err(err) => Err(err),
                        }
                    })
                })
                .await;
            match created {
                Err(Error::NoNode { .. }) if swept < PARENT_SWEPT_RETRIES => swept += 1,
                outcome => return outcome,
            }
        }
    }

    /// `mkdir -p`, recreating the chroot first if it has been deleted.
    fn mkdir(
        &self,
        path: &str,
        mode: zk::CreateMode,
        acl: zk::Acls,
        deadline: Option<Instant>,
    ) -> Result<()> {
        blocking(self.mkdir_async(path, mode, acl, deadline))
    }

    /// As [`mkdir`](Self::mkdir), awaited.
    async fn mkdir_async(
        &self,
        path: &str,
        mode: zk::CreateMode,
        acl: zk::Acls,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let write = || {
            self.retry_async(path, deadline, Seen::ByLeader, move |zk, p| {
                Box::pin(async move { zk.mkdir(&p, &mode.with_acls(acl)).await })
            })
        };
        match write().await {
            Err(Error::NoNode { .. }) if self.chroot().is_some() => {
                self.recreate_chroot(deadline).await?;
                write().await
            }
            outcome => outcome,
        }
    }

    /// Creates the chroot again, which someone deleted.
    async fn recreate_chroot(&self, deadline: Option<Instant>) -> Result<()> {
        let Some(chroot) = self.chroot() else {
            return Ok(());
        };
        warn!("chroot {} is gone; creating it again", chroot.path);
        let parent_acl = self.parent_acl;
        self.retry_async(&chroot.path, deadline, Seen::ByLeader, |_, _| {
            chroot.create(parent_acl)
        })
        .await
    }

    /// Runs `write`; if it fails with NoNode because even the chroot is missing (someone
    /// deleted it), creates the chroot again and runs `write` once more.
    fn in_chroot<T>(&self, deadline: Option<Instant>, write: impl Fn() -> Result<T>) -> Result<T> {
        match write() {
            Err(Error::NoNode { .. }) if self.chroot().is_some() => {
                blocking(self.recreate_chroot(deadline))?;
                write()
            }
            outcome => outcome,
        }
    }

    /// Deletes `path` only if it is still the node created at zxid `czxid` with data version
    /// `version`: `Ok(true)` once it is gone after our delete, `Ok(false)` if the server says
    /// it was gone before, [`Error::NodeChanged`] if it changed.
    ///
    /// Retry rule: a delete whose reply was lost is never simply repeated (the repeat would
    /// find the node gone and report it as gone before). The node is read again: unchanged,
    /// the delete did not happen and is sent again; absent, it is gone after our request
    /// (ours, or its owner's release: either way what was asked); changed, refused.
    pub(crate) fn delete_if_unchanged(
        &self,
        path: &str,
        czxid: i64,
        version: i32,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        blocking(self.delete_if_unchanged_async(path, czxid, version, deadline))
    }

    /// As [`delete_if_unchanged`](Self::delete_if_unchanged), awaited.
    async fn delete_if_unchanged_async(
        &self,
        path: &str,
        czxid: i64,
        version: i32,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        self.check_process()?;
        loop {
            let zk = self.zk()?;
            let target = path.to_owned();
            let op: Op<()> = Box::pin(async move { zk.delete(&target, Some(version)).await });
            let sent = Instant::now();
            let outcome = until(op, deadline).await;
            if let Ok(answer) = &outcome {
                self.answered(sent, answer);
            }
            match outcome {
                Ok(Ok(())) => return Ok(true),
                Ok(Err(zk::Error::NoNode)) => return Ok(false),
                Ok(Err(err)) if outcome_unknown(&err) => {
                    debug!("delete of {path} got no answer ({err}); reading it again");
                    self.pause_before_retry_async(deadline).await?;
                    self.sync_async(path, deadline).await?;
                    match self.get_data_async(path, deadline).await? {
                        None => return Ok(true),
                        Some((_, stat)) if stat.czxid == czxid && stat.version == version => {}
                        Some(_) => {
                            return Err(Error::NodeChanged {
                                path: path.to_owned(),
                            })
                        }
                    }
                }
                Ok(Err(err)) => return Err(Error::from_zk(err, path)),
                Err(_) => {
                    return Err(Error::OutcomeUnknown {
                        path: path.to_owned(),
                    })
                }
            }
        }
    }

    /// Writes `data` into `path` if it exists: `Ok(false)` if it does not.
    ///
    /// Retry rule: repeated freely. It is used for Curator's revocation marker on a lock node,
    /// whose protected name is never reused: writing the marker twice asks the same holder the
    /// same thing.
    pub(crate) fn set_existing(
        &self,
        path: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let data = data.to_vec();
        self.retry(path, deadline, Seen::ByLeader, move |zk, p| {
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
    pub(crate) fn watch_own_node(&self, path: &str) -> Result<OwnNodeWatch> {
        let flags = Arc::new(NodeFlags::default());
        let (zk, path, raise) = (self.zk()?, path.to_owned(), flags.clone());
        let state = self.state_watcher();
        let task = self.spawn(OwnNodeWatch::watch(zk, path, state, raise));
        Ok(OwnNodeWatch::new(flags, task))
    }

    /// Creates or overwrites a persistent node (missing parents are created persistent too).
    ///
    /// Retry rule: repeated freely. The write is unconditional, so a repeat leaves the same
    /// data as a single write applied at the later moment would.
    pub(crate) fn put(&self, path: &str, data: &[u8], deadline: Option<Instant>) -> Result<()> {
        if let Some(parent) = crate::path::parent(path) {
            self.mkdir(
                parent,
                zk::CreateMode::Persistent,
                self.parent_acl,
                deadline,
            )?;
        }
        let acl = self.acl;
        self.in_chroot(deadline, || {
            let data = data.to_vec();
            self.retry(path, deadline, Seen::ByLeader, move |zk, p| {
                let data = data.clone();
                Box::pin(async move {
                    let options = zk::CreateMode::Persistent.with_acls(acl.acls());
                    match zk.set_data(&p, &data, None).await {
                        Err(zk::Error::NoNode) => {}
                        other => return other.map(drop),
                    }
                    match zk.create(&p, &data, &options).await {
                        Err(zk::Error::NodeExists) => zk.set_data(&p, &data, None).await.map(drop),
                        other => other.map(drop),
                    }
                })
            })
        })
    }

    /// Creates the ephemeral sequential node `prefix` + sequence and, pipelined behind it on the
    /// same session, lists `lock_path`. ZooKeeper executes one session's requests in order, so
    /// the listing contains our node and every node created before it. Dropped before the create is
    /// answered (a dropped future, or the deadline), the node it may still make is deleted in
    /// the background.
    pub(crate) async fn create_lock_node_async(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Create> {
        self.check_process()?;
        let (zk, acl) = (self.zk()?, self.acl);
        let (node_prefix, list_path, data) = (
            format!("{lock_path}/{prefix}"),
            lock_path.to_owned(),
            data.to_vec(),
        );
        // Alone, the create pipelines its listing (one round trip); among others, a listing
        // each would cost O(N²) bytes, so they share listings sent after their creates.
        let _creating = Creating::begin(&self.creating);
        let with_listing = _creating.alone;
        let op: Op<CreateAndList> = Box::pin(async move {
            let options = zk::CreateMode::EphemeralSequential.with_acls(acl.acls());
            // Both requests are sent here, before the first await.
            let create = zk.create(&node_prefix, &data, &options);
            // getChildren2: the lock path's stat comes with the listing, at no extra cost.
            let list = with_listing.then(|| zk.get_children(&list_path));
            let created = create.await.map(|(stat, created)| {
                let name = created.rsplit('/').next().unwrap_or_default().to_owned();
                (name, NodeStat::from(&stat))
            });
            let listed = match list {
                Some(list) => list
                    .await
                    .map(|(children, stat)| (children, NodeStat::from(&stat))),
                None => Err(zk::Error::ConnectionLoss), // Not asked: listed apart.
            };
            Ok((created, listed))
        });
        let mut pending = PendingCreate {
            session: self,
            lock_path,
            prefix,
            op: Some(op),
        };
        let sent = Instant::now();
        let outcome = match pending.op.as_mut() {
            Some(op) => until(op, deadline).await.ok(),
            None => None,
        };
        let Some(outcome) = outcome else {
            drop(pending); // The create may still execute after the connection returns.
            return Ok(Create::TimedOut);
        };
        pending.op = None;
        if let Ok((answer, _)) = &outcome {
            self.answered(sent, answer);
        }
        match outcome {
            Ok((Ok((name, stat)), listing)) => {
                let (children, parent) = listing.ok().unzip();
                Ok(Create::Created {
                    name,
                    stat,
                    children,
                    parent,
                })
            }
            Ok((Err(err), _)) if outcome_unknown(&err) => Ok(Create::Unknown),
            Ok((Err(zk::Error::NoNode), _)) => Ok(Create::ParentMissing),
            Ok((Err(err), _)) => Err(Error::from_zk(err, lock_path)),
            Err(err) => Err(Error::from_zk(err, lock_path)),
        }
    }

    /// Sets a watch on `path` (getData-and-watch: an exists watch on a node deleted meanwhile
    /// would never fire). `None` if the node does not exist. Dropping the watcher removes the
    /// watch from the server.
    pub(crate) async fn watch_node_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<zk::OneshotWatcher>> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_and_watch_data(&p).await {
                    Ok((_, _, watcher)) => Ok(Some(watcher)),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
        .await
    }

    /// Lists `path` and sets a child watch on it.
    pub(crate) async fn watch_children_async(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, zk::OneshotWatcher)> {
        self.retry_async(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                zk.get_and_watch_children(&p)
                    .await
                    .map(|(children, _, watcher)| (children, watcher))
            })
        })
        .await
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
    /// Dropped before the delete is
    /// answered, it goes on in the background.
    pub(crate) async fn delete_node_async(&self, path: &str, wait: Duration) -> Result<bool> {
        if self.liveness() == Liveness::Ended {
            return Err(self.ended_error());
        }
        let zk = self.zk()?;
        let target = path.to_owned();
        let op: Op<()> = Box::pin(async move { zk.delete(&target, None).await });
        let deadline = if self.liveness() == Liveness::Connected {
            Instant::now() + wait
        } else {
            Instant::now()
        };
        let mut pending = PendingDelete {
            session: self,
            path,
            op: Some(op),
        };
        let sent = Instant::now();
        let outcome = match pending.op.as_mut() {
            Some(op) => until(op, Some(deadline)).await.ok(),
            None => None,
        };
        if let Some(answer) = &outcome {
            self.answered(sent, answer);
        }
        match outcome {
            Some(Ok(())) => {
                pending.op = None;
                return Ok(true);
            }
            Some(Err(zk::Error::NoNode)) => {
                pending.op = None;
                return Ok(false);
            }
            Some(Err(err)) if !outcome_unknown(&err) => {
                pending.op = None;
                return Err(Error::from_zk(err, path));
            }
            Some(Err(_)) => pending.op = None,
            None => {}
        }
        warn!(
            "delete of {path} (session {:#x}) not confirmed; retrying in the background",
            self.id
        );
        if self.zk().is_err() {
            return Err(Error::Closed); // The node goes with the session.
        }
        // Whether the delete went out or failed unsent, retried until the node is gone.
        let sent = pending.op.take();
        self.delete_in_background(path, sent);
        Err(Error::ConnectionLoss)
    }

    /// Deletes `path` in the background after `pending` (a delete already sent, if any)
    /// ends without an answer: until the node is gone or the session has ended.
    fn delete_in_background(&self, path: &str, pending: Option<Op<()>>) {
        let Ok(zk) = self.zk() else {
            return; // Closed: the node goes with the session.
        };
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
    }

    /// Withdraws our node `path` without waiting: deleted in the background until it is gone
    /// or the session has ended. `done` is dropped once that is settled.
    pub(crate) fn withdraw_in_background(&self, path: &str, done: impl Send + 'static) {
        let Ok(zk) = self.zk() else {
            return; // Closed: the node goes with the session.
        };
        let target = path.to_owned();
        self.spawn_release(async move {
            delete_until_gone(&zk, &target).await;
            drop(done);
        });
    }

    /// Deletes every child of `lock_path` whose name starts with `prefix`, in the background,
    /// once the connection allows (used after a create whose outcome is unknown was abandoned).
    pub(crate) fn sweep_in_background(&self, lock_path: &str, prefix: &str) {
        let Ok(zk) = self.zk() else {
            return; // Closed: the nodes go with the session.
        };
        let (lock_path, prefix) = (lock_path.to_owned(), prefix.to_owned());
        self.spawn_release(async move { sweep(&zk, &lock_path, &prefix).await });
    }

    /// Runs a background release on the runtime: it outlives this `Session` value (it ends
    /// with the node gone or the session), and is aborted only when the session is closed.
    fn spawn_release(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let token = self.releases.begin();
        let handle = self.handle.spawn(async move {
            task.await;
            drop(token);
        });
        let mut releases = self.release_tasks.lock();
        releases.retain(|t| !t.is_finished());
        releases.push(handle.abort_handle());
        drop(releases);
        if self.closed.load(Ordering::SeqCst) {
            // Closed while we spawned it: close may have aborted the others already, and
            // this one must not keep the session open.
            handle.abort();
        }
    }
}

/// `op`'s output, or `op` handed back unfinished once `deadline` has passed.
pub(crate) async fn until<F: Future + Unpin>(
    mut op: F,
    deadline: Option<Instant>,
) -> std::result::Result<F::Output, F> {
    let Some(deadline) = deadline else {
        return Ok((&mut op).await);
    };
    let mut timer = crate::runtime::sleep_until(deadline);
    let output = std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = Pin::new(&mut op).poll(cx) {
            return Poll::Ready(Some(output));
        }
        Pin::new(&mut timer).poll(cx).map(|()| None)
    })
    .await;
    output.ok_or(op)
}

/// Runs the operation `op` on the calling thread until it is done: the blocking form of an
/// async operation, bounded by its own deadline. A cancelled token that the thread watches (or
/// its client's closing) stops it, and `op` is dropped, which cleans up what it began.
pub(crate) fn blocking<T>(op: impl Future<Output = Result<T>>) -> Result<T> {
    let mut op = std::pin::pin!(op);
    block_on(op.as_mut(), None).unwrap_or_else(|_| Err(gave_up_waiting()))
}

/// One lock-node create in flight on a session, counted while it lives.
struct Creating<'a> {
    count: &'a std::sync::atomic::AtomicUsize,
    /// No other create was in flight when this one began.
    alone: bool,
}

impl<'a> Creating<'a> {
    fn begin(count: &'a std::sync::atomic::AtomicUsize) -> Creating<'a> {
        let before = count.fetch_add(1, Ordering::SeqCst);
        Creating {
            count,
            alone: before == 0,
        }
    }
}

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A create in flight: dropped before its reply was read, the node it may still make is
/// deleted in the background (or, if its reply is lost, looked for by its prefix).
struct PendingCreate<'a> {
    session: &'a Session,
    lock_path: &'a str,
    prefix: &'a str,
    op: Option<Op<CreateAndList>>,
}

impl Drop for PendingCreate<'_> {
    fn drop(&mut self) {
        let Some(op) = self.op.take() else {
            return;
        };
        let Ok(zk) = self.session.zk() else {
            return; // Closed: the node goes with the session.
        };
        let (lock_path, prefix) = (self.lock_path.to_owned(), self.prefix.to_owned());
        self.session.spawn_release(async move {
            match op.await {
                Ok((Ok((name, _)), _)) => {
                    delete_until_gone(&zk, &format!("{lock_path}/{name}")).await
                }
                Ok((Err(err), _)) if outcome_unknown(&err) => sweep(&zk, &lock_path, &prefix).await,
                _ => {}
            }
        });
    }
}

/// A delete of our node in flight: dropped unanswered, it goes on in the background.
struct PendingDelete<'a> {
    session: &'a Session,
    path: &'a str,
    op: Option<Op<()>>,
}

impl Drop for PendingDelete<'_> {
    fn drop(&mut self) {
        if let Some(op) = self.op.take() {
            self.session.delete_in_background(self.path, Some(op));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Tasks on the runtime hold handles on the session, which closes only once they are
        // gone; background releases end on their own (with the node gone or the session).
        self.abort_tasks(false);
    }
}

/// Retries `delete(path)` until it succeeds, the node is gone, or the session ends.
async fn delete_until_gone(zk: &zk::Client, path: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.delete(path, None).await {
            Ok(()) => {
                io_log!(Debug, "deleted {path} in the background");
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
                io_log!(Debug, "background delete of {path} stopped: {err}");
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
                    io_log!(
                        Warn,
                        "deleting {lock_path}/{child}, left by an abandoned create"
                    );
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

/// Counts background releases so that closing a client can wait for them.
#[derive(Default)]
pub(crate) struct Releases {
    pending: Mutex<usize>,
    idle: Condvar,
    /// Notified whenever the count changes, for the client's state thread (metrics).
    pub(crate) changed: event_listener::Event,
}

struct ReleaseToken(Arc<Releases>);

impl Releases {
    fn begin(self: &Arc<Self>) -> ReleaseToken {
        *self.pending.lock() += 1;
        self.changed.notify(usize::MAX);
        ReleaseToken(self.clone())
    }

    /// How many releases are being retried in the background.
    pub(crate) fn pending(&self) -> usize {
        *self.pending.lock()
    }

    /// Waits until no release is pending; `false` if `deadline` passed first.
    pub(crate) fn wait_idle(&self, deadline: Instant) -> bool {
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
        // Runs on the runtime thread: a notification only, never blocking.
        self.0.changed.notify(usize::MAX);
    }
}

/// One operation of a transaction ([`Session::multi`]).
#[derive(Debug, Clone)]
pub(crate) enum TxnOp {
    /// Succeeds only if `path` exists and, if `version` is given, has that data version.
    Check {
        path: String,
        version: Option<i32>,
    },
    /// Creates a persistent node with the session's ACL.
    Create {
        path: String,
        data: Vec<u8>,
    },
    /// Creates an empty persistent node on the way to another, with the parent ACL (as
    /// [`Session::put`] does), so one identity's fenced write does not close a shared parent
    /// to the others.
    CreateParent {
        path: String,
    },
    SetData {
        path: String,
        data: Vec<u8>,
    },
    Delete {
        path: String,
    },
}

impl TxnOp {
    pub(crate) fn path(&self) -> &str {
        match self {
            TxnOp::Check { path, .. }
            | TxnOp::Create { path, .. }
            | TxnOp::CreateParent { path }
            | TxnOp::SetData { path, .. }
            | TxnOp::Delete { path } => path,
        }
    }
}

/// How a transaction ended, when the server answered or the request stayed unsent.
#[derive(Debug)]
pub(crate) enum TxnOutcome {
    /// Every operation was applied.
    Committed,
    /// The server refused operation `index` with `error` (typed for that operation's path);
    /// nothing of the transaction was applied.
    Refused { index: usize, error: Error },
    /// The request was sent but its reply was lost (connection dropped, or the deadline passed
    /// first): it may or may not have been applied, and one abandoned at the deadline may still
    /// be applied later, as the server finds the state then.
    Unknown,
}

impl Session {
    /// Sends `ops` as one ZooKeeper `multi`: the server applies all of them or none.
    ///
    /// Never resends a request that may have reached the server: only a throttled one (refused
    /// unexecuted). Blocks until a reply or `deadline`; the request is issued only once the
    /// session is connected, so [`Error::ConnectionLoss`] means nothing was sent. Other errors
    /// (session expired, client closed) are definite: nothing was applied.
    ///
    /// Dropped after the request was sent, its outcome stays unknown, as one abandoned at the
    /// deadline.
    pub(crate) async fn multi_async(
        &self,
        ops: &[TxnOp],
        deadline: Option<Instant>,
    ) -> Result<TxnOutcome> {
        let first_path = ops.first().map_or("", TxnOp::path);
        loop {
            // A request queued while disconnected would be sent whenever the connection
            // returns, long after the caller gave up: send only on a live connection.
            self.wait_connected_async(deadline).await?;
            let (zk, acl, parent_acl) = (self.zk()?, self.acl, self.parent_acl);
            let requests: Vec<zk::TxnRequest> = ops
                .iter()
                .map(|op| match op.clone() {
                    TxnOp::Check { path, version } => zk::TxnRequest::Check {
                        path,
                        version: version.unwrap_or(-1),
                    },
                    TxnOp::CreateParent { path } => zk::TxnRequest::Create {
                        path,
                        data: Vec::new(),
                        options: zk::CreateMode::Persistent.with_acls(parent_acl),
                    },
                    TxnOp::Create { path, data } => zk::TxnRequest::Create {
                        path,
                        data,
                        options: zk::CreateMode::Persistent.with_acls(acl.acls()),
                    },
                    TxnOp::SetData { path, data } => zk::TxnRequest::SetData {
                        path,
                        data,
                        version: -1,
                    },
                    TxnOp::Delete { path } => zk::TxnRequest::Delete { path, version: -1 },
                })
                .collect();
            // The request is on the wire when `multi` returns; the lease counts from before.
            let sent = Instant::now();
            let request = zk.multi(&requests);
            let outcome = until(request, deadline).await;
            if let Ok(Ok(_)) = &outcome {
                self.lease.renew(sent); // The leader ran (or refused) the transaction.
            }
            match outcome {
                Ok(Ok(None)) => return Ok(TxnOutcome::Committed),
                Ok(Ok(Some((index, source)))) => {
                    let path = ops.get(index).map_or(first_path, TxnOp::path);
                    return Ok(TxnOutcome::Refused {
                        index,
                        error: Error::from_zk(source, path),
                    });
                }
                Ok(Err(zk::Error::Throttled)) => {
                    debug!("transaction on {first_path} throttled by the server; retrying");
                    crate::runtime::sleep(RETRY_PAUSE).await;
                }
                Ok(Err(source)) if outcome_unknown(&source) => {
                    warn!(
                        "transaction on {first_path} (session {:#x}) sent, reply lost: {source}",
                        self.id
                    );
                    return Ok(TxnOutcome::Unknown);
                }
                Ok(Err(source)) => return Err(Error::from_zk(source, first_path)),
                Err(_abandoned) => {
                    warn!("transaction on {first_path} (session {:#x}) unanswered at the deadline; it may still be applied", self.id);
                    return Ok(TxnOutcome::Unknown);
                }
            }
        }
    }
}

#[cfg(test)]
impl Session {
    /// Blocks the runtime thread and the session's I/O thread for `stall`, as a blocking call
    /// on them (or a stopped process) would: no keepalive, no pings, no replies read.
    pub(crate) fn stall_runtime_for_tests(&self, stall: Duration) {
        if let Ok(zk) = self.zk() {
            zk.stall_io_for_tests(stall);
        }
        self.handle.spawn(async move { std::thread::sleep(stall) });
    }

    /// Ends this session from the server's side, as an expiry would: with our runtime thread
    /// held up (so our client cannot win the session back), a second connection takes the
    /// session over and closes it. Returns once this client has seen the session expire.
    pub(crate) fn expire_for_tests(&self, hosts: &str) {
        let zk = self.zk().unwrap();
        // Our client must not win the session back between the takeover and the close.
        zk.hold_reconnects_for_tests(Duration::from_secs(2));
        let (id, password) = zk.session();
        let thief = zk::Connector::new()
            .resume(id, password)
            .connect(hosts, Instant::now() + Duration::from_secs(10))
            .expect("take the session over");
        thief.close(); // CloseSession ends the session on the server.
        drop(thief);
        let mut state = self.state_watcher();
        let ended = Box::pin(async move {
            while !state.state().is_terminated() {
                state.changed().await;
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        assert!(
            block_on(ended, Some(deadline)).is_ok(),
            "session never ended"
        );
        assert_eq!(
            self.state(),
            zk::SessionState::Expired,
            "the session ended otherwise"
        );
    }
}
