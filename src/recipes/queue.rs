//! `LockQueue`: the one front-end of the recipes that queue on a single lock path (mutex,
//! read/write lock, election). A recipe is its [`Kind`]s (names and blocker rule) plus a
//! queue; [`acquisitions!`] writes its public lock methods.

use std::sync::Arc;
use std::time::Instant;

use crate::client::Client;
use crate::core::cohort::{
    ended, wait_locally, Check, Checked, Checker, Claim, Cohort, Contention,
};
use crate::core::contend::{acquire_on, Options};
use crate::core::held::Held;
use crate::core::kind::{Kind, Role};
use crate::core::wait::{Budget, Patience};
use crate::error::Result;
use crate::session::Session;
use crate::znode::path::validate_lock_path;

use super::acquisition::{envelope, on_session};
use super::guard::LockGuard;
use super::inspect::{self, Contender};

/// A lock path, the client it is reached through, and the recipe's per-acquisition options.
#[derive(Clone)]
pub(crate) struct LockQueue {
    pub(crate) client: Client,
    pub(crate) path: String,
    pub(crate) options: Options,
}

impl std::fmt::Debug for LockQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockQueue")
            .field("path", &self.path)
            .finish()
    }
}

impl LockQueue {
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a bad lock path.
    pub(crate) fn new(client: &Client, path: &str, options: Options) -> Result<LockQueue> {
        validate_lock_path(path)?;
        Ok(LockQueue {
            client: client.clone(),
            path: path.to_owned(),
            options,
        })
    }

    /// Queues a node of `kind` and waits as `attempt` says. With `background_drop` (async
    /// callers), the guard releases in the background when dropped.
    pub(crate) async fn acquire(
        &self,
        kind: &'static Kind,
        attempt: Budget,
        background_drop: bool,
    ) -> Result<Option<LockGuard>> {
        let cohort = (self.options.local_handoff.filter(|_| exclusive(kind))).map(|batch| {
            let name = kind.names[kind.ours].0;
            let revocable = self.options.revocable;
            self.client
                .cohort(&self.path, name, batch, revocable, kind.metric)
        });
        let mut attempt = attempt;
        if let Some(cohort) = &cohort {
            // The node is the local queue's: a caller that leaves (a timeout, a cancellation)
            // waits for its withdrawal, if it was the last, as it would for a node of its own.
            attempt.withdrawals = cohort.withdrawals();
        }
        let (cohort, attempt_ref) = (&cohort, &attempt);
        let take = move |session: Arc<Session>, deadline| async move {
            let held = match cohort {
                Some(cohort) => {
                    self.acquire_locally(&session, kind, cohort, attempt_ref, deadline)
                        .await?
                }
                None => {
                    acquire_on(
                        &session,
                        &self.path,
                        kind,
                        attempt_ref,
                        deadline,
                        &self.options,
                    )
                    .await?
                }
            };
            Ok(held.map(|held| LockGuard::new(held, self.client.clone())))
        };
        let recipe = (kind.metric, self.path.as_str());
        envelope(
            &self.client,
            recipe,
            &attempt,
            background_drop,
            take,
            |guard| vec![&mut guard.held],
        )
        .await
    }

    /// With local handoff: waits in the client's local queue of this path, whose contentions
    /// (the core's acquisition) run on behalf of every local caller (see `core/cohort.rs`).
    async fn acquire_locally(
        &self,
        session: &Session,
        kind: &'static Kind,
        cohort: &Arc<Cohort<Held>>,
        attempt: &Budget,
        deadline: Option<Instant>,
    ) -> Result<Option<Held>> {
        let start = {
            let (client, path, withdrawals) =
                (self.client.clone(), self.path.clone(), cohort.withdrawals());
            let options = Options {
                local_handoff: None,
                ..self.options.clone()
            };
            move |try_only: bool| -> Contention<Held> {
                let (client, path, options) = (client.clone(), path.clone(), options.clone());
                let mut attempt = if try_only {
                    Budget::dont_wait()
                } else {
                    Budget::forever()
                };
                attempt.withdrawals = withdrawals.clone();
                Box::pin(async move {
                    let (path_ref, attempt_ref, options) = (&path, &attempt, &options);
                    let take = move |session: Arc<Session>, deadline| async move {
                        let held =
                            acquire_on(&session, path_ref, kind, attempt_ref, deadline, options);
                        Ok((held.await?, session))
                    };
                    let (Some(held), session) = on_session(&client, &attempt, take).await? else {
                        return Ok(None);
                    };
                    // Who else waits, and whether our node is still there: the checks of
                    // the bound (see `core/cohort.rs`), each a listing sent when it is made
                    // (no answer counts as another node).
                    let ours = held.node_path().rsplit('/').next().unwrap_or("").to_owned();
                    let ended = ended(session.clone());
                    let checks: Checker = Box::new(move || -> Check {
                        let (listing, ours) = (session.list_sent_now(&path), ours.clone());
                        Box::pin(async move {
                            listing
                                .await
                                .map_or(Checked::Others, |names| Checked::of(&names, &ours))
                        })
                    });
                    Ok(Some(Claim {
                        node: held,
                        checks,
                        ended,
                    }))
                })
            }
        };
        let try_only = matches!(attempt.patience, Patience::DontWait);
        // A caller that does not end holding waits for the withdrawal of the node queued for
        // it, if it was the last caller, in `Budget::run`.
        wait_locally(session, cohort, try_only, deadline, start)
            .await
            .unwrap_or_else(|elapsed| elapsed.outcome(session.liveness()))
    }

    /// The nodes queued, in order, as seen by inspection. `kinds` are every kind of node the
    /// queue holds (they share their names), whose rules say which nodes hold the lock.
    pub(crate) async fn contenders(&self, kinds: &[&Kind]) -> Result<Vec<Contender>> {
        let names = kinds.first().map_or(&[][..], |k| k.names);
        inspect::contenders(&self.client, &self.path, names, |nodes, at| {
            inspect::holds_by_rule(kinds, nodes, at)
        })
        .await
    }

    pub(crate) async fn break_contender(&self, contender: &Contender) -> Result<bool> {
        inspect::break_contender(&self.client, &self.path, contender).await
    }

    pub(crate) async fn request_revocation(&self, contender: &Contender) -> Result<bool> {
        inspect::request_revocation(&self.client, &self.path, contender).await
    }
}

/// Whether local handoff applies to `kind`: a mutex's and a write lock's nodes (readers
/// share already; an election's leadership is not passed around).
fn exclusive(kind: &Kind) -> bool {
    matches!(kind.names[kind.ours].1, Role::Exclusive | Role::Write)
}

/// Writes a recipe's acquisitions of one kind, with their docs: the four blocking forms
/// (block until held; try without waiting; wait up to a timeout; wait as a
/// [`Wait`](crate::Wait) says, which also covers a cancel token) and the three async ones a
/// dropped future or a runtime's own timeout does not already give (block, try, `Wait`). The
/// recipe provides `async fn $via(&self, $($arg,)* Budget, background_drop: bool) ->
/// Result<Option<$guard>>`, the one acquisition every form runs; `$what` names what is held,
/// and `$errors` adds a line to the errors of the blocking call (for the arguments).
macro_rules! acquisitions {
    (
        $what:literal => $guard:ty, via $via:ident($($arg:ident: $argty:ty),*)
        $(, errors $errors:literal)?:
        $block:ident, $try_:ident, $timeout:ident, $with:ident;
        async $block_a:ident, $try_a:ident, $with_a:ident
    ) => {
        #[doc = concat!("Blocks until it holds ", $what, ".")]
        ///
        /// Waits as long as it takes for other holders; a lost connection is waited out too,
        /// but the call returns an error once the session expires, so it cannot hang past an
        /// outage longer than the session timeout. Contenders are served in the order they
        /// asked (FIFO).
        ///
        /// Locking again from a thread that holds it through a guard waits for that guard,
        /// like `std::sync::Mutex`: release it first, or use a timed call or a cancel token
        #[doc = concat!("([`", stringify!($with), "`](Self::", stringify!($with), ")).")]
        ///
        #[doc = concat!("Never call it on an async runtime's worker thread: use [`", stringify!($block_a), "`](Self::", stringify!($block_a), ").")]
        ///
        /// # Errors
        /// [`Error::SessionExpired`](crate::Error::SessionExpired),
        /// [`Error::Closed`](crate::Error::Closed) (the client was closed meanwhile),
        /// [`Error::EphemeralParent`](crate::Error::EphemeralParent),
        /// [`Error::NoAuth`](crate::Error::NoAuth) and other server errors. No node is left
        /// behind.
        $(#[doc = $errors])?
        pub fn $block(&self $(, $arg: $argty)*) -> $crate::Result<$guard> {
            $crate::session::blocking(self.$via($($arg,)* $crate::core::wait::Budget::forever(), false))
                .and_then($crate::core::wait::never_gives_up)
        }

        #[doc = concat!("Takes ", $what, " if that needs no wait: never waits for other contenders.")]
        ///
        /// Still one round trip to the server; if the connection is down it waits for it at
        /// most the session timeout. Returns `Ok(None)` when busy; no node is left behind.
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($block), "`](Self::", stringify!($block), "), plus [`Error::ConnectionLoss`](crate::Error::ConnectionLoss) if the connection did not return in time.")]
        pub fn $try_(&self $(, $arg: $argty)*) -> $crate::Result<Option<$guard>> {
            $crate::session::blocking(self.$via($($arg,)* $crate::core::wait::Budget::dont_wait(), false))
        }

        #[doc = concat!("Blocks until it holds ", $what, " or `timeout` (monotonic clock, from the call) has passed: `Ok(None)` then.")]
        ///
        /// On timeout our queued node is deleted first (waiting for that delete at most 100 ms
        /// past the timeout, also on a connection that has gone silent; a slow one finishes in
        /// the background), so nothing is left behind. The
        /// timeout holds during outages too: if the connection is down when it runs out, the
        /// call returns [`Error::ConnectionLoss`](crate::Error::ConnectionLoss) (naming the lock
        /// path, the timeout and the server last connected to) instead of `None`, and a node
        /// created meanwhile is deleted once the connection returns.
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($block), "`](Self::", stringify!($block), "), plus [`Error::ConnectionLoss`](crate::Error::ConnectionLoss).")]
        pub fn $timeout(
            &self,
            $($arg: $argty,)*
            timeout: std::time::Duration,
        ) -> $crate::Result<Option<$guard>> {
            $crate::session::blocking(self.$via($($arg,)* $crate::core::wait::Budget::timeout(timeout), false))
        }

        #[doc = concat!("Blocks until it holds ", $what, ", waiting as `wait` says: up to its timeout (`Ok(None)` then), and until its token is cancelled ([`Error::Cancelled`](crate::Error::Cancelled)).")]
        ///
        /// Cancelling the token (from any thread) makes the call delete its queued node and
        /// return `Cancelled` promptly; during an outage it returns at once and the node is
        /// deleted in the background once the connection is back. A token cancelled before the
        /// call makes it return at once, sending nothing. `Wait::forever().cancel_on(&token)`
        /// waits until held or cancelled, and so never returns `Ok(None)`;
        /// `Wait::timeout(d).cancel_on(&token)` gives up at whichever comes first.
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($timeout), "`](Self::", stringify!($timeout), "), plus [`Error::Cancelled`](crate::Error::Cancelled).")]
        pub fn $with(
            &self,
            $($arg: $argty,)*
            wait: $crate::Wait,
        ) -> $crate::Result<Option<$guard>> {
            $crate::session::blocking(self.$via($($arg,)* $crate::core::wait::Budget::with(wait), false))
        }

        #[doc = concat!("As [`", stringify!($block), "`](Self::", stringify!($block), "), as a future: waits for ", $what, " without blocking a thread.")]
        ///
        /// Runs on any executor (tokio, smol, `futures::executor`); the future is `Send`.
        ///
        /// **Cancel safety:** dropping the future at any await point (a `select!`, a runtime's
        /// timeout such as `tokio::time::timeout`, an aborted task) withdraws the node it
        /// queued in the background (within a round trip, or once the connection returns),
        /// removes its watch, and releases the lock if it had just been taken. So a runtime's
        /// timeout and a dropped future do what a timed or cancellable call would; use
        #[doc = concat!("[`", stringify!($with_a), "`](Self::", stringify!($with_a), ") for a deadline that does not depend on a runtime.")]
        /// The guard it returns releases in the background when dropped; await its
        /// `unlock_async` for the outcome.
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($block), "`](Self::", stringify!($block), ").")]
        pub async fn $block_a(&self $(, $arg: $argty)*) -> $crate::Result<$guard> {
            self.$via($($arg,)* $crate::core::wait::Budget::forever(), true)
                .await
                .and_then($crate::core::wait::never_gives_up)
        }

        #[doc = concat!("As [`", stringify!($try_), "`](Self::", stringify!($try_), "), as a future. Cancel safe: see [`", stringify!($block_a), "`](Self::", stringify!($block_a), ").")]
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($try_), "`](Self::", stringify!($try_), ").")]
        pub async fn $try_a(&self $(, $arg: $argty)*) -> $crate::Result<Option<$guard>> {
            self.$via($($arg,)* $crate::core::wait::Budget::dont_wait(), true).await
        }

        #[doc = concat!("As [`", stringify!($with), "`](Self::", stringify!($with), "), as a future: `Ok(None)` once the timeout has passed, after its queued node was withdrawn; [`Error::Cancelled`](crate::Error::Cancelled) once the token is cancelled. Cancel safe: see [`", stringify!($block_a), "`](Self::", stringify!($block_a), ").")]
        ///
        /// The timeout is measured by zklock's own timer, on any executor.
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($with), "`](Self::", stringify!($with), ").")]
        pub async fn $with_a(
            &self,
            $($arg: $argty,)*
            wait: $crate::Wait,
        ) -> $crate::Result<Option<$guard>> {
            self.$via($($arg,)* $crate::core::wait::Budget::with(wait), true).await
        }
    };
}
pub(crate) use acquisitions;

/// Writes the calls every lock recipe (mutex, read/write lock) shares besides its
/// acquisitions, for a queue that holds `$kind`'s nodes: `revocable`, `path`, and
/// `contenders`, `break_contender` and `request_revocation` with their `_async` forms.
macro_rules! queue_calls {
    ($($kind:expr),+) => {
        /// Makes the guards of this lock listen for revocation requests
        /// ([`request_revocation`](Self::request_revocation), or Curator's `Revoker`): see
        /// [`LockGuard::revocation_requested`](crate::LockGuard::revocation_requested). The
        /// guard then also learns at once when its node is deleted by someone else (an
        /// operator breaking the lock): its state turns
        /// [`LockState::Lost`](crate::LockState::Lost). Costs one extra request per
        /// acquisition.
        pub fn revocable(mut self) -> Self {
            self.queue.options.revocable = true;
            self
        }

        /// The lock path.
        pub fn path(&self) -> &str {
            &self.queue.path
        }

        /// The contenders queued on this lock, holders first, each with its [`Role`](crate::inspect::Role)
        /// and the owner data stored in its node (`host=.. pid=.. thread=..` for zklock
        /// nodes).
        ///
        /// Blocks for a few round trips.
        ///
        /// # Errors
        /// Connection and server errors; an absent lock path is an empty queue.
        pub fn contenders(&self) -> $crate::Result<Vec<$crate::recipes::inspect::Contender>> {
            $crate::session::blocking(self.contenders_async())
        }

        /// As [`contenders`](Self::contenders), as a future (`Send`, any executor). Cancel
        /// safe: dropping it leaves nothing behind (it only reads).
        ///
        /// # Errors
        /// As [`contenders`](Self::contenders).
        pub async fn contenders_async(
            &self,
        ) -> $crate::Result<Vec<$crate::recipes::inspect::Contender>> {
            self.queue.contenders(&[$(&$kind),+]).await
        }

        /// Deletes a contender's node, typically a stale holder's (a hung process that keeps
        /// its session alive), as seen by an earlier [`contenders`](Self::contenders) call.
        /// The node is deleted only if it is unchanged since then (same creation zxid and data
        /// version), so an operator never removes a node other than the one shown. Its owner,
        /// if alive, finds the lock lost. Blocks for one round trip (more if the reply is
        /// lost: the node is then read again rather than deleted blindly).
        ///
        /// Returns `Ok(true)` once the node is gone after our delete, `Ok(false)` if the
        /// server said it was gone already.
        ///
        /// # Errors
        /// [`Error::NodeChanged`](crate::Error::NodeChanged) if the node changed;
        /// [`Error::NoAuth`](crate::Error::NoAuth) if its ACL forbids us; connection errors.
        pub fn break_contender(
            &self,
            contender: &$crate::recipes::inspect::Contender,
        ) -> $crate::Result<bool> {
            $crate::session::blocking(self.queue.break_contender(contender))
        }

        /// As [`break_contender`](Self::break_contender), as a future (`Send`, any executor).
        /// Dropped before it completes, the delete may or may not have been applied; nothing
        /// else is left behind.
        ///
        /// # Errors
        /// As [`break_contender`](Self::break_contender).
        pub async fn break_contender_async(
            &self,
            contender: &$crate::recipes::inspect::Contender,
        ) -> $crate::Result<bool> {
            self.queue.break_contender(contender).await
        }

        /// Asks the holder of `contender`'s node to release the lock, by writing Curator's
        /// revocation marker (`__REVOKE__`) into the node. A zklock holder of a
        /// [`revocable`](Self::revocable) lock sees it through
        /// [`LockGuard::revocation_requested`](crate::LockGuard::revocation_requested); a
        /// Curator holder through its `RevocationListener`. The holder decides; nothing is
        /// released by force. Blocks for one round trip.
        ///
        /// Returns `Ok(false)` if the node is gone.
        ///
        /// # Errors
        /// Connection and server errors.
        pub fn request_revocation(
            &self,
            contender: &$crate::recipes::inspect::Contender,
        ) -> $crate::Result<bool> {
            $crate::session::blocking(self.queue.request_revocation(contender))
        }

        /// As [`request_revocation`](Self::request_revocation), as a future (`Send`, any
        /// executor). Dropped before it completes, the request may or may not have been
        /// written; nothing else is left behind.
        ///
        /// # Errors
        /// As [`request_revocation`](Self::request_revocation).
        pub async fn request_revocation_async(
            &self,
            contender: &$crate::recipes::inspect::Contender,
        ) -> $crate::Result<bool> {
            self.queue.request_revocation(contender).await
        }
    };
}
pub(crate) use queue_calls;
