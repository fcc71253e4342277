//! `LeaderElection`: the holder of a lock is the leader; node-compatible with Curator's
//! `LeaderLatch`.

use std::fmt;
use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::inspect::{self, Contender};
use crate::path::validate_lock_path;
use crate::recipe::{self, deadline_after, previous_node, Kind, Options, Patience, Role};

/// Proof of leadership; see [`LockGuard`]: [`LockGuard::state`] and
/// [`LockGuard::wait_lost`] report a lost leadership exactly as a lost lock (including, at
/// once, the deletion of our node by someone else), and dropping it steps down.
pub type Leadership<'a> = LockGuard<'a>;

const LATCH: Kind = Kind {
    names: &[("latch-", Role::Participant)],
    ours: 0,
    blocker: previous_node,
};

/// A leader election among every process that uses the same ZooKeeper path: participants
/// queue, the first is the leader, the next takes over when it steps down or dies.
///
/// Nodes are named like Curator's `LeaderLatch` nodes (`_c_<uuid>-latch-<seq>`) and carry the
/// participant's id as data, so zklock and Curator processes can run one election together.
pub struct LeaderElection {
    client: Client,
    path: String,
    options: Options,
}

impl LeaderElection {
    /// An election on the ZooKeeper node `path`; nothing is sent until first use.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a path that is not absolute and
    /// canonical.
    pub fn new(client: &Client, path: &str) -> Result<LeaderElection> {
        validate_lock_path(path)?;
        Ok(LeaderElection {
            client: client.clone(),
            path: path.to_owned(),
            // Leadership is rare and precious: always watch our node, so a leader whose node
            // is deleted by someone else learns at once that it no longer leads.
            options: Options {
                revocable: true,
                data: None,
            },
        })
    }

    /// The participant id stored in our node (Curator's `LeaderLatch` id), shown by
    /// [`participants`](Self::participants). Defaults to `host=.. pid=.. thread=..`.
    pub fn participant_id(mut self, id: &str) -> Self {
        self.options.data = Some(id.as_bytes().to_vec());
        self
    }

    /// The election path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Joins the election and blocks until this participant is the leader.
    ///
    /// # Errors
    /// As [`DistributedMutex::lock`](crate::DistributedMutex::lock).
    pub fn participate(&self) -> Result<Leadership<'_>> {
        self.join(Patience::Forever).and_then(recipe::waited)
    }

    /// Joins the election and waits at most `timeout` to lead; `Ok(None)` (having left the
    /// election) if someone else still leads then.
    ///
    /// # Errors
    /// As [`DistributedMutex::lock_timeout`](crate::DistributedMutex::lock_timeout).
    pub fn participate_timeout(&self, timeout: Duration) -> Result<Option<Leadership<'_>>> {
        self.join(Patience::Until(deadline_after(timeout)))
    }

    fn join(&self, patience: Patience) -> Result<Option<Leadership<'_>>> {
        let token = self.client.enter(&self.path)?;
        let held = recipe::acquire(&self.client, &self.path, &LATCH, patience, &self.options)?;
        Ok(held.map(|held| LockGuard::new(held, token)))
    }

    /// The participants in order: the leader first. Each one's `owner` is its participant data.
    ///
    /// # Errors
    /// Connection and server errors.
    pub fn participants(&self) -> Result<Vec<Contender>> {
        inspect::contenders(&self.client, &self.path, LATCH.names)
    }

    /// Deletes a participant's node if unchanged since inspected (for example a hung leader's);
    /// see [`DistributedMutex::break_contender`](crate::DistributedMutex::break_contender).
    ///
    /// # Errors
    /// As there.
    pub fn break_participant(&self, participant: &Contender) -> Result<bool> {
        inspect::break_contender(&self.client, &self.path, participant)
    }

    /// The current leader, if anyone participates.
    ///
    /// # Errors
    /// Connection and server errors.
    pub fn current_leader(&self) -> Result<Option<Contender>> {
        Ok(self.participants()?.into_iter().next())
    }
}

impl fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElection")
            .field("path", &self.path)
            .finish()
    }
}
