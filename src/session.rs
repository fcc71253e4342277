//! `Session`: one ZooKeeper session and every request zklock makes through it.
//!
//! Everything zklock asks of ZooKeeper goes through this module, so the recipes never see the
//! client crate's types and the transport can be replaced without touching them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::wire as zk;
use log::{debug, warn};
use parking_lot::{Condvar, Mutex};

use crate::error::{outcome_unknown, Error, Result};
use crate::lease::Lease;
use crate::rt::relay::io_log;
use crate::rt::runtime::{block_on, deadline_after, Abort, Handle, JoinHandle, Runtime};
use crate::security::{NodeAcl, Security};
use crate::watch::{
    retry_pause_async, FollowUp, Leftover, NodeFlags, NodeWatch, OwnNodeWatch, Signal, RETRY_PAUSE,
};
use crate::znode::layout::{nodes_ahead, LockNode};

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
            crate::rt::runtime::sleep_until(due).await;
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
    crate::rt::cancel::interruption().unwrap_or(Error::ConnectionLoss)
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
}

type ZkResult<T> = std::result::Result<T, zk::Error>;
/// The replies to a pipelined create (node name, stat) and listing.
type CreateAndList = (
    ZkResult<(String, NodeStat)>,
    ZkResult<(Vec<String>, NodeStat)>,
);
type Op<T> = std::pin::Pin<Box<dyn std::future::Future<Output = ZkResult<T>> + Send>>;

/// The request a waiter sends as soon as the node it waits for is deleted (see
/// [`Session::watch_node`]): sent from the runtime the moment the deletion is notified, on the
/// same session, so its reply reflects the queue as it is after the deletion.
#[derive(Debug, Clone)]
pub(crate) enum Then {
    /// List the lock path and keep the lock nodes ahead of `ours` (see
    /// [`nodes_ahead`]): the waiter is woken with the short answer, and the listing is freed
    /// after it is woken.
    Queue {
        path: String,
        ours: LockNode,
        lock_names: Vec<&'static str>,
        /// Sift the listing on the runtime thread. Not for readers: all readers waiting on
        /// one writer wake together, and each sifts its own listing on its own thread rather
        /// than all of them one after another on the runtime thread.
        on_runtime: bool,
    },
    /// Read our own node's stat.
    ReadOwn(String),
}

/// The reply to a [`Then`] request, once the deletion it followed was notified.
#[derive(Debug)]
pub(crate) enum Prefetched {
    /// The nodes ahead of ours, in order; `None` if our node is not in the queue.
    Ahead(Option<Vec<LockNode>>),
    /// The listing, for the waiter to sift.
    Listing(Vec<String>),
    /// Our node's stat, `None` if it is gone.
    Own(Option<NodeStat>),
}

/// Where a [`Then`] request's reply lands; empty if there was none (or it failed: the waiter
/// then sends the request itself).
#[derive(Default, Clone)]
pub(crate) struct Prefetch(Arc<Mutex<Option<Prefetched>>>);

impl Prefetch {
    pub(crate) fn take(&self) -> Option<Prefetched> {
        self.0.lock().take()
    }
}

impl Then {
    fn follow_up(self, zk: zk::Client, slot: Prefetch) -> FollowUp {
        Box::new(move || {
            Box::pin(async move {
                let mut leftover: Leftover = None;
                let reply = match self {
                    Then::Queue {
                        path,
                        ours,
                        lock_names,
                        on_runtime,
                    } => zk.list_children(&path).await.map(|children| {
                        if !on_runtime {
                            return Prefetched::Listing(children);
                        }
                        let ahead = nodes_ahead(&children, &ours, &lock_names);
                        leftover = Some(Box::new(children));
                        Prefetched::Ahead(ahead)
                    }),
                    Then::ReadOwn(path) => zk
                        .check_stat(&path)
                        .await
                        .map(|stat| Prefetched::Own(stat.as_ref().map(NodeStat::from))),
                };
                if let Ok(reply) = reply {
                    *slot.0.lock() = Some(reply);
                }
                leftover
            })
        })
    }
}

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

    /// Blocks until the session is connected, the session ends (error) or `deadline` passes
    /// ([`Error::ConnectionLoss`]).
    pub(crate) fn wait_connected(&self, deadline: Option<Instant>) -> Result<()> {
        self.check_process()?;
        let mut state = self.state.clone();
        loop {
            // Check before waiting: `changed()` never returns once the state is terminal.
            match state.state() {
                s if s.is_terminated() => return Err(self.ended_error()),
                zk::SessionState::SyncConnected => return Ok(()),
                _ => {}
            }
            if block_on(Box::pin(state.changed()), deadline).is_err() {
                return Err(gave_up_waiting());
            }
        }
    }

    /// Blocks until the session is no longer connected (`true`) or `deadline` passes (`false`).
    pub(crate) fn wait_disconnected(&self, deadline: Option<Instant>) -> bool {
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
            if block_on(Box::pin(state.changed()), deadline).is_err() {
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
        if !crate::rt::cancel::shielded(|| block_on(ended, Some(deadline)).is_ok()) {
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
        self.check_process()?;
        loop {
            let sent = Instant::now();
            let outcome = block_on(op(self.zk()?, path.to_owned()), deadline);
            if let (Ok(answer), Seen::ByLeader) = (&outcome, seen) {
                self.answered(sent, answer);
            }
            match outcome {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) if outcome_unknown(&err) => {
                    debug!("request on {path} failed without an answer ({err}); retrying");
                    self.pause_before_retry(deadline)?;
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
    fn pause_before_retry(&self, deadline: Option<Instant>) -> Result<()> {
        if self.liveness() == Liveness::Connected {
            std::thread::sleep(RETRY_PAUSE);
        }
        self.wait_connected(deadline)
    }

    /// Makes the server we are connected to catch up with the leader on `path`, so that a
    /// read after it sees every write committed before it (ours from an earlier connection,
    /// in particular: a follower we reconnected to may lag). A read; retried.
    pub(crate) fn sync(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.retry(path, deadline, Seen::ByLeader, |zk, p| {
            Box::pin(async move { zk.sync(&p).await })
        })
    }

    /// The children of `path`; `NoNode` as an error.
    pub(crate) fn list(&self, path: &str, deadline: Option<Instant>) -> Result<Vec<String>> {
        self.retry(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move { zk.list_children(&p).await })
        })
    }

    /// Whether `path` exists (needs no permission on it, unlike reading its data).
    pub(crate) fn exists(&self, path: &str, deadline: Option<Instant>) -> Result<bool> {
        self.retry(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move { zk.check_stat(&p).await.map(|stat| stat.is_some()) })
        })
    }

    /// Data and stat of `path`, `None` if it does not exist.
    pub(crate) fn get_data(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeData>> {
        self.retry(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_data(&p).await {
                    Ok((data, stat)) => Ok(Some((data, NodeStat::from(&stat)))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
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
    pub(crate) fn ensure_path(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        let Some(parent) = crate::znode::path::parent(path) else {
            return self.mkdir(path, zk::CreateMode::Container, self.acl.acls(), deadline);
        };
        let acl = self.acl;
        let mut swept = 0;
        loop {
            self.mkdir(parent, zk::CreateMode::Container, self.parent_acl, deadline)?;
            // The lock path alone, not `mkdir -p`: had the sweep removed the parent again in
            // between, `mkdir -p` would recreate it with the lock's ACL.
            let created = self.retry(path, deadline, Seen::ByLeader, move |zk, p| {
                Box::pin(async move {
                    let options = zk::CreateMode::Container.with_acls(acl.acls());
                    match zk.create(&p, &[], &options).await {
                        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                        Err(err) => Err(err),
                    }
                })
            });
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
        self.in_chroot(deadline, || {
            self.retry(path, deadline, Seen::ByLeader, move |zk, p| {
                Box::pin(async move { zk.mkdir(&p, &mode.with_acls(acl)).await })
            })
        })
    }

    /// Runs `write`; if it fails with NoNode because even the chroot is missing (someone
    /// deleted it), creates the chroot again and runs `write` once more.
    fn in_chroot<T>(&self, deadline: Option<Instant>, write: impl Fn() -> Result<T>) -> Result<T> {
        match write() {
            Err(Error::NoNode { .. }) => {
                let Some(chroot) = self.chroot() else {
                    return write();
                };
                warn!("chroot {} is gone; creating it again", chroot.path);
                let parent_acl = self.parent_acl;
                self.retry(&chroot.path, deadline, Seen::ByLeader, |_, _| {
                    chroot.create(parent_acl)
                })?;
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
        self.check_process()?;
        loop {
            let zk = self.zk()?;
            let target = path.to_owned();
            let op: Op<()> = Box::pin(async move { zk.delete(&target, Some(version)).await });
            let sent = Instant::now();
            let outcome = block_on(op, deadline);
            if let Ok(answer) = &outcome {
                self.answered(sent, answer);
            }
            match outcome {
                Ok(Ok(())) => return Ok(true),
                Ok(Err(zk::Error::NoNode)) => return Ok(false),
                Ok(Err(err)) if outcome_unknown(&err) => {
                    debug!("delete of {path} got no answer ({err}); reading it again");
                    self.pause_before_retry(deadline)?;
                    self.sync(path, deadline)?;
                    match self.get_data(path, deadline)? {
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
        if let Some(parent) = crate::znode::path::parent(path) {
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
    /// the listing contains our node and every node created before it.
    pub(crate) fn create_lock_node(
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
        let op: Op<CreateAndList> = Box::pin(async move {
            let options = zk::CreateMode::EphemeralSequential.with_acls(acl.acls());
            // Both requests are sent here, before the first await.
            let create = zk.create(&node_prefix, &data, &options);
            // getChildren2: the lock path's stat comes with the listing, at no extra cost.
            let list = zk.get_children(&list_path);
            let created = create.await.map(|(stat, created)| {
                let name = created.rsplit('/').next().unwrap_or_default().to_owned();
                (name, NodeStat::from(&stat))
            });
            let listed = list
                .await
                .map(|(children, stat)| (children, NodeStat::from(&stat)));
            Ok((created, listed))
        });
        let sent = Instant::now();
        let outcome = block_on(op, deadline);
        if let Ok(Ok((answer, _))) = &outcome {
            self.answered(sent, answer);
        }
        match outcome {
            Ok(Ok((Ok((name, stat)), listing))) => {
                let (children, parent) = listing.ok().unzip();
                Ok(Create::Created {
                    name,
                    stat,
                    children,
                    parent,
                })
            }
            Ok(Ok((Err(err), _))) if outcome_unknown(&err) => Ok(Create::Unknown),
            Ok(Ok((Err(zk::Error::NoNode), _))) => Ok(Create::ParentMissing),
            Ok(Ok((Err(err), _))) => Err(Error::from_zk(err, lock_path)),
            Ok(Err(err)) => Err(Error::from_zk(err, lock_path)),
            Err(pending) => {
                // The create may still execute after the connection returns.
                let Ok(zk) = self.zk() else {
                    return Ok(Create::TimedOut); // Closed: the node goes with the session.
                };
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
        then: Option<Then>,
    ) -> Result<Option<(NodeWatch, Prefetch)>> {
        let watcher = self.retry(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                match zk.get_and_watch_data(&p).await {
                    Ok((_, _, watcher)) => Ok(Some(watcher)),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })?;
        let Some(watcher) = watcher else {
            return Ok(None);
        };
        let prefetch = Prefetch::default();
        let follow_up = match then {
            None => None,
            Some(then) => Some(then.follow_up(self.zk()?, prefetch.clone())),
        };
        let watch = NodeWatch::spawn(
            &self.handle,
            watcher,
            self.state_watcher(),
            signal.clone(),
            follow_up,
        );
        Ok(Some((watch, prefetch)))
    }

    /// Lists `path` and sets a child watch that signals `signal` (like [`watch_node`]
    /// (Self::watch_node) does for one node).
    pub(crate) fn watch_children(
        &self,
        path: &str,
        signal: &Arc<Signal>,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, NodeWatch)> {
        let (children, watcher) = self.retry(path, deadline, Seen::ByServer, |zk, p| {
            Box::pin(async move {
                zk.get_and_watch_children(&p)
                    .await
                    .map(|(children, _, watcher)| (children, watcher))
            })
        })?;
        Ok((
            children,
            NodeWatch::spawn(
                &self.handle,
                watcher,
                self.state_watcher(),
                signal.clone(),
                None,
            ),
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
        let zk = self.zk()?;
        let target = path.to_owned();
        let op: Op<()> = Box::pin(async move { zk.delete(&target, None).await });
        let deadline = if self.liveness() == Liveness::Connected {
            Instant::now() + wait
        } else {
            Instant::now()
        };
        let sent = Instant::now();
        let outcome = block_on(op, Some(deadline));
        if let Ok(answer) = &outcome {
            self.answered(sent, answer);
        }
        let pending = match outcome {
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
        let Ok(zk) = self.zk() else {
            return Err(Error::Closed); // The node goes with the session.
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
        Err(Error::ConnectionLoss)
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
    pub(crate) fn multi(&self, ops: &[TxnOp], deadline: Option<Instant>) -> Result<TxnOutcome> {
        let first_path = ops.first().map_or("", TxnOp::path);
        loop {
            // A request queued while disconnected would be sent whenever the connection
            // returns, long after the caller gave up: send only on a live connection.
            self.wait_connected(deadline)?;
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
            let outcome = block_on(request, deadline);
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
                    std::thread::sleep(RETRY_PAUSE);
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
