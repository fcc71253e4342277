//! The bridge from ZooKeeper watches and session-state changes to a blocked thread: a task on
//! the runtime waits for either and signals a `parking_lot::Condvar`.

use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::wire as zk;
use parking_lot::{Condvar, Mutex};

use crate::rt::cancel::{wake_on_cancel, CancelToken, CancelWake};
use crate::rt::relay::io_log;
use crate::rt::runtime::{Handle, JoinHandle};
use crate::znode::layout::REVOKE_MESSAGE;

use super::errors::outcome_unknown;
use super::retry::retry_pause_async;

/// What happened to a watched node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeEvent {
    Deleted,
    /// Data changed (or another node event): re-check.
    Changed,
    /// The session ended (expired, closed): the watch will never fire.
    SessionEnded,
}

/// Why a wait on a [`Signal`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    Node(NodeEvent),
    /// The session's connection state changed (disconnected, reconnected, expired).
    SessionChanged,
    TimedOut,
}

#[derive(Default)]
struct SignalState {
    event: Option<NodeEvent>,
    session_changes: u64,
}

/// The mailbox of one waiting thread: watch tasks post and unpark it. The thread parks rather
/// than waiting on a condition variable, so that cancelling a token it watches wakes it too.
pub(crate) struct Signal {
    state: Mutex<SignalState>,
    waiter: Thread,
}

impl Signal {
    /// A mailbox for the calling thread, the only one that may [`wait`](Self::wait) on it.
    pub(crate) fn new() -> Arc<Signal> {
        Arc::new(Signal {
            state: Mutex::default(),
            waiter: std::thread::current(),
        })
    }

    fn post_node(&self, event: NodeEvent) {
        self.state.lock().event = Some(event);
        self.waiter.unpark();
    }

    fn post_session_change(&self) {
        self.state.lock().session_changes += 1;
        self.waiter.unpark();
    }

    /// Blocks until a node event or a session change newer than `*seen` is posted, until
    /// `deadline`, or until a token the thread watches is cancelled (then
    /// [`Wake::TimedOut`] too: the caller gives up either way). Spurious wake-ups are
    /// absorbed here.
    pub(crate) fn wait(&self, seen: &mut u64, deadline: Option<Instant>) -> Wake {
        loop {
            {
                let mut state = self.state.lock();
                if let Some(event) = state.event.take() {
                    return Wake::Node(event);
                }
                if state.session_changes != *seen {
                    *seen = state.session_changes;
                    return Wake::SessionChanged;
                }
            }
            if crate::rt::cancel::interrupted() {
                return Wake::TimedOut;
            }
            match deadline {
                None => std::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Wake::TimedOut;
                    }
                    std::thread::park_timeout(deadline - now);
                }
            }
        }
    }
}

/// Work a [`NodeWatch`] does on the runtime when its node is deleted (see
/// [`NodeWatch::spawn`]); it keeps its own result, and hands back what is left to free, which
/// is dropped after the waiter is woken (freeing a long listing is no work for its wake-up).
pub(crate) type FollowUp = Box<
    dyn FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = Leftover> + Send>> + Send,
>;

/// What a [`FollowUp`] leaves to be dropped once the waiter is woken.
pub(crate) type Leftover = Option<Box<dyn std::any::Any + Send>>;

/// A watch being waited on; dropping it cancels the task (and with it the server-side watch).
pub(crate) struct NodeWatch {
    task: JoinHandle<()>,
}

impl NodeWatch {
    /// `on_deleted`, if given, runs on the runtime as soon as the node's deletion is
    /// notified, before the waiting thread is woken: the request the waiter would send next
    /// (a listing, a read of its own node) is sent at once from here, so its round trip
    /// overlaps the waiter's wake-up instead of following it.
    pub(crate) fn spawn(
        runtime: &Handle,
        watcher: zk::OneshotWatcher,
        mut state: zk::StateWatcher,
        signal: Arc<Signal>,
        on_deleted: Option<FollowUp>,
    ) -> NodeWatch {
        let task = runtime.spawn(async move {
            let mut fired = std::pin::pin!(watcher.changed());
            loop {
                // The session's state changes (never after a terminal one: the watcher then
                // reports it instead) interleave with the one event we wait for.
                let next = futures_lite::future::or(async { Some((&mut fired).await) }, async {
                    state.changed().await;
                    None
                });
                match next.await {
                    Some(event) => {
                        let event = match event.event_type {
                            zk::EventType::NodeDeleted => NodeEvent::Deleted,
                            zk::EventType::Session => NodeEvent::SessionEnded,
                            _ => NodeEvent::Changed,
                        };
                        // Posted on drop: also if the follow-up panics, the waiter is woken.
                        let post = PostOnDrop(&signal, event);
                        let mut leftover = None;
                        if let (NodeEvent::Deleted, Some(follow_up)) = (event, on_deleted) {
                            leftover = follow_up().await;
                        }
                        drop(post);
                        drop(leftover);
                        return;
                    }
                    None => signal.post_session_change(),
                }
            }
        });
        NodeWatch { task }
    }
}

/// Posts `event` to the waiter when dropped.
struct PostOnDrop<'a>(&'a Signal, NodeEvent);

impl Drop for PostOnDrop<'_> {
    fn drop(&mut self) {
        self.0.post_node(self.1);
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A holder's ear on its own node: a task re-reads the node's data on every change and raises
/// a flag when it holds the revocation marker, or when the node is deleted by someone else.
pub(crate) struct OwnNodeWatch {
    flags: Arc<NodeFlags>,
    task: JoinHandle<()>,
}

#[derive(Default, Clone, Copy)]
struct Marks {
    revocation_requested: bool,
    deleted: bool,
    /// The watching task has ended (node or session gone, client closed): no news will come.
    ended: bool,
    /// A request that sets the watch is on its way: dropped before its reply, it would leave a
    /// watch on the server that nobody listens to.
    in_flight: bool,
    /// [`OwnNodeWatch::stop`] was called: send nothing more.
    stopping: bool,
}

#[derive(Default)]
pub(crate) struct NodeFlags {
    marks: Mutex<Marks>,
    changed: Condvar,
}

impl NodeFlags {
    pub(crate) fn raise_revocation(&self) {
        self.marks.lock().revocation_requested = true;
        self.changed.notify_all();
    }

    pub(crate) fn revocation_raised(&self) -> bool {
        self.marks.lock().revocation_requested
    }

    /// Waits until `done` holds, the watching task has ended, `deadline` passes or `cancel` is
    /// cancelled; returns the marks as they are then.
    fn wait_until(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
        done: impl Fn(&Marks) -> bool,
    ) -> Marks {
        let cancelled = || cancel.is_some_and(CancelToken::is_cancelled);
        let mut marks = self.marks.lock();
        while !done(&marks) && !marks.ended && !cancelled() {
            match deadline {
                Some(deadline) => {
                    if self.changed.wait_until(&mut marks, deadline).timed_out() {
                        break;
                    }
                }
                None => self.changed.wait(&mut marks),
            }
        }
        *marks
    }

    pub(crate) fn raise_deleted(&self) {
        self.marks.lock().deleted = true;
        self.changed.notify_all();
    }
}

impl CancelWake for NodeFlags {
    fn wake(&self) {
        let _marks = self.marks.lock();
        self.changed.notify_all();
    }
}

impl OwnNodeWatch {
    pub(crate) fn new(flags: Arc<NodeFlags>, task: JoinHandle<()>) -> OwnNodeWatch {
        OwnNodeWatch { flags, task }
    }

    /// The task behind an `OwnNodeWatch`: reads our lock node `path` and watches it, raising
    /// `flags` for the revocation marker and for the node's deletion by someone else, until
    /// the node or the session is gone.
    pub(crate) async fn watch(
        zk: zk::Client,
        path: String,
        mut state: zk::StateWatcher,
        flags: Arc<NodeFlags>,
    ) {
        /// Tells waiters when the task ends, also when it is aborted (`Client::close`).
        struct Ended(Arc<NodeFlags>);
        impl Drop for Ended {
            fn drop(&mut self) {
                self.0.marks.lock().ended = true;
                self.0.changed.notify_all();
            }
        }
        let _ended = Ended(flags.clone());
        loop {
            {
                let mut marks = flags.marks.lock();
                if marks.stopping {
                    return;
                }
                marks.in_flight = true;
            }
            let read = zk.get_and_watch_data(&path).await;
            flags.marks.lock().in_flight = false;
            flags.changed.notify_all();
            match read {
                Ok((data, _, watcher)) => {
                    // Keep watching after a request: the holder may ignore it, and a later
                    // deletion must still mark the lock lost.
                    if data == REVOKE_MESSAGE && !flags.revocation_raised() {
                        io_log!(Info, "revocation requested for {path}");
                        flags.raise_revocation();
                    }
                    match watcher.changed().await.event_type {
                        zk::EventType::NodeDataChanged => {}
                        zk::EventType::NodeDeleted => {
                            io_log!(
                                Warn,
                                "lock node {path} was deleted by someone else: lock lost"
                            );
                            flags.raise_deleted();
                            return;
                        }
                        _ => return, // The session ended: the guard sees that itself.
                    }
                }
                Err(err) if outcome_unknown(&err) => {
                    if !retry_pause_async(&mut state).await {
                        return;
                    }
                }
                Err(zk::Error::NoNode) => {
                    flags.raise_deleted();
                    return;
                }
                Err(_) => return,
            }
        }
    }

    pub(crate) fn revocation_requested(&self) -> bool {
        self.flags.marks.lock().revocation_requested
    }

    /// Ends the watch and waits (at most `wait`, and never long) until the task is gone: its
    /// watch is then removed, by a request queued before any the caller sends next. A request
    /// setting the watch that is on its way is let come back first (else the server would set
    /// a watch after we stopped listening, and fire it at our own delete).
    pub(crate) fn stop(mut self, wait: Duration) {
        let wait = wait.min(STOP_WAIT);
        let deadline = Instant::now() + wait;
        self.flags.marks.lock().stopping = true;
        self.flags
            .wait_until(Some(deadline), None, |m| !m.in_flight);
        self.task.abort();
        // A budget of its own: a slow reply above must not leave the removal no time.
        let _ = crate::rt::runtime::block_on(&mut self.task, Some(Instant::now() + wait));
    }

    pub(crate) fn deleted(&self) -> bool {
        self.flags.marks.lock().deleted
    }

    /// Waits until revocation is requested (`true`), the watch ends (the node or the session
    /// is gone: `false`) or `deadline` passes.
    /// Also returns (`false`) once `cancel`, if given, is cancelled.
    pub(crate) fn wait_revocation(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> bool {
        let _wake = cancel.map(|token| wake_on_cancel(token, self.flags.clone()));
        self.flags
            .wait_until(deadline, cancel, |m| m.revocation_requested)
            .revocation_requested
    }
}

impl Drop for OwnNodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The longest a release waits for its own-node watch to be removed (a round trip at most,
/// unless the runtime thread or the server is stalled; then the delete goes first and the
/// watch fires).
const STOP_WAIT: Duration = Duration::from_millis(100);
