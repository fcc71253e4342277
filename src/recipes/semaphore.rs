//! `Semaphore`: N leases shared across processes, node-compatible with Curator's
//! `InterProcessSemaphoreV2`.

use std::fmt;
use std::time::Instant;

use crate::client::Client;
use crate::core::contend::{acquire_on, past_deadline_is_busy, Options};
use crate::core::held::Held;
use crate::core::partial::Partial;
use crate::core::permits::acquire_permit_node;
use crate::core::wait::Attempt;
use crate::error::{Error, Result};
use crate::rt::runtime::deadline_after;
use crate::znode::path::validate_lock_path;

use super::acquisition::Acquisition;
use super::catalogue::{rival_of, LockKind, SEMAPHORE};
use super::guard_calls::{guard_calls, least_certain};
use super::inspect::{self, Contender};
use super::queue::acquisitions;

/// A counting semaphore: at most `permits` leases are held at once, across every process using
/// the same ZooKeeper path. A crashed holder's leases vanish with its session.
///
/// The layout is Curator's `InterProcessSemaphoreV2`: lease takers queue on a mutex at
/// `<path>/locks`; the one at its head creates a lease node under `<path>/leases` and waits,
/// watching the leases, until at most `permits` exist. So zklock and Curator processes can
/// share one semaphore, as long as all use the same number of permits (ZooKeeper does not
/// store it).
///
/// There is no local handoff (as [`DistributedMutex::local_handoff`](crate::DistributedMutex::local_handoff)
/// offers): leases are shared by design, and each lease is a node that other processes count
/// to decide whether a permit is free; a lease passed on inside a process would keep a
/// permit from the others without a node they can see change hands, and the gate, the
/// semaphore's mutex, is held only for the moment a lease is taken.
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    path: String,
    /// The path of the lease nodes.
    leases: String,
    permits: usize,
    /// The path of the mutex that serialises lease takers.
    gate: String,
}

/// Leases of a [`Semaphore`]; released (all of them) when dropped, blocking at most the
/// client's [release timeout](crate::ClientBuilder::release_timeout) for all of them together
/// (what is not confirmed by then goes on in the background).
#[must_use = "the leases are released as soon as the permit is dropped"]
#[clippy::has_significant_drop]
pub struct Permit {
    leases: Vec<Held>,
    /// Keeps the client (its runtime) alive as long as the leases.
    client: Client,
}

impl Semaphore {
    /// A semaphore with `permits` leases at `path`; nothing is sent until first use.
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
            path: path.to_owned(),
            leases: format!("{path}/{}", SEMAPHORE.leases),
            permits,
            gate: format!("{path}/{}", SEMAPHORE.gate),
        })
    }

    acquisitions!("one lease" => Permit, via take_one():
        acquire, try_acquire, acquire_timeout, acquire_with;
        async acquire_async, try_acquire_async, acquire_with_async);

    async fn take_one(&self, attempt: Attempt, background: bool) -> Result<Option<Permit>> {
        self.take(1, attempt, background).await
    }

    acquisitions!("`count` leases (taken in one pass: two takers of several leases cannot deadlock each other)"
        => Permit, via take(count: usize),
        errors "[`Error::InvalidArgument`] if `count` is zero or more than the permits. Leases taken before an error, a timeout or a cancel are released (all or nothing).":
        acquire_many, try_acquire_many, acquire_many_timeout, acquire_many_with;
        async acquire_many_async, try_acquire_many_async, acquire_many_with_async);

    async fn take(
        &self,
        count: usize,
        attempt: Attempt,
        background: bool,
    ) -> Result<Option<Permit>> {
        if count == 0 || count > self.permits {
            return Err(Error::InvalidArgument(
                "lease count must be between 1 and the permits",
            ));
        }
        let measured = Acquisition::start(&self.client, SEMAPHORE.metric, &self.path);
        let acquire = async {
            let deadline = attempt.deadline(|| self.client.call_deadline());
            // One session for the gate and every lease: were it to expire half-way, a lease
            // taken on a new session would wait while the gate (lost with the old one) let
            // others in.
            let session = Box::pin(self.client.session_async(deadline)).await?;
            // One pass through the gate for all `count` leases: two takers each holding some
            // leases while waiting for more would wait for each other for ever.
            let options = Options::default();
            let gate_kind = SEMAPHORE.gate_kind;
            let gate = acquire_on(
                &session, &self.gate, gate_kind, &attempt, deadline, &options,
            )
            .await?;
            let Some(gate) = gate else {
                return Ok(None);
            };
            // Dropped on the way out, `taken` releases what was taken (all or nothing); the
            // gate, taken first, goes last.
            let mut taken = Partial::new(&attempt);
            taken.push(gate);
            // Our gate node exists (and with it the gate), so another recipe's contender that
            // lists the path after this finds the semaphore; this listing finds one that
            // created its node before (see `rival_of`). Refused, `taken` releases the gate.
            let beside = Box::pin(session.list_async(&self.path, deadline)).await;
            // Run into the deadline on a live connection, the listing is a timeout, as the
            // gate's and the leases' requests are.
            let Some(beside) = past_deadline_is_busy(session.as_ref(), deadline, beside.map(Some))?
            else {
                return Ok(None);
            };
            if let Some(rival) = rival_of(LockKind::Semaphore, &beside) {
                return Err(Error::RecipeConflict {
                    path: self.path.clone(),
                    ours: LockKind::Semaphore.name(),
                    theirs: rival.recipe,
                });
            }
            let (leases, lease_name) = (&self.leases, SEMAPHORE.lease_names[0].0);
            for _ in 0..count {
                let lease = acquire_permit_node(
                    &session,
                    leases,
                    lease_name,
                    self.permits,
                    &attempt,
                    deadline,
                )
                .await?;
                match lease {
                    Some(lease) => taken.push(lease),
                    None => return Ok(None),
                }
            }
            let mut leases = taken.complete();
            // Leave the gate to the next taker, waiting for the server no longer than a
            // dropped permit would (a slow reply finishes in the background).
            leases
                .remove(0)
                .release_logged(self.client.release_timeout())
                .await;
            for lease in &mut leases {
                lease.background_drop = background;
            }
            Ok(Some(Permit {
                leases,
                client: self.client.clone(),
            }))
        };
        let outcome = attempt
            .run(self.client.close_token(), Box::pin(acquire))
            .await;
        measured.finish(&attempt, outcome, |permit| {
            permit.leases.iter_mut().collect()
        })
    }

    /// Deletes a lease node if unchanged since inspected (a hung holder's), freeing its permit;
    /// see [`DistributedMutex::break_contender`](crate::DistributedMutex::break_contender).
    ///
    /// # Errors
    /// As there.
    pub fn break_contender(&self, lease: &Contender) -> Result<bool> {
        crate::session::blocking(self.break_contender_async(lease))
    }

    /// As [`break_contender`](Self::break_contender), as a future (`Send`, any executor).
    /// Dropped before it completes, the delete may or may not have been applied; nothing else
    /// is left behind.
    ///
    /// # Errors
    /// As [`break_contender`](Self::break_contender).
    pub async fn break_contender_async(&self, lease: &Contender) -> Result<bool> {
        inspect::break_contender(&self.client, &self.leases, lease).await
    }

    /// The number of permits.
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// The leases now held (and, briefly, the one being waited for), oldest first. Blocks for
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
        let permits = self.permits;
        inspect::contenders(
            &self.client,
            &self.leases,
            SEMAPHORE.lease_names,
            |_, at| at < permits,
        )
        .await
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("leases", &self.leases)
            .field("permits", &self.permits)
            .finish()
    }
}

impl Permit {
    /// How many leases this permit holds.
    pub fn count(&self) -> usize {
        self.leases.len()
    }

    /// The lease nodes' paths.
    pub fn node_paths(&self) -> Vec<&str> {
        self.leases.iter().map(Held::node_path).collect()
    }

    guard_calls!("every lease",
        fencing: "The token of the first lease node. A semaphore admits several holders at once, so a token does not single out one holder: it orders the leases (a later lease has a higher token), which lets a store refuse a holder whose lease is older than one it knows to be later; [`tokens`](Self::tokens) gives every lease's.");

    /// The leases, in the order taken.
    fn nodes(&self) -> std::slice::Iter<'_, Held> {
        self.leases.iter()
    }

    fn nodes_to_release(&mut self) -> Vec<&mut Held> {
        self.leases.iter_mut().collect()
    }

    fn client(&self) -> &Client {
        &self.client
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        // Closing the client wakes a release stuck on a silent connection.
        let _closing = self.client.watch_close();
        // One bound for the whole drop, not one per lease.
        let deadline = deadline_after(self.client.release_timeout());
        for lease in &mut self.leases {
            lease.release_on_drop(deadline.saturating_duration_since(Instant::now()));
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("leases", &self.node_paths())
            .field(
                "state",
                &least_certain(self.leases.iter().map(Held::peek_state)),
            )
            .finish()
    }
}
