//! One workload process: lock loops over a mutex (mainly), a read/write lock and two
//! semaphores; under the exclusive locks, increments of a fenced register and of an unfenced
//! control register beside it; and nothing but raw facts written to `<dir>/c<id>/client.log`.
//! The client never judges whether it overlapped anyone; the checker does, from these facts.
//!
//! The careless holder. Now and then (see [`PAUSE_PERCENT`], and twice per client early in
//! the run, see [`FORCED_PAUSE_AT`]) an exclusive holder freezes its whole process with `raise(SIGSTOP)` between reading the registers and writing them; a
//! forked child sends the SIGCONT 0.9 to 2.5 session timeouts later. Half of them are
//! careless: they write without asking `is_held()`, and only once the client has replaced the
//! expired session (or the old one proved alive), so that the write reaches the server through
//! a live session and only the server's check of the lock node can refuse it. The others are
//! careful: they ask `is_held()` the moment they resume, before zklock's own threads have run
//! again (freeze.rs), which only the lease can answer correctly.
//!
//! Log lines (times: CLOCK_MONOTONIC ns; `h` is the hold number of this client):
//! ```text
//! B <t> <pid>                               started
//! A h <lock> <mode> <t_call> <t_acq> <token> <session> <patience_ms>
//!                                           acquired (token 0 for a permit)
//! T h <lock> <mode> <t_call> <t_ret> <patience_ms>        timed out (contention)
//! E h <lock> <mode> <t_call> <t_ret> <patience_ms> <err>  acquisition failed
//! C h <t> <0|1>                             is_held() answered, stamp taken before the call
//! G h <register> <t> <token> <value> <n>    the register read under the lock (n elements)
//! G h <register> <t> err <e>                the read failed
//! W h <register> <t_send> <t_done> <token> <old> <element> <session> <outcome> [err]
//!                                           write of "<token>:<old+1>:<elements>,<element>",
//!                                           fenced or plain by the register; <session> is
//!                                           the client's session after the call; outcome
//!                                           acked, refused (LockLost), unknown
//!                                           (OutcomeUnknown), notsent (ConnectionLoss), error
//! P h <t_stop> <t_resume> <planned_ms> <careless|careful> <t_ready> <new|same|timeout>
//!                                           froze itself; t_ready: when it went on (careless:
//!                                           a new session, the old one alive again, or given
//!                                           up waiting)
//! R h <t> <t_done> <ok|err ...>             release (unlock) and its outcome
//! I <t>                                     stopped locking, idle with the session open
//! X <t>                                     exiting
//! ```

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::thread::sleep;
use std::time::Duration;

use anyhow::Context;
use zklock::{Client, DistributedMutex, DistributedRwLock, Error, LockGuard, Permit, Semaphore};

use crate::{lock_spec, mono_ns, parse_register, register_of, Args, Rng};

/// Percent of exclusive holds that freeze themselves between read and write (half of them
/// careless).
const PAUSE_PERCENT: u64 = 5;

/// Besides, every client pauses once carelessly (its first exclusive hold from its 6th hold
/// on) and once carefully (from its 12th). At random alone (10 %, half careless), one 60 s run
/// in six had a single careless pause and no refusal by the check; with only the careless
/// pause forced, one in six had no careful pause, which is what tests the lease (FINDINGS.md).
const FORCED_PAUSE_AT: [u64; 2] = [6, 12];

/// Pause lengths, in tenths of the session timeout: 0.9 to 2.5 (below 1 the session may
/// survive; 0.9-1.6 is where a lease longer than the session would show).
const PAUSE_TENTHS: (u64, u64) = (9, 25);

struct Log(std::fs::File);

impl Log {
    fn line(&mut self, line: String) {
        // One write per line on an O_APPEND file: a line is never torn, and a SIGSTOP or a
        // crash loses nothing already written.
        let _ = self.0.write_all(format!("{line}\n").as_bytes());
    }
}

struct Worker {
    id: usize,
    client: Client,
    session_ms: u64,
    /// Sabotage (to prove the checker has teeth, never in CI): `blind` believes without asking
    /// is_held(); `unfenced` writes the fenced registers with the plain, unconditional
    /// `Client::set_data` and keeps its own copy of the register during a hold.
    blind: bool,
    unfenced: bool,
    log: Log,
    rng: Rng,
    hold: u64,
    /// The careless and the careful pause every client makes once: still to come.
    forced_pause: [bool; 2],
}

/// What a hold read from a register.
struct Read {
    value: u64,
    elements: String,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let dir = PathBuf::from(args.get("dir")?);
    let id: usize = args.num("id", None)?;
    let seed: u64 = args.num("seed", None)?;
    let session_ms: u64 = args.num("session-timeout-ms", None)?;
    let session_timeout = Duration::from_millis(session_ms);
    let deadline = mono_ns() + args.num::<u64>("deadline-secs", None)? * 1_000_000_000;
    let stop = dir.join("stop");
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("c{id}/client.log")))
        .context("opening the client log")?;
    let mut log = Log(file);
    log.line(format!("B {} {}", mono_ns(), std::process::id()));
    crate::freeze::install();

    // The orchestrator starts clients only once the ensemble serves; still, never give up on
    // a first connect before the run's deadline.
    let client = loop {
        match Client::builder(&crate::connect_string())
            .session_timeout(session_timeout)
            .connect_timeout(Duration::from_secs(10))
            .connect()
        {
            Ok(client) => break client,
            Err(err) if mono_ns() < deadline => {
                eprintln!("client {id}: connect: {err}; retrying");
                sleep(Duration::from_millis(500));
            }
            Err(err) => return Err(err.into()),
        }
    };
    let spec = |name: &str| lock_spec(name).expect("a lock of LOCKS");
    let mutex = DistributedMutex::new(&client, spec("mutex").path)?;
    let rwlock = DistributedRwLock::new(&client, spec("rw").path)?;
    let sem = Semaphore::new(&client, spec("sem").path, spec("sem").permits)?;
    let sem1 = Semaphore::new(&client, spec("sem1").path, spec("sem1").permits)?;
    let sabotage = args.get_or("sabotage", "none");
    let mut w = Worker {
        id,
        client: client.clone(),
        session_ms,
        blind: sabotage.contains("blind"),
        unfenced: sabotage.contains("unfenced"),
        log,
        rng: Rng::new(seed),
        hold: 0,
        forced_pause: [true, true],
    };
    while !stop.exists() && mono_ns() < deadline {
        w.hold += 1;
        let h = w.hold;
        let pick = w.rng.below(100);
        let patience = w.rng.millis(500, 5000);
        let ms = patience.as_millis();
        // Mutex 50 %, write lock 14 %, read lock 10 %, each semaphore 13 %.
        let (lock, mode) = match pick {
            0..=49 => ("mutex", "x"),
            50..=63 => ("rw", "w"),
            64..=73 => ("rw", "r"),
            74..=86 => ("sem", "s"),
            _ => ("sem1", "s"),
        };
        let t_call = mono_ns();
        let outcome = match (lock, mode) {
            ("mutex", _) => mutex
                .lock_timeout(patience)
                .map(|g| g.map(|g| w.exclusive(g, lock, mode, t_call, ms))),
            ("rw", "w") => rwlock
                .write_timeout(patience)
                .map(|g| g.map(|g| w.exclusive(g, lock, mode, t_call, ms))),
            ("rw", _) => rwlock
                .read_timeout(patience)
                .map(|g| g.map(|g| w.shared(g, t_call, ms))),
            ("sem", _) => sem
                .acquire_timeout(patience)
                .map(|p| p.map(|p| w.permit(p, lock, t_call, ms))),
            _ => sem1
                .acquire_timeout(patience)
                .map(|p| p.map(|p| w.permit(p, lock, t_call, ms))),
        };
        match outcome {
            Ok(Some(())) => {}
            Ok(None) => w
                .log
                .line(format!("T {h} {lock} {mode} {t_call} {} {ms}", mono_ns())),
            Err(err) => {
                w.log.line(format!(
                    "E {h} {lock} {mode} {t_call} {} {ms} {err}",
                    mono_ns()
                ));
                sleep(w.rng.millis(100, 400));
            }
        }
    }
    // Idle, session still open: the orchestrator now counts the watches we leave behind (a
    // waiter that gave up must not leave its watch), then lets us exit.
    w.log.line(format!("I {}", mono_ns()));
    let exit = dir.join("exit");
    let idle_limit = mono_ns() + 120_000_000_000;
    while !exit.exists() && mono_ns() < idle_limit {
        sleep(Duration::from_millis(100));
    }
    w.log.line(format!("X {}", mono_ns()));
    drop((mutex, rwlock, sem, sem1));
    drop(w);
    // Dropping the last clone closes the session (bounded by the session timeout).
    drop(client);
    Ok(())
}

impl Worker {
    /// `is_held()` with its stamp taken before the call: a "yes" claims the lock at that time.
    fn check(&mut self, held: impl FnOnce() -> bool) -> bool {
        let t = mono_ns();
        let yes = self.blind || held();
        self.log
            .line(format!("C {} {t} {}", self.hold, u8::from(yes)));
        yes
    }

    /// Works for `time` in steps of at most 50 ms, asking `held` before each step; `false` as
    /// soon as it says no.
    fn work(&mut self, held: impl Fn() -> bool, time: std::time::Duration) -> bool {
        let end = mono_ns() + time.as_nanos() as u64;
        loop {
            if !self.check(&held) {
                return false;
            }
            let now = mono_ns();
            if now >= end {
                return true;
            }
            sleep(Duration::from_nanos((end - now).min(50_000_000)));
        }
    }

    fn acquired(&mut self, lock: &str, mode: &str, t_call: u64, token: i64, patience_ms: u128) {
        let t_acq = mono_ns();
        let session = self.client.session_id();
        self.log.line(format!(
            "A {} {lock} {mode} {t_call} {t_acq} {token} {session:#x} {patience_ms}",
            self.hold
        ));
    }

    /// A mutex or write-lock hold: 1-3 read-modify-write increments of the lock's fenced
    /// register and of its unfenced control, slow enough that an overlap with another holder
    /// would show in the registers.
    fn exclusive(
        &mut self,
        guard: LockGuard,
        lock: &str,
        mode: &str,
        t_call: u64,
        patience_ms: u128,
    ) {
        let token = guard.fencing().zxid();
        self.acquired(lock, mode, t_call, token, patience_ms);
        let fenced_reg = register_of(lock, true);
        let plain_reg = register_of(lock, false);
        // A hasty holder (1 in 5) writes without asking is_held() between its read and its
        // write (it did ask before the read).
        let hasty = self.rng.chance(20);
        // A long hold (1 in 10): work in small steps between increments, asking is_held()
        // before each step, as a holder guarding real work does; its lease is what keeps it
        // from working on after the lock moved on.
        let long = self.rng.chance(10);
        // The self-pause of this hold, if any: (careless, length).
        let forced = (0..2).find(|&i| self.forced_pause[i] && self.hold >= FORCED_PAUSE_AT[i]);
        let pause = (forced.is_some() || self.rng.chance(PAUSE_PERCENT)).then(|| {
            let (lo, hi) = (
                self.session_ms * PAUSE_TENTHS.0 / 10,
                self.session_ms * PAUSE_TENTHS.1 / 10,
            );
            let careless = match forced {
                Some(i) => i == 0,
                None => self.rng.chance(50),
            };
            (careless, self.rng.millis(lo, hi))
        });
        if let Some(i) = forced {
            self.forced_pause[i] = false;
        }
        let rounds = match (self.unfenced, long) {
            (true, _) => 4 + self.rng.below(3),
            (_, true) => 2 + self.rng.below(2),
            _ => 1 + self.rng.below(3),
        };
        // Sabotage `unfenced` also trusts the lock too much: it reads the register once per
        // hold and counts on from its own copy.
        let mut cached: Option<Read> = None;
        for round in 0..rounds {
            if !self.check(|| guard.is_held()) {
                break;
            }
            let read = match cached.take() {
                Some(read) => Some(read),
                None => self.read(fenced_reg),
            };
            let Some(read) = read else {
                break;
            };
            let Some(plain) = self.read(plain_reg) else {
                break;
            };
            sleep(self.rng.millis(20, 120));
            match pause.filter(|_| round == 0) {
                Some((careless, time)) => {
                    if !self.pause(&guard, careless, time) {
                        break;
                    }
                }
                None => {
                    if !hasty && !self.check(|| guard.is_held()) {
                        break;
                    }
                }
            }
            let element = format!("{}.{}.{round}", self.id, self.hold);
            // The control first: a plain write, refused by nothing but a dead connection.
            let data = increment(token, &plain, &element);
            let t_send = mono_ns();
            let result = self
                .client
                .set_data(plain_reg, data.as_bytes())
                .map_err(|e| match e {
                    // A lost reply leaves the outcome open, as for a fenced write.
                    Error::ConnectionLoss { .. } => Error::OutcomeUnknown {
                        path: plain_reg.to_owned(),
                    },
                    other => other,
                });
            self.wrote(plain_reg, t_send, token, plain.value, &element, &result);
            let data = increment(token, &read, &element);
            let t_send = mono_ns();
            let result = if self.unfenced {
                self.client
                    .set_data(fenced_reg, data.as_bytes())
                    .map_err(|e| match e {
                        Error::ConnectionLoss { .. } => Error::OutcomeUnknown {
                            path: fenced_reg.to_owned(),
                        },
                        other => other,
                    })
            } else {
                guard.fenced_set_data(fenced_reg, data.as_bytes())
            };
            self.wrote(fenced_reg, t_send, token, read.value, &element, &result);
            if result.is_err() {
                break;
            }
            if self.unfenced {
                cached = Some(Read {
                    value: read.value + 1,
                    elements: format!("{},{element}", read.elements),
                });
            }
            let step = if long {
                self.rng.millis(800, 2000)
            } else {
                self.rng.millis(20, 100)
            };
            if !self.work(|| guard.is_held(), step) {
                break;
            }
        }
        // Asked right before the release, so a belief that lasted until the release shows.
        self.check(|| guard.is_held());
        let t = mono_ns();
        let outcome = guard.unlock();
        self.released(t, outcome);
    }

    /// Freezes the process for `time` between the read and the write, then gets ready to
    /// write: `true` to write. A careful holder asks `is_held()` at once; a careless one
    /// waits until its client has a new session (or the old one proved alive) and writes
    /// whatever it was told.
    fn pause(&mut self, guard: &LockGuard, careless: bool, time: Duration) -> bool {
        // A careful holder's check comes before zklock's threads run again (see freeze.rs).
        let Some(frozen) = crate::freeze::freeze(time, !careless) else {
            return careless || self.check(|| guard.is_held());
        };
        let (t_stop, t_resume) = (frozen.t_stop, frozen.t_resume);
        let kind = if careless { "careless" } else { "careful" };
        let ms = time.as_millis();
        if !careless {
            let go = self.check(|| guard.is_held());
            frozen.release();
            let t = mono_ns();
            self.log.line(format!(
                "P {} {t_stop} {t_resume} {ms} {kind} {t} same",
                self.hold
            ));
            return go;
        }
        frozen.release();
        // Not a judgement of the holder's (it asks nothing): the harness waits until the write
        // can reach the server through a live session. An expired session is replaced on the
        // next call, so poke the client with a read.
        let limit = mono_ns() + 3 * self.session_ms * 1_000_000;
        let ready = loop {
            if self.client.session_id() != guard.session_id() {
                break "new";
            }
            if guard.state() == zklock::LockState::Held {
                break "same";
            }
            if mono_ns() > limit {
                break "timeout";
            }
            let _ = self.client.get_data(register_of("mutex", false));
            sleep(Duration::from_millis(20));
        };
        self.log.line(format!(
            "P {} {t_stop} {t_resume} {ms} {kind} {} {ready}",
            self.hold,
            mono_ns()
        ));
        true
    }

    fn wrote(
        &mut self,
        register: &str,
        t_send: u64,
        token: i64,
        old: u64,
        element: &str,
        result: &zklock::Result<()>,
    ) {
        let t_done = mono_ns();
        let (outcome, detail) = match result {
            Ok(()) => ("acked", String::new()),
            Err(Error::LockLost { .. }) => ("refused", String::new()),
            Err(Error::OutcomeUnknown { .. }) => ("unknown", String::new()),
            Err(Error::ConnectionLoss { .. }) => ("notsent", String::new()),
            Err(err) => ("error", format!(" {err}")),
        };
        let session = self.client.session_id();
        self.log.line(format!(
            "W {} {register} {t_send} {t_done} {token} {old} {element} {session:#x} {outcome}{detail}",
            self.hold
        ));
    }

    /// A read-lock hold: no writes, just time under the lock.
    fn shared(&mut self, guard: LockGuard, t_call: u64, patience_ms: u128) {
        self.acquired("rw", "r", t_call, guard.fencing().zxid(), patience_ms);
        let time = if self.rng.chance(10) {
            self.rng.millis(1000, 4000)
        } else {
            self.rng.millis(30, 300)
        };
        self.work(|| guard.is_held(), time);
        self.check(|| guard.is_held());
        let t = mono_ns();
        let outcome = guard.unlock();
        self.released(t, outcome);
    }

    /// A semaphore permit: time under the lease (permits carry no fencing token).
    fn permit(&mut self, permit: Permit, lock: &str, t_call: u64, patience_ms: u128) {
        self.acquired(lock, "s", t_call, 0, patience_ms);
        let time = if self.rng.chance(10) {
            self.rng.millis(1000, 4000)
        } else {
            self.rng.millis(30, 300)
        };
        self.work(|| permit.is_held(), time);
        self.check(|| permit.is_held());
        let t = mono_ns();
        let outcome = permit.unlock();
        self.released(t, outcome);
    }

    fn released(&mut self, t: u64, outcome: zklock::Result<()>) {
        let done = mono_ns();
        let what = match outcome {
            Ok(()) => "ok".to_owned(),
            Err(err) => format!("err {err}"),
        };
        self.log.line(format!("R {} {t} {done} {what}", self.hold));
    }

    /// Reads `"<token>:<value>:<elements>"`; logs it and returns it.
    fn read(&mut self, register: &str) -> Option<Read> {
        let t = mono_ns();
        let h = self.hold;
        match self.client.get_data(register) {
            Ok(Some(data)) => {
                let text = String::from_utf8_lossy(&data).into_owned();
                match parse_register(&text) {
                    Some((token, value, elements)) => {
                        let n = elements.split(',').filter(|e| !e.is_empty()).count();
                        self.log
                            .line(format!("G {h} {register} {t} {token} {value} {n}"));
                        Some(Read {
                            value,
                            elements: elements.to_owned(),
                        })
                    }
                    None => {
                        let shown: String = text.chars().take(40).collect();
                        self.log
                            .line(format!("G {h} {register} {t} err unparsable {shown:?}"));
                        None
                    }
                }
            }
            Ok(None) => {
                self.log.line(format!("G {h} {register} {t} err missing"));
                None
            }
            Err(err) => {
                self.log.line(format!("G {h} {register} {t} err {err}"));
                None
            }
        }
    }
}

/// The register's next content: our token, the value read plus one, the elements read plus
/// ours.
fn increment(token: i64, read: &Read, element: &str) -> String {
    let sep = if read.elements.is_empty() { "" } else { "," };
    format!("{token}:{}:{}{sep}{element}", read.value + 1, read.elements)
}
