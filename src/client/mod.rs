//! The client and what it tells about its session: [`Client`] (also at the crate root, with
//! its [`ClientBuilder`](crate::ClientBuilder)), the session's [`SessionState`]
//! ([`Client::state`]) and the [`StateChange`]s a listener receives
//! ([`ClientBuilder::on_state_change`](crate::ClientBuilder::on_state_change)), and a
//! [`WeakClient`] for code that must not keep the client alive (such a listener). See
//! [`guide::operating`](crate::guide::operating).

// For maintainers: `Client` is one ZooKeeper session shared by every lock made from it, behind
// a blocking facade. The session itself, and every request, live in the session layer
// (`session/`); `builder` holds the options and the connect, `state` the public session state
// and `hub` the client's state thread and listener; `shutdown` closes it on signals; `data` has
// the calls on plain nodes. `Client::inspect` is the recipes' (`recipes/inspect.rs`): it reads
// every recipe's layout, which the client, below the recipes, cannot import.

// Only files that do not import this one are re-exported here (the house plan: no circles);
// `ClientBuilder` and `CloseOnSignals` are re-exported at the crate root.
pub use self::state::{SessionState, StateChange};

pub(crate) mod builder;
pub(crate) mod data;
pub(crate) mod hub;
#[cfg(feature = "signals")]
pub(crate) mod shutdown;
pub(crate) mod state;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::Mutex;

use crate::core::cohort::Cohort;
use crate::core::held::Held;
use crate::core::wait::Wait;
use crate::error::{Error, Result};
use crate::metrics::Recipe;
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::{deadline_after, Runtime};
use crate::session::config::SessionConfig;
use crate::session::open::open_session;
use crate::session::releases::Releases;
use crate::session::{until, Session};
use crate::wire as zk;

use self::hub::{wait_any_async, Hub, Observe, LISTENER_STOP_WAIT};
use self::state::{next_look, of_session};

/// A handle to a ZooKeeper session, shared by all the locks made from it.
///
/// Cloning is cheap: clones share one session, one connection and one background thread. The
/// blocking methods block the calling thread and need no async runtime; async code uses the
/// `_async` calls instead (see the crate docs' "Async"), never a blocking one on a runtime's
/// worker thread.
///
/// If the server expires the session (for example after a network partition longer than the
/// session timeout), every lock held through it is lost and reported as such by its guard; the
/// next call on the client opens a new session transparently.
///
/// Dropping the last clone waits for releases still being retried in the background (at most
/// the [release timeout](crate::ClientBuilder::release_timeout), one second by default), then closes
/// the session, which removes any ephemeral node left (waiting up to two seconds for the
/// server's confirmation when nothing was pending), and ends the client's threads (see
/// [`ClientBuilder::on_state_change`](crate::ClientBuilder::on_state_change) for the listener's).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    config: SessionConfig,
    hosts: Vec<zk::Host>,
    chroot: Option<String>,
    /// `None` only while the client is being dropped.
    session: Mutex<Option<Arc<Session>>>,
    /// Taken by the one call replacing an expired session.
    renewal: Renewal,
    releases: Arc<Releases>,
    /// Cancelled by [`Client::close`]: every call in progress on any clone stops on it.
    closed: CancelToken,
    /// The outcome of the first [`Client::close`], which later ones report.
    close_outcome: Mutex<Option<Result<()>>>,
    observe: Observe,
    /// How long a dropped guard waits for its release (see `ClientBuilder::release_timeout`).
    release_timeout: Duration,
    /// Shared with the client's state thread (`hub.rs`).
    hub: Arc<Hub>,
    /// The local queues of the locks with local handoff (see `core/cohort.rs`).
    cohorts: Cohorts,
    // Dropped last: the session's task runs on it.
    runtime: Arc<Runtime>,
}

/// Who is replacing an expired session: one call at a time.
#[derive(Default)]
pub(crate) struct Renewal {
    busy: Mutex<bool>,
    /// Notified when a renewal ends.
    ended: event_listener::Event,
}

/// One call's turn at [`Renewal`], given back when dropped.
struct RenewalTurn<'a>(&'a Renewal);

impl Drop for RenewalTurn<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock() = false;
        self.0.ended.notify(usize::MAX);
    }
}

/// A client's local queues, by lock path, name of node, batch and revocability (alive while a
/// caller of the client waits or holds).
type Cohorts = Mutex<
    std::collections::HashMap<(String, &'static str, u32, bool), std::sync::Weak<Cohort<Held>>>,
>;

impl Client {
    /// The local queue of `path` for nodes named `name` with local handoff in batches of
    /// `batch` (see `core/cohort.rs`), shared by every lock object of this client and path
    /// with the same batch and revocability (a revocable lock's node listens for revocation
    /// requests, a plain one's does not: they are never passed between the two).
    pub(crate) fn cohort(
        &self,
        path: &str,
        name: &'static str,
        batch: u32,
        revocable: bool,
        recipe: Recipe,
    ) -> Arc<Cohort<Held>> {
        let mut cohorts = self.inner.cohorts.lock();
        let key = (path.to_owned(), name, batch, revocable);
        if let Some(cohort) = cohorts.get(&key).and_then(std::sync::Weak::upgrade) {
            return cohort;
        }
        // Forget idle ones now and then (amortized: when the map doubled).
        if cohorts.len().is_power_of_two() {
            cohorts.retain(|_, weak| weak.strong_count() > 0);
        }
        let cohort = Arc::new(Cohort::new(batch, recipe));
        cohorts.insert(key, Arc::downgrade(&cohort));
        cohort
    }

    /// The id of the current session (as in ZooKeeper's logs and the `ephemeralOwner` of the
    /// nodes it creates). It changes when an expired session is replaced.
    pub fn session_id(&self) -> i64 {
        self.inner.session.lock().as_ref().map_or(0, |s| s.id)
    }

    /// The session timeout the server granted (it clamps the requested one to its
    /// `minSessionTimeout`..`maxSessionTimeout`), on the latest connection: a reconnect to a
    /// server with other settings may be granted another, and the lease follows it.
    pub fn session_timeout(&self) -> Duration {
        self.inner
            .session
            .lock()
            .as_ref()
            .map_or(Duration::ZERO, |s| s.lease.timeout())
    }

    /// The current session for a call, replacing it first if the server expired it (see
    /// [`open_session`] for where the connect blocks).
    pub(crate) async fn session_async(&self, deadline: Option<Instant>) -> Result<Arc<Session>> {
        let current = self.current_session()?;
        if current.state() != zk::KeeperState::Expired {
            return Ok(current);
        }
        self.renew_async(deadline).await
    }

    /// Replaces the expired session. One call renews; the others wait for it, each within its
    /// own deadline, then take what it installed. The session slot itself stays free, so
    /// inspecting the client never waits for a connect.
    async fn renew_async(&self, deadline: Option<Instant>) -> Result<Arc<Session>> {
        let _turn = self.renewal_turn(deadline).await?;
        let current = self.current_session()?;
        if current.state() != zk::KeeperState::Expired {
            return Ok(current); // Replaced while we waited.
        }
        info!(
            "zookeeper session {:#x} expired; opening a new one",
            current.id
        );
        // Failing fast is for the first connect: a replacement waits out a restarting server.
        let config = SessionConfig {
            fail_fast_if_refused: false,
            ..self.inner.config.clone()
        };
        let fresh = open_session(
            &self.inner.runtime,
            &config,
            &self.inner.hosts,
            self.inner.chroot.as_deref(),
            &self.inner.releases,
            deadline,
            Some(&self.inner.closed),
        )
        .await;
        let fresh = match fresh {
            Ok(fresh) if self.is_closed() => {
                fresh.close(); // Closed while we connected.
                return Err(Error::Closed);
            }
            Ok(fresh) => Arc::new(fresh.closed_by(&self.inner.closed)),
            // The caller's deadline, not the connect timeout, ran out: an outage.
            Err(_) if self.is_closed() => return Err(Error::Closed),
            Err(Error::Connect { .. }) if deadline.is_some_and(|d| Instant::now() >= d) => {
                return Err(Error::connection_loss())
            }
            Err(err) => return Err(err),
        };
        let mut slot = self.inner.session.lock();
        if slot.is_none() {
            fresh.close(); // Closed while we connected.
            return Err(Error::Closed);
        }
        *slot = Some(fresh.clone());
        drop(slot);
        self.inner.hub.notify();
        Ok(fresh)
    }

    /// The turn to renew the session, once no other call has it, or [`Error::ConnectionLoss`]
    /// at `deadline`. Given back when dropped (also when the renewing future is).
    async fn renewal_turn(&self, deadline: Option<Instant>) -> Result<RenewalTurn<'_>> {
        let renewal = &self.inner.renewal;
        loop {
            let ended = renewal.ended.listen();
            if !std::mem::replace(&mut *renewal.busy.lock(), true) {
                return Ok(RenewalTurn(renewal));
            }
            if until(Box::pin(ended), deadline).await.is_err() {
                return Err(Error::connection_loss());
            }
        }
    }

    /// The deadline of a one-off call: one [`call_timeout`](Self::call_timeout) from now.
    pub(crate) fn call_deadline(&self) -> Instant {
        deadline_after(self.call_timeout())
    }

    /// How long a one-off call waits at most: one session timeout (as requested).
    pub(crate) fn call_timeout(&self) -> Duration {
        self.inner.config.session_timeout
    }

    /// Names in an [`Error::ConnectionLoss`] the call's `path` and `timeout`, and the server
    /// the session was last connected to, unless it says them already; other errors pass
    /// unchanged. The front ends call it on their way out, so the layers below need not carry
    /// what only the call knows.
    pub(crate) fn outage(&self, err: Error, path: &str, timeout: Option<Duration>) -> Error {
        let server = || self.inner.session.lock().as_ref().and_then(|s| s.server());
        err.during(path, server, timeout)
    }

    /// Runs a one-off call about `path` on the current session, within one call timeout; an
    /// outage names the path, the timeout and the server. `call` gets the session and the
    /// call's deadline. Closing the client stops it at once with [`Error::Closed`]: the future
    /// races the close token (it may run on a thread registered with no token). The blocking calls
    /// wait for the same future ([`blocking`](crate::session::blocking)).
    pub(crate) async fn one_call_async<'a, T, F, Fut>(&'a self, path: &str, call: F) -> Result<T>
    where
        F: FnOnce(Arc<Session>, Option<Instant>) -> Fut + 'a,
        Fut: std::future::Future<Output = Result<T>> + 'a,
    {
        let deadline = Some(self.call_deadline());
        let work = async move {
            let session = Box::pin(self.session_async(deadline)).await?;
            call(session, deadline).await
        };
        let outcome = self.unless_closed(work).await;
        outcome.map_err(|err| self.call_outage(err, path))
    }

    /// `work`'s outcome, or [`Error::Closed`] as soon as the client is closed (then `work` is
    /// dropped, which cleans up what it began).
    pub(crate) async fn unless_closed<T>(
        &self,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        use std::future::Future;
        if self.is_closed() {
            return Err(Error::Closed);
        }
        let mut work = std::pin::pin!(work);
        let mut closed = std::pin::pin!(self.inner.closed.cancelled_error());
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(outcome) = work.as_mut().poll(cx) {
                return std::task::Poll::Ready(outcome);
            }
            closed.as_mut().poll(cx).map(|_| Err(Error::Closed))
        })
        .await
    }

    /// [`outage`](Self::outage) for a one-off call about `path`, allowed one call timeout.
    pub(crate) fn call_outage(&self, err: Error, path: &str) -> Error {
        self.outage(err, path, Some(self.call_timeout()))
    }

    fn current_session(&self) -> Result<Arc<Session>> {
        let current = self.inner.session.lock().clone().ok_or(Error::Closed)?;
        current.check_process()?;
        match current.state() {
            zk::KeeperState::AuthFailed => Err(Error::AuthFailed),
            zk::KeeperState::Closed => Err(Error::Closed),
            _ => Ok(current),
        }
    }

    /// Ends the session now: ZooKeeper's closeSession removes every ephemeral node of the
    /// session at once (held locks, queued waiters, permit nodes), instead of after the session
    /// timeout.
    ///
    /// Every thread blocked in a call on this client or any clone of it returns
    /// [`Error::Closed`] promptly (within milliseconds); every guard turns
    /// [`LockState::Lost`](crate::LockState::Lost); later calls on any clone return
    /// [`Error::Closed`]. Guards dropped afterwards do nothing and never block. Idempotent.
    ///
    /// Blocks until the server confirmed the close, at most about two seconds, then for the
    /// state listener to be told `Closed`, at most one second more (see
    /// [`ClientBuilder::on_state_change`](crate::ClientBuilder::on_state_change)).
    ///
    /// The shutdown recipe for a service: on SIGTERM, cancel the acquisitions you own
    /// ([`CancelToken`]) or call `close()`, join your threads, exit. Dropping the last clone of
    /// a client closes it too, but `std::process::exit` runs no destructors: call `close()`
    /// before it.
    ///
    /// # Errors
    /// [`Error::ConnectionLoss`] if the server could not be told (the connection is down): the
    /// session then ends on the server after its timeout. The client is closed either way.
    pub fn close(&self) -> Result<()> {
        self.close_with(Wait::forever())
    }

    /// As [`close`](Self::close), blocking at most `timeout` in all (monotonic clock, from the
    /// call): for the server's confirmation, for a concurrent `close` to finish, and for the
    /// state listener. For a process that must exit within a bound whatever the servers do
    /// (`zklock run` closes its client this way).
    ///
    /// # Errors
    /// As [`close`](Self::close); [`Error::ConnectionLoss`] also when the confirmation (or a
    /// concurrent close's outcome) did not come within `timeout`. The client is closed either
    /// way.
    pub fn close_timeout(&self, timeout: Duration) -> Result<()> {
        self.close_with(Wait::timeout(timeout))
    }

    /// As [`close`](Self::close), waiting as `wait` says: up to its timeout or deadline in all,
    /// as [`close_timeout`](Self::close_timeout) (a deadline that has passed already waits for
    /// nothing; [`Wait::forever`] waits as `close` does), and no longer than until its token is
    /// cancelled (at once, if it already is).
    ///
    /// The client is closed at once either way, on every clone, and closeSession goes to the
    /// server: a cancel stops only the waiting for the server's confirmation and the state
    /// listener, which go on in the background (on a short-lived thread) as they would have
    /// on the calling thread, and later calls of `close` report their outcome.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// use std::time::{Duration, Instant};
    /// use zklock::Wait;
    /// // One budget for the whole shutdown: what is left of it after the other steps.
    /// let shutdown_by = Instant::now() + Duration::from_secs(5);
    /// // ... stop the work, flush ...
    /// if let Err(err) = client.close_with(Wait::until(shutdown_by)) {
    ///     eprintln!("closed without the server's confirmation: {err}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`close_timeout`](Self::close_timeout), and [`Error::Cancelled`] when the token was
    /// cancelled before the close was confirmed.
    pub fn close_with(&self, wait: Wait) -> Result<()> {
        let deadline = wait.deadline();
        match wait.cancel_token() {
            // Nothing can stop the wait early: it needs no thread of its own.
            None => self.close_within(deadline),
            Some(cancel) => crate::session::blocking(self.close_on_thread(deadline, Some(cancel))),
        }
    }

    /// As [`close`](Self::close), as a future: the client is closed at once (every call on it
    /// returns [`Error::Closed`] from then on), and the future waits, without blocking the
    /// executor's thread, for the server's confirmation and the state listener (on a
    /// short-lived thread, as [`close`](Self::close) would wait). Dropping the future stops
    /// only the waiting.
    ///
    /// # Errors
    /// As [`close`](Self::close).
    pub async fn close_async(&self) -> Result<()> {
        self.close_with_async(Wait::forever()).await
    }

    /// As [`close_with`](Self::close_with), as a future (`Send`, any executor): the client is
    /// closed at once, and the future waits as [`close_async`](Self::close_async) does, up to
    /// `wait`'s timeout or deadline, and until its token is cancelled ([`Error::Cancelled`];
    /// the close goes on in the background). Dropping the future stops only the waiting.
    ///
    /// ```no_run
    /// # async fn run(client: zklock::Client, shutdown: zklock::CancelToken) {
    /// use std::time::Duration;
    /// use zklock::Wait;
    /// // At most 2 s for the confirmation, less if a second signal cancels `shutdown`.
    /// let wait = Wait::timeout(Duration::from_secs(2)).cancel_on(&shutdown);
    /// if let Err(err) = client.close_with_async(wait).await {
    ///     eprintln!("closed without the server's confirmation: {err}");
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`close_with`](Self::close_with).
    pub async fn close_with_async(&self, wait: Wait) -> Result<()> {
        self.close_on_thread(wait.deadline(), wait.cancel_token())
            .await
    }

    /// Closes the client at once, and waits for [`close_within`](Self::close_within) on a
    /// short-lived thread until it is done or `token` is cancelled ([`Error::Cancelled`]; the
    /// thread finishes the close).
    async fn close_on_thread(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<()> {
        // Marked closed here, before the first await, so that the caller's next call sees it.
        self.inner.closed.cancel();
        let client = self.clone();
        let closing =
            crate::rt::runtime::on_thread("zklock-close", move || client.close_within(deadline));
        crate::rt::cancel::unless_cancelled(cancel, closing).await??
    }

    /// The one close: waits for the server's confirmation up to `deadline`, or two seconds
    /// without one, and for a concurrent close and the state listener never past `deadline`.
    fn close_within(&self, deadline: Option<Instant>) -> Result<()> {
        if let Some(session) = self.inner.session.lock().as_ref() {
            // A forked child's copy has no connection to close; the parent's stays open.
            session.check_process()?;
        }
        // Concurrent and later closes wait for the first and report its outcome.
        let mut outcome = match deadline {
            None => self.inner.close_outcome.lock(),
            Some(deadline) => match self.inner.close_outcome.try_lock_until(deadline) {
                Some(outcome) => outcome,
                None => {
                    self.inner.closed.cancel(); // Closed either way, as documented.
                    return Err(Error::connection_loss());
                }
            },
        };
        if let Some(outcome) = outcome.as_ref() {
            return outcome.clone();
        }
        self.inner.closed.cancel();
        let session = self.inner.session.lock().take();
        let closed = match session {
            None => Ok(()),
            Some(session) => {
                info!("closing zookeeper session {:#x}", session.id);
                session.close();
                self.inner.hub.notify();
                if session.wait_ended(deadline.unwrap_or_else(|| deadline_after(CLOSE_WAIT))) {
                    Ok(())
                } else {
                    warn!(
                        "session {:#x} closed without the server's confirmation; it expires there after its timeout",
                        session.id
                    );
                    Err(Error::connection_loss())
                }
            }
        };
        // The state thread tells the listener `Closed` on its way out; the listener's thread
        // is given a bounded time to tell it and end.
        self.inner.hub.shutdown();
        let listener_wait = deadline.map_or(LISTENER_STOP_WAIT, |d| {
            d.saturating_duration_since(Instant::now())
                .min(LISTENER_STOP_WAIT)
        });
        self.inner.hub.stop_listener(listener_wait);
        *outcome = Some(closed.clone());
        closed
    }

    /// A handle that does not keep the client alive: for a state listener (see
    /// [`ClientBuilder::on_state_change`](crate::ClientBuilder::on_state_change)) or any other long-lived callback that must reach the
    /// client without keeping its session open after the application dropped it. Never
    /// blocks.
    pub fn downgrade(&self) -> WeakClient {
        WeakClient {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// The blocking form of the client's async operation `op` (see
    /// [`blocking`](crate::session::blocking)), also ended by closing the client
    /// ([`Error::Closed`]): no entry point has to remember it (a fenced write stuck on a
    /// silent connection ends at the close).
    pub(crate) fn blocking<T>(&self, op: impl Future<Output = Result<T>>) -> Result<T> {
        crate::session::blocking_or_stop(op, std::slice::from_ref(&self.inner.closed))
    }

    /// The token [`close`](Self::close) cancels.
    pub(crate) fn close_token(&self) -> &CancelToken {
        &self.inner.closed
    }

    /// Whether [`close`](Self::close) was called on this client or a clone.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// The current session; `None` once the client is closed.
    pub(crate) fn current(&self) -> Option<Arc<Session>> {
        if self.is_closed() {
            return None;
        }
        self.inner.session.lock().clone()
    }

    pub(crate) fn hub(&self) -> &Hub {
        &self.inner.hub
    }

    pub(crate) fn observe(&self) -> &Observe {
        &self.inner.observe
    }

    /// How long dropping a guard may wait for its release (see
    /// [`ClientBuilder::release_timeout`](crate::ClientBuilder::release_timeout)).
    pub(crate) fn release_timeout(&self) -> Duration {
        self.inner.release_timeout
    }
}

/// A [`Client`] that does not keep the client alive, made by [`Client::downgrade`].
///
/// Once every [`Client`] clone is dropped (and the last drop has closed the session),
/// [`upgrade`](Self::upgrade) returns `None`. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct WeakClient {
    inner: std::sync::Weak<Inner>,
}

impl WeakClient {
    /// The client, if any clone of it is still alive. The clone returned keeps it alive while
    /// held: drop it when done (in a listener, before returning). Never blocks.
    pub fn upgrade(&self) -> Option<Client> {
        self.inner.upgrade().map(|inner| Client { inner })
    }
}

impl fmt::Debug for WeakClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakClient")
            .field("alive", &(self.inner.strong_count() > 0))
            .finish()
    }
}

/// How long closing waits for the server to confirm.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let session = self.inner.session.lock();
        f.debug_struct("Client")
            .field("connect_string", &self.inner.config.connect_string)
            .field(
                "session_id",
                &format_args!("{:#x}", session.as_ref().map_or(0, |s| s.id)),
            )
            .field("state", &session.as_ref().map(|s| s.state()))
            .finish()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.hub.shutdown();
        self.close_session();
        self.hub.stop_listener(LISTENER_STOP_WAIT);
    }
}

impl Inner {
    /// The last clone's part of the drop: lets background releases finish, then closes the
    /// session.
    fn close_session(&mut self) {
        let Some(session) = self.session.get_mut().take() else {
            return;
        };
        if session.check_process().is_err() {
            // A forked child: the runtime thread and the connection belong to the parent.
            // Nothing can be waited for here, and the parent's session must not be touched.
            std::mem::forget(session);
            return;
        }
        // Let releases that are being retried finish while the session can still delete, for
        // no longer than a dropped guard would wait: closing the session removes their nodes
        // too (at once if the server hears of it, else when the session expires), and a drop
        // must not hang on a silent server.
        let idle = self
            .releases
            .wait_idle(Instant::now() + self.release_timeout);
        if !idle {
            warn!("closing session {:#x} with releases still pending; the server removes their nodes when the session expires", session.id);
        }
        // CloseSession removes our ephemeral nodes at once. With releases still pending the
        // connection is down: there is nothing to wait for.
        session.close();
        if idle {
            session.wait_ended(Instant::now() + CLOSE_WAIT);
        }
        debug!("zookeeper client for {} closed", self.config.connect_string);
    }
}

impl Client {
    /// The state of the session, decided when called, on the calling thread; never blocks.
    ///
    /// `Connected` only while the session is connected *and* its lease has not run out (the
    /// server answered a request sent less than 2/3 of the session timeout ago), so a process
    /// that was frozen, or whose network thread stalled, never reads `Connected` from stale
    /// news. See [`SessionState`] for the others.
    pub fn state(&self) -> SessionState {
        self.current()
            .map_or(SessionState::Closed, |s| of_session(&s).0)
    }

    /// Blocks until [`state`](Self::state) differs from `seen`, and returns the new state; or
    /// returns the current state (still `seen`) once `timeout` (monotonic clock, from the call)
    /// has passed.
    ///
    /// Pass the state you last acted on, so that no change between two calls is missed:
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// use std::time::Duration;
    /// use zklock::client::SessionState;
    /// let mut seen = client.state();
    /// while seen != SessionState::Closed {
    ///     seen = client.wait_state_change(seen, Duration::from_secs(60));
    ///     println!("session is {seen}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Wakes on the session's changes, on its own when the lease runs out (the calling
    /// thread's clock: a stalled network thread cannot keep it waiting), when a new session
    /// replaces an expired one, and at once when the client is closed (returning
    /// [`SessionState::Closed`]). A session `Expired` stays so until some call on the client
    /// opens a new one: this wait does not open it.
    pub fn wait_state_change(&self, seen: SessionState, timeout: Duration) -> SessionState {
        self.wait_state_change_with(seen, Wait::timeout(timeout))
    }

    /// As [`wait_state_change`](Self::wait_state_change), waiting as `wait` says: returns the
    /// current state (still `seen`) once its timeout or deadline has passed or its token is
    /// cancelled (at once if it already is), the same as when the timeout passes. A
    /// [`Wait::forever`] without a token waits until the state changes.
    ///
    /// For a thread that follows the session until its owner stops it:
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// use zklock::client::SessionState;
    /// use zklock::{CancelToken, Wait};
    /// let stop = CancelToken::new();
    /// let follower = std::thread::spawn({
    ///     let (client, stop) = (client.clone(), stop.clone());
    ///     move || {
    ///         let mut seen = client.state();
    ///         while seen != SessionState::Closed && !stop.is_cancelled() {
    ///             seen = client.wait_state_change_with(seen, Wait::forever().cancel_on(&stop));
    ///             println!("session is {seen}");
    ///         }
    ///     }
    /// });
    /// // ... later:
    /// stop.cancel(); // the follower returns at once
    /// follower.join().unwrap();
    /// # Ok(()) }
    /// ```
    pub fn wait_state_change_with(&self, seen: SessionState, wait: Wait) -> SessionState {
        let wait = std::pin::pin!(self.state_change(seen, &wait));
        // Interrupted only by the client's closing, which the state then says.
        let closes = std::slice::from_ref(&self.inner.closed);
        crate::rt::runtime::block_on_or_stop(wait, None, closes).unwrap_or_else(|_| self.state())
    }

    /// As [`wait_state_change`](Self::wait_state_change) without a timeout, as a future
    /// (`Send`, any executor): ready with the new state once [`state`](Self::state) differs
    /// from `seen`. It wakes as the blocking call does (the session's changes, the lease
    /// running out on the monotonic clock, a replaced session, the client's closing), so a
    /// stalled network thread cannot keep it pending. Bound it with a runtime's timeout, or
    /// use [`wait_state_change_with_async`](Self::wait_state_change_with_async); dropping it
    /// stops only the wait (it sets nothing on the server).
    ///
    /// ```no_run
    /// # async fn run(client: zklock::Client) {
    /// use zklock::client::SessionState;
    /// let mut seen = client.state();
    /// while seen != SessionState::Closed {
    ///     seen = client.wait_state_change_async(seen).await;
    ///     println!("session is {seen}");
    /// }
    /// # }
    /// ```
    pub async fn wait_state_change_async(&self, seen: SessionState) -> SessionState {
        self.wait_state_change_with_async(seen, Wait::forever())
            .await
    }

    /// As [`wait_state_change_with`](Self::wait_state_change_with), as a future (`Send`, any
    /// executor): ready with the new state, or with the current one (still `seen`) once
    /// `wait`'s timeout or deadline passes (zklock's own timer) or its token is cancelled.
    /// Cancel safe, as [`wait_state_change_async`](Self::wait_state_change_async).
    ///
    /// ```no_run
    /// # async fn run(client: zklock::Client) {
    /// use std::time::Duration;
    /// use zklock::client::SessionState;
    /// use zklock::Wait;
    /// let now = client
    ///     .wait_state_change_with_async(SessionState::Connected, Wait::timeout(Duration::from_secs(5)))
    ///     .await;
    /// if now == SessionState::Connected {
    ///     println!("still connected after 5 s");
    /// }
    /// # }
    /// ```
    pub async fn wait_state_change_with_async(
        &self,
        seen: SessionState,
        wait: Wait,
    ) -> SessionState {
        self.state_change(seen, &wait).await
    }

    /// The one wait behind [`wait_state_change`](Self::wait_state_change) and its other forms:
    /// the state once it differs from `seen`, or as it is when `wait` ends.
    async fn state_change(&self, seen: SessionState, wait: &Wait) -> SessionState {
        let changed = self.state_change_until(seen, wait.deadline());
        crate::rt::cancel::unless_cancelled(wait.cancel_token(), changed)
            .await
            .unwrap_or_else(|_| self.state())
    }

    /// The state once it differs from `seen`, or as it is at `deadline`.
    async fn state_change_until(
        &self,
        seen: SessionState,
        deadline: Option<Instant>,
    ) -> SessionState {
        loop {
            // Registered before looking, so that a notification in between is not missed.
            let replaced = self.hub().listen();
            let session = self.current();
            let mut watcher = session.as_ref().map(|s| s.state_watcher());
            let judged = session.as_deref().map(|s| (s, of_session(s)));
            let now = judged.map_or(SessionState::Closed, |(_, (state, _))| state);
            if now != seen || deadline.is_some_and(|d| Instant::now() >= d) {
                return now;
            }
            let far = || deadline_after(Duration::MAX);
            let wake = judged.map_or(deadline.unwrap_or_else(far), |(s, (_, standing))| {
                let next = next_look(s, standing);
                deadline.map_or(next, |d| next.min(d))
            });
            drop(session);
            wait_any_async(watcher.as_mut(), replaced, None, wake).await;
        }
    }
}
