//! How long an acquisition waits, and what stops it: the public [`Wait`] and its resolved,
//! internal form [`Budget`].

use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::rt::cancel::{self, CancelToken};
use crate::rt::runtime::deadline_after;

use super::withdraw::{
    Withdrawals, CANCEL_WITHDRAW_WAIT, PAST_DEADLINE_WITHDRAW_WAIT, WITHDRAW_WAIT,
};

/// How a call waits: as long as it takes, up to a timeout or until a deadline, and
/// optionally until a [`CancelToken`] is cancelled. Passed to the `*_with` acquisitions
/// ([`DistributedMutex::lock_with`](crate::DistributedMutex::lock_with) and the like), which
/// return `Ok(None)` when the timeout passes and [`Error::Cancelled`] when the token is
/// cancelled, and to the guards' waits ([`LockGuard::wait_lost_with`](crate::LockGuard::wait_lost_with),
/// [`LockGuard::wait_revocation_with`](crate::LockGuard::wait_revocation_with)), which return
/// `None` (or `false`) in both cases. Every other wait of the API takes one too, in the same
/// forms (`x_with`, `x_with_async`): a release
/// ([`LockGuard::unlock_with`](crate::LockGuard::unlock_with)), a close
/// ([`Client::close_with`](crate::Client::close_with)), a change of the session's state
/// ([`Client::wait_state_change_with`](crate::Client::wait_state_change_with)).
///
/// ```no_run
/// # fn main() -> zklock::Result<()> {
/// # let client = zklock::Client::connect("127.0.0.1:2181")?;
/// # let mutex = zklock::DistributedMutex::new(&client, "/jobs/nightly")?;
/// use std::time::Duration;
/// use zklock::{CancelToken, Wait};
/// let shutdown = CancelToken::new();
/// match mutex.lock_with(Wait::timeout(Duration::from_secs(30)).cancel_on(&shutdown)) {
///     Ok(Some(_guard)) => { /* do the work */ }
///     Ok(None) => println!("still busy after 30 s"),
///     Err(zklock::Error::Cancelled) => println!("shutting down"),
///     Err(err) => return Err(err),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Wait {
    limit: Limit,
    cancel: Option<CancelToken>,
}

/// How far a [`Wait`] reaches.
#[derive(Debug, Clone, Copy, Default)]
enum Limit {
    #[default]
    Forever,
    /// A timeout, measured from the start of the call.
    After(Duration),
    /// A deadline, the same whenever the call starts.
    At(Instant),
}

impl Wait {
    /// Wait as long as it takes (the default).
    pub fn forever() -> Wait {
        Wait::default()
    }

    /// Wait at most `timeout`, measured on the monotonic clock from the start of the call.
    pub fn timeout(timeout: Duration) -> Wait {
        Wait {
            limit: Limit::After(timeout),
            cancel: None,
        }
    }

    /// Wait until `deadline` (the monotonic clock): one budget shared by several calls, each
    /// given what is left of it. A call given a deadline that has passed already gives up
    /// as one given a zero timeout would. Messages that name the timeout name the time left
    /// at the start of the call.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// use std::time::{Duration, Instant};
    /// use zklock::{DistributedMutex, Wait};
    /// // Both locks within 5 s in all, however the time splits between them.
    /// let budget = Wait::until(Instant::now() + Duration::from_secs(5));
    /// let source = DistributedMutex::new(&client, "/accounts/alice")?;
    /// let target = DistributedMutex::new(&client, "/accounts/bob")?;
    /// let Some(_source) = source.lock_with(budget.clone())? else { return Ok(()) };
    /// let Some(_target) = target.lock_with(budget)? else { return Ok(()) };
    /// # Ok(()) }
    /// ```
    pub fn until(deadline: Instant) -> Wait {
        Wait {
            limit: Limit::At(deadline),
            cancel: None,
        }
    }

    /// Also stop, with [`Error::Cancelled`], as soon as `token` is cancelled:
    /// `Wait::forever().cancel_on(&token)` waits until done or cancelled,
    /// `Wait::timeout(d).cancel_on(&token)` until whichever comes first.
    pub fn cancel_on(mut self, token: &CancelToken) -> Wait {
        self.cancel = Some(token.clone());
        self
    }

    /// The deadline of a call that starts now, if it has one, and the time that leaves it
    /// (for messages): the one place a timeout turns into a deadline.
    pub(crate) fn resolve(&self) -> Option<(Instant, Duration)> {
        match self.limit {
            Limit::Forever => None,
            Limit::After(timeout) => Some((deadline_after(timeout), timeout)),
            Limit::At(deadline) => {
                Some((deadline, deadline.saturating_duration_since(Instant::now())))
            }
        }
    }

    /// The deadline of a call that starts now, if it has one.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.resolve().map(|(deadline, _)| deadline)
    }

    /// The token that cancels the call, if one was given ([`cancel_on`](Self::cancel_on)).
    pub(crate) fn cancel_token(&self) -> Option<&CancelToken> {
        self.cancel.as_ref()
    }

    /// Awaits `wait` until it ends, or this wait's deadline passes or its token is cancelled
    /// (`None` then): the async form of a guard's bounded waits, which report a deadline and
    /// a cancel alike, as their blocking forms do. `wait` is polled first, so one that is
    /// over already is reported even past the deadline or with a cancelled token.
    pub(crate) async fn race<F: Future>(&self, wait: F) -> Option<F::Output> {
        let deadline = self.deadline();
        let mut wait = std::pin::pin!(wait);
        let mut timer = std::pin::pin!(async {
            match deadline {
                Some(at) => crate::rt::runtime::sleep_until(at).await,
                None => std::future::pending().await,
            }
        });
        let mut stop = std::pin::pin!(async {
            match &self.cancel {
                Some(token) => drop(token.cancelled_error().await),
                None => std::future::pending().await,
            }
        });
        std::future::poll_fn(|cx| {
            if let Poll::Ready(done) = wait.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            if timer.as_mut().poll(cx).is_ready() || stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await
    }
}

/// How long an acquisition may wait for other contenders.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// Do not wait for other contenders (`try_lock`).
    DontWait,
    Until(Instant),
    Forever,
}

/// One acquisition's budget: its patience and cancellation, resolved at the start of the call
/// (a [`Wait`] made concrete), and what it withdraws on its way out.
#[derive(Clone)]
pub(crate) struct Budget {
    pub(crate) patience: Patience,
    /// The caller's timeout, for messages: [`Patience::Until`] keeps only its deadline.
    timeout: Option<Duration>,
    cancel: Option<CancelToken>,
    pub(crate) withdrawals: Withdrawals,
}

impl Budget {
    pub(crate) fn forever() -> Budget {
        Budget::with(Wait::forever())
    }

    pub(crate) fn dont_wait() -> Budget {
        Budget {
            patience: Patience::DontWait,
            ..Budget::forever()
        }
    }

    pub(crate) fn timeout(timeout: Duration) -> Budget {
        Budget::with(Wait::timeout(timeout))
    }

    pub(crate) fn with(wait: Wait) -> Budget {
        let resolved = wait.resolve();
        Budget {
            patience: resolved.map_or(Patience::Forever, |(deadline, _)| Patience::Until(deadline)),
            timeout: resolved.map(|(_, timeout)| timeout),
            cancel: wait.cancel,
            withdrawals: Withdrawals::default(),
        }
    }

    /// A budget that waits until `deadline` of a clock other than the monotonic one (the
    /// simulation's virtual clock), `timeout` after its start.
    #[cfg(any(test, feature = "simulation"))]
    pub(crate) fn until(deadline: Instant, timeout: Duration) -> Budget {
        Budget {
            patience: Patience::Until(deadline),
            timeout: Some(timeout),
            cancel: None,
            withdrawals: Withdrawals::default(),
        }
    }

    /// The same budget, stopped also by `token` (as [`Wait::cancel_on`]).
    #[cfg(any(test, feature = "simulation"))]
    pub(crate) fn cancelled_by(mut self, token: &CancelToken) -> Budget {
        self.cancel = Some(token.clone());
        self
    }

    /// The deadline of the acquisition's requests; `one_call` gives the deadline of a one-off
    /// call on the client (see `Client::call_deadline`).
    pub(crate) fn deadline(&self, one_call: impl FnOnce() -> Instant) -> Option<Instant> {
        match self.patience {
            Patience::Forever => None,
            Patience::Until(deadline) => Some(deadline),
            // Not waiting on other holders still takes round trips: bound them.
            Patience::DontWait => Some(one_call()),
        }
    }

    /// How long the acquisition may wait, for messages; `one_call` gives a one-off call's
    /// timeout, as [`deadline`](Self::deadline) its deadline.
    pub(crate) fn time_allowed(&self, one_call: impl FnOnce() -> Duration) -> Option<Duration> {
        match self.patience {
            Patience::Forever => None,
            Patience::Until(_) => self.timeout,
            Patience::DontWait => Some(one_call()),
        }
    }

    /// Runs the acquisition `acquire` until it ends, this budget's token is cancelled
    /// ([`Error::Cancelled`]) or `closes` (the client's own token) is ([`Error::Closed`]);
    /// a token cancelled
    /// already stops it before anything is sent. A stopped acquisition's future is dropped,
    /// which withdraws what it queued. Unless it acquired, waits briefly for its withdrawals
    /// to be settled, so that nothing is left behind on return as far as the server answers
    /// in time (the rest goes on in the background); never more than
    /// [`PAST_DEADLINE_WITHDRAW_WAIT`] past the budget's deadline (see
    /// [`settle_until`](Self::settle_until)).
    ///
    /// The blocking calls run the same future on their own thread
    /// ([`blocking`](crate::session::blocking)): a cancel wakes that thread through the
    /// future's waker.
    pub(crate) async fn run<T>(
        &self,
        closes: &CancelToken,
        acquire: impl Future<Output = Result<Option<T>>>,
    ) -> Result<Option<T>> {
        self.run_on(
            closes,
            acquire,
            Instant::now,
            crate::rt::runtime::sleep_until,
        )
        .await
    }

    /// [`run`](Self::run) on the clock read by `now` and slept on by `sleep_until` (the
    /// simulation's virtual clock, which the budget's deadline is then of).
    pub(crate) async fn run_on<T, Z: Future<Output = ()>>(
        &self,
        closes: &CancelToken,
        acquire: impl Future<Output = Result<Option<T>>>,
        now: impl Fn() -> Instant,
        sleep_until: impl Fn(Instant) -> Z,
    ) -> Result<Option<T>> {
        let tokens: Vec<CancelToken> = self
            .cancel
            .iter()
            .cloned()
            .chain([closes.clone()])
            .collect();
        if let Some(stopped) = cancel::stopped(&tokens) {
            return Err(stopped);
        }
        let (outcome, grace) = {
            let mut acquire = std::pin::pin!(acquire);
            let mut stop = std::pin::pin!(cancel::first_cancelled(&tokens));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(outcome) = acquire.as_mut().poll(cx) {
                    return Poll::Ready((outcome, WITHDRAW_WAIT));
                }
                stop.as_mut()
                    .poll(cx)
                    .map(|stopped| (Err(stopped), CANCEL_WITHDRAW_WAIT))
            })
            .await
        };
        if !matches!(outcome, Ok(Some(_))) {
            Box::pin(self.settle(&tokens, grace, now, sleep_until)).await;
        }
        outcome
    }

    /// Waits for the withdrawals until [`settle_until`](Self::settle_until) with `grace`; a
    /// token cancelled before or meanwhile (the acquisition ended by itself just before a
    /// cancel, or the caller cancels a call that is only tidying up) shortens the wait to a
    /// cancelled call's.
    async fn settle<Z: Future<Output = ()>>(
        &self,
        tokens: &[CancelToken],
        grace: Duration,
        now: impl Fn() -> Instant,
        sleep_until: impl Fn(Instant) -> Z,
    ) {
        let until = self.settle_until(now(), grace);
        let cancelled = {
            let mut settled = std::pin::pin!(self.withdrawals.settled(sleep_until(until)));
            let mut stop = std::pin::pin!(cancel::first_cancelled(tokens));
            std::future::poll_fn(|cx| {
                if settled.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(false);
                }
                stop.as_mut().poll(cx).map(|_| true)
            })
            .await
        };
        if cancelled {
            let until = until.min(self.settle_until(now(), CANCEL_WITHDRAW_WAIT));
            self.withdrawals.settled(sleep_until(until)).await;
        }
    }

    /// Until when an acquisition that stopped at `now` waits for its withdrawals: `grace`,
    /// and never longer than [`PAST_DEADLINE_WITHDRAW_WAIT`] past its deadline. On a silent
    /// connection (it still looks connected, so the withdrawals are waited for) the wait
    /// would otherwise push the return a whole grace past the deadline.
    pub(crate) fn settle_until(&self, now: Instant, grace: Duration) -> Instant {
        let by = now.checked_add(grace).unwrap_or(now);
        match self.patience {
            Patience::Until(deadline) => deadline
                .checked_add(PAST_DEADLINE_WITHDRAW_WAIT)
                .map_or(by, |latest| by.min(latest)),
            Patience::Forever | Patience::DontWait => by,
        }
    }
}

/// The outcome of an acquisition that waits as long as it takes (`lock()` and the like): it
/// never gives up, so `None` cannot come back; should it ever, that is reported as a lost
/// connection rather than a panic.
pub(crate) fn never_gives_up<T>(outcome: Option<T>) -> Result<T> {
    outcome.ok_or_else(Error::connection_loss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_stays_put_and_a_timeout_runs_from_the_call() {
        let at = deadline_after(Duration::from_secs(60));
        let (deadline, left) = Wait::until(at).resolve().unwrap();
        assert_eq!(deadline, at);
        assert!(left <= Duration::from_secs(60) && left > Duration::from_secs(59));
        assert!(matches!(Budget::with(Wait::until(at)).patience, Patience::Until(d) if d == at));
        let passed = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(
            Wait::until(passed).resolve(),
            Some((passed, Duration::ZERO))
        );

        let before = Instant::now();
        let (deadline, timeout) = Wait::timeout(Duration::from_secs(5)).resolve().unwrap();
        assert_eq!(timeout, Duration::from_secs(5));
        assert!(deadline >= before + timeout);
        assert!(Wait::forever().resolve().is_none());
        assert!(matches!(
            Budget::with(Wait::forever()).patience,
            Patience::Forever
        ));
    }
}
