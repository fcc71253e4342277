//! `Semaphore`: N leases shared across processes, node-compatible with Curator's
//! `InterProcessSemaphoreV2`.

use std::fmt;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::core::contend::{acquire_on, Options};
use crate::core::held::Held;
use crate::core::leases::acquire_lease;
use crate::core::partial::Partial;
use crate::core::standing::LockState;
use crate::core::wait::{never_gives_up, Attempt, Wait};
use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::deadline_after;
use crate::session::blocking;
use crate::znode::path::validate_lock_path;

use super::acquisition::Acquisition;
use super::catalogue::SEMAPHORE;
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

    acquisitions!("one lease" => Permit, via take_one:
        acquire, try_acquire, acquire_timeout, acquire_cancellable, acquire_with;
        async acquire_async, try_acquire_async, acquire_timeout_async, acquire_cancellable_async,
        acquire_with_async);

    async fn take_one(&self, attempt: Attempt, background: bool) -> Result<Option<Permit>> {
        self.take(1, attempt, background).await
    }

    /// Blocks until `count` leases are held, all taken in one pass (two takers of several
    /// leases cannot deadlock each other).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `count` is zero or more than the permits; otherwise as
    /// [`acquire`](Self::acquire). Leases taken before an error are released.
    pub fn acquire_many(&self, count: usize) -> Result<Permit> {
        blocking(self.take(count, Attempt::forever(), false)).and_then(never_gives_up)
    }

    /// As [`acquire_many`](Self::acquire_many), all or nothing within `timeout`: on timeout the
    /// leases already taken are released (waiting for the server no longer than the timeout;
    /// the rest goes on in the background) and `Ok(None)` is returned.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    pub fn acquire_many_timeout(&self, count: usize, timeout: Duration) -> Result<Option<Permit>> {
        blocking(self.take(count, Attempt::timeout(timeout), false))
    }

    /// As [`acquire_many`](Self::acquire_many), until `token` is cancelled:
    /// [`Error::Cancelled`](crate::Error::Cancelled) then, with nothing held.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many), plus `Cancelled`.
    pub fn acquire_many_cancellable(&self, count: usize, token: &CancelToken) -> Result<Permit> {
        blocking(self.take(count, Attempt::cancellable(token), false)).and_then(never_gives_up)
    }

    /// As [`acquire_many`](Self::acquire_many), waiting as `wait` says (see [`Wait`]).
    ///
    /// # Errors
    /// As [`acquire_many_timeout`](Self::acquire_many_timeout) and
    /// [`acquire_many_cancellable`](Self::acquire_many_cancellable).
    pub fn acquire_many_with(&self, count: usize, wait: Wait) -> Result<Option<Permit>> {
        blocking(self.take(count, Attempt::with(wait), false))
    }

    /// As [`acquire_many`](Self::acquire_many), as a future. Cancel safe: dropped at any
    /// await point, it releases the leases taken so far and withdraws its queued node in the
    /// background (see [`acquire_async`](Self::acquire_async)).
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    pub async fn acquire_many_async(&self, count: usize) -> Result<Permit> {
        self.take(count, Attempt::forever(), true)
            .await
            .and_then(never_gives_up)
    }

    /// As [`acquire_many_timeout`](Self::acquire_many_timeout), as a future. Cancel safe: see
    /// [`acquire_many_async`](Self::acquire_many_async).
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    pub async fn acquire_many_timeout_async(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<Option<Permit>> {
        self.take(count, Attempt::timeout(timeout), true).await
    }

    /// As [`acquire_many_cancellable`](Self::acquire_many_cancellable), as a future. Cancel
    /// safe: see [`acquire_many_async`](Self::acquire_many_async).
    ///
    /// # Errors
    /// As [`acquire_many_cancellable`](Self::acquire_many_cancellable).
    pub async fn acquire_many_cancellable_async(
        &self,
        count: usize,
        token: &CancelToken,
    ) -> Result<Permit> {
        self.take(count, Attempt::cancellable(token), true)
            .await
            .and_then(never_gives_up)
    }

    /// As [`acquire_many_with`](Self::acquire_many_with), as a future. Cancel safe: see
    /// [`acquire_many_async`](Self::acquire_many_async).
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    pub async fn acquire_many_with_async(
        &self,
        count: usize,
        wait: Wait,
    ) -> Result<Option<Permit>> {
        self.take(count, Attempt::with(wait), true).await
    }

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
            let (leases, lease_name) = (&self.leases, SEMAPHORE.lease_names[0].0);
            for _ in 0..count {
                let lease = acquire_lease(
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
    pub fn break_lease(&self, lease: &Contender) -> Result<bool> {
        inspect::break_contender(&self.client, &self.leases, lease)
    }

    /// The number of permits.
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// The leases now held (and, briefly, the one being waited for), oldest first.
    ///
    /// # Errors
    /// Connection and server errors.
    pub fn leases(&self) -> Result<Vec<Contender>> {
        let permits = self.permits;
        inspect::contenders(
            &self.client,
            &self.leases,
            SEMAPHORE.lease_names,
            |_, at| at < permits,
        )
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

    /// The least certain state among the leases (see [`LockGuard::state`](crate::LockGuard::state)).
    pub fn state(&self) -> LockState {
        least_certain(self.leases.iter().map(Held::state))
    }

    /// `true` while every lease is held.
    pub fn is_held(&self) -> bool {
        self.state() == LockState::Held
    }

    /// The id of the session the leases belong to (all of them share one).
    pub fn session_id(&self) -> i64 {
        self.leases.first().map_or(0, Held::session_id)
    }

    /// Blocks until the permit is no longer [`LockState::Held`] (see
    /// [`state`](Self::state)) and returns the new state, or returns `None` as soon as `token`
    /// is cancelled: as [`LockGuard::wait_lost_cancellable`](crate::LockGuard::wait_lost_cancellable),
    /// for a watchdog that its owner ends before releasing.
    pub fn wait_lost_cancellable(&self, token: &CancelToken) -> Option<LockState> {
        match self.leases.as_slice() {
            [] => Some(LockState::Lost),
            [lease] => lease.wait_not_held(None, Some(token)),
            [first, ..] => loop {
                let state = self.state();
                if state != LockState::Held {
                    return Some(state);
                }
                if token.is_cancelled() {
                    return None;
                }
                // A session change wakes the wait on any lease; another lease's node deleted
                // is seen at the next look.
                first.wait_not_held(Some(deadline_after(OTHER_LEASES_POLL)), Some(token));
            },
        }
    }

    /// Releases every lease and reports the first failure, if any (each is released anyway,
    /// with background retries, as a [`LockGuard`](crate::LockGuard) is).
    ///
    /// # Errors
    /// As [`LockGuard::unlock`](crate::LockGuard::unlock).
    pub fn release(mut self) -> Result<()> {
        let _closing = self.client.watch_close();
        let mut outcome = Ok(());
        for lease in &mut self.leases {
            if let Err(err) = lease.release() {
                outcome = outcome.and(Err(err));
            }
        }
        outcome
    }

    /// As [`release`](Self::release), as a future. Cancel safe: the leases not yet released
    /// when it is dropped are released in the background.
    ///
    /// # Errors
    /// As [`LockGuard::unlock`](crate::LockGuard::unlock).
    pub async fn release_async(mut self) -> Result<()> {
        let mut outcome = Ok(());
        // Dropped half-way on an async worker, the permit must not block in its drop.
        for lease in &mut self.leases {
            lease.background_drop = true;
        }
        for lease in &mut self.leases {
            let wait = lease.session_timeout();
            if let Err(err) = lease.release_within_async(wait).await {
                outcome = outcome.and(Err(err));
            }
        }
        outcome
    }

    /// As [`wait_lost_cancellable`](Self::wait_lost_cancellable), as a future (cancelled by
    /// dropping it): ready once the permit is no longer [`LockState::Held`], with the new
    /// state.
    pub async fn wait_lost_async(&self) -> LockState {
        loop {
            let state = self.state();
            let Some(first) = self.leases.first().filter(|_| state == LockState::Held) else {
                return state;
            };
            // A session change wakes the wait on any lease; another lease's node deleted is
            // seen at the next look.
            let step = deadline_after(OTHER_LEASES_POLL);
            if let Some(state) = first.wait_not_held_async(Some(step)).await {
                return state;
            }
        }
    }
}

/// How often [`Permit::wait_lost_cancellable`] looks at the leases other than the first, as a
/// lock guard looks at its own node.
const OTHER_LEASES_POLL: Duration = Duration::from_millis(50);

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

/// The least certain of some leases' states.
fn least_certain(states: impl Iterator<Item = LockState>) -> LockState {
    states
        .max_by_key(|s| match s {
            LockState::Held => 0,
            LockState::Suspended => 1,
            _ => 2,
        })
        .unwrap_or(LockState::Lost)
}
