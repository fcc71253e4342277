//! `LeaderElection`: the holder of a lock is the leader; node-compatible with Curator's
//! `LeaderLatch`.

use crate::client::Client;
use crate::core::contend::Options;
use crate::core::wait::Budget;
use crate::error::Result;

use super::catalogue::LATCH;
use super::guard::LockGuard;
use super::inspect::Contender;
use super::observe::LeaderWatch;
use super::queue::{acquisitions, LockQueue};

/// Proof of leadership; see [`LockGuard`]: [`LockGuard::state`] and
/// [`LockGuard::wait_lost`] report a lost leadership exactly as a lost lock (including, at
/// once, the deletion of our node by someone else), and dropping it steps down.
pub type Leadership = LockGuard;

/// A leader election among every process that uses the same ZooKeeper path: participants
/// queue, the first is the leader, the next takes over when it steps down or dies.
///
/// Nodes are named like Curator's `LeaderLatch` nodes (`_c_<uuid>-latch-<seq>`) and carry the
/// participant's id as data, so zklock and Curator processes can run one election together.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    queue: LockQueue,
}

impl LeaderElection {
    /// An election on the ZooKeeper node `path`; nothing is sent until first use.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a path that is not absolute and
    /// canonical.
    pub fn new(client: &Client, path: &str) -> Result<LeaderElection> {
        // Leadership is rare and precious: always watch our node, so a leader whose node is
        // deleted by someone else learns at once that it no longer leads.
        let options = Options {
            revocable: true,
            data: None,
            local_handoff: None,
        };
        Ok(LeaderElection {
            queue: LockQueue::new(client, path, options)?,
        })
    }

    /// The participant id stored in our node (Curator's `LeaderLatch` id), shown by
    /// [`contenders`](Self::contenders). Defaults to `host=.. pid=.. thread=..`.
    pub fn participant_id(mut self, id: &str) -> Self {
        self.queue.options.data = Some(id.as_bytes().to_vec());
        self
    }

    /// The election path.
    pub fn path(&self) -> &str {
        &self.queue.path
    }

    acquisitions!("leadership" => Leadership, via join():
        participate, try_participate, participate_timeout, participate_with;
        async participate_async, try_participate_async, participate_with_async);

    /// Joins the election; an attempt that ends without leading has left it again (unlike
    /// Curator's `LeaderLatch.await(timeout)`, which stays in).
    async fn join(&self, attempt: Budget, background_drop: bool) -> Result<Option<Leadership>> {
        self.queue.acquire(&LATCH, attempt, background_drop).await
    }

    /// The participants in order: the leader first. Each one's `owner` is its participant data.
    /// Blocks for a few round trips.
    ///
    /// # Errors
    /// Connection and server errors.
    pub fn contenders(&self) -> Result<Vec<Contender>> {
        crate::session::blocking(self.contenders_async())
    }

    /// As [`contenders`](Self::contenders), as a future (`Send`, any executor). Cancel safe:
    /// dropping it leaves nothing behind (it only reads).
    ///
    /// # Errors
    /// As [`contenders`](Self::contenders).
    pub async fn contenders_async(&self) -> Result<Vec<Contender>> {
        self.queue.contenders(&[&LATCH]).await
    }

    /// Deletes a participant's node if unchanged since inspected (for example a hung leader's);
    /// see [`DistributedMutex::break_contender`](crate::DistributedMutex::break_contender).
    ///
    /// # Errors
    /// As there.
    pub fn break_contender(&self, participant: &Contender) -> Result<bool> {
        crate::session::blocking(self.queue.break_contender(participant))
    }

    /// As [`break_contender`](Self::break_contender), as a future (`Send`, any executor).
    /// Dropped before it completes, the delete may or may not have been applied; nothing else
    /// is left behind.
    ///
    /// # Errors
    /// As [`break_contender`](Self::break_contender).
    pub async fn break_contender_async(&self, participant: &Contender) -> Result<bool> {
        self.queue.break_contender(participant).await
    }

    /// Follows the leader as it changes: see [`LeaderWatch`],
    /// whose `next()` (blocking, with `_timeout` and `_with(Wait)` forms) and `next_async()`
    /// return each new leader, driven by a watch, without polling. Observing joins no queue,
    /// so a participant waiting in [`participate`](Self::participate) keeps its place while
    /// another thread or task observes. Sends nothing until the first `next` call.
    ///
    /// ```no_run
    /// # async fn run(election: zklock::LeaderElection) -> zklock::Result<()> {
    /// let mut leaders = election.observe();
    /// loop {
    ///     let change = leaders.next_async().await?;
    ///     println!("leader now: {:?}", change.leader.map(|l| l.owner));
    /// }
    /// # }
    /// ```
    pub fn observe(&self) -> LeaderWatch {
        LeaderWatch::new(&self.queue.client, &self.queue.path)
    }

    /// The current leader, if anyone participates. Blocks for a few round trips. To follow
    /// the leader as it changes, [`observe`](Self::observe) the election instead of calling
    /// this in a loop.
    ///
    /// # Errors
    /// Connection and server errors.
    pub fn current_leader(&self) -> Result<Option<Contender>> {
        crate::session::blocking(self.current_leader_async())
    }

    /// As [`current_leader`](Self::current_leader), as a future (`Send`, any executor).
    /// Cancel safe: dropping it leaves nothing behind (it only reads).
    ///
    /// # Errors
    /// As [`current_leader`](Self::current_leader).
    pub async fn current_leader_async(&self) -> Result<Option<Contender>> {
        Ok(self.contenders_async().await?.into_iter().next())
    }
}
