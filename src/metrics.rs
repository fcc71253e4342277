//! zklock's metrics, through the `metrics` facade (cargo feature `metrics`): whatever exporter
//! the application installs receives them. Without the feature every call here is a no-op.
//!
//! The names and labels are part of the public contract (see the README's "Operating
//! zklock"); keep them in step with it.
//!
//! Every call here runs on a caller's thread or on a client's state thread, never on the
//! runtime thread: a recorder is the application's code, and may take locks.

// Without the feature the names are documentation only.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

use std::time::Duration;

/// Which recipe an acquisition belongs to: the `recipe` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recipe {
    Mutex,
    RwLockRead,
    RwLockWrite,
    Semaphore,
    Multi,
    Election,
}

impl Recipe {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Recipe::Mutex => "mutex",
            Recipe::RwLockRead => "rwlock_read",
            Recipe::RwLockWrite => "rwlock_write",
            Recipe::Semaphore => "semaphore",
            Recipe::Multi => "multi",
            Recipe::Election => "election",
        }
    }
}

/// How an acquisition call ended: the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    /// A `try_*` call found it held.
    Busy,
    /// A timed call ran out of time.
    Timeout,
    /// Stopped by a `CancelToken` or by `Client::close`.
    Cancelled,
    Error,
}

impl Outcome {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Busy => "busy",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::Error => "error",
        }
    }
}

/// Why a held lock was lost: the `cause` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LossCause {
    /// The session expired.
    Expired,
    /// Our node was deleted by someone else.
    Deleted,
    /// The lease ran out while the connection looked alive (a stalled or frozen process).
    Lease,
    /// The client was closed (or dropped) while the lock was held.
    Closed,
}

impl LossCause {
    pub(crate) fn label(self) -> &'static str {
        match self {
            LossCause::Expired => "expired",
            LossCause::Deleted => "deleted",
            LossCause::Lease => "lease",
            LossCause::Closed => "closed",
        }
    }
}

pub(crate) const ACQUIRE_WAIT: &str = "zklock_acquire_wait_seconds";
pub(crate) const HOLD: &str = "zklock_hold_seconds";
pub(crate) const ACQUISITIONS: &str = "zklock_acquisitions_total";
pub(crate) const LOCKS_LOST: &str = "zklock_locks_lost_total";
pub(crate) const SESSION_STATE: &str = "zklock_session_state";
pub(crate) const RECONNECTS: &str = "zklock_reconnects_total";
pub(crate) const EXPIRATIONS: &str = "zklock_session_expirations_total";
pub(crate) const BACKGROUND_RELEASES: &str = "zklock_background_releases";

#[cfg(feature = "metrics")]
mod imp {
    use super::*;
    use ::metrics::{counter, gauge, histogram, Label};

    /// The labels of a per-lock metric: the given ones, plus `path` when the client asked for it.
    fn labels(fixed: &[(&'static str, &'static str)], path: Option<&str>) -> Vec<Label> {
        let mut labels: Vec<Label> = fixed.iter().map(|&(k, v)| Label::new(k, v)).collect();
        if let Some(path) = path {
            labels.push(Label::new("path", path.to_owned()));
        }
        labels
    }

    /// Describes the metrics to the recorder (units and help texts); cheap, called per client.
    pub(crate) fn describe() {
        use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_histogram!(
            ACQUIRE_WAIT,
            Unit::Seconds,
            "Time an acquisition call waited, by recipe and outcome"
        );
        describe_histogram!(
            HOLD,
            Unit::Seconds,
            "Time a lock was held, from acquisition to release"
        );
        describe_counter!(ACQUISITIONS, "Acquisition calls, by recipe and outcome");
        describe_counter!(LOCKS_LOST, "Held locks lost, by cause");
        describe_gauge!(
            SESSION_STATE,
            "1 while the session is connected (summed over the clients of the process)"
        );
        describe_counter!(RECONNECTS, "Connections re-established after a loss");
        describe_counter!(EXPIRATIONS, "Sessions expired by the server");
        describe_gauge!(
            BACKGROUND_RELEASES,
            "Releases still being retried in the background"
        );
    }

    pub(crate) fn acquisition(
        recipe: Recipe,
        outcome: Outcome,
        path: Option<&str>,
        wait: Duration,
    ) {
        let fixed = [("recipe", recipe.label()), ("outcome", outcome.label())];
        histogram!(ACQUIRE_WAIT, labels(&fixed, path)).record(wait);
        counter!(ACQUISITIONS, labels(&fixed, path)).increment(1);
    }

    pub(crate) fn hold(recipe: Recipe, path: Option<&str>, held: Duration) {
        histogram!(HOLD, labels(&[("recipe", recipe.label())], path)).record(held);
    }

    pub(crate) fn lost(cause: LossCause, path: Option<&str>) {
        counter!(LOCKS_LOST, labels(&[("cause", cause.label())], path)).increment(1);
    }

    pub(crate) fn connected(delta: f64) {
        gauge!(SESSION_STATE).increment(delta);
    }

    /// Makes the session series exist from the start (at zero): an alert on their rate needs
    /// them before the first reconnect.
    pub(crate) fn session_series() {
        counter!(RECONNECTS).increment(0);
        counter!(EXPIRATIONS).increment(0);
        gauge!(BACKGROUND_RELEASES).increment(0.0);
    }

    pub(crate) fn reconnected() {
        counter!(RECONNECTS).increment(1);
    }

    pub(crate) fn expired() {
        counter!(EXPIRATIONS).increment(1);
    }

    pub(crate) fn background_releases(delta: f64) {
        gauge!(BACKGROUND_RELEASES).increment(delta);
    }
}

#[cfg(not(feature = "metrics"))]
#[allow(clippy::missing_const_for_fn)]
mod imp {
    use super::*;

    pub(crate) fn describe() {}
    pub(crate) fn acquisition(_: Recipe, _: Outcome, _: Option<&str>, _: Duration) {}
    pub(crate) fn hold(_: Recipe, _: Option<&str>, _: Duration) {}
    pub(crate) fn lost(_: LossCause, _: Option<&str>) {}
    pub(crate) fn connected(_: f64) {}
    pub(crate) fn session_series() {}
    pub(crate) fn reconnected() {}
    pub(crate) fn expired() {}
    pub(crate) fn background_releases(_: f64) {}
}

pub(crate) use imp::*;
