//! `zklock run` (hold a lock while a command runs) and `zklock leader` (run a command while
//! leading an election); the supervision itself is in `supervise.rs`.

use std::time::{Duration, Instant};

use log::{info, warn};
use zklock::{DistributedMutex, DistributedRwLock, Error, LeaderElection, LockGuard};

use crate::supervise::{hold, Job, Queue, Supervisor};
use crate::text::session_hex;
use crate::waiting::reporting_holders;
use crate::{code, Failure, Global, LeaderArgs, OnLost, Outcome, RunArgs};

pub fn run(global: &Global, args: &RunArgs) -> Outcome {
    let started = Instant::now();
    let supervisor = Supervisor::install()?;
    let client = global.connect(args.timeout.as_ref().map(|t| t.value))?;
    // Revocable: the guard learns at once when its node is deleted (`zklock break`), also
    // after a revocation request it ignored, and hears revocation requests (`zklock revoke`).
    let (lock, queue) = if args.shared || args.exclusive {
        let rwlock = DistributedRwLock::new(&client, &args.path)?.revocable();
        (Lock::ReadWrite(rwlock, args.shared), Queue::ReadWrite)
    } else {
        let mutex = DistributedMutex::new(&client, &args.path)?.revocable();
        (Lock::Mutex(mutex), Queue::Lock)
    };
    supervisor.acquiring(&client);
    let guard = reporting_holders(&client, &args.path, queue, || acquire(&lock, args, started));
    let guard = supervisor.acquired(guard)?;
    let policy =
        args.supervision
            .policy(args.on_lost, Some(args.on_revoke), client.session_timeout());
    info!(
        "acquired {} (fencing token {}, session {})",
        guard.node_path(),
        guard.fencing(),
        session_hex(guard.session_id())
    );
    let job = Job {
        path: &args.path,
        command: &args.command,
        noun: "lock",
    };
    hold(supervisor, &client, guard, &job, &policy)
}

/// What `run` holds: a mutex, or one side of a read/write lock (`true`: the read side).
enum Lock {
    Mutex(DistributedMutex),
    ReadWrite(DistributedRwLock, bool),
}

impl Lock {
    fn try_lock(&self) -> zklock::Result<Option<LockGuard>> {
        match self {
            Lock::Mutex(mutex) => mutex.try_lock(),
            Lock::ReadWrite(rwlock, true) => rwlock.try_read(),
            Lock::ReadWrite(rwlock, false) => rwlock.try_write(),
        }
    }

    fn lock_timeout(&self, timeout: Duration) -> zklock::Result<Option<LockGuard>> {
        match self {
            Lock::Mutex(mutex) => mutex.lock_timeout(timeout),
            Lock::ReadWrite(rwlock, true) => rwlock.read_timeout(timeout),
            Lock::ReadWrite(rwlock, false) => rwlock.write_timeout(timeout),
        }
    }

    fn lock(&self) -> zklock::Result<LockGuard> {
        match self {
            Lock::Mutex(mutex) => mutex.lock(),
            Lock::ReadWrite(rwlock, true) => rwlock.read(),
            Lock::ReadWrite(rwlock, false) => rwlock.write(),
        }
    }
}

/// Waits for the lock as the options say.
fn acquire(lock: &Lock, args: &RunArgs, started: Instant) -> Result<LockGuard, Failure> {
    loop {
        let attempt = if args.nonblock {
            lock.try_lock()
        } else if let Some(timeout) = &args.timeout {
            lock.lock_timeout(timeout.value.saturating_sub(started.elapsed()))
        } else {
            lock.lock().map(Some)
        };
        match attempt {
            Ok(Some(guard)) => return Ok(guard),
            Ok(None) if args.nonblock => {
                return Err(Failure {
                    code: args.conflict_exit_code.unwrap_or(code::BUSY),
                    message: format!("{} is busy", args.path),
                })
            }
            Ok(None) => {
                return Err(Failure {
                    code: args.conflict_exit_code.unwrap_or(code::TIMEOUT),
                    message: match &args.timeout {
                        Some(timeout) => format!("{} still busy after {timeout}", args.path),
                        None => format!("{} still busy", args.path),
                    },
                })
            }
            // The session expired while we waited (a long outage): our place in the queue is
            // gone, but the client opens a new session, so queue again while time remains.
            Err(Error::SessionExpired)
                if !args.nonblock
                    && args
                        .timeout
                        .as_ref()
                        .is_none_or(|t| started.elapsed() < t.value) =>
            {
                warn!(
                    "session expired while waiting for {}; queueing again",
                    args.path
                );
            }
            Err(err) => return Err(err.into()),
        }
    }
}

pub fn leader(global: &Global, args: &LeaderArgs) -> Outcome {
    let supervisor = Supervisor::install()?;
    let client = global.connect(None)?;
    let mut election = LeaderElection::new(&client, &args.path)?;
    if let Some(id) = &args.id {
        election = election.participant_id(id);
    }
    supervisor.acquiring(&client);
    let leadership = reporting_holders(&client, &args.path, Queue::Election, || loop {
        match election.participate() {
            Ok(leadership) => break Ok(leadership),
            Err(Error::SessionExpired) => warn!(
                "session expired while waiting to lead {}; joining again",
                args.path
            ),
            Err(err) => break Err(Failure::from(err)),
        }
    });
    let leadership = supervisor.acquired(leadership)?;
    // A leadership watches its own node: its deletion (`zklock break`) turns it `Lost` at
    // once. Elections have no revocation protocol.
    let policy = args
        .supervision
        .policy(OnLost::Kill, None, client.session_timeout());
    info!(
        "leading {} (node {}, fencing token {}, session {})",
        args.path,
        leadership.node_path(),
        leadership.fencing(),
        session_hex(leadership.session_id())
    );
    let job = Job {
        path: &args.path,
        command: &args.command,
        noun: "leadership of",
    };
    hold(supervisor, &client, leadership, &job, &policy)
}
