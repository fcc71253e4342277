//! What the schedule's tasks and its checks share: what a task acquires ([`Acquisition`]),
//! what the tasks report to the checks ([`Book`]), the one rule a holder reads `Held` by, and
//! which errors the docs allow an acquisition. The scheduler (`schedule.rs`), its tasks
//! (`worker.rs`), the checks (`checks.rs`) and local handoff's tasks (`local.rs`) stand on it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::core::kind::{Kind, Role};
use crate::core::sim::world::World;
use crate::core::sim::TIMEOUT;
use crate::core::standing::{decide, Loss, Standing};
use crate::error::Error;
use crate::wire as zk;

/// What an acquisition takes.
#[derive(Clone)]
pub(super) enum Target {
    Lock(&'static Kind),
    /// `count` leases of the semaphore at the lock path, with `permits` permits.
    Leases {
        permits: usize,
        count: usize,
    },
    /// Several locks, each path with its kind, in the order given (the core orders them).
    Multi(Vec<(String, &'static Kind)>),
}

/// How an acquisition waits.
#[derive(Debug, Clone, Copy)]
pub(super) enum Wait {
    Forever,
    Try,
    Timeout(Duration),
}

/// One acquisition a task makes.
#[derive(Clone)]
pub(super) struct Acquisition {
    pub(super) lock: String,
    pub(super) target: Target,
    pub(super) wait: Wait,
    /// The future is dropped after this many polls (cancellation, a `select!`, an abort).
    pub(super) drop_after: Option<u32>,
    pub(super) hold: Duration,
    /// A pause before it (a lock path left empty for a while, so its container may go).
    pub(super) pause: Duration,
    /// Taken revocable: a revocation request (a write to a node it holds) makes it release
    /// at once, as a revocable guard's holder does.
    pub(super) revocable: bool,
    /// Through the process's local queue, with this batch (see `local.rs`).
    pub(super) local: Option<u32>,
    /// Its cancel token cancelled this long after it starts (`Wait::cancel_on`).
    pub(super) cancel_after: Option<Duration>,
}

/// A holder, as the checks see it.
pub(super) struct Holder {
    pub(super) task: usize,
    pub(super) lock: String,
    pub(super) role: Role,
    pub(super) session: i64,
    pub(super) node_path: String,
    /// The watch on its own node (the guard's).
    pub(super) watch: u64,
    /// Its node's czxid: the fencing token.
    pub(super) czxid: i64,
    /// The token's local number (local handoff).
    pub(super) local: u16,
    /// Its token was checked against the previous holder's (when it first read `Held`).
    pub(super) fenced: bool,
}

/// What the tasks report to the checks.
#[derive(Default)]
pub(super) struct Book {
    pub(super) holders: Vec<Holder>,
    /// Per lock path, the czxid (and local number) of its latest exclusive holder (the
    /// fencing token's order).
    pub(super) last_token: BTreeMap<String, (i64, u16)>,
    pub(super) violations: Vec<String>,
    pub(super) acquired: u64,
    pub(super) finished: BTreeSet<usize>,
    /// Per task, its waits (from a poll that left it pending to its next wake) since its
    /// current acquisition began: the time its own code chose to wait, not the scheduler's
    /// delay in polling it once woken.
    pub(super) waits: BTreeMap<usize, Vec<(Duration, Duration)>>,
}

pub(super) type SharedBook = Rc<RefCell<Book>>;

/// The deadline of a `try_lock`'s requests (one call's timeout).
pub(super) const ONE_CALL: Duration = TIMEOUT;

/// Whether `holder` reads `Held` at `now`, by the one rule every reader of a guard uses.
pub(super) fn reads_held(world: &World, holder: &Holder, now: std::time::Instant) -> bool {
    if world.operator_removed.contains(&holder.czxid) {
        // The operator deleted the node (before or after the claim): the docs forbid it, and
        // the guard reports it as lost once it looks.
        return false;
    }
    session_reads_held(world, holder.session, holder.watch, now)
}

/// Whether a guard of `session` whose own-node watch is `watch` reads `Held` at `now`: the
/// standing rule of `core/standing.rs` on the simulated session's view.
pub(super) fn session_reads_held(
    world: &World,
    session: i64,
    watch: u64,
    now: std::time::Instant,
) -> bool {
    let s = world.session(session);
    let deleted = matches!(world.watch_event(watch), Some(zk::EventType::NodeDeleted));
    matches!(
        decide(
            deleted,
            s.liveness,
            || s.lease.remaining_at(now),
            || Loss::Expired
        ),
        Standing::Held(_)
    )
}

/// A future dropped after `polls` polls.
pub(super) struct DroppedAfter<F: ?Sized> {
    pub(super) inner: Option<Pin<Box<F>>>,
    pub(super) polls: u32,
}

impl<F: Future + ?Sized> Future for DroppedAfter<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        if self.polls == 0 {
            self.inner = None;
            return Poll::Ready(None);
        }
        self.polls -= 1;
        let inner = self.inner.as_mut().expect("polled after the end");
        match inner.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Some(output)),
            Poll::Pending if self.polls == 0 => {
                self.inner = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Why `err`, returned by `acquisition`, is not one the docs list for that call; `None` if
/// it is.
pub(super) fn undocumented(err: &Error, acquisition: &Acquisition) -> Option<String> {
    let wait = acquisition.wait;
    let paths: Vec<&str> = match &acquisition.target {
        Target::Multi(members) => members.iter().map(|(path, _)| path.as_str()).collect(),
        _ => vec![acquisition.lock.as_str()],
    };
    // (A semaphore's errors name its gate or its leases, below its path.)
    let ours = |path: &str| {
        paths
            .iter()
            .any(|lock| path == *lock || path.starts_with(&format!("{lock}/")))
    };
    let ok = match err {
        Error::SessionExpired => true,
        Error::LockLost { path } | Error::SequenceExhausted { path } | Error::NoNode { path } => {
            ours(path)
        }
        Error::ConnectionLoss { .. } => !matches!(wait, Wait::Forever),
        Error::Cancelled => acquisition.cancel_after.is_some(),
        _ => false,
    };
    (!ok).then(|| format!("{wait:?} acquisition of {paths:?} returned {err:?}"))
}
