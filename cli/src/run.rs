//! `zklock run` (hold a lock while a command runs) and `zklock leader` (run a command while
//! leading an election); the supervision itself is in `supervise.rs`.

use std::time::{Duration, Instant};

use log::{info, warn};
use zklock::{
    Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, LockGuard, Semaphore,
};

use crate::supervise::{hold, Holding, Job, Queue, Supervisor};
use crate::text::session_hex;
use crate::waiting::reporting_holders;
use crate::{code, Failure, Global, LeaderArgs, OnLost, OnRevoke, Outcome, RunArgs};

pub fn run(global: &Global, args: &RunArgs) -> Outcome {
    let started = Instant::now();
    let supervisor = Supervisor::install()?;
    let client = global.connect(args.timeout.as_ref().map(|t| t.value))?;
    let hosts = global.connect_string();
    if let Some(permits) = args.permits {
        // A semaphore's leases have no revocation protocol; a deleted lease is found as a
        // lock's node is, through the permit's state.
        let semaphore = Semaphore::new(&client, &args.path, permits as usize)?;
        supervisor.acquiring(&client);
        let queue = Queue::Semaphore(permits as usize);
        let permit = reporting_holders(&client, &args.path, queue, || {
            acquire(args, &hosts, started, |patience| match patience {
                Patience::Try => semaphore.try_acquire(),
                Patience::For(timeout) => semaphore.acquire_timeout(timeout),
                Patience::Forever => semaphore.acquire().map(Some),
            })
        });
        let permit = supervisor.acquired(permit)?;
        return holding(supervisor, &client, permit, args, None);
    }
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
    let guard = reporting_holders(&client, &args.path, queue, || {
        acquire(args, &hosts, started, |patience| lock.take(patience))
    });
    let guard = supervisor.acquired(guard)?;
    holding(supervisor, &client, guard, args, Some(args.on_revoke))
}

/// Runs the command while `held` holds.
fn holding(
    supervisor: Supervisor,
    client: &Client,
    held: impl Holding,
    args: &RunArgs,
    on_revoke: Option<OnRevoke>,
) -> Outcome {
    let policy = args
        .supervision
        .policy(args.on_lost, on_revoke, client.session_timeout());
    info!(
        "acquired {} ({}session {})",
        held.node_path(),
        held.fencing()
            .map_or_else(String::new, |(fencing, _)| format!(
                "fencing token {fencing}, "
            )),
        session_hex(held.session_id())
    );
    let job = Job {
        path: &args.path,
        command: &args.command,
        noun: "lock",
    };
    hold(supervisor, client, held, &job, &policy)
}

/// How long an acquisition may wait.
enum Patience {
    /// Not at all (--nonblock).
    Try,
    /// At most this long (--timeout).
    For(Duration),
    Forever,
}

/// What `run` holds: a mutex, or one side of a read/write lock (`true`: the read side).
enum Lock {
    Mutex(DistributedMutex),
    ReadWrite(DistributedRwLock, bool),
}

impl Lock {
    fn take(&self, patience: Patience) -> zklock::Result<Option<LockGuard>> {
        match (self, patience) {
            (Lock::Mutex(mutex), Patience::Try) => mutex.try_lock(),
            (Lock::Mutex(mutex), Patience::For(timeout)) => mutex.lock_timeout(timeout),
            (Lock::Mutex(mutex), Patience::Forever) => mutex.lock().map(Some),
            (Lock::ReadWrite(rw, true), Patience::Try) => rw.try_read(),
            (Lock::ReadWrite(rw, true), Patience::For(timeout)) => rw.read_timeout(timeout),
            (Lock::ReadWrite(rw, true), Patience::Forever) => rw.read().map(Some),
            (Lock::ReadWrite(rw, false), Patience::Try) => rw.try_write(),
            (Lock::ReadWrite(rw, false), Patience::For(timeout)) => rw.write_timeout(timeout),
            (Lock::ReadWrite(rw, false), Patience::Forever) => rw.write().map(Some),
        }
    }
}

/// Waits for the lock as the options say.
fn acquire<G>(
    args: &RunArgs,
    hosts: &str,
    started: Instant,
    take: impl Fn(Patience) -> zklock::Result<Option<G>>,
) -> Result<G, Failure> {
    loop {
        let attempt = if args.nonblock {
            take(Patience::Try)
        } else if let Some(timeout) = &args.timeout {
            take(Patience::For(
                timeout.value.saturating_sub(started.elapsed()),
            ))
        } else {
            take(Patience::Forever)
        };
        match attempt {
            Ok(Some(guard)) => return Ok(guard),
            Ok(None) => {
                let (default_code, message) = match (&args.timeout, args.nonblock) {
                    (_, true) => (code::BUSY, format!("{} is busy", args.path)),
                    (Some(timeout), false) => (
                        code::TIMEOUT,
                        format!("{} still busy after {timeout}", args.path),
                    ),
                    (None, false) => (code::TIMEOUT, format!("{} still busy", args.path)),
                };
                // With -E the caller has said what a conflict means (a cron job's `-E 0`: skip
                // this run): a conflict is then no news, and prints nothing, as flock does.
                // Cron mails whatever a job prints, whatever its exit status.
                return Err(match args.conflict_exit_code {
                    Some(code) => {
                        info!("{message}");
                        Failure::silent(code)
                    }
                    None => Failure::with_code(default_code, message),
                });
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
            // An outage at the deadline: say where, and which deadline.
            Err(Error::ConnectionLoss { .. }) => {
                return Err(Failure::error(format!(
                    "waiting for {}: the connection to ZooKeeper at {hosts} was down and not \
                     back {}",
                    args.path,
                    args.timeout.as_ref().map_or_else(
                        || "in time".to_owned(),
                        |timeout| format!("within --timeout {timeout}")
                    ),
                )))
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
