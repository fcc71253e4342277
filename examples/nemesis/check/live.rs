//! Liveness, timeouts, coverage and leftovers (see judge.rs for safety).
//!
//! - Warm-up: every client acquires within [`WARMUP_NS`] of the start, and the orchestrator saw
//!   the warm-up complete.
//! - Progress per client: after each heal, the time until each client's next acquisition; over
//!   the bound (default 30 s) is a violation.
//! - Progress per lock and per recipe (`mutex/x`, `rw/w`, `rw/r`, `sem/s`, `sem1/s`): a recipe
//!   that someone kept trying for longer than the bound without anyone acquiring it has
//!   stalled. After each heal, the time to each recipe's next acquisition is reported.
//! - Timeouts: a timed acquisition must return within its timeout plus [`TIMEOUT_SLACK_NS`]
//!   (unless its process was stopped meanwhile), and must not time out on a lock that nobody
//!   held, waited for ahead of it, or left a node on, with no fault near.
//! - Coverage: self-pauses (careless and careful, how many outlived their session, their
//!   lengths), `pause-client` faults that hit a holder, the most holders at once, read/write
//!   waits; a run of [`FENCE_MIN_NS`] or more in which the server's check never refused a stale
//!   write fails as "fence never exercised".
//! - Leftovers: no lock node and no watch while every client idles with its session open, none
//!   once they exited, every client exited 0.

use std::collections::BTreeMap;

use super::history::History;
use super::judge::{Class, Report};
use crate::lock_spec;

/// Every client must have acquired something this long after the start.
pub const WARMUP_NS: u64 = 60_000_000_000;

/// How late a timed acquisition may return (scheduling on a loaded 2-core machine).
pub const TIMEOUT_SLACK_NS: u64 = 2_000_000_000;

/// A run at least this long (from the clients' start to their stop) must have seen the check
/// refuse a stale write. Every client pauses carelessly once in its first holds, so a 60 s
/// run has several such refusals (FINDINGS.md has the figures).
pub const FENCE_MIN_NS: u64 = 50_000_000_000;

fn recipe(lock: &str, mode: &str) -> String {
    format!("{lock}/{mode}")
}

pub fn progress(h: &History, r: &mut Report) {
    let rel = |t: u64| (t as f64 - h.start as f64) / 1e9;
    // Warm-up.
    if h.warmup.is_some_and(|(_, ok)| !ok) {
        r.violation(
            Class::Warmup,
            "the orchestrator saw the warm-up never complete (not every client acquired within 60 s)".to_owned(),
        );
    }
    for c in 1..=h.clients {
        let first = h
            .holds
            .iter()
            .filter(|x| x.client == c)
            .map(|x| x.t_acq)
            .min();
        match first {
            Some(t) if t <= h.start + WARMUP_NS => {}
            Some(t) => r.violation(
                Class::Warmup,
                format!(
                    "client {c} first acquired at {:.1} s, over {} s after the start",
                    rel(t),
                    WARMUP_NS / 1_000_000_000
                ),
            ),
            None => r.violation(Class::Warmup, format!("client {c} never acquired anything")),
        }
    }

    // Per client, after each heal.
    type Row = (u64, usize, u64, Vec<u64>);
    let mut per_kind: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    r.say("faults (time from the start of the clients; recovery = heal to every client's next acquisition):".to_owned());
    let recipes: Vec<String> = {
        let mut v: Vec<String> = h.holds.iter().map(|x| recipe(&x.lock, &x.mode)).collect();
        v.extend(h.attempts.iter().map(|a| recipe(&a.lock, &a.mode)));
        v.sort();
        v.dedup();
        v
    };
    for fault in &h.faults {
        let Some(heal) = fault.heal else { continue };
        let mut worst = 0;
        let mut censored = false;
        for c in 1..=h.clients {
            let next = h
                .holds
                .iter()
                .filter(|x| x.client == c && x.t_acq > heal)
                .map(|x| x.t_acq)
                .min();
            match next {
                Some(t) => worst = worst.max(t - heal),
                None => {
                    let exit = h.client_info.get(&c).map_or(h.stop, |i| i.exit);
                    let waited = exit.saturating_sub(heal);
                    if waited >= h.bound_ns {
                        worst = worst.max(waited);
                        r.violation(
                            Class::Progress,
                            format!(
                                "client {c} did not acquire in the {:.1} s between heal {} ({}) and its exit",
                                waited as f64 / 1e9,
                                fault.n,
                                fault.kind
                            ),
                        );
                    } else {
                        censored = true;
                    }
                }
            }
        }
        if worst > h.bound_ns {
            r.violation(
                Class::Progress,
                format!(
                    "a client took {:.1} s after heal {} to acquire (bound {} s)",
                    worst as f64 / 1e9,
                    fault.n,
                    h.bound_ns / 1_000_000_000
                ),
            );
        }
        r.max_unavail = r.max_unavail.max(worst);
        // Per recipe: the first acquisition after the heal (a figure; stalls are judged below).
        for key in &recipes {
            let next = h
                .holds
                .iter()
                .filter(|x| recipe(&x.lock, &x.mode) == *key && x.t_acq > heal)
                .map(|x| x.t_acq - heal)
                .min();
            if let Some(ns) = next {
                let slot = r.recovery.entry(key.clone()).or_default();
                *slot = (*slot).max(ns);
            }
        }
        let during = h
            .holds
            .iter()
            .filter(|x| x.t_acq >= fault.start && x.t_acq <= heal)
            .count();
        let mut stamps: Vec<u64> = h
            .holds
            .iter()
            .map(|x| x.t_acq)
            .filter(|&t| t >= fault.start && t <= heal + worst)
            .collect();
        stamps.push(fault.start);
        stamps.push(heal + worst);
        stamps.sort_unstable();
        let gap = stamps.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let latencies: Vec<u64> = h
            .holds
            .iter()
            .filter(|x| x.t_acq >= fault.start && x.t_acq <= heal)
            .map(|x| x.t_acq - x.t_call)
            .collect();
        per_kind
            .entry(fault.kind.clone())
            .or_default()
            .push((worst, during, gap, latencies));
        r.say(format!(
            "  {:6.1} s  fault {:2} {:14} {:5.1} s  {:4} acquisitions during, longest gap {:5.1} s, recovery {:5.1} s{}  [{}; {}]",
            rel(fault.start),
            fault.n,
            fault.kind,
            (heal - fault.start) as f64 / 1e9,
            during,
            gap as f64 / 1e9,
            worst as f64 / 1e9,
            if censored { " (run ended first)" } else { "" },
            fault.what,
            fault.effect
        ));
    }
    r.say("per fault kind: count | recovery after heal mean / max | longest gap without any acquisition, mean / max | acquisitions/s during | acquisition latency during, median / max:".to_owned());
    let secs_in = |kind: &str| -> f64 {
        h.faults
            .iter()
            .filter(|f| f.kind == kind)
            .filter_map(|f| Some((f.heal? - f.start) as f64 / 1e9))
            .sum()
    };
    for (kind, rows) in &per_kind {
        let n = rows.len() as f64;
        let mean = |f: &dyn Fn(&Row) -> u64| rows.iter().map(f).sum::<u64>() as f64 / n / 1e9;
        let max = |f: &dyn Fn(&Row) -> u64| rows.iter().map(f).max().unwrap_or(0) as f64 / 1e9;
        let mut lat: Vec<u64> = rows.iter().flat_map(|r| r.3.iter().copied()).collect();
        lat.sort_unstable();
        let median = lat.get(lat.len() / 2).map_or(f64::NAN, |&l| l as f64 / 1e6);
        let worst = lat.last().map_or(f64::NAN, |&l| l as f64 / 1e6);
        let acquired: usize = rows.iter().map(|r| r.1).sum();
        r.say(format!(
            "  {kind:14} {:3} | {:5.1} / {:5.1} s | {:5.1} / {:5.1} s | {:5.1} | {median:6.0} / {worst:6.0} ms",
            rows.len(),
            mean(&|r| r.0),
            max(&|r| r.0),
            mean(&|r| r.2),
            max(&|r| r.2),
            acquired as f64 / secs_in(kind).max(0.001),
        ));
    }
    let mut latencies: Vec<u64> = h.holds.iter().map(|x| x.t_acq - x.t_call).collect();
    latencies.sort_unstable();
    if !latencies.is_empty() {
        let q = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1e6;
        r.say(format!(
            "acquisition latency (call to return, all recipes, contention included): median {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            q(0.5),
            q(0.99),
            q(1.0)
        ));
    }

    // Stalls, per recipe and per lock.
    // (what is judged, its lock, its mode or every mode of the lock)
    let mut keys: Vec<(String, String, Option<String>)> = recipes
        .iter()
        .filter_map(|k| {
            let (lock, mode) = k.split_once('/')?;
            Some((k.clone(), lock.to_owned(), Some(mode.to_owned())))
        })
        .collect();
    let mut locks: Vec<String> = keys.iter().map(|k| k.1.clone()).collect();
    locks.dedup();
    keys.extend(locks.into_iter().map(|l| (l.clone(), l, None)));
    let mut line = Vec::new();
    for (key, lock, mode) in &keys {
        let matches = |l: &str, m: &str| l == lock && mode.as_ref().is_none_or(|x| x == m);
        let mut acquired: Vec<u64> = h
            .holds
            .iter()
            .filter(|x| matches(&x.lock, &x.mode))
            .map(|x| x.t_acq)
            .collect();
        acquired.sort_unstable();
        // Every call of this recipe: when it started.
        let mut calls: Vec<u64> = h
            .holds
            .iter()
            .filter(|x| matches(&x.lock, &x.mode))
            .map(|x| x.t_call)
            .chain(
                h.attempts
                    .iter()
                    .filter(|a| matches(&a.lock, &a.mode))
                    .map(|a| a.t_call),
            )
            .collect();
        calls.sort_unstable();
        let mut longest: u64 = 0;
        let mut bounds = vec![h.start];
        bounds.extend(&acquired);
        bounds.push(h.stop.max(h.start));
        for w in bounds.windows(2) {
            let (g0, g1) = (w[0], w[1]);
            // The first call made after the previous acquisition: wanted since then.
            let Some(&s0) = calls.iter().find(|&&t| t > g0 && t < g1) else {
                continue;
            };
            let wanted = g1 - s0;
            longest = longest.max(wanted);
            if wanted > h.bound_ns {
                let tries = calls.iter().filter(|&&t| t >= s0 && t < g1).count();
                r.violation(
                    Class::Stall,
                    format!(
                        "{key}: wanted from {:.1} s, {tries} calls, and nobody acquired it for {:.1} s (bound {} s)",
                        rel(s0),
                        wanted as f64 / 1e9,
                        h.bound_ns / 1_000_000_000
                    ),
                );
            }
        }
        line.push(format!(
            "{key} {} acquired, longest wanted-but-not-granted {:.1} s",
            acquired.len(),
            longest as f64 / 1e9
        ));
    }
    r.say(format!("progress per recipe and lock: {}", line.join("; ")));
    if !r.recovery.is_empty() {
        let parts: Vec<String> = r
            .recovery
            .iter()
            .map(|(k, ns)| format!("{k} {:.1} s", *ns as f64 / 1e9))
            .collect();
        r.say(format!(
            "slowest first acquisition after a heal, per recipe: {}",
            parts.join(", ")
        ));
    }
}

/// Was client `c`'s process stopped by a `pause-client` fault during `[a, b]`?
fn fault_paused(h: &History, c: usize, a: u64, b: u64) -> bool {
    h.faults
        .iter()
        .any(|f| f.paused_client() == Some(c) && f.start < b && f.heal.unwrap_or(u64::MAX) > a)
}

pub fn timeouts(h: &History, r: &mut Report) {
    let rel = |t: u64| (t as f64 - h.start as f64) / 1e9;
    let session = h.session_ms * 1_000_000;
    // Every timed call: (client, lock, mode, call, return, patience, outcome).
    let mut calls: Vec<(usize, &str, &str, u64, u64, u64, &str)> = h
        .holds
        .iter()
        .map(|x| {
            (
                x.client,
                x.lock.as_str(),
                x.mode.as_str(),
                x.t_call,
                x.t_acq,
                x.patience_ms,
                "acquired",
            )
        })
        .collect();
    calls.extend(h.attempts.iter().map(|a| {
        (
            a.client,
            a.lock.as_str(),
            a.mode.as_str(),
            a.t_call,
            a.t_ret,
            a.patience_ms,
            a.outcome.as_str(),
        )
    }));
    for &(c, lock, mode, a, b, patience, outcome) in &calls {
        if patience == 0 {
            continue;
        }
        let took = b.saturating_sub(a);
        if took > patience * 1_000_000 + TIMEOUT_SLACK_NS && !fault_paused(h, c, a, b) {
            r.violation(
                Class::Timeout,
                format!(
                    "client {c}: a {lock}/{mode} acquisition with a {patience} ms timeout returned ({outcome}) after {:.1} s, at {:.1} s",
                    took as f64 / 1e9,
                    rel(b)
                ),
            );
        }
    }
    // Timed out on a free lock: nothing that conflicts with us held it, waited ahead of us or
    // may have left a node on it, and no fault was near.
    let near_fault = |a: u64, b: u64| {
        h.faults
            .iter()
            .any(|f| f.start < b + session && f.heal.unwrap_or(u64::MAX) + 2 * session > a)
    };
    let conflicts = |lock: &str, mode: &str, other: &str| {
        let readers = lock == "rw" && mode == "r" && other == "r";
        !readers
    };
    for t in h.attempts.iter().filter(|a| a.outcome == "timeout") {
        let (a, b) = (t.t_call, t.t_ret);
        if near_fault(a, b) {
            continue;
        }
        let held = h.holds.iter().any(|x| {
            if x.lock != t.lock || !conflicts(&t.lock, &t.mode, &x.mode) {
                return false;
            }
            // From its call (it may have queued ahead of us) to its release's return, longer if
            // the release failed (the node goes with the session).
            let end = match &x.release {
                Some((_, done, outcome)) if outcome == "ok" => *done,
                Some((_, done, _)) => done + 2 * session,
                None => u64::MAX,
            };
            x.t_call < b && end > a
        });
        let waited = h.attempts.iter().any(|o| {
            !std::ptr::eq(o, t)
                && o.lock == t.lock
                && conflicts(&t.lock, &t.mode, &o.mode)
                && o.t_call < b
                && o.t_ret + if o.outcome == "error" { 2 * session } else { 0 } > a
                && (o.t_call <= a || o.client == t.client)
        });
        if !held && !waited {
            let free = lock_spec(&t.lock).map_or(String::new(), |s| {
                if s.permits > 0 {
                    format!(" ({} permits, none taken)", s.permits)
                } else {
                    String::new()
                }
            });
            r.violation(
                Class::Timeout,
                format!(
                    "client {} timed out after {:.1} s on {}/{} at {:.1} s while nobody held{free}, queued for or had just left it",
                    t.client,
                    (b - a) as f64 / 1e9,
                    t.lock,
                    t.mode,
                    rel(b)
                ),
            );
        }
    }
}

pub fn coverage(h: &History, r: &mut Report) {
    let cov = &mut r.coverage;
    let session = h.session_ms as f64 * 1e6;
    for x in &h.holds {
        // The session of the client's next hold: another one means ours did not survive.
        let next_session = h
            .holds
            .iter()
            .filter(|y| y.client == x.client && y.h > x.h)
            .min_by_key(|y| y.h)
            .map(|y| y.session.as_str());
        for p in &x.pauses {
            cov.self_pauses += 1;
            if p.kind == "careless" {
                cov.careless += 1;
            } else {
                cov.careful += 1;
            }
            // The session was replaced if the careless wait saw a new one, a later write of
            // the hold went through another one, or the client's next hold has another.
            let replaced = p.ready == "new"
                || x.writes.iter().any(|w| w.session != x.session)
                || next_session.is_some_and(|s| s != x.session);
            if replaced {
                cov.pauses_expired += 1;
            }
            let len = (p.t_resume - p.t_stop) as f64 / session;
            cov.pause_range = Some(match cov.pause_range {
                None => (len, len),
                Some((lo, hi)) => (lo.min(len), hi.max(len)),
            });
        }
    }
    for f in &h.faults {
        if let Some(c) = f.paused_client() {
            cov.fault_pauses += 1;
            let holding = h.holds.iter().any(|x| {
                x.client == c
                    && x.t_acq <= f.start
                    && x.release.as_ref().is_none_or(|(t, _, _)| *t >= f.start)
            });
            if holding {
                cov.fault_pauses_on_holders += 1;
            }
        }
    }
    // Read/write waits: a reader that waited while a writer held the lock, a writer that
    // waited while a reader did.
    for x in h.holds.iter().filter(|x| x.lock == "rw") {
        let waited_on = |mode: &str| {
            h.holds.iter().any(|y| {
                y.lock == "rw"
                    && y.mode == mode
                    && y.client != x.client
                    && y.t_acq < x.t_acq
                    && y.release.as_ref().map_or(u64::MAX, |(_, d, _)| *d) > x.t_call
            })
        };
        if x.mode == "r" && waited_on("w") {
            cov.read_waits += 1;
        }
        if x.mode == "w" && waited_on("r") {
            cov.write_waits += 1;
        }
    }
    cov.timeouts = h.attempts.iter().filter(|a| a.outcome == "timeout").count();
    cov.errors = h.attempts.iter().filter(|a| a.outcome == "error").count();
    let refused_check: usize = r.fenced().map(|f| f.refused_check).sum();
    let refused_expired: usize = r.fenced().map(|f| f.refused_expired).sum();
    let cov = r.coverage.clone();
    let range = cov
        .pause_range
        .map_or("none".to_owned(), |(lo, hi)| format!("{lo:.2}-{hi:.2}"));
    let most: Vec<String> = cov
        .max_holders
        .iter()
        .map(|(lock, n)| {
            let permits = lock_spec(lock).map_or(0, |s| s.permits);
            if permits > 0 {
                format!("{lock} {n} of {permits}")
            } else {
                format!("{lock} {n}")
            }
        })
        .collect();
    r.say(format!(
        "coverage: {} self-pauses ({} careless, {} careful; {} outlived their session; {range} session timeouts long), {} of {} pause-client faults hit a holder; fence refusals: {refused_check} by the check, {refused_expired} by expiry; most holders at once: {}; read/write waits: {} readers behind a writer, {} writers behind readers; {} timeouts, {} errors",
        cov.self_pauses,
        cov.careless,
        cov.careful,
        cov.pauses_expired,
        cov.fault_pauses_on_holders,
        cov.fault_pauses,
        most.join(", "),
        cov.read_waits,
        cov.write_waits,
        cov.timeouts,
        cov.errors,
    ));
    let ran = h.stop.saturating_sub(h.start);
    if ran >= FENCE_MIN_NS && refused_check == 0 {
        r.violation(
            Class::FenceUnused,
            format!(
                "in {:.0} s the server's check of the lock node refused no write ({} self-pauses, {} careless): the run cannot show what fencing is for",
                ran as f64 / 1e9,
                cov.self_pauses,
                cov.careless
            ),
        );
    }
}

pub fn leftovers(h: &History, r: &mut Report) {
    for c in 1..=h.clients {
        match h.client_info.get(&c).and_then(|i| i.status.as_deref()) {
            Some("0") => {}
            Some(status) => r.violation(
                Class::Crash,
                format!("client {c} exited with {status} (see c{c}/stderr)"),
            ),
            None => r.violation(Class::Crash, format!("client {c} reported no exit")),
        }
    }
    for l in &h.leftovers {
        let what = match l.kind.as_str() {
            "idle-watch" => "watches held by idle clients (no lock held or wanted)",
            "idle-node" => "lock nodes while every client is idle (orphans)",
            "node" => "lock nodes left after every client exited",
            "watch" => "watches left on a server after every client exited",
            _ => "a server did not answer wchs",
        };
        r.violation(
            Class::Leftover,
            format!(
                "{} {what}:\n    {}",
                l.count,
                l.detail.replace('\n', "\n    ")
            ),
        );
    }
}
