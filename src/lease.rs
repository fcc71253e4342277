//! The holder's lease: for how long, from now, the server cannot have expired our session.
//!
//! The server expires a session one session timeout after it last heard from it, and may then
//! hand our locks to the next contender. Whatever it heard last, it heard no earlier than we
//! *sent* it: so if a request sent at `t` was answered, the session lives at least until
//! `t + session timeout`. Only requests the leader processes count (writes, syncs): a
//! follower answers reads by itself, also while it is cut off from the leader, which decides
//! expiry. The lease keeps the latest such `t` ("acknowledged") and is judged
//! at call time on the caller's own thread with the monotonic clock, so a process frozen
//! past its session (SIGSTOP, a long GC or VM pause) or a stalled runtime thread reads
//! "not held" as soon as it looks, whatever the runtime thread last published.
//!
//! The lease runs [`LEASE_FRACTION`] of the session timeout past the last acknowledgement; a
//! keepalive (see `session.rs`) renews it after a third of the timeout without other traffic,
//! so a healthy holder never sees it run out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The lease is this fraction of the negotiated session timeout: 2/3.
///
/// The remaining third is the safety margin between "we stop believing" and "the server may
/// expire us": it covers the time between a caller's check and its next step, scheduling
/// delays on a loaded host, and any difference between the client's and the server's clock
/// rates (parts per million in practice). The server's tick only makes expiry later (sessions
/// expire on tick boundaries after their deadline), never earlier. A larger fraction would
/// leave too little of that margin; a smaller one would make a holder on a slow network
/// suspend for nothing.
pub(crate) const LEASE_FRACTION: (u32, u32) = (2, 3);

/// The keepalive (a `sync`) renews the lease once this fraction of the session timeout (1/3)
/// has passed without an answered write or sync, well before the lease (2/3) runs out.
pub(crate) const KEEPALIVE_FRACTION: (u32, u32) = (1, 3);

pub(crate) struct Lease {
    /// A fixed point of the monotonic clock that acknowledgements are measured from.
    origin: Instant,
    /// Send time of the latest answered write or sync, in nanoseconds after `origin`.
    acknowledged: AtomicU64,
    /// The negotiated session timeout, in nanoseconds: a reconnect may negotiate another.
    timeout: AtomicU64,
}

impl Lease {
    /// A lease acknowledged at `sent`: the send time of the request that established the
    /// session.
    pub(crate) fn new(sent: Instant, timeout: Duration) -> Lease {
        Lease {
            origin: sent,
            acknowledged: AtomicU64::new(0),
            timeout: AtomicU64::new(nanos(timeout)),
        }
    }

    /// The server granted `timeout` on a new connection: it expires the session by that one
    /// from now on (shorter or longer), so the lease must too. Set it before renewing from the
    /// same handshake, so that no reader sees the new acknowledgement with the old timeout.
    pub(crate) fn set_timeout(&self, timeout: Duration) {
        self.timeout.store(nanos(timeout), Ordering::Release);
    }

    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout.load(Ordering::Acquire))
    }

    /// The server answered a request we sent at `sent`.
    pub(crate) fn renew(&self, sent: Instant) {
        let since = sent.saturating_duration_since(self.origin).as_nanos();
        let since = u64::try_from(since).unwrap_or(u64::MAX);
        self.acknowledged.fetch_max(since, Ordering::AcqRel);
    }

    /// When the latest answered write or sync was sent.
    pub(crate) fn acknowledged(&self) -> Instant {
        self.origin + Duration::from_nanos(self.acknowledged.load(Ordering::Acquire))
    }

    /// The instant the lease runs out unless renewed.
    pub(crate) fn expiry(&self) -> Instant {
        self.acknowledged() + fraction(self.timeout(), LEASE_FRACTION)
    }

    /// How long, from now, the lease still runs; `None` once it has run out.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        self.expiry()
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
    }

    /// When the keepalive should renew the lease if nothing else has.
    pub(crate) fn renewal_due(&self) -> Instant {
        self.acknowledged() + fraction(self.timeout(), KEEPALIVE_FRACTION)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn fraction(timeout: Duration, (num, den): (u32, u32)) -> Duration {
    timeout * num / den
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_two_thirds_of_the_timeout_from_the_latest_acknowledged_send() {
        let start = Instant::now();
        let lease = Lease::new(start, Duration::from_secs(3));
        assert_eq!(lease.expiry(), start + Duration::from_secs(2));
        assert_eq!(lease.renewal_due(), start + Duration::from_secs(1));
        // An older answer (a slow reply to an earlier request) never moves it back.
        lease.renew(start + Duration::from_millis(500));
        lease.renew(start + Duration::from_millis(100));
        assert_eq!(lease.acknowledged(), start + Duration::from_millis(500));
        assert!(lease
            .remaining()
            .is_some_and(|r| r <= Duration::from_millis(2500)));
    }

    #[test]
    fn a_timeout_granted_on_a_reconnect_moves_the_expiry() {
        let start = Instant::now();
        let lease = Lease::new(start, Duration::from_secs(30));
        assert_eq!(lease.expiry(), start + Duration::from_secs(20));
        lease.set_timeout(Duration::from_secs(3));
        assert_eq!(lease.expiry(), start + Duration::from_secs(2));
        assert_eq!(lease.renewal_due(), start + Duration::from_secs(1));
    }

    #[test]
    fn has_nothing_left_once_run_out() {
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(10)).unwrap_or(now);
        let lease = Lease::new(long_ago, Duration::from_secs(3));
        if long_ago == now {
            return; // The monotonic clock is younger than 10 s: nothing to test.
        }
        assert_eq!(lease.remaining(), None);
    }
}

/// The lease against the real server of the integration tests (`ZK_CONNECT`, default
/// 127.0.0.1:2181), with zklock's runtime thread held up as a blocking logger would.
#[cfg(test)]
mod stalled_runtime {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    use std::thread;
    use std::time::{Duration, Instant};

    use crate::{Client, DistributedMutex, LockState};

    #[test]
    fn a_holder_whose_runtime_thread_stalls_knows_before_the_next_holder_acquires() {
        let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
        let connect = |timeout| {
            Client::builder(&hosts)
                .session_timeout(timeout)
                .connect()
                .expect("ZooKeeper must be running: scripts/start-zk.sh")
        };
        let path = format!("/zklock-tests/stall-{}", uuid::Uuid::new_v4().simple());
        let a = connect(Duration::from_secs(2));
        let b = connect(Duration::from_secs(10));
        let a_mutex = DistributedMutex::new(&a, &path).unwrap();
        let b_mutex = DistributedMutex::new(&b, &path).unwrap();
        let a_guard = a_mutex.lock().unwrap();
        assert!(a_guard.is_held());

        let stall = Duration::from_secs(8);
        let (done, samples) = (AtomicBool::new(false), Mutex::new(Vec::new()));
        let b_acquired = thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    // The time is taken before the question, so a late answer cannot hide.
                    let at = Instant::now();
                    samples.lock().unwrap().push((at, a_guard.state()));
                    thread::sleep(Duration::from_millis(2));
                }
            });
            a.session(None).unwrap().stall_runtime_for_tests(stall);
            let stalled_at = Instant::now();
            let guard = b_mutex.lock().unwrap();
            let acquired = Instant::now();
            assert!(
                acquired < stalled_at + stall,
                "the next holder only acquired after the stall ended: nothing was tested"
            );
            // Keep asking the stalled holder for a while after the hand-over.
            thread::sleep(Duration::from_millis(500));
            done.store(true, Ordering::SeqCst);
            (acquired, guard)
        });
        let (b_acquired, _b_guard) = b_acquired;
        let samples = samples.into_inner().unwrap();
        let held_late = samples
            .iter()
            .filter(|(at, state)| *at >= b_acquired && *state == LockState::Held)
            .count();
        let first_not_held = samples
            .iter()
            .find(|(_, state)| *state != LockState::Held)
            .map(|(at, _)| *at);
        assert_eq!(
            held_late, 0,
            "the stalled holder still read Held after the next holder acquired"
        );
        assert!(
            first_not_held.is_some_and(|at| at < b_acquired),
            "the stalled holder never noticed before the next holder acquired"
        );
    }
}
