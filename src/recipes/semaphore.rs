//! `Semaphore`: N permits shared across processes, node-compatible with Curator's
//! `InterProcessSemaphoreV2`.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::client::Client;
use crate::core::held::Held;
use crate::core::permits::{take_permits, SemaphoreAt};
use crate::core::wait::Budget;
use crate::error::{Error, Result};
use crate::rt::runtime::deadline_after;
use crate::session::Session;
use crate::znode::path::validate_lock_path;

use super::acquisition::envelope;
use super::catalogue::SEMAPHORE;
use super::guard_calls::{guard_calls, least_certain};
use super::inspect::{self, Contender};
use super::queue::acquisitions;

/// A counting semaphore: at most `permits` permits are held at once, across every process
/// using the same ZooKeeper path. A crashed holder's permits vanish with its session.
///
/// The layout is Curator's `InterProcessSemaphoreV2`: permit takers queue on a mutex at
/// `<path>/locks`; the one at its head creates a permit node under `<path>/leases` (Curator
/// calls them leases) and waits, watching them, until at most `permits` exist. So zklock and Curator processes can
/// share one semaphore, as long as all use the same number of permits (ZooKeeper does not
/// store it).
///
/// There is no local handoff (as [`DistributedMutex::local_handoff`](crate::DistributedMutex::local_handoff)
/// offers): permit nodes are shared by design, each one a node that other processes count
/// to decide whether a permit is free; a permit passed on inside a process would keep a
/// permit from the others without a node they can see change hands, and the gate, the
/// semaphore's mutex, is held only for the moment a permit node is taken.
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    /// Where its gate and permit nodes are, and its permits.
    at: SemaphoreAt,
}

/// Permits of a [`Semaphore`], one node each; released (all of them) when dropped, blocking at most the
/// client's [release timeout](crate::ClientBuilder::release_timeout) for all of them together
/// (what is not confirmed by then goes on in the background).
#[must_use = "the permits are released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct Permit {
    nodes: Vec<Held>,
    /// Keeps the client (its runtime) alive as long as the nodes.
    client: Client,
}

impl Semaphore {
    /// A semaphore with `permits` permits at `path`; nothing is sent until first use.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad path; [`Error::InvalidArgument`] for zero permits.
    pub fn new(client: &Client, path: &str, permits: usize) -> Result<Semaphore> {
        validate_lock_path(path)?;
        if permits == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore needs at least one permit",
            ));
        }
        Ok(Semaphore {
            client: client.clone(),
            at: SEMAPHORE.at(path, permits),
        })
    }

    acquisitions!("one permit" => Permit, via take_one():
        acquire, try_acquire, acquire_timeout, acquire_with;
        async acquire_async, try_acquire_async, acquire_with_async);

    async fn take_one(&self, attempt: Budget, background: bool) -> Result<Option<Permit>> {
        self.take(1, attempt, background).await
    }

    acquisitions!("`count` permits (taken in one pass: two takers of several permits cannot deadlock each other)"
        => Permit, via take(count: usize),
        errors "[`Error::InvalidArgument`] if `count` is zero or more than the permits. Permits taken before an error, a timeout or a cancel are released (all or nothing).":
        acquire_many, try_acquire_many, acquire_many_timeout, acquire_many_with;
        async acquire_many_async, try_acquire_many_async, acquire_many_with_async);

    async fn take(
        &self,
        count: usize,
        attempt: Budget,
        background: bool,
    ) -> Result<Option<Permit>> {
        if count == 0 || count > self.at.permits {
            return Err(Error::InvalidArgument(
                "permit count must be between 1 and the permits",
            ));
        }
        let attempt = &attempt;
        // One session for the gate and every permit (see `take_permits`).
        let take = move |session: Arc<Session>, deadline| async move {
            let release_wait = self.client.release_timeout();
            let taken = take_permits(&session, &self.at, count, attempt, deadline, release_wait);
            Ok(taken.await?.map(|nodes| Permit {
                nodes,
                client: self.client.clone(),
            }))
        };
        let recipe = (SEMAPHORE.metric, self.at.path.as_str());
        envelope(&self.client, recipe, attempt, background, take, |permit| {
            permit.nodes.iter_mut().collect()
        })
        .await
    }

    /// Deletes a permit node if unchanged since inspected (a hung holder's), freeing its permit;
    /// see [`DistributedMutex::break_contender`](crate::DistributedMutex::break_contender).
    ///
    /// # Errors
    /// As there.
    pub fn break_contender(&self, permit: &Contender) -> Result<bool> {
        crate::session::blocking(self.break_contender_async(permit))
    }

    /// As [`break_contender`](Self::break_contender), as a future (`Send`, any executor).
    /// Dropped before it completes, the delete may or may not have been applied; nothing else
    /// is left behind.
    ///
    /// # Errors
    /// As [`break_contender`](Self::break_contender).
    pub async fn break_contender_async(&self, permit: &Contender) -> Result<bool> {
        inspect::break_contender(&self.client, &self.at.permit_parent, permit).await
    }

    /// The number of permits.
    pub fn permits(&self) -> usize {
        self.at.permits
    }

    /// The permit nodes now held (and, briefly, the one being waited for), oldest first. Blocks for
    /// a few round trips.
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
        let permits = self.at.permits;
        inspect::contenders(
            &self.client,
            &self.at.permit_parent,
            SEMAPHORE.permit_names,
            |_, at| at < permits,
        )
        .await
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("leases", &self.at.permit_parent)
            .field("permits", &self.at.permits)
            .finish()
    }
}

impl Permit {
    /// How many permits this guard holds.
    pub fn count(&self) -> usize {
        self.nodes.len()
    }

    /// The permit nodes' paths.
    pub fn node_paths(&self) -> Vec<&str> {
        self.nodes.iter().map(Held::node_path).collect()
    }

    guard_calls!("every permit",
        fencing: "The token of the first permit node. A semaphore admits several holders at once, so a token does not single out one holder: it orders the permits (a later permit has a higher token), which lets a store refuse a holder whose permit is older than one it knows to be later; [`tokens`](Self::tokens) gives every permit's.");

    /// The permit nodes, in the order taken.
    fn nodes(&self) -> std::slice::Iter<'_, Held> {
        self.nodes.iter()
    }

    fn nodes_to_release(&mut self) -> Vec<&mut Held> {
        self.nodes.iter_mut().collect()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        // One bound for the whole drop, not one per permit.
        let deadline = deadline_after(self.client.release_timeout());
        for node in &mut self.nodes {
            node.release_on_drop(deadline.saturating_duration_since(Instant::now()));
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("nodes", &self.node_paths())
            .field(
                "state",
                &least_certain(self.nodes.iter().map(Held::peek_state)),
            )
            .finish()
    }
}
