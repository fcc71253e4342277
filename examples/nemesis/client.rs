//! One workload process: lock loops over a mutex (mainly), a read/write lock and a semaphore,
//! fenced increments of a register under the exclusive locks, and nothing but raw facts
//! written to `<dir>/c<id>/client.log`. The client never judges whether it overlapped anyone;
//! the checker does, from these facts.
//!
//! Log lines (times: CLOCK_MONOTONIC ns; `h` is the hold number of this client):
//! ```text
//! B <t> <pid>                               started
//! A h <lock> <mode> <t_call> <t_acq> <token> <session>   acquired (token 0 for a permit)
//! T h <lock> <mode> <t_call> <t_ret>        acquisition timed out (contention)
//! E h <lock> <mode> <t_call> <t_ret> <err>  acquisition failed
//! C h <t> <0|1>                             is_held() answered, stamp taken before the call
//! G h <register> <t> <token> <value>|err <e> the register read under the lock
//! W h <register> <t_send> <t_done> <token> <old> <outcome> [err]
//!                                           fenced write of "<token>:<old+1>"; outcome
//!                                           acked, refused (LockLost), unknown
//!                                           (OutcomeUnknown), notsent (ConnectionLoss), error
//! R h <t> <t_done> <ok|err ...>             release (unlock) and its outcome
//! I <t>                                     stopped locking, idle with the session open
//! X <t>                                     exiting
//! ```

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::thread::sleep;
use std::time::Duration;

use anyhow::Context;
use zklock::{Client, DistributedMutex, DistributedRwLock, Error, LockGuard, Permit, Semaphore};

use crate::{mono_ns, Args, Rng, MUTEX, PERMITS, REG_MUTEX, REG_RW, RWLOCK, SEMAPHORE};

struct Log(File);

impl Log {
    fn line(&mut self, line: String) {
        // One write per line on an O_APPEND file: a line is never torn, and a SIGSTOP or a
        // crash loses nothing already written.
        let _ = self.0.write_all(format!("{line}\n").as_bytes());
    }
}

struct Worker {
    client: Client,
    /// Sabotage (to prove the checker has teeth, never in CI): `blind` believes without asking
    /// is_held(); `unfenced` writes with the plain, unconditional `Client::set_data` and keeps
    /// its own copy of the register during a hold.
    blind: bool,
    unfenced: bool,
    log: Log,
    rng: Rng,
    hold: u64,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let dir = PathBuf::from(args.get("dir")?);
    let id: usize = args.num("id", None)?;
    let seed: u64 = args.num("seed", None)?;
    let session_timeout = Duration::from_millis(args.num("session-timeout-ms", None)?);
    let deadline = mono_ns() + args.num::<u64>("deadline-secs", None)? * 1_000_000_000;
    let stop = dir.join("stop");
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("c{id}/client.log")))
        .context("opening the client log")?;
    let mut log = Log(file);
    log.line(format!("B {} {}", mono_ns(), std::process::id()));

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
    let mutex = DistributedMutex::new(&client, MUTEX)?;
    let rwlock = DistributedRwLock::new(&client, RWLOCK)?;
    let semaphore = Semaphore::new(&client, SEMAPHORE, PERMITS)?;
    let sabotage = args.get_or("sabotage", "none");
    let mut w = Worker {
        client: client.clone(),
        blind: sabotage.contains("blind"),
        unfenced: sabotage.contains("unfenced"),
        log,
        rng: Rng::new(seed),
        hold: 0,
    };
    while !stop.exists() && mono_ns() < deadline {
        w.hold += 1;
        let h = w.hold;
        let pick = w.rng.below(100);
        let patience = w.rng.millis(500, 5000);
        // Mutex 60 %, write lock 15 %, read lock 10 %, semaphore 15 %.
        let (lock, mode) = match pick {
            0..=59 => ("mutex", "x"),
            60..=74 => ("rw", "w"),
            75..=84 => ("rw", "r"),
            _ => ("sem", "s"),
        };
        let t_call = mono_ns();
        let outcome = match mode {
            "x" => mutex
                .lock_timeout(patience)
                .map(|g| g.map(|g| w.exclusive(g, lock, mode, t_call, REG_MUTEX))),
            "w" => rwlock
                .write_timeout(patience)
                .map(|g| g.map(|g| w.exclusive(g, lock, mode, t_call, REG_RW))),
            "r" => rwlock
                .read_timeout(patience)
                .map(|g| g.map(|g| w.shared(g, t_call))),
            _ => semaphore
                .acquire_timeout(patience)
                .map(|p| p.map(|p| w.permit(p, t_call))),
        };
        match outcome {
            Ok(Some(())) => {}
            Ok(None) => w
                .log
                .line(format!("T {h} {lock} {mode} {t_call} {}", mono_ns())),
            Err(err) => {
                w.log
                    .line(format!("E {h} {lock} {mode} {t_call} {} {err}", mono_ns()));
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
    drop((mutex, rwlock, semaphore));
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

    fn acquired(&mut self, lock: &str, mode: &str, t_call: u64, token: i64) {
        let t_acq = mono_ns();
        let session = self.client.session_id();
        self.log.line(format!(
            "A {} {lock} {mode} {t_call} {t_acq} {token} {session:#x}",
            self.hold
        ));
    }

    /// A mutex or write-lock hold: 1-3 read-modify-write increments of `register`, slow enough
    /// that an overlap with another holder would show in the register.
    fn exclusive(&mut self, guard: LockGuard, lock: &str, mode: &str, t_call: u64, register: &str) {
        let token = guard.fencing_token();
        self.acquired(lock, mode, t_call, token);
        // A careless holder (1 in 5) writes without asking is_held() first: the fence alone
        // must keep its late writes out.
        let careless = self.rng.chance(20);
        // A long hold (1 in 10): work in small steps between increments, asking is_held()
        // before each step, as a holder guarding real work does; its lease is what keeps it
        // from working on after the lock moved on.
        let long = self.rng.chance(10);
        let rounds = match (self.unfenced, long) {
            (true, _) => 4 + self.rng.below(3),
            (_, true) => 2 + self.rng.below(2),
            _ => 1 + self.rng.below(3),
        };
        // Sabotage `unfenced` also trusts the lock too much: it reads the register once per
        // hold and counts on from its own copy.
        let mut cached: Option<u64> = None;
        for _ in 0..rounds {
            if !self.check(|| guard.is_held()) {
                break;
            }
            let read = match cached {
                Some(value) => Some(value),
                None => self.read(register),
            };
            let Some(old) = read else {
                break;
            };
            if self.unfenced {
                cached = Some(old + 1);
            }
            sleep(self.rng.millis(20, 120));
            if !careless && !self.check(|| guard.is_held()) {
                break;
            }
            let data = format!("{token}:{}", old + 1);
            let t_send = mono_ns();
            let result = if self.unfenced {
                // Unconditional: a lost reply leaves the outcome open, as for a fenced write.
                self.client
                    .set_data(register, data.as_bytes())
                    .map_err(|e| match e {
                        Error::ConnectionLoss => Error::OutcomeUnknown {
                            path: register.to_owned(),
                        },
                        other => other,
                    })
            } else {
                guard.fenced_set_data(register, data.as_bytes())
            };
            let t_done = mono_ns();
            let (outcome, detail) = match &result {
                Ok(()) => ("acked", String::new()),
                Err(Error::LockLost { .. }) => ("refused", String::new()),
                Err(Error::OutcomeUnknown { .. }) => ("unknown", String::new()),
                Err(Error::ConnectionLoss) => ("notsent", String::new()),
                Err(err) => ("error", format!(" {err}")),
            };
            self.log.line(format!(
                "W {} {register} {t_send} {t_done} {token} {old} {outcome}{detail}",
                self.hold
            ));
            if result.is_err() {
                break;
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

    /// A read-lock hold: no writes, just time under the lock.
    fn shared(&mut self, guard: LockGuard, t_call: u64) {
        self.acquired("rw", "r", t_call, guard.fencing_token());
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
    fn permit(&mut self, permit: Permit, t_call: u64) {
        self.acquired("sem", "s", t_call, 0);
        let time = if self.rng.chance(10) {
            self.rng.millis(1000, 4000)
        } else {
            self.rng.millis(30, 300)
        };
        self.work(|| permit.is_held(), time);
        self.check(|| permit.is_held());
        let t = mono_ns();
        let outcome = permit.release();
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

    /// Reads `"<token>:<value>"`; logs and returns the value.
    fn read(&mut self, register: &str) -> Option<u64> {
        let t = mono_ns();
        let h = self.hold;
        match self.client.get_data(register) {
            Ok(Some(data)) => {
                let text = String::from_utf8_lossy(&data).into_owned();
                let parsed = text
                    .split_once(':')
                    .and_then(|(tok, v)| Some((tok.parse::<i64>().ok()?, v.parse::<u64>().ok()?)));
                match parsed {
                    Some((tok, value)) => {
                        self.log.line(format!("G {h} {register} {t} {tok} {value}"));
                        Some(value)
                    }
                    None => {
                        self.log
                            .line(format!("G {h} {register} {t} err unparsable {text:?}"));
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
