//! The session layer: zklock's one owner of "the session". A [`Session`] is one ZooKeeper
//! session of a [`Client`](crate::Client) (replaced by the client when it expires) with
//! everything zklock keeps about it: its lease, its chroot, its ACLs, its background tasks and
//! releases, and every request zklock makes through it. Below it, the transport (`wire`)
//! speaks the protocol on a connection (handshake, reconnects, pings, watch bookkeeping) and
//! reports ZooKeeper's own `KeeperState`; above it, the recipes see only this layer, never the
//! transport's types. The waiting core (`core`) sits below both: it defines the seam this
//! layer implements ([`seam`]) and the words it reports in (`core/session_view.rs`).
//!
//! Where `impl Session` lives, by one rule: this file defines the value and its life (state
//! and [`Liveness`], the wait for a connection, closing, and the retry of repeatable
//! requests); each family of requests adds its own `impl Session` block in the file named
//! after it. Nothing outside this folder adds inherent methods; [`seam`] implements the core's
//! seam for `Session`, from the methods here.
//!
//! - opening a session: [`config`] (what it is opened with, the connect string read),
//!   [`dial`] (connecting within the connect timeout), [`security`] (auth, ACLs, TLS),
//!   [`open`] (chroot, lease, keepalive), [`chroot`];
//! - its requests, one family per file: [`requests`] (reads and repeatable writes),
//!   [`create`] (our lock nodes) with [`listing`] (listings shared by waiters; what they
//!   proved is kept in the core's `Floors`), [`watches`] (the watches a waiter awaits, and a holder's
//!   watch on its own node, followed by [`own_node`]), [`follow`] (the head of a queue,
//!   followed from outside it), [`delete`] (deleting our nodes, retried in the background,
//!   counted by [`releases`]), [`txn`] (transactions);
//! - what it proves: [`lease`] (for how long the server cannot have expired it);
//! - [`errors`]: the transport's errors in zklock's terms, [`op`]: a request on its way, and
//!   [`retry`]: the pause before a request is repeated.

pub(crate) mod chroot;
pub(crate) mod config;
pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod dial;
pub(crate) mod errors;
pub(crate) mod follow;
pub(crate) mod lease;
pub(crate) mod listing;
pub(crate) mod op;
pub(crate) mod open;
pub(crate) mod own_node;
pub(crate) mod paths_seen;
pub(crate) mod releases;
pub(crate) mod requests;
pub(crate) mod retry;
pub(crate) mod seam;
pub(crate) mod security;
pub(crate) mod txn;
pub(crate) mod watches;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::debug;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::{block_on, Abort, Handle, JoinHandle};
// The blocking and timed forms every request of the layer is awaited in.
pub(crate) use crate::rt::runtime::{blocking_or_stop, until};
use crate::wire as zk;

use self::chroot::Chroot;
use self::errors::outcome_unknown;
use self::lease::Lease;
use self::op::{Op, ZkResult};
use self::releases::Releases;
use self::retry::RETRY_PAUSE;
use self::security::NodeAcl;

/// What keeps the session open: the transport closes it once every handle is dropped.
struct Handles {
    zk: zk::Transport,
    chroot: Option<Chroot>,
}

/// One ZooKeeper session of a [`Client`](crate::Client); replaced when it expires.
pub(crate) struct Session {
    /// `None` once closed: every request then fails with [`Error::Closed`].
    handles: Mutex<Option<Handles>>,
    /// Set by [`close`](Self::close).
    closed: AtomicBool,
    /// The handle [`close`](Self::close) closed, to learn whether the server confirmed it.
    closing: Mutex<Option<zk::Transport>>,
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
    /// Who the session is to the server, for [`Error::NoAuth`].
    identity: String,
    /// The process that opened the session: after a fork, the child has no runtime thread.
    pid: u32,
    handle: Handle,
    releases: Arc<Releases>,
    /// The client's close token: the blocking waits on this session (releases) end when
    /// the client is closed. Set by the client once the session is open
    /// ([`closed_by`](Self::closed_by)).
    closes: CancelToken,
    /// Lock-node creates in flight, by lock path: while others are on its lock path, a
    /// create does not pipeline a listing of its own but shares one (see `listing.rs`).
    creating: Mutex<std::collections::HashMap<String, usize>>,
    /// Whether lock paths used for the first time lately existed (see `paths_seen.rs`).
    paths_seen: Arc<paths_seen::PathsSeen>,
    /// Below which sequence number each of its queues is known to be empty (see `core/floors.rs`).
    pub(crate) floors: crate::core::floors::Floors,
}

// The core's words for what the session reports (see `core/session_view.rs`).
pub(crate) use crate::core::session_view::{Liveness, NodeStat};
use crate::core::standing::{decide, ended, Standing};

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

/// How many times [`Session::ensure_path_async`] recreates a parent that the container sweep removed
/// again before the lock path could be created in it.
const PARENT_SWEPT_RETRIES: u32 = 3;

/// The error of a wait that reached its deadline without an answer: the deadline during an
/// outage. (A cancellation or a close ends a wait before, by dropping it or by the token its
/// blocking form was given: see [`blocking_or_stop`].)
fn gave_up_waiting() -> Error {
    Error::connection_loss()
}

/// Whether a request's outcome is an answer from a server that still serves our session.
fn proves_alive<T>(outcome: &ZkResult<T>) -> bool {
    use zk::Error as E;
    match outcome {
        Ok(_) => true,
        Err(E::NoNode | E::NoAuth(_) | E::BadVersion | E::NodeExists | E::NotEmpty) => true,
        Err(E::NoChildrenForEphemerals | E::InvalidAcl | E::ReplyTooLarge { .. }) => true,
        Err(_) => false,
    }
}

impl Session {
    pub(crate) fn liveness(&self) -> Liveness {
        if self.check_process().is_err() || self.closed.load(Ordering::SeqCst) {
            return Liveness::Ended;
        }
        match self.state() {
            zk::KeeperState::SyncConnected => Liveness::Connected,
            zk::KeeperState::Disconnected => Liveness::Disconnected,
            _ => Liveness::Ended,
        }
    }

    pub(crate) fn state(&self) -> zk::KeeperState {
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
            zk::KeeperState::AuthFailed => Error::AuthFailed,
            zk::KeeperState::Closed => Error::Closed,
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
                zk::KeeperState::SyncConnected => return Ok(()),
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
            if !matches!(current, zk::KeeperState::SyncConnected) {
                return true;
            }
            if until(Box::pin(state.changed()), deadline).await.is_err() {
                return false;
            }
        }
    }

    /// A handle to send requests with; [`Error::Closed`] once the session is closed.
    fn zk(&self) -> Result<zk::Transport> {
        self.check_process()?;
        let handles = self.handles.lock();
        handles.as_ref().map(|h| h.zk.clone()).ok_or(Error::Closed)
    }

    /// The server the session is, or was last, connected to; `None` once closed.
    pub(crate) fn server(&self) -> Option<String> {
        let handles = self.handles.lock();
        handles.as_ref().map(|h| h.zk.server())
    }

    /// A transport error from a request on `path`, in zklock's terms. A NoAuth names the
    /// node as the server knows it: inside a chroot, `/` or `/job` would send an operator to
    /// the wrong ACL.
    fn error(&self, err: zk::Error, path: &str) -> Error {
        let mut error = Error::from_zk(err, path, &self.identity);
        if let (Error::NoAuth { path, .. }, Some(chroot)) = (&mut error, self.chroot()) {
            *path = match path.as_str() {
                "/" => chroot.path,
                below => format!("{}{below}", chroot.path),
            };
        }
        error
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

    /// Decides, now and on the calling thread, where a node held through this session stands
    /// (`deleted`: our node is known to be gone; `false` to judge the session alone), by the
    /// core's one rule ([`decide`]). Never blocks: nothing the network or runtime thread last
    /// said is trusted past the lease.
    pub(crate) fn standing(&self, deleted: bool) -> Standing {
        decide(
            deleted,
            self.liveness(),
            || self.lease.remaining(),
            || ended(&self.ended_error()),
        )
    }

    /// The session of a client whose close token is `closes`.
    pub(crate) fn closed_by(mut self, closes: &CancelToken) -> Session {
        self.closes = closes.clone();
        self
    }

    /// The client's close token (see [`closed_by`](Self::closed_by)).
    pub(crate) fn closes(&self) -> &CancelToken {
        &self.closes
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
        if block_on(ended, Some(deadline)).is_err() {
            return false;
        }
        let closing = self.closing.lock().clone();
        // The session's thread ends right after: wait for it, so that no thread outlives a
        // closed client.
        if let Some(zk) = &closing {
            zk.join_io(deadline);
        }
        match (self.state(), closing) {
            (zk::KeeperState::Closed, Some(zk)) => zk.close_confirmed(),
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
    async fn retry_async<T: Send + 'static>(
        &self,
        path: &str,
        deadline: Option<Instant>,
        seen: Seen,
        op: impl Fn(zk::Transport, String) -> Op<T>,
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
                Ok(Err(err)) => return Err(self.error(err, path)),
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
            crate::rt::runtime::sleep(RETRY_PAUSE).await;
        }
        self.wait_connected_async(deadline).await
    }

    /// A state watcher positioned at the current state, for waits on session changes.
    pub(crate) fn state_watcher(&self) -> zk::StateWatcher {
        let mut state = self.state.clone();
        state.state();
        state
    }
}

/// Runs the operation `op` on the calling thread until it is done: the blocking form of an
/// async operation, bounded by its own deadline (an acquisition also races its tokens inside
/// `op`, see `Budget::run`).
pub(crate) fn blocking<T>(op: impl Future<Output = Result<T>>) -> Result<T> {
    blocking_or_stop(op, &[])
}

impl Drop for Session {
    fn drop(&mut self) {
        // Tasks on the runtime hold handles on the session, which closes only once they are
        // gone; background releases end on their own (with the node gone or the session).
        self.abort_tasks(false);
    }
}
