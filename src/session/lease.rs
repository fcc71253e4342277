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
//! keepalive (see `open.rs`) renews it after a third of the timeout without other traffic,
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
        self.remaining_at(Instant::now())
    }

    /// How long, from `now`, the lease still runs: the clock seam the simulation judges a
    /// lease through on its virtual clock (`core/sim`); real callers use
    /// [`remaining`](Self::remaining).
    pub(crate) fn remaining_at(&self, now: Instant) -> Option<Duration> {
        self.expiry()
            .checked_duration_since(now)
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
