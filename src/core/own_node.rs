//! A holder's watch on its own node, as the core reads it: flags (the revocation marker, the
//! node's deletion by someone else) that a task of the session raises (see
//! `session/own_node.rs`) and the guard reads. A waiter awaits the watch on the node ahead of
//! it itself (see `contend.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::rt::cancel::{wake_on_cancel, CancelToken, CancelWake};
use crate::rt::runtime::{until, JoinHandle};

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
    /// [`OwnNodeWatch::stop_async`] or [`OwnNodeWatch::stop_in_background`] was called: send nothing more.
    stopping: bool,
}

/// What the task following our node has found, and where it stands, shared with the guard.
#[derive(Default)]
pub(crate) struct NodeFlags {
    marks: Mutex<Marks>,
    changed: Condvar,
    /// Notified with `changed`, for async waits.
    news: event_listener::Event,
}

impl NodeFlags {
    fn notify(&self) {
        self.changed.notify_all();
        self.news.notify(usize::MAX);
    }

    /// As [`wait_until`](Self::wait_until), awaited (without a token: the future is dropped
    /// instead).
    async fn wait_until_async(&self, deadline: Option<Instant>, done: impl Fn(&Marks) -> bool) {
        loop {
            let marks = *self.marks.lock();
            if done(&marks) || marks.ended {
                return;
            }
            let listener = self.news.listen();
            let marks = *self.marks.lock();
            if done(&marks) || marks.ended {
                return;
            }
            if until(listener, deadline).await.is_err() {
                return;
            }
        }
    }

    pub(crate) fn raise_revocation(&self) {
        self.marks.lock().revocation_requested = true;
        self.notify();
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
        self.notify();
    }

    /// The watching task is about to send a request that sets the watch; `false` (and nothing
    /// is to be sent) once the watch is being stopped.
    pub(crate) fn reading(&self) -> bool {
        let mut marks = self.marks.lock();
        if marks.stopping {
            return false;
        }
        marks.in_flight = true;
        true
    }

    /// The request of [`reading`](Self::reading) has come back.
    pub(crate) fn read(&self) {
        self.marks.lock().in_flight = false;
        self.notify();
    }

    /// The watching task has ended (also when it was aborted): no news will come.
    pub(crate) fn ended(&self) {
        self.marks.lock().ended = true;
        self.notify();
    }
}

impl CancelWake for NodeFlags {
    fn wake(&self) {
        let _marks = self.marks.lock();
        self.notify();
    }
}

impl OwnNodeWatch {
    pub(crate) fn new(flags: Arc<NodeFlags>, task: JoinHandle<()>) -> OwnNodeWatch {
        OwnNodeWatch { flags, task }
    }

    pub(crate) fn revocation_requested(&self) -> bool {
        self.flags.marks.lock().revocation_requested
    }

    /// Ends the watch and waits (at most `wait`, and never long) until the task is gone: its
    /// watch is then removed, by a request queued before any the caller sends next. A request
    /// setting the watch that is on its way is let come back first (else the server would set
    /// a watch after we stopped listening, and fire it at our own delete).
    pub(crate) async fn stop_async(mut self, wait: Duration) {
        let wait = wait.min(STOP_WAIT);
        let deadline = Instant::now() + wait;
        self.flags.marks.lock().stopping = true;
        self.flags
            .wait_until_async(Some(deadline), |m| !m.in_flight)
            .await;
        self.task.abort();
        // A budget of its own: a slow reply above must not leave the removal no time.
        let _ = until(&mut self.task, Some(Instant::now() + wait)).await;
    }

    /// Ends the watch without waiting (a release that must not wait: our own delete may then
    /// fire the watch, which nobody listens to any more).
    pub(crate) fn stop_in_background(self) {
        self.flags.marks.lock().stopping = true;
        self.task.abort();
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

impl OwnNodeWatch {
    /// As [`wait_revocation`](Self::wait_revocation) without a deadline or token, awaited
    /// (cancelled by dropping it).
    pub(crate) async fn wait_revocation_async(&self) -> bool {
        self.flags
            .wait_until_async(None, |m| m.revocation_requested)
            .await;
        self.revocation_requested()
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
