//! zklock's metrics, through the [`metrics`](https://docs.rs/metrics) facade (0.24; cargo
//! feature `metrics`): install any exporter (Prometheus, StatsD, ...) and they appear. Without
//! the feature nothing is recorded, and only the names below exist.
//!
//! # Reference
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `zklock_info` | gauge | `version` | always 1; the crate version in its label |
//! | `zklock_acquire_wait_seconds` | histogram | `recipe`, `outcome` | how long each acquisition call took, whatever its outcome |
//! | `zklock_acquisitions_total` | counter | `recipe`, `outcome` | acquisition calls |
//! | `zklock_hold_seconds` | histogram | `recipe` | from acquisition to release (a multi-lock or a permit of several nodes is one hold) |
//! | `zklock_locks_held` | gauge | `recipe` | acquisitions whose guard is not yet released (a lost lock counts until its guard is released or dropped) |
//! | `zklock_waiting` | gauge | `recipe` | acquisition calls in progress: threads waiting for a lock |
//! | `zklock_oldest_hold_seconds` | gauge | `recipe` | age of the oldest current hold (0 when none); refreshed at least every second while a client is open, and at every acquisition and release |
//! | `zklock_locks_lost_total` | counter | `cause` | held locks lost, once per acquisition (see below) |
//! | `zklock_session_state` | gauge | | 1 while connected, 0 otherwise (with several clients in a process: the number connected) |
//! | `zklock_reconnects_total` | counter | | connections re-established after a loss, on the same session or, after an expiry, a new one |
//! | `zklock_session_expirations_total` | counter | | sessions expired by the server |
//! | `zklock_background_releases` | gauge | | releases still being retried in the background (connection down) |
//! | `zklock_handoffs_total` | counter | `recipe`, `via` | ends of holds of locks with [local handoff](crate::DistributedMutex::local_handoff): `via="local"` passed to another caller of the same client without the server, `via="server"` the node released through the server |
//!
//! - `recipe`: `mutex`, `rwlock_read`, `rwlock_write`, `semaphore`, `multi`, `election`.
//! - `outcome`: `acquired`; `busy` (a `try_*` call found it held); `timeout` (a timed call ran
//!   out); `cancelled` (a [`CancelToken`](crate::CancelToken), or
//!   [`Client::close`](crate::Client::close)); `error` (any other error).
//! - `cause`: `expired` (the session expired); `deleted` (someone deleted our node, e.g.
//!   `break_contender`); `lease` (the lease ran out while the connection looked alive: a frozen
//!   process or a stalled network thread; another process may hold the lock by now); `closed`
//!   (the client was closed or dropped under a held lock).
//! - A loss is counted when zklock sees it: the first call on the guard (`state`, `is_held`,
//!   `lease_remaining`, `wait_lost`...) that finds it `Lost`, or `Suspended` because the lease
//!   ran out, or its release finding the node gone or the session ended. A guard that is never
//!   looked at is counted at its release. A lock merely suspended by a lost connection is not a
//!   loss: it is counted as `expired` if the session does not come back.
//! - A `path` label with the lock path (for a multi-lock its paths, comma-separated) is added
//!   to the per-lock metrics (wait, acquisitions, hold, held, waiting, lost) by
//!   [`ClientBuilder::metrics_path_label(true)`](crate::ClientBuilder::metrics_path_label); it
//!   is off by default, since every path makes series of its own.
//!
//! **Every series exists from the first client on**, at zero: each counter for every
//! combination of its labels (without `path`), the gauges for every recipe, so that alerts on
//! rates and increases work before the first event (`increase(zklock_locks_lost_total[5m]) >
//! 0` needs a series that was 0 before).
//!
//! **Histogram buckets.** The facade carries no buckets; an exporter that has none renders
//! histograms as summaries. Give it [`BUCKETS`], from half a millisecond (an uncontended
//! acquisition on a local ensemble) to ten minutes (a long hold): with
//! `metrics-exporter-prometheus`,
//! `PrometheusBuilder::new().set_buckets_for_metric(Matcher::Prefix("zklock_".into()),
//! zklock::metrics::BUCKETS)` (see `examples/metrics.rs`).
//!
//! **Alerting.** `examples/prometheus-alerts.yml` has sample Prometheus rules (a lock held
//! too long, locks lost, sessions expiring, a disconnected client, releases stuck in the
//! background) and `examples/grafana-dashboard.json` a Grafana dashboard on these metrics.
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

/// `zklock_info`: gauge, always 1, with the crate version as label `version`.
pub const INFO: &str = "zklock_info";
/// `zklock_acquire_wait_seconds`: histogram of acquisition calls' durations.
pub const ACQUIRE_WAIT: &str = "zklock_acquire_wait_seconds";
/// `zklock_hold_seconds`: histogram of holds, acquisition to release.
pub const HOLD: &str = "zklock_hold_seconds";
/// `zklock_acquisitions_total`: counter of acquisition calls.
pub const ACQUISITIONS: &str = "zklock_acquisitions_total";
/// `zklock_locks_held`: gauge of acquisitions not yet released.
pub const LOCKS_HELD: &str = "zklock_locks_held";
/// `zklock_waiting`: gauge of acquisition calls in progress.
pub const WAITING: &str = "zklock_waiting";
/// `zklock_oldest_hold_seconds`: gauge, the age of the oldest current hold.
pub const OLDEST_HOLD: &str = "zklock_oldest_hold_seconds";
/// `zklock_locks_lost_total`: counter of held locks lost.
pub const LOCKS_LOST: &str = "zklock_locks_lost_total";
/// `zklock_session_state`: gauge, 1 per connected client.
pub const SESSION_STATE: &str = "zklock_session_state";
/// `zklock_reconnects_total`: counter of connections re-established.
pub const RECONNECTS: &str = "zklock_reconnects_total";
/// `zklock_session_expirations_total`: counter of sessions expired by the server.
pub const EXPIRATIONS: &str = "zklock_session_expirations_total";
/// `zklock_background_releases`: gauge of releases retried in the background.
pub const BACKGROUND_RELEASES: &str = "zklock_background_releases";

/// `zklock_handoffs_total`: counter of the ends of holds of locks with local handoff, by
/// label `via`: `local` (passed to another caller of the same client without the server) or
/// `server` (the node released through the server).
pub const HANDOFFS: &str = "zklock_handoffs_total";

/// Every metric name zklock records.
pub const NAMES: &[&str] = &[
    INFO,
    ACQUIRE_WAIT,
    HOLD,
    ACQUISITIONS,
    LOCKS_HELD,
    WAITING,
    OLDEST_HOLD,
    LOCKS_LOST,
    SESSION_STATE,
    RECONNECTS,
    EXPIRATIONS,
    BACKGROUND_RELEASES,
    HANDOFFS,
];

/// Histogram buckets (upper bounds, in seconds) for [`ACQUIRE_WAIT`] and [`HOLD`], for
/// exporters that need them to render histograms (see the module docs).
pub const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0, 600.0,
];

const RECIPES: [Recipe; 6] = [
    Recipe::Mutex,
    Recipe::RwLockRead,
    Recipe::RwLockWrite,
    Recipe::Semaphore,
    Recipe::Multi,
    Recipe::Election,
];
const OUTCOMES: [Outcome; 5] = [
    Outcome::Acquired,
    Outcome::Busy,
    Outcome::Timeout,
    Outcome::Cancelled,
    Outcome::Error,
];
const CAUSES: [LossCause; 4] = [
    LossCause::Expired,
    LossCause::Deleted,
    LossCause::Lease,
    LossCause::Closed,
];

#[cfg(feature = "metrics")]
mod imp {
    use super::*;
    use ::metrics::{counter, gauge, histogram, Label};
    use parking_lot::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

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
        describe_counter!(
            HANDOFFS,
            "Ends of holds of locks with local handoff: passed on locally, or released through the server"
        );
        describe_gauge!(INFO, "Always 1; the zklock version in the version label");
        describe_gauge!(
            LOCKS_HELD,
            "Acquisitions not yet released (lost locks count until released), by recipe"
        );
        describe_gauge!(WAITING, "Acquisition calls in progress, by recipe");
        describe_gauge!(
            OLDEST_HOLD,
            Unit::Seconds,
            "Age of the oldest current hold (0 when none), by recipe"
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

    /// A hold of a lock with local handoff ended: passed on `local`ly, or through the server.
    pub(crate) fn handoff(recipe: Recipe, local: bool) {
        let via = if local { "local" } else { "server" };
        counter!(HANDOFFS, "recipe" => recipe.label(), "via" => via).increment(1);
    }

    /// Makes every series exist from the start (at zero), as far as it does not depend on a
    /// lock path: an alert on a rate or an increase needs the series before the first event.
    pub(crate) fn register_all() {
        counter!(RECONNECTS).increment(0);
        counter!(EXPIRATIONS).increment(0);
        gauge!(BACKGROUND_RELEASES).increment(0.0);
        for recipe in RECIPES {
            for outcome in OUTCOMES {
                let fixed = [("recipe", recipe.label()), ("outcome", outcome.label())];
                counter!(ACQUISITIONS, labels(&fixed, None)).increment(0);
            }
            gauge!(LOCKS_HELD, "recipe" => recipe.label()).increment(0.0);
            gauge!(WAITING, "recipe" => recipe.label()).increment(0.0);
        }
        for cause in CAUSES {
            counter!(LOCKS_LOST, "cause" => cause.label()).increment(0);
        }
        for recipe in [Recipe::Mutex, Recipe::RwLockWrite] {
            for via in ["local", "server"] {
                counter!(HANDOFFS, "recipe" => recipe.label(), "via" => via).increment(0);
            }
        }
        refresh_hold_ages();
        // Last: once it shows, every series above does.
        gauge!(INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    }

    /// An acquisition call of `recipe` began (`delta` 1) or ended (-1).
    pub(crate) fn waiting(recipe: Recipe, path: Option<&str>, delta: f64) {
        gauge!(WAITING, labels(&[("recipe", recipe.label())], path)).increment(delta);
    }

    /// The holds in progress, for their count and the oldest one's age: (id, recipe, since).
    static HOLDS: Mutex<Vec<(u64, Recipe, Instant)>> = Mutex::new(Vec::new());
    static NEXT_HOLD: AtomicU64 = AtomicU64::new(1);

    /// A hold of `recipe` began; returns its id for [`hold_ended`].
    pub(crate) fn hold_started(recipe: Recipe, path: Option<&str>) -> u64 {
        let id = NEXT_HOLD.fetch_add(1, Ordering::Relaxed);
        HOLDS.lock().push((id, recipe, Instant::now()));
        gauge!(LOCKS_HELD, labels(&[("recipe", recipe.label())], path)).increment(1.0);
        refresh_hold_ages();
        id
    }

    /// The hold `id` (of `recipe`) ended: released, or its guard dropped.
    pub(crate) fn hold_ended(id: u64, recipe: Recipe, path: Option<&str>) {
        HOLDS.lock().retain(|&(hold, ..)| hold != id);
        gauge!(LOCKS_HELD, labels(&[("recipe", recipe.label())], path)).decrement(1.0);
        refresh_hold_ages();
    }

    /// Sets the age of the oldest current hold of each recipe (0 where none).
    pub(crate) fn refresh_hold_ages() {
        let now = Instant::now();
        let mut oldest = [Duration::ZERO; RECIPES.len()];
        for &(_, recipe, since) in HOLDS.lock().iter() {
            let at = RECIPES.iter().position(|&r| r == recipe).unwrap_or(0);
            oldest[at] = oldest[at].max(now.saturating_duration_since(since));
        }
        for (recipe, age) in RECIPES.iter().zip(oldest) {
            gauge!(OLDEST_HOLD, "recipe" => recipe.label()).set(age.as_secs_f64());
        }
    }

    /// When a client's state thread must look again at the latest, to keep
    /// [`OLDEST_HOLD`] current: `wake`, or one second from now if sooner.
    pub(crate) fn refresh_by(wake: Instant) -> Instant {
        wake.min(Instant::now() + Duration::from_secs(1))
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
    pub(crate) fn handoff(_: Recipe, _: bool) {}
    pub(crate) fn register_all() {}
    pub(crate) fn waiting(_: Recipe, _: Option<&str>, _: f64) {}
    pub(crate) fn hold_started(_: Recipe, _: Option<&str>) -> u64 {
        0
    }
    pub(crate) fn hold_ended(_: u64, _: Recipe, _: Option<&str>) {}
    pub(crate) fn refresh_hold_ages() {}
    pub(crate) fn refresh_by(wake: std::time::Instant) -> std::time::Instant {
        wake
    }
    pub(crate) fn reconnected() {}
    pub(crate) fn expired() {}
    pub(crate) fn background_releases(_: f64) {}
}

pub(crate) use imp::*;

#[cfg(test)]
mod tests {
    use super::*;

    /// The metric names a text uses: `zklock_` words, a histogram's series suffixes removed.
    fn names_in(text: &str) -> Vec<String> {
        let mut names: Vec<String> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("zklock_"))
            .map(|word| {
                let histogram = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| word.strip_suffix(suffix))
                    .filter(|base| [ACQUIRE_WAIT, HOLD].contains(base));
                histogram.unwrap_or(word).to_owned()
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }

    #[test]
    fn the_sample_alerts_and_dashboard_use_only_metrics_that_exist() {
        for (file, text) in [
            (
                "examples/prometheus-alerts.yml",
                include_str!("../examples/prometheus-alerts.yml"),
            ),
            (
                "examples/grafana-dashboard.json",
                include_str!("../examples/grafana-dashboard.json"),
            ),
        ] {
            let used = names_in(text);
            assert!(used.len() >= 5, "{file} uses hardly any metric: {used:?}");
            for name in &used {
                assert!(
                    NAMES.contains(&name.as_str()),
                    "{file} uses {name}, which zklock does not record"
                );
            }
        }
        assert_eq!(
            names_in("rate(zklock_hold_seconds_bucket[5m]) zklock_locks_lost_total zklock_nope"),
            [
                "zklock_hold_seconds",
                "zklock_locks_lost_total",
                "zklock_nope"
            ]
        );
    }

    #[test]
    fn buckets_rise_and_cover_a_millisecond_to_minutes() {
        assert!(BUCKETS.windows(2).all(|w| w[0] < w[1]));
        assert!(BUCKETS[0] <= 0.001 && *BUCKETS.last().unwrap() >= 300.0);
    }
}
