//! The checker's own tests: synthetic histories, one per violation class, each of which it
//! must flag, and clean ones it must pass (run by `cargo test --example nemesis`, and so by
//! `cargo test` / scripts/test.sh: the example is marked `test = true` in Cargo.toml).

use super::history::{
    Attempt, Fault, Health, History, Hold, Leftover, Pause, Read, Truncation, Write,
};
use super::judge::{judge, Class, Report};

const START: u64 = 1_000_000_000_000;
const FENCED: &str = "/nemesis/reg/mutex";
const PLAIN: &str = "/nemesis/unfenced/mutex";

fn at(secs: f64) -> u64 {
    START + (secs * 1e9) as u64
}

/// A history under construction: two clients, a 60 s run, 3 s sessions, a 30 s bound.
struct B(History);

impl B {
    fn new() -> B {
        let mut h = History {
            seed: 1,
            duration_s: 60,
            start: START,
            stop: at(60.0),
            clients: 2,
            session_ms: 3000,
            bound_ns: 30_000_000_000,
            warmup: Some((at(1.0), true)),
            ..History::default()
        };
        for c in 1..=2 {
            let info = h.client_info.entry(c).or_default();
            info.started = START;
            info.exit = at(61.0);
            info.status = Some("0".into());
        }
        for r in crate::REGISTERS {
            h.registers.insert(r.path.into(), "0:0:".into());
        }
        B(h)
    }

    /// A hold believed from `from` to `to` (acquired 10 ms after the call, released at `to`).
    fn hold(
        &mut self,
        client: usize,
        lock: &str,
        mode: &str,
        from: f64,
        to: f64,
        token: i64,
    ) -> usize {
        let h = self.0.holds.iter().filter(|x| x.client == client).count() as u64 + 100;
        self.0.holds.push(Hold {
            client,
            h,
            lock: lock.into(),
            mode: mode.into(),
            t_call: at(from) - 10_000_000,
            t_acq: at(from),
            token,
            session: format!("0x{client}"),
            patience_ms: 5000,
            release: Some((at(to), at(to) + 1_000_000, "ok".into())),
            checks: vec![(at(from), true), (at(to), true)],
            ..Hold::default()
        });
        self.0.holds.len() - 1
    }

    fn read(&mut self, i: usize, register: &str, t: f64, value: u64) {
        self.0.holds[i].reads.push(Read {
            register: register.into(),
            t: at(t),
            value: Some(value),
            token: 0,
            elements: value as usize,
        });
    }

    /// A write of `old + 1` by hold `i`, sent at `t`, answered 10 ms later.
    fn write(&mut self, i: usize, register: &str, t: f64, old: u64, outcome: &str, session: &str) {
        let x = &self.0.holds[i];
        let element = format!("{}.{}.{}", x.client, x.h, x.writes.len() / 2);
        let token = x.token;
        self.0.holds[i].writes.push(Write {
            register: register.into(),
            t_send: at(t),
            t_done: at(t) + 10_000_000,
            token,
            old,
            element,
            session: session.into(),
            outcome: outcome.into(),
            detail: String::new(),
        });
    }

    /// Reads both registers at `t` (values `fenced`, `plain`) and writes both, acked.
    fn increment(&mut self, i: usize, t: f64, fenced: u64, plain: u64) {
        let session = self.0.holds[i].session.clone();
        self.read(i, FENCED, t, fenced);
        self.read(i, PLAIN, t, plain);
        self.write(i, PLAIN, t + 0.05, plain, "acked", &session);
        self.write(i, FENCED, t + 0.06, fenced, "acked", &session);
    }

    fn element(&self, i: usize, register: &str) -> String {
        self.0.holds[i]
            .writes
            .iter()
            .find(|w| w.register == register)
            .map(|w| w.element.clone())
            .unwrap()
    }

    fn set_final(&mut self, register: &str, token: i64, value: u64, elements: &[String]) {
        self.0.registers.insert(
            register.into(),
            format!("{token}:{value}:{}", elements.join(",")),
        );
    }
}

/// Indices of the clean history's holds, for the variations below.
struct Clean {
    b: B,
    c1h1: usize,
    c2h1: usize,
    careless: usize,
    c2h2: usize,
    c2h3: usize,
    c1h3: usize,
}

/// A clean 60 s run: increments of both registers by alternating clients; a careless holder
/// (client 1) freezes for 2.3 session timeouts between its read and its write, its session
/// expires, client 2 acquires meanwhile, and the careless write then goes through client 1's
/// new session: the control register takes it (and loses client 2's increment), the fence
/// refuses it (by the check). A split from 4 s to 6 s; a read lock and the semaphores in use.
fn clean() -> Clean {
    let mut b = B::new();
    let c1h1 = b.hold(1, "mutex", "x", 1.0, 1.5, 10);
    b.increment(c1h1, 1.1, 0, 0);
    let c2h1 = b.hold(2, "mutex", "x", 2.0, 2.5, 20);
    b.increment(c2h1, 2.1, 1, 1);
    // The careless holder: believed only until 3.05 s.
    let careless = b.hold(1, "mutex", "x", 3.0, 3.05, 30);
    b.0.holds[careless].release = Some((at(10.5), at(10.6), "err lock lost".into()));
    b.0.holds[careless].checks.push((at(10.4), false));
    b.read(careless, FENCED, 3.1, 2);
    b.read(careless, PLAIN, 3.1, 2);
    b.0.holds[careless].pauses.push(Pause {
        t_stop: at(3.15),
        t_resume: at(10.0),
        planned_ms: 6850,
        kind: "careless".into(),
        t_ready: at(10.1),
        ready: "new".into(),
    });
    b.write(careless, PLAIN, 10.1, 2, "acked", "0x11");
    b.write(careless, FENCED, 10.2, 2, "refused", "0x11");
    let c2h2 = b.hold(2, "mutex", "x", 7.0, 7.5, 40);
    b.increment(c2h2, 7.1, 2, 2);
    // Client 2 reads the control after the careless write put it back to 3.
    let c2h3 = b.hold(2, "mutex", "x", 12.0, 12.5, 50);
    b.increment(c2h3, 12.1, 3, 3);
    let c1h3 = b.hold(1, "mutex", "x", 15.0, 15.5, 60);
    b.increment(c1h3, 15.1, 4, 4);
    b.hold(1, "rw", "r", 20.0, 20.5, 70);
    b.hold(2, "rw", "r", 20.2, 20.8, 71);
    b.hold(1, "sem", "s", 22.0, 22.5, 0);
    b.hold(2, "sem", "s", 22.1, 22.4, 0);
    b.hold(2, "sem1", "s", 23.0, 23.5, 0);
    b.hold(1, "sem1", "s", 24.0, 24.5, 0);
    b.0.faults.push(Fault {
        n: 1,
        kind: "split".into(),
        what: "minority {server 1, clients [1]} | majority {servers [2, 3], clients [2]}".into(),
        start: at(4.0),
        heal: Some(at(6.0)),
        effect: "dropped=10".into(),
    });
    let fenced: Vec<String> = [c1h1, c2h1, c2h2, c2h3, c1h3]
        .iter()
        .map(|&i| b.element(i, FENCED))
        .collect();
    b.set_final(FENCED, 60, 5, &fenced);
    // The control lost client 2's increment of 7.1 s to the careless write.
    let plain: Vec<String> = [c1h1, c2h1, careless, c2h3, c1h3]
        .iter()
        .map(|&i| b.element(i, PLAIN))
        .collect();
    b.set_final(PLAIN, 60, 5, &plain);
    Clean {
        b,
        c1h1,
        c2h1,
        careless,
        c2h2,
        c2h3,
        c1h3,
    }
}

fn classes(r: &Report) -> Vec<Class> {
    let mut v: Vec<Class> = r.violations.iter().map(|v| v.class).collect();
    v.dedup();
    v
}

fn assert_flags(r: &Report, class: Class) {
    assert!(
        r.count(class) > 0,
        "expected a {} violation; got {:?}\n{}",
        class.name(),
        classes(r),
        r.lines.join("\n")
    );
}

fn assert_clean(r: &Report) {
    assert!(
        r.ok(),
        "expected no violation; got:\n{}",
        r.violations
            .iter()
            .map(|v| format!("{}: {}", v.class.name(), v.text))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn clean_history_passes_with_the_figures_of_the_control() {
    let c = clean();
    let r = judge(&c.b.0);
    assert_clean(&r);
    let fenced = r.fenced().find(|f| f.path == FENCED).unwrap();
    assert_eq!((fenced.acked, fenced.lost), (5, 0));
    assert_eq!((fenced.refused_check, fenced.refused_expired), (1, 0));
    let plain = r.unfenced().find(|f| f.path == PLAIN).unwrap();
    assert_eq!((plain.acked, plain.lost, plain.stale_accepted), (6, 1, 1));
    assert_eq!(r.coverage.self_pauses, 1);
    assert_eq!(r.coverage.pauses_expired, 1);
    assert_eq!(r.coverage.max_holders["sem"], 2);
    assert_eq!(r.coverage.max_holders["rw"], 2);
    assert!(r.server_loss.is_empty());
    let summary = r.summary(&c.b.0);
    assert!(
        summary.contains("unfenced: 1 of 6 increments lost; fenced: 0 lost, 1 stale writes refused (1 by the check, 0 by expiry)"),
        "{summary}"
    );
    let _ = (c.careless, c.c2h2);
}

#[test]
fn a_short_run_need_not_exercise_the_fence() {
    let mut b = B::new();
    b.0.stop = at(20.0);
    let i = b.hold(1, "mutex", "x", 1.0, 1.5, 10);
    b.increment(i, 1.1, 0, 0);
    let j = b.hold(2, "mutex", "x", 2.0, 2.5, 20);
    b.increment(j, 2.1, 1, 1);
    let e: Vec<String> = [i, j].iter().map(|&x| b.element(x, FENCED)).collect();
    b.set_final(FENCED, 20, 2, &e);
    let e: Vec<String> = [i, j].iter().map(|&x| b.element(x, PLAIN)).collect();
    b.set_final(PLAIN, 20, 2, &e);
    assert_clean(&judge(&b.0));
}

#[test]
fn the_history_survives_json_lines() {
    let c = clean();
    let back = History::from_jsonl(&c.b.0.to_jsonl()).unwrap();
    let (a, b) = (judge(&c.b.0), judge(&back));
    assert_eq!(a.lines, b.lines);
    assert_eq!(a.summary(&c.b.0), b.summary(&back));
}

#[test]
fn flags_an_overlap_of_two_mutex_holders() {
    let mut c = clean();
    c.b.hold(2, "mutex", "x", 1.2, 1.4, 15);
    assert_flags(&judge(&c.b.0), Class::Overlap);
}

#[test]
fn flags_a_semaphore_admitting_one_too_many() {
    let mut c = clean();
    c.b.hold(1, "sem1", "s", 23.2, 23.4, 0);
    let r = judge(&c.b.0);
    assert_flags(&r, Class::Overlap);
    assert_eq!(r.coverage.max_holders["sem1"], 2);
}

#[test]
fn flags_an_overlap_of_a_writer_and_a_reader() {
    let mut c = clean();
    c.b.hold(2, "rw", "w", 20.3, 20.4, 72);
    assert_flags(&judge(&c.b.0), Class::Overlap);
}

#[test]
fn flags_a_stale_write_the_fence_should_have_refused() {
    // The careless write through the new session accepted: no check op.
    let mut c = clean();
    let w = c.b.0.holds[c.careless]
        .writes
        .iter_mut()
        .find(|w| w.register == FENCED)
        .unwrap();
    w.outcome = "acked".into();
    let r = judge(&c.b.0);
    assert_flags(&r, Class::StaleWrite);
    assert_flags(&r, Class::LostUpdate);
}

#[test]
fn flags_a_lost_update() {
    // Two holders, one after the other, both write value 2 (the second read a stale 1).
    let mut c = clean();
    let x = c.b.hold(1, "mutex", "x", 30.0, 30.5, 80);
    c.b.increment(x, 30.1, 5, 5);
    let y = c.b.hold(2, "mutex", "x", 31.0, 31.5, 90);
    c.b.increment(y, 31.1, 5, 6);
    let mut fenced: Vec<String> = [c.c1h1, c.c2h1, c.c2h2, c.c2h3, c.c1h3, y]
        .iter()
        .map(|&i| c.b.element(i, FENCED))
        .collect();
    fenced.sort();
    c.b.set_final(FENCED, 90, 6, &fenced);
    let r = judge(&c.b.0);
    assert_flags(&r, Class::LostUpdate);
    assert!(r.server_loss.is_empty());
}

#[test]
fn flags_a_register_that_goes_back_without_server_evidence() {
    let mut c = clean();
    let mut fenced: Vec<String> = [c.c1h1, c.c2h1, c.c2h2, c.c2h3]
        .iter()
        .map(|&i| c.b.element(i, FENCED))
        .collect();
    fenced.sort();
    c.b.set_final(FENCED, 50, 4, &fenced);
    let r = judge(&c.b.0);
    assert_flags(&r, Class::LostUpdate);
    assert!(r.server_loss.is_empty());
}

#[test]
fn flags_token_disorder() {
    let mut c = clean();
    c.b.0.holds[c.c2h3].token = 5;
    for w in &mut c.b.0.holds[c.c2h3].writes {
        w.token = 5;
    }
    assert_flags(&judge(&c.b.0), Class::TokenOrder);
}

#[test]
fn flags_a_token_shared_by_two_holds() {
    let mut c = clean();
    c.b.hold(1, "mutex", "x", 40.0, 40.5, 60);
    assert_flags(&judge(&c.b.0), Class::TokenOrder);
}

#[test]
fn flags_a_stall_of_one_lock() {
    // A 1-permit semaphore that stops granting: client 2 tries for 34 s, and nobody gets it.
    let mut c = clean();
    let mut t = 25.0;
    let mut h = 500;
    while t < 59.0 {
        c.b.0.attempts.push(Attempt {
            client: 2,
            h,
            lock: "sem1".into(),
            mode: "s".into(),
            t_call: at(t),
            t_ret: at(t + 2.0),
            patience_ms: 2000,
            outcome: "timeout".into(),
            err: String::new(),
        });
        t += 2.1;
        h += 1;
    }
    let r = judge(&c.b.0);
    assert_flags(&r, Class::Stall);
    assert!(r.violations.iter().any(|v| v.text.starts_with("sem1/s")));
    // Per lock and recipe, not per client: client 2 acquired other locks meanwhile.
    assert_eq!(r.count(Class::Progress), 0);
}

#[test]
fn flags_a_client_that_never_recovers_after_a_heal() {
    let mut c = clean();
    c.b.0.faults.push(Fault {
        n: 2,
        kind: "cut-client".into(),
        what: "client 1 cut from server 2 only".into(),
        start: at(24.6),
        heal: Some(at(26.0)),
        effect: String::new(),
    });
    assert_flags(&judge(&c.b.0), Class::Progress);
}

#[test]
fn flags_a_timeout_that_overruns() {
    let mut c = clean();
    c.b.0.attempts.push(Attempt {
        client: 1,
        h: 900,
        lock: "mutex".into(),
        mode: "x".into(),
        t_call: at(40.0),
        t_ret: at(44.0),
        patience_ms: 500,
        outcome: "error".into(),
        err: "connection lost".into(),
    });
    assert_flags(&judge(&c.b.0), Class::Timeout);
}

#[test]
fn flags_a_timeout_on_a_free_lock() {
    let mut c = clean();
    c.b.0.attempts.push(Attempt {
        client: 1,
        h: 901,
        lock: "mutex".into(),
        mode: "x".into(),
        t_call: at(40.0),
        t_ret: at(41.0),
        patience_ms: 1000,
        outcome: "timeout".into(),
        err: String::new(),
    });
    let r = judge(&c.b.0);
    assert_flags(&r, Class::Timeout);
    // Behind a holder, the same timeout is contention.
    let mut c = clean();
    c.b.hold(2, "mutex", "x", 39.5, 41.5, 95);
    c.b.0.attempts.push(Attempt {
        client: 1,
        h: 901,
        lock: "mutex".into(),
        mode: "x".into(),
        t_call: at(40.0),
        t_ret: at(41.0),
        patience_ms: 1000,
        outcome: "timeout".into(),
        err: String::new(),
    });
    assert_clean(&judge(&c.b.0));
}

#[test]
fn flags_a_warm_up_that_never_completes() {
    let mut c = clean();
    c.b.0.warmup = Some((at(60.0), false));
    assert_flags(&judge(&c.b.0), Class::Warmup);
    let mut b = B::new();
    b.hold(1, "mutex", "x", 1.0, 1.5, 10);
    assert_flags(&judge(&b.0), Class::Warmup);
}

#[test]
fn flags_leftover_nodes_and_failed_clients() {
    let mut c = clean();
    c.b.0.leftovers.push(Leftover {
        kind: "node".into(),
        count: 1,
        detail: "/nemesis/mutex/_c_x-lock-0000000007 (session 0x1, owner x)".into(),
    });
    assert_flags(&judge(&c.b.0), Class::Leftover);
    let mut c = clean();
    c.b.0.client_info.get_mut(&2).unwrap().status = Some("101".into());
    assert_flags(&judge(&c.b.0), Class::Crash);
}

#[test]
fn flags_a_long_run_in_which_the_check_never_refused() {
    // The careless write refused through its own (expired) session: the check never ran.
    let mut c = clean();
    for w in &mut c.b.0.holds[c.careless].writes {
        w.session = "0x1".into();
    }
    let r = judge(&c.b.0);
    assert_flags(&r, Class::FenceUnused);
    let fenced = r.fenced().find(|f| f.path == FENCED).unwrap();
    assert_eq!((fenced.refused_check, fenced.refused_expired), (0, 1));
}

/// ZooKeeper loses committed writes: after a fault, a new epoch, a server truncates its log,
/// and the register reads 1 where 3 had been acked. Clients 2 and 1 then write 2 and 3 again.
fn server_loss(truncated: bool) -> History {
    let c = clean();
    let mut b = c.b;
    // Client 2's hold at 12 s reads the lost state (1) and writes 2; client 1 then 3.
    for i in [c.c2h3, c.c1h3] {
        b.0.holds[i].reads.clear();
        b.0.holds[i].writes.clear();
    }
    b.increment(c.c2h3, 12.1, 1, 3);
    b.increment(c.c1h3, 15.1, 2, 4);
    for (t, epoch, phase) in [(5.0, 4, "before"), (11.0, 5, "whole")] {
        for server in 1..=3 {
            b.0.health.push(Health {
                t: at(t),
                phase: phase.into(),
                fault: 1,
                server,
                mode: if server == 1 { "leader" } else { "follower" }.into(),
                zxid: format!("0x{epoch}00000010"),
                epoch: Some(epoch),
                accepted: Some(epoch),
            });
        }
    }
    if truncated {
        b.0.truncations.push(Truncation {
            server: 3,
            t: at(9.0),
            line: "2026-11-24 04:50:12,345 WARN [QuorumPeer[myid=3]:Learner@707] - Truncating log to get in sync with the leader 0x400000042".into(),
        });
    }
    let fenced: Vec<String> = [c.c1h1, c.c2h3, c.c1h3]
        .iter()
        .map(|&i| b.element(i, FENCED))
        .collect();
    b.set_final(FENCED, 60, 3, &fenced);
    b.0
}

#[test]
fn names_server_data_loss_with_its_evidence_and_passes_the_clients() {
    let r = judge(&server_loss(true));
    assert_eq!(r.server_loss.len(), 1, "{}", r.lines.join("\n"));
    let loss = &r.server_loss[0];
    assert_eq!((loss.from, loss.to), (3, 1));
    assert!(loss.evidence.iter().any(|e| e.contains("epoch 4 -> 5")));
    assert!(loss.evidence.iter().any(|e| e.contains("Truncating log")));
    assert!(loss.explained >= 2);
    assert_clean(&r);
    let fenced = r.fenced().find(|f| f.path == FENCED).unwrap();
    assert_eq!((fenced.lost, fenced.lost_server), (0, 2));
    assert!(r.summary(&server_loss(true)).contains("SERVER DATA LOSS 1"));
}

#[test]
fn without_a_truncation_the_same_history_is_the_clients_lost_update() {
    let r = judge(&server_loss(false));
    assert!(r.server_loss.is_empty());
    assert_flags(&r, Class::LostUpdate);
}

#[test]
fn the_page_has_a_lane_per_client_and_lock() {
    let c = clean();
    let page = crate::plot::page(&c.b.0);
    assert_eq!(
        page.matches(r#"<g class="lane""#).count(),
        c.b.0.clients * crate::LOCKS.len()
    );
    assert!(page.contains("fault 1 split") || page.contains(">1 split<"));
    assert!(page.ends_with("</body></html>\n"));
}
