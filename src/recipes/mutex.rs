//! `DistributedMutex`: ZooKeeper's lock recipe, node-compatible with Curator's
//! `InterProcessMutex`.

use crate::client::Client;
use crate::core::contend::Options;
use crate::core::wait::Budget;
use crate::error::Result;

use super::catalogue::MUTEX;
use super::guard::LockGuard;
use super::queue::{acquisitions, queue_calls, LockQueue};

/// A mutual-exclusion lock shared by every process that uses the same ZooKeeper path.
///
/// Contenders queue in the order they asked (FIFO); each waits only for the contender just ahead
/// of it, so a release wakes exactly one waiter. Lock nodes are named like Curator's
/// `InterProcessMutex` nodes (`_c_<uuid>-lock-<sequence>`), so zklock and Curator processes
/// exclude each other on the same path.
///
/// The mutex is `Send + Sync` and cheap to clone (clones are the same lock). Its guards own
/// what they need: they can outlive the mutex, move to other threads or tasks, and be
/// returned from functions. Locks are not reentrant: like `std::sync::Mutex`, a thread that
/// locks again while it holds a guard waits for that guard (use a timed call or a cancel
/// token where that can happen).
#[derive(Clone, Debug)]
pub struct DistributedMutex {
    queue: LockQueue,
}

impl DistributedMutex {
    /// A mutex on the ZooKeeper node `path` (relative to the client's chroot). Nothing is sent
    /// to the server until the first acquisition, which creates the path (and its missing
    /// parents) as container nodes if needed.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) if `path` is not an absolute, canonical
    /// ZooKeeper path other than `/`.
    pub fn new(client: &Client, path: &str) -> Result<DistributedMutex> {
        Ok(DistributedMutex {
            queue: LockQueue::new(client, path, Options::default())?,
        })
    }

    /// Local handoff: the callers of this mutex's [`Client`] (threads and tasks, blocking and
    /// async mixed, through any mutex object of that client on this path with the same
    /// `batch`) queue in this process behind one lock node, and a holder's release passes the
    /// lock straight to the next local caller, without a request to the server, while
    /// - the next hold is within the bound on other processes: holds of the node are
    ///   numbered from its claim, and hold `n` begins only if `n <= clear + batch`, where
    ///   `clear` counts the holds begun when the latest listing of the lock path that showed
    ///   no other node was sent (0 at the claim; one listing is sent at the claim and, while
    ///   none has shown another node, one every `batch / 2` holds);
    /// - the lock reads [`Held`](crate::LockState::Held) at that instant (a holder that
    ///   could have lost its session never hands on);
    /// - no revocation was requested (for a [`revocable`](Self::revocable) lock).
    ///
    /// Otherwise the node is released through the server as usual, and the local callers
    /// still waiting queue a new node, behind every process that waited meanwhile. A node of
    /// another contender (another process, or a lock object without local handoff) created
    /// after the server answered such a listing is in every later one, so it waits at most
    /// `batch` local holds from its creation, however late replies or notifications reach
    /// this process. When the next hold is not allowed yet, the node waits, held by no caller,
    /// for a listing's answer. `batch` 0 counts as 1. The cost: a process alone makes one
    /// request per `batch / 2` holds, and at most about `batch` holds per round trip. 128 drained
    /// 10,000 queued tasks in about 0.15 s and kept two processes of 8 threads each on one lock
    /// at 0.05 server requests per acquisition in `examples/bench.rs hot`; smaller batches
    /// let other processes in sooner and drain slower
    /// ([`guide::performance`](crate::guide::performance)).
    ///
    /// Every guard behaves as without local handoff: its [`state`](LockGuard::state),
    /// [`is_held`](LockGuard::is_held) and [`wait_lost`](LockGuard::wait_lost) are its own
    /// (a guard released or passed on reads nothing of the next one's); fenced writes are
    /// refused once the shared node is gone; its [`fencing`](LockGuard::fencing) token is the
    /// node's, with a [`local`](crate::FencingToken::local) number one higher than the previous
    /// local holder's, so tokens still increase from one holder to the next and across
    /// processes. [`node_path`](LockGuard::node_path) is the same for the local holders of one
    /// node. A caller that gives up (timeout, [`CancelToken`](crate::CancelToken), a dropped
    /// future) only leaves the local queue; the last one to leave withdraws the node. A
    /// `try_lock` while another local caller holds or waits returns `None` without a request.
    /// The metric `zklock_handoffs_total` counts local and server handoffs
    /// ([`metrics`](crate::metrics)).
    ///
    /// Local callers are served in FIFO order among themselves. Off by default: each caller
    /// then queues a node of its own, like a caller of another process.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// // Any number of threads and tasks of this process may share it (or make their own
    /// // with the same client, path and batch: they share one local queue).
    /// let mutex = zklock::DistributedMutex::new(&client, "/locks/hot")?.local_handoff(128);
    /// std::thread::scope(|s| {
    ///     for _ in 0..8 {
    ///         s.spawn(|| -> zklock::Result<()> {
    ///             for _ in 0..100 {
    ///                 let guard = mutex.lock()?; // mostly handed over without the server
    ///                 let _token = guard.fencing(); // increases from one holder to the next
    ///             }
    ///             Ok(())
    ///         });
    ///     }
    /// });
    /// # Ok(()) }
    /// ```
    pub fn local_handoff(mut self, batch: u32) -> Self {
        self.queue.options.local_handoff = Some(batch);
        self
    }

    acquisitions!("the lock" => LockGuard, via acquire():
        lock, try_lock, lock_timeout, lock_with;
        async lock_async, try_lock_async, lock_with_async);

    async fn acquire(&self, attempt: Budget, background_drop: bool) -> Result<Option<LockGuard>> {
        self.queue.acquire(&MUTEX, attempt, background_drop).await
    }

    queue_calls!(MUTEX);
}
