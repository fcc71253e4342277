//! The judgement of a history: pure, no I/O, so that synthetic histories can test it
//! (check/tests.rs). Safety here (overlaps, tokens, registers, server data loss); liveness,
//! leftovers and coverage in check/live.rs.
//!
//! 1. Overlaps. A hold's belief interval runs from its acquisition stamp (taken after
//!    `lock()` returned) to the stamp of its last `is_held() == true` answer (stamps are taken
//!    before each call, so a frozen process's belief after resuming counts from its resume;
//!    clients ask right before every release, so a belief that lasted to the release shows).
//!    A hold that never got a `true` has no belief interval. Per lock: mutex holds pairwise
//!    disjoint; a write hold disjoint from every other hold of the read/write lock; at most
//!    `permits` holds of a semaphore at any instant.
//! 2. Fencing tokens: strictly increasing per lock along non-overlapping belief intervals;
//!    never shared by two holds.
//! 3. The fenced registers. Every write stores `"<token>:<value>:<elements>"` with value =
//!    read + 1 and its own element added. Acked writes must produce distinct values, none above
//!    the final value (else an update was lost), every value up to the final one must come from
//!    an acked or unknown-outcome write, and every acked element must be in the final set.
//!    Stale writes: an acked write sent after a holder with a higher token of the same lock had
//!    acquired (that holder could only acquire once our node was gone, so the fence had to
//!    refuse), and, along the chain of values, a writer token lower than the one before it.
//!    Refusals are counted by cause: the write went through a newer session than the hold's
//!    (so the server's check of the lock node refused it) or through the hold's own session
//!    (which the server had expired).
//! 4. Server data loss. A fenced register that goes back (a read, or the final state, below a
//!    value acked earlier) with no client write of the lower value to explain it is ZooKeeper
//!    losing committed writes when an epoch changed in between and a server log says
//!    "Truncating log": named `server data loss` with that evidence, and the lost updates it
//!    explains are not counted against the clients. Without that evidence it stays a lost
//!    update.
//! 5. The unfenced control registers: no verdict, figures only (increments lost, stale writes
//!    accepted), for the summary's side-by-side.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::history::{History, Hold, Write};
use crate::{lock_spec, parse_register, RegisterSpec, REGISTERS};

/// The classes of client violations; any one fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Overlap,
    StaleWrite,
    LostUpdate,
    TokenOrder,
    /// A lock or recipe that did not grant anyone for longer than the bound while wanted.
    Stall,
    /// A client that did not acquire again within the bound after a heal.
    Progress,
    /// A timed acquisition that overran its timeout, or timed out on a lock nobody held.
    Timeout,
    Warmup,
    Leftover,
    Crash,
    /// A long run in which the server's check never refused a stale write.
    FenceUnused,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Overlap => "overlap",
            Class::StaleWrite => "stale write accepted",
            Class::LostUpdate => "lost update",
            Class::TokenOrder => "token order",
            Class::Stall => "stall",
            Class::Progress => "no progress",
            Class::Timeout => "timeout",
            Class::Warmup => "warm-up",
            Class::Leftover => "leftover",
            Class::Crash => "client failure",
            Class::FenceUnused => "fence never exercised",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Violation {
    pub class: Class,
    pub text: String,
}

/// A fenced register that went back, with the servers' evidence that ZooKeeper lost it.
#[derive(Debug, Clone)]
pub struct ServerLoss {
    pub register: String,
    /// When the higher value was acked, and when the lower one was seen.
    pub t_written: u64,
    pub t_seen: u64,
    pub from: u64,
    pub to: u64,
    pub evidence: Vec<String>,
    /// Lost updates (values, elements) it explains.
    pub explained: usize,
}

#[derive(Debug, Clone, Default)]
pub struct RegisterFigures {
    pub path: String,
    pub fenced: bool,
    pub acked: usize,
    pub unknown: usize,
    pub refused_check: usize,
    pub refused_expired: usize,
    pub notsent: usize,
    pub errors: usize,
    pub final_value: u64,
    /// Acked increments missing from the final set, not explained by server data loss.
    pub lost: usize,
    /// Acked increments lost to server data loss.
    pub lost_server: usize,
    /// Acked writes sent after a newer holder of the lock had acquired.
    pub stale_accepted: usize,
}

/// How much of the safety machinery a run exercised.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    pub self_pauses: usize,
    pub careless: usize,
    pub careful: usize,
    /// Self-pauses after which the client had to open a new session.
    pub pauses_expired: usize,
    /// The shortest and longest self-pause, in session timeouts.
    pub pause_range: Option<(f64, f64)>,
    pub fault_pauses: usize,
    /// `pause-client` faults that stopped a client inside a hold.
    pub fault_pauses_on_holders: usize,
    /// The most believed holders of each lock at one instant.
    pub max_holders: BTreeMap<String, usize>,
    /// Read-lock acquisitions that waited while a writer held the lock, and write-lock ones
    /// that waited while readers did.
    pub read_waits: usize,
    pub write_waits: usize,
    pub timeouts: usize,
    pub errors: usize,
}

#[derive(Debug, Default)]
pub struct Report {
    /// The human-readable body, in order, violations included.
    pub lines: Vec<String>,
    pub violations: Vec<Violation>,
    pub server_loss: Vec<ServerLoss>,
    pub registers: Vec<RegisterFigures>,
    pub coverage: Coverage,
    /// The slowest recovery after a heal (every client acquiring again).
    pub max_unavail: u64,
    /// Per recipe (`lock/mode`): the slowest first acquisition after a heal.
    pub recovery: BTreeMap<String, u64>,
}

impl Report {
    pub fn say(&mut self, line: String) {
        self.lines.push(line);
    }

    pub fn violation(&mut self, class: Class, text: String) {
        self.lines
            .push(format!("VIOLATION {}: {text}", class.name()));
        self.violations.push(Violation { class, text });
    }

    pub fn count(&self, class: Class) -> usize {
        self.violations.iter().filter(|v| v.class == class).count()
    }

    /// No client violation. Server data loss does not fail a run: it is ZooKeeper's.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn fenced(&self) -> impl Iterator<Item = &RegisterFigures> {
        self.registers.iter().filter(|r| r.fenced)
    }

    pub fn unfenced(&self) -> impl Iterator<Item = &RegisterFigures> {
        self.registers.iter().filter(|r| !r.fenced)
    }

    pub fn summary(&self, h: &History) -> String {
        let sum =
            |it: &mut dyn Iterator<Item = &RegisterFigures>,
             f: &dyn Fn(&RegisterFigures) -> usize| it.map(f).sum::<usize>();
        let u_acked = sum(&mut self.unfenced(), &|r| r.acked);
        let u_lost = sum(&mut self.unfenced(), &|r| r.lost + r.lost_server);
        let f_lost = sum(&mut self.fenced(), &|r| r.lost);
        let f_check = sum(&mut self.fenced(), &|r| r.refused_check);
        let f_expired = sum(&mut self.fenced(), &|r| r.refused_expired);
        let progress =
            self.count(Class::Stall) + self.count(Class::Progress) + self.count(Class::Warmup);
        let loss = if self.server_loss.is_empty() {
            "no server data loss".to_owned()
        } else {
            format!(
                "SERVER DATA LOSS {} (ZooKeeper; not counted above)",
                self.server_loss.len()
            )
        };
        format!(
            "nemesis: {} holds, {} faults; unfenced: {u_lost} of {u_acked} increments lost; fenced: {f_lost} lost, {} stale writes refused ({f_check} by the check, {f_expired} by expiry); {} overlaps, {} stale writes accepted, {} token, {progress} progress, {} timeout, {} leftover violations; {:.1} s max unavailability; {loss}",
            h.holds.len(),
            h.faults.len(),
            f_check + f_expired,
            self.count(Class::Overlap),
            self.count(Class::StaleWrite),
            self.count(Class::TokenOrder),
            self.count(Class::Timeout),
            self.count(Class::Leftover) + self.count(Class::Crash),
            self.max_unavail as f64 / 1e9,
        )
    }
}

impl Hold {
    pub fn belief(&self) -> Option<(u64, u64)> {
        let last_true = self.checks.iter().filter(|c| c.1).map(|c| c.0).max()?;
        Some((self.t_acq, last_true.max(self.t_acq)))
    }

    pub fn exclusive(&self) -> bool {
        self.mode == "x" || self.mode == "w"
    }

    pub fn name(&self, start: u64) -> String {
        let rel = |t: u64| (t as f64 - start as f64) / 1e9;
        let (b0, b1) = self
            .belief()
            .map_or((f64::NAN, f64::NAN), |(a, b)| (rel(a), rel(b)));
        format!(
            "client {} hold {} ({} {}, token {:#x}, session {}, acquired {:.3} s, believed {:.3}..{:.3} s)",
            self.client, self.h, self.lock, self.mode, self.token, self.session, rel(self.t_acq), b0, b1
        )
    }
}

/// Judges a history: every check, in order.
pub fn judge(h: &History) -> Report {
    let mut r = Report::default();
    r.say(format!(
        "check: {} clients, {} acquisitions, {} faults, session timeout {} ms",
        h.clients,
        h.holds.len(),
        h.faults.len(),
        h.session_ms
    ));
    overlaps(h, &mut r);
    tokens(h, &mut r);
    for spec in REGISTERS {
        register(h, spec, &mut r);
    }
    servers(h, &mut r);
    super::live::progress(h, &mut r);
    super::live::timeouts(h, &mut r);
    super::live::coverage(h, &mut r);
    super::live::leftovers(h, &mut r);
    if h.holds.is_empty() {
        r.violation(Class::Warmup, "no client acquired anything".to_owned());
    }
    r
}

/// The servers' own health: epochs seen, log truncations, an ensemble that did not become
/// whole again. Not judged against the clients; printed so that it is never hidden.
fn servers(h: &History, r: &mut Report) {
    let epochs: Vec<u64> = h.health.iter().filter_map(|v| v.epoch()).collect();
    let (lo, hi) = (epochs.iter().min(), epochs.iter().max());
    let changes = h
        .faults
        .iter()
        .filter(|f| {
            let max_in = |phase: &str| {
                h.health
                    .iter()
                    .filter(|v| v.fault == f.n && v.phase == phase)
                    .filter_map(|v| v.epoch())
                    .max()
            };
            matches!((max_in("before"), max_in("whole").or(max_in("heal"))), (Some(a), Some(b)) if b > a)
        })
        .count();
    r.say(format!(
        "servers: {} health samples, epochs {}..{}, {changes} faults followed by a new epoch; {} \"Truncating log\" lines in the servers' logs; {} times the ensemble was not whole 60 s after a heal",
        h.health.len(),
        lo.map_or("?".to_owned(), |e| e.to_string()),
        hi.map_or("?".to_owned(), |e| e.to_string()),
        h.truncations.len(),
        h.unhealthy.len()
    ));
    for x in &h.truncations {
        r.say(format!("  server {}: {}", x.server, x.line.trim()));
    }
    for (t, n, what) in &h.unhealthy {
        r.say(format!(
            "  SERVERS NOT WHOLE after fault {n} (at {:.1} s): {what}",
            (*t as f64 - h.start as f64) / 1e9
        ));
    }
}

fn by_lock(h: &History) -> BTreeMap<&str, Vec<&Hold>> {
    let mut by: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in &h.holds {
        by.entry(hold.lock.as_str()).or_default().push(hold);
    }
    by
}

fn believed<'a>(list: &[&'a Hold]) -> Vec<(&'a Hold, (u64, u64))> {
    let mut b: Vec<_> = list
        .iter()
        .filter_map(|h| h.belief().map(|b| (*h, b)))
        .collect();
    b.sort_by_key(|(_, b)| b.0);
    b
}

fn overlaps(h: &History, r: &mut Report) {
    let start = h.start;
    let mut never_believed = 0;
    for (lock, list) in by_lock(h) {
        let believed = believed(&list);
        never_believed += list.len() - believed.len();
        let permits = lock_spec(lock).map_or(0, |s| s.permits);
        // The most holders believed at one instant (readers, permits), and for a semaphore
        // the check that it never exceeds the permits.
        let mut events: Vec<(u64, i32, &Hold)> = Vec::new();
        for (hold, (a, b)) in &believed {
            events.push((*a, 1, hold));
            events.push((*b, -1, hold));
        }
        events.sort_by_key(|e| (e.0, e.1));
        let mut inside: Vec<&Hold> = Vec::new();
        let mut most = 0;
        for (_, delta, hold) in events {
            if delta > 0 {
                inside.push(hold);
                most = most.max(inside.len());
                if permits > 0 && inside.len() > permits {
                    let who: Vec<String> = inside.iter().map(|x| x.name(start)).collect();
                    r.violation(
                        Class::Overlap,
                        format!(
                            "{} holders of {lock} ({permits} permits) believed at once:\n    {}",
                            inside.len(),
                            who.join("\n    ")
                        ),
                    );
                }
            } else {
                inside.retain(|x| !(x.client == hold.client && x.h == hold.h));
            }
        }
        r.coverage.max_holders.insert(lock.to_owned(), most);
        if permits > 0 {
            continue;
        }
        for i in 0..believed.len() {
            let (a, (_, a_end)) = believed[i];
            for &(b, (b_start, _)) in &believed[i + 1..] {
                if b_start >= a_end {
                    break;
                }
                if a.exclusive() || b.exclusive() {
                    r.violation(
                        Class::Overlap,
                        format!("on {lock}:\n    {}\n    {}", a.name(start), b.name(start)),
                    );
                }
            }
        }
    }
    r.say(format!(
        "holds: {} acquired, {never_believed} never believed (first is_held() already false)",
        h.holds.len()
    ));
}

fn tokens(h: &History, r: &mut Report) {
    let start = h.start;
    for (lock, list) in by_lock(h) {
        if lock_spec(lock).is_some_and(|s| s.permits > 0) {
            continue;
        }
        let mut seen: HashMap<i64, &Hold> = HashMap::new();
        for hold in &list {
            if let Some(other) = seen.insert(hold.token, hold) {
                r.violation(
                    Class::TokenOrder,
                    format!(
                        "token shared by two holds:\n    {}\n    {}",
                        other.name(start),
                        hold.name(start)
                    ),
                );
            }
        }
        let believed = believed(&list);
        for i in 0..believed.len() {
            let (a, (_, a_end)) = believed[i];
            for &(b, (b_start, _)) in &believed[i + 1..] {
                if b_start > a_end && (a.exclusive() || b.exclusive()) && b.token <= a.token {
                    r.violation(
                        Class::TokenOrder,
                        format!(
                            "on {lock}: a later hold has a lower token:\n    {}\n    {}",
                            a.name(start),
                            b.name(start)
                        ),
                    );
                }
            }
        }
    }
}

/// A register going back: the value `from`, acked at `t_written`, then `to` seen at `t_seen`.
struct Regression {
    t_written: u64,
    t_seen: u64,
    from: u64,
    to: u64,
}

/// Where a fenced register went back without a client write to explain it.
fn regressions(
    h: &History,
    path: &str,
    writes: &[(&Hold, &Write)],
    final_value: u64,
) -> Vec<Regression> {
    // (acked at, value, sent at)
    let mut acked: Vec<(u64, u64, u64)> = writes
        .iter()
        .filter(|(_, w)| w.outcome == "acked")
        .map(|(_, w)| (w.t_done, w.old + 1, w.t_send))
        .collect();
    acked.sort_unstable();
    let mut seen: Vec<(u64, u64)> = h
        .holds
        .iter()
        .flat_map(|x| x.reads.iter())
        .filter(|rd| rd.register == path)
        .filter_map(|rd| Some((rd.t, rd.value?)))
        .collect();
    let last = h
        .holds
        .iter()
        .flat_map(|x| x.writes.iter().map(|w| w.t_done))
        .max()
        .unwrap_or(0)
        .max(h.stop);
    seen.push((last + 1, final_value));
    seen.sort_unstable();
    let mut out = Vec::new();
    // After a regression, only what was acked since counts (and the value it went back to).
    let (mut floor_t, mut base) = (0, 0);
    for (t, v) in seen {
        let top = acked
            .iter()
            .filter(|(done, _, _)| *done >= floor_t && *done < t)
            .max_by_key(|(_, value, _)| *value)
            .copied();
        let (t_high, high, sent_high) = match top {
            Some((done, value, sent)) if value > base => (done, value, sent),
            _ => (floor_t, base, floor_t),
        };
        if v >= high {
            continue;
        }
        // A client's (stale) write of `v` that may have been applied after the higher value
        // (it was answered after that one was sent) explains it: that is for the value
        // checks, not the servers.
        let written = writes.iter().any(|(_, w)| {
            w.old + 1 == v
                && (w.outcome == "acked" || w.outcome == "unknown")
                && w.t_done >= sent_high
                && w.t_send < t
        });
        if written {
            continue;
        }
        out.push(Regression {
            t_written: t_high,
            t_seen: t,
            from: high,
            to: v,
        });
        floor_t = t;
        base = v;
    }
    out
}

/// The servers' evidence for a regression: an epoch change between the write and the sighting,
/// and a "Truncating log" around it. `None` unless both.
fn server_evidence(h: &History, g: &Regression) -> Option<Vec<String>> {
    const SLACK: u64 = 10_000_000_000;
    let epochs = |until: u64| {
        h.health
            .iter()
            .filter(move |v| v.t <= until)
            .filter_map(|v| Some((v.epoch()?, v)))
    };
    let first = h.health.iter().filter_map(|v| v.epoch()).min()?;
    let before = epochs(g.t_written).map(|(e, _)| e).max().unwrap_or(first);
    let (after, at) = epochs(g.t_seen + SLACK).max_by_key(|(e, v)| (*e, v.t))?;
    if after <= before {
        return None;
    }
    let truncations: Vec<String> = h
        .truncations
        .iter()
        .filter(|x| x.t == 0 || (x.t + 2_000_000_000 >= g.t_written && x.t <= g.t_seen + SLACK))
        .map(|x| format!("server {} log: {}", x.server, x.line.trim()))
        .collect();
    if truncations.is_empty() {
        return None;
    }
    let rel = |t: u64| (t as f64 - h.start as f64) / 1e9;
    let mut evidence = vec![format!(
        "epoch {before} -> {after} between {:.3} s and {:.3} s (server {} {} at {:.3} s, after fault {}, last zxid {})",
        rel(g.t_written),
        rel(g.t_seen),
        at.server,
        at.mode,
        rel(at.t),
        at.fault,
        at.zxid
    )];
    evidence.extend(truncations);
    Some(evidence)
}

fn register(h: &History, spec: RegisterSpec, r: &mut Report) {
    let start = h.start;
    let rel = |t: u64| (t as f64 - start as f64) / 1e9;
    let path = spec.path;
    let writes: Vec<(&Hold, &Write)> = h
        .holds
        .iter()
        .flat_map(|x| x.writes.iter().map(move |w| (x, w)))
        .filter(|(_, w)| w.register == path)
        .collect();
    let text = h.registers.get(path).cloned().unwrap_or_default();
    let Some((final_token, final_value, final_elements)) = parse_register(&text) else {
        if spec.fenced {
            r.violation(
                Class::LostUpdate,
                format!("register {path} holds {text:?}, not \"<token>:<value>:<elements>\""),
            );
        }
        return;
    };
    let final_set: HashSet<&str> = final_elements.split(',').collect();
    let count = |o: &str| writes.iter().filter(|(_, w)| w.outcome == o).count();
    let mut fig = RegisterFigures {
        path: path.to_owned(),
        fenced: spec.fenced,
        acked: count("acked"),
        unknown: count("unknown"),
        notsent: count("notsent"),
        final_value,
        ..RegisterFigures::default()
    };
    fig.errors = writes.len() - fig.acked - fig.unknown - fig.notsent - count("refused");
    // The cause of each refusal: a write through a newer session than the hold's reached the
    // server alive, so the check of the (gone) lock node refused it; one through the hold's
    // own session was refused because the server had expired that session.
    for (hold, w) in writes.iter().filter(|(_, w)| w.outcome == "refused") {
        if w.session != hold.session {
            fig.refused_check += 1;
        } else {
            fig.refused_expired += 1;
        }
    }
    // Stale: an acked write sent after a newer holder of the same lock had acquired.
    let lock_holds: Vec<&Hold> = h.holds.iter().filter(|x| x.lock == spec.lock).collect();
    let mut stale = Vec::new();
    for &(x, w) in writes.iter().filter(|(_, w)| w.outcome == "acked") {
        if let Some(newer) = lock_holds
            .iter()
            .find(|n| n.token > w.token && n.t_acq < w.t_send)
        {
            stale.push((x, w, *newer));
        }
    }
    fig.stale_accepted = stale.len();

    let regs = if spec.fenced {
        regressions(h, path, &writes, final_value)
    } else {
        Vec::new()
    };
    let mut losses: Vec<ServerLoss> = Vec::new();
    for g in &regs {
        match server_evidence(h, g) {
            Some(evidence) => losses.push(ServerLoss {
                register: path.to_owned(),
                t_written: g.t_written,
                t_seen: g.t_seen,
                from: g.from,
                to: g.to,
                evidence,
                explained: 0,
            }),
            None => r.violation(
                Class::LostUpdate,
                format!(
                    "{path} went back from {} (acked by {:.3} s) to {} (seen at {:.3} s) with no client write of {}, and the servers show no epoch change with a log truncation to explain it",
                    g.from,
                    rel(g.t_written),
                    g.to,
                    rel(g.t_seen),
                    g.to
                ),
            ),
        }
    }
    // The loss (if any) that explains an acked write of `value` done at `t_done` going missing.
    let lost_by_server = |losses: &[ServerLoss], value: u64, t_done: u64| {
        losses
            .iter()
            .position(|l| l.to < value && value <= l.from && t_done < l.t_seen)
    };

    // Acked increments missing from the final set.
    for &(_, w) in writes.iter().filter(|(_, w)| w.outcome == "acked") {
        if final_set.contains(w.element.as_str()) {
            continue;
        }
        match lost_by_server(&losses, w.old + 1, w.t_done) {
            Some(i) => {
                fig.lost_server += 1;
                losses[i].explained += 1;
            }
            None => fig.lost += 1,
        }
    }
    r.say(format!(
        "register {path} ({}): final {final_value} (token {final_token:#x}); writes: {} acked, {} unknown, {} refused by the check, {} refused by expiry, {} not sent, {} other errors; {} acked increments missing from the final value{}",
        if spec.fenced { "fenced" } else { "unfenced control" },
        fig.acked,
        fig.unknown,
        fig.refused_check,
        fig.refused_expired,
        fig.notsent,
        fig.errors,
        fig.lost + fig.lost_server,
        if fig.lost_server > 0 { format!(" ({} lost by the server)", fig.lost_server) } else { String::new() },
    ));
    if !spec.fenced {
        r.say(format!(
            "  the control: {} acked writes were sent after a newer holder had acquired (no fence to refuse them)",
            fig.stale_accepted
        ));
        r.registers.push(fig);
        return;
    }
    for (x, w, newer) in &stale {
        r.violation(
            Class::StaleWrite,
            format!(
                "{path} write sent at {:.3} s by\n    {}\n  after a newer holder acquired:\n    {}",
                rel(w.t_send),
                x.name(start),
                newer.name(start)
            ),
        );
    }
    if fig.lost > 0 {
        r.violation(
            Class::LostUpdate,
            format!(
                "{} acked increments of {path} are missing from its final value",
                fig.lost
            ),
        );
    }

    let mut by_value: BTreeMap<u64, Vec<(&Hold, &Write)>> = BTreeMap::new();
    for &(x, w) in &writes {
        by_value.entry(w.old + 1).or_default().push((x, w));
    }
    for (value, ws) in &by_value {
        let acked: Vec<_> = ws.iter().filter(|(_, w)| w.outcome == "acked").collect();
        if acked.len() > 1 {
            // Once before the register went back and once after: the server's loss.
            let explained = losses.iter().position(|l| {
                let before = acked.iter().filter(|(_, w)| w.t_done < l.t_seen).count();
                l.to < *value && *value <= l.from && before == 1 && acked.len() == 2
            });
            match explained {
                Some(i) => losses[i].explained += 1,
                None => {
                    let who: Vec<String> = acked.iter().map(|(x, _)| x.name(start)).collect();
                    r.violation(
                        Class::LostUpdate,
                        format!(
                            "{} acked writes of value {value} to {path}:\n    {}",
                            acked.len(),
                            who.join("\n    ")
                        ),
                    );
                }
            }
        }
        if *value > final_value && !acked.is_empty() {
            match lost_by_server(&losses, *value, acked[0].1.t_done) {
                Some(i) => losses[i].explained += 1,
                None => r.violation(
                    Class::LostUpdate,
                    format!(
                        "acked write of value {value} to {path}, final value {final_value}: {}",
                        acked[0].0.name(start)
                    ),
                ),
            }
        }
    }
    // The chain of values 1..=final: each from an acked or unknown-outcome write.
    let mut previous: Option<(u64, i64)> = None;
    for value in 1..=final_value {
        let ws = by_value.get(&value).cloned().unwrap_or_default();
        let acked: Vec<_> = ws.iter().filter(|(_, w)| w.outcome == "acked").collect();
        let unknown: Vec<_> = ws.iter().filter(|(_, w)| w.outcome == "unknown").collect();
        let writer = match (acked.len(), unknown.len()) {
            (1, _) => Some(acked[0].1.token),
            (0, 1) => Some(unknown[0].1.token),
            (0, 0) => {
                match ws.iter().find(|(_, w)| w.outcome == "refused") {
                    Some((x, _)) => r.violation(
                        Class::StaleWrite,
                        format!(
                            "value {value} of {path} can only come from a write the fence refused: {}",
                            x.name(start)
                        ),
                    ),
                    None => r.violation(
                        Class::LostUpdate,
                        format!(
                            "value {value} of {path} was written by no acked or unknown-outcome write (candidates: {:?})",
                            ws.iter()
                                .map(|(x, w)| format!("{} -> {}", x.name(start), w.outcome))
                                .collect::<Vec<_>>()
                        ),
                    ),
                }
                None
            }
            _ => None,
        };
        if let (Some(token), Some((pv, pt))) = (writer, previous) {
            if pv + 1 == value && token < pt {
                r.violation(
                    Class::StaleWrite,
                    format!("value {value} of {path} written with token {token:#x} after value {pv} with token {pt:#x}"),
                );
            }
        }
        previous = writer.map(|t| (value, t)).or(previous);
    }
    if let Some((pv, pt)) = previous {
        if pv == final_value && pt != final_token {
            r.violation(
                Class::StaleWrite,
                format!("register {path} holds token {final_token:#x} but its last write came from token {pt:#x}"),
            );
        }
    }
    for loss in losses {
        r.say(format!(
            "SERVER DATA LOSS: {} went back from {} (acked by {:.3} s) to {} (seen at {:.3} s); ZooKeeper lost committed writes, not the clients ({} lost updates explained). Evidence:\n    {}",
            loss.register,
            loss.from,
            rel(loss.t_written),
            loss.to,
            rel(loss.t_seen),
            loss.explained,
            loss.evidence.join("\n    ")
        ));
        r.server_loss.push(loss);
    }
    r.registers.push(fig);
}
