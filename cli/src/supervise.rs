//! Holding a lock (or leadership) for the lifetime of a child process: shared by `zklock run`
//! and `zklock leader`.
//!
//! Besides the main thread: the signal thread (signal-hook) turns signals into events, a
//! watcher turns the guard's state into a "lost" event (a long `Suspended` counts; so does our
//! node's deletion, which every guard used here watches for, also after an ignored revocation
//! request), and, for `run`, a revocation watcher turns a revocation request into a "revoked"
//! event. The main thread owns the child and acts on the events, so only it ever signals or
//! reaps the child.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::process::Command;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use nix::sys::signal::Signal;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;
use zklock::{CancelToken, Client, Error, LockGuard, LockState, Permit, Wait};

use crate::child::{Change, Process};
use crate::text::{format_duration, session_hex, Dur};
use crate::{code, Failure, OnLost, OnRevoke, Outcome};

/// How often the watcher re-checks a `Suspended` lock.
const SUSPENDED_POLL: Duration = Duration::from_millis(20);
/// The supervisor's longest sleep: SIGCHLD normally wakes it at once.
const SUPERVISE_TICK: Duration = Duration::from_millis(500);
/// How long a lost lock's cause (deleted node or expired session) is looked for.
const CAUSE_WAIT: Duration = Duration::from_secs(2);
/// How long releasing and closing may take once the command is dead: the library's bound for
/// a dropped guard.
const RELEASE_WAIT: Duration = zklock::DEFAULT_RELEASE_TIMEOUT;

enum Event {
    Signal(i32),
    ChildChanged,
    Lost(String),
    Revoked,
}

/// Why the command was stopped (or, with `--on-lost=ignore`, should have been).
enum Ending {
    Lost,
    Revoked,
}

/// Which recipe's queue we wait in.
#[derive(Debug, Clone, Copy)]
pub enum Queue {
    Lock,
    ReadWrite,
    /// A semaphore with this many permits.
    Semaphore(usize),
    Election,
}

/// What the signal thread does with a signal depends on how far the run has got.
enum Phase {
    Connecting,
    /// Closing the client ends the session, which withdraws our queued node at once and
    /// wakes the blocked acquisition.
    Acquiring(Client),
    Running,
}

/// The signal thread and the channel it (and the watchers) report on.
pub struct Supervisor {
    phase: Arc<Mutex<Phase>>,
    events: Sender<Event>,
    inbox: Receiver<Event>,
}

impl Supervisor {
    /// Installs the signal handlers: call it before anything else, so no signal falls between
    /// two regimes. Until [`acquiring`](Self::acquiring), a signal exits 128+N at once.
    pub fn install() -> Result<Supervisor, Failure> {
        let (events, inbox) = mpsc::channel();
        let phase = Arc::new(Mutex::new(Phase::Connecting));
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD])
            .map_err(|e| Failure::error(format!("installing signal handlers: {e}")))?;
        {
            let phase = phase.clone();
            let events = events.clone();
            thread::Builder::new()
                .name("signals".into())
                .spawn(move || {
                    for signal in signals.forever() {
                        on_signal(signal, &phase, &events);
                    }
                })
                .map_err(|e| Failure::error(format!("starting the signal thread: {e}")))?;
        }
        Ok(Supervisor {
            phase,
            events,
            inbox,
        })
    }

    /// From now on a signal closes `client` (its session, and with it our queued node, ends
    /// at once) before exiting 128+N.
    pub fn acquiring(&self, client: &Client) {
        *lock(&self.phase) = Phase::Acquiring(client.clone());
    }

    /// The outcome of the acquisition begun by [`acquiring`](Self::acquiring). If a signal
    /// ended it (the signal thread closed the client and is exiting 128+N), it never returns:
    /// the signal thread holds the phase until the process is gone.
    pub fn acquired<T>(&self, outcome: Result<T, Failure>) -> Result<T, Failure> {
        drop(lock(&self.phase));
        outcome
    }
}

/// How `hold` reacts to trouble.
#[derive(Debug, Clone)]
pub struct Policy {
    pub on_lost: OnLost,
    /// `None` where the recipe has no revocation protocol (elections): requests are not
    /// listened for.
    pub on_revoke: Option<OnRevoke>,
    pub kill_grace: Dur,
    pub suspended_grace: Dur,
    /// The child leads a process group of its own, which receives our signals.
    pub group: bool,
}

/// What runs under the lock.
pub struct Job<'a> {
    pub path: &'a str,
    pub command: &'a [OsString],
    /// What is lost, for messages: "lock" or "leadership of".
    pub noun: &'static str,
}

/// What `hold` keeps while the command runs: a lock guard (mutex, read/write lock,
/// leadership) or a semaphore's permit.
pub trait Holding: Sync {
    /// The node shown to the command as ZKLOCK_NODE (a permit's first lease).
    fn node_path(&self) -> &str;
    fn session_id(&self) -> i64;
    /// ZKLOCK_FENCING and ZKLOCK_FENCING_TOKEN, where the recipe has fencing tokens.
    fn fencing(&self) -> Option<(String, String)>;
    fn state(&self) -> LockState;
    /// As `LockGuard::wait_lost_with(Wait::forever().cancel_on(stop))`.
    fn wait_lost(&self, stop: &CancelToken) -> Option<LockState>;
    /// As `LockGuard::wait_revocation_with(Wait::forever().cancel_on(stop))`; `false` at once without a revocation
    /// protocol.
    fn wait_revocation(&self, stop: &CancelToken) -> bool;
    /// Releases within about `wait`.
    fn release(self, wait: Duration) -> Result<(), Error>;
}

impl Holding for LockGuard {
    fn node_path(&self) -> &str {
        LockGuard::node_path(self)
    }

    fn session_id(&self) -> i64 {
        LockGuard::session_id(self)
    }

    fn fencing(&self) -> Option<(String, String)> {
        Some((
            LockGuard::fencing(self).to_string(),
            LockGuard::fencing(self).zxid().to_string(),
        ))
    }

    fn state(&self) -> LockState {
        LockGuard::state(self)
    }

    fn wait_lost(&self, stop: &CancelToken) -> Option<LockState> {
        self.wait_lost_with(Wait::forever().cancel_on(stop))
    }

    fn wait_revocation(&self, stop: &CancelToken) -> bool {
        self.wait_revocation_with(Wait::forever().cancel_on(stop))
    }

    fn release(self, wait: Duration) -> Result<(), Error> {
        self.unlock_timeout(wait)
    }
}

impl Holding for Permit {
    fn node_path(&self) -> &str {
        self.node_paths().first().copied().unwrap_or_default()
    }

    fn session_id(&self) -> i64 {
        Permit::session_id(self)
    }

    fn fencing(&self) -> Option<(String, String)> {
        None
    }

    fn state(&self) -> LockState {
        Permit::state(self)
    }

    fn wait_lost(&self, stop: &CancelToken) -> Option<LockState> {
        self.wait_lost_with(Wait::forever().cancel_on(stop))
    }

    fn wait_revocation(&self, _: &CancelToken) -> bool {
        false
    }

    fn release(self, wait: Duration) -> Result<(), Error> {
        // One bound for every lease (`unlock()` could wait a session timeout per lease).
        self.unlock_timeout(wait)
    }
}

/// Runs `job` while `guard` holds, releases, and returns the exit code.
///
/// `guard` must watch its own node (a revocable lock, or a leadership), so that its deletion
/// by someone else turns its state `Lost` at once.
pub fn hold(
    supervisor: Supervisor,
    client: &Client,
    guard: impl Holding,
    job: &Job<'_>,
    policy: &Policy,
) -> Outcome {
    let mut command = Command::new(&job.command[0]);
    command
        .args(&job.command[1..])
        .env("ZKLOCK_LOCK_PATH", job.path)
        .env("ZKLOCK_NODE", guard.node_path())
        .env("ZKLOCK_SESSION_ID", session_hex(guard.session_id()));
    if let Some((fencing, token)) = guard.fencing() {
        command
            .env("ZKLOCK_FENCING", fencing)
            .env("ZKLOCK_FENCING_TOKEN", token);
    }
    let spawned = {
        let mut phase = lock(&supervisor.phase);
        *phase = Phase::Running;
        Process::spawn(
            &mut command,
            policy.group,
            policy.kill_grace.value,
            job.path,
        )
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            let name = job.command[0].to_string_lossy();
            return Err(Failure::with_code(
                match err.kind() {
                    ErrorKind::NotFound => code::NOT_FOUND,
                    _ => code::CANNOT_EXECUTE,
                },
                format!("cannot run {name:?}: {err}"),
            ));
        }
    };
    debug!("started command, pid {}", child.pid());

    // Cancelled once the command is gone: the watchers' waits on the guard return at once, so
    // joining them delays neither the release nor the exit.
    let stop = CancelToken::new();
    let supervised = thread::scope(|s| {
        let (guard, stop) = (&guard, &stop);
        let events = supervisor.events.clone();
        s.spawn(move || watch_state(client, guard, policy, stop, &events));
        if let Some(on_revoke) = policy.on_revoke {
            let events = supervisor.events.clone();
            s.spawn(move || watch_revocation(guard, job.path, on_revoke, stop, &events));
        }
        let supervised = supervise(&mut child, &supervisor.inbox, policy, job);
        stop.cancel();
        supervised
    });
    let (status, mut ending) = supervised?;

    // The command is dead: release and close within one bound, whatever the servers do. A
    // release not confirmed by then (a silent or frozen server) is left to the server, which
    // removes the node when the session ends; waiting for the connection to be declared dead,
    // or for the session to expire, would only delay the exit.
    let done_by = Instant::now() + RELEASE_WAIT;
    match guard.release(RELEASE_WAIT) {
        Ok(()) => debug!("released {}", job.path),
        Err(Error::LockLost { .. }) if ending.is_none() => {
            warn!(
                "the {} {} was lost before the command finished (its node was gone at release)",
                job.noun, job.path
            );
            ending = Some(Ending::Lost);
        }
        Err(Error::LockLost { .. }) => {}
        Err(Error::OutcomeUnknown { .. }) => warn!(
            "release of {} not confirmed within {}; the server removes the node when the \
             session ends",
            job.path,
            format_duration(RELEASE_WAIT)
        ),
        Err(err) => warn!(
            "releasing {}: {err} (the server removes the node when the session ends)",
            job.path
        ),
    }
    if let Err(err) = client.close_timeout(done_by.saturating_duration_since(Instant::now())) {
        debug!("closing the session: {err}");
    }
    Ok(match ending {
        Some(Ending::Lost) if policy.on_lost == OnLost::Kill => code::LOST,
        Some(Ending::Revoked) => code::REVOKED,
        _ => status,
    })
}

/// Acts on events until the child exits. Returns its exit code (as a shell reports it) and
/// why it was stopped, if it was.
fn supervise(
    child: &mut Process,
    inbox: &Receiver<Event>,
    policy: &Policy,
    job: &Job<'_>,
) -> Result<(u8, Option<Ending>), Failure> {
    let (noun, path) = (job.noun, job.path);
    let grace = &policy.kill_grace;
    let mut ending: Option<Ending> = None;
    let mut kill_at: Option<Instant> = None;
    loop {
        while let Some(change) = child.poll()? {
            match change {
                Change::Exited(status) => {
                    let stopping = match &ending {
                        Some(Ending::Lost) => policy.on_lost == OnLost::Kill,
                        Some(Ending::Revoked) => true,
                        None => false,
                    };
                    if stopping && child.is_group() {
                        // The leader is gone; nothing it started may go on without the lock.
                        child.send(Signal::SIGKILL);
                    }
                    return Ok((status, ending));
                }
                Change::Stopped(signal) => warn!("{}", stopped_message(signal, child)),
                Change::Continued => info!("the command was continued"),
            }
        }
        let now = Instant::now();
        if kill_at.is_some_and(|at| now >= at) {
            warn!("command still running {grace} after SIGTERM; sending SIGKILL");
            child.send(Signal::SIGKILL);
            kill_at = None;
        }
        let wait = kill_at.map_or(SUPERVISE_TICK, |at| {
            at.saturating_duration_since(now).min(SUPERVISE_TICK)
        });
        match inbox.recv_timeout(wait) {
            Ok(Event::Signal(number)) => {
                // In the foreground, terminal signals reach the command directly.
                if child.is_group() || number == SIGTERM {
                    if let Ok(signal) = Signal::try_from(number) {
                        debug!("forwarding {signal} to the command");
                        child.deliver(signal);
                    }
                    // As `timeout -k`: a command told to terminate gets the grace, then SIGKILL.
                    if number == SIGTERM && kill_at.is_none() {
                        info!("SIGTERM forwarded; SIGKILL in {grace} unless the command exits");
                        kill_at = Some(Instant::now() + grace.value);
                    }
                }
            }
            Ok(Event::Lost(reason)) if ending.is_none() => {
                match policy.on_lost {
                    OnLost::Kill => {
                        error!(
                            "{noun} {path} lost: {reason}; terminating the command (SIGKILL in {grace})"
                        );
                        child.deliver(Signal::SIGTERM);
                        kill_at = Some(Instant::now() + grace.value);
                    }
                    OnLost::Ignore => {
                        warn!("{noun} {path} lost: {reason}; the command keeps running (--on-lost=ignore)");
                    }
                }
                ending = Some(Ending::Lost);
            }
            Ok(Event::Revoked) if ending.is_none() => {
                error!(
                    "release of {path} requested (revocation, --on-revoke=release); terminating \
                     the command (SIGKILL in {grace})"
                );
                child.deliver(Signal::SIGTERM);
                kill_at = Some(Instant::now() + grace.value);
                ending = Some(Ending::Revoked);
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => unreachable!("the supervisor keeps a sender"),
        }
    }
}

/// The warning for a command that stopped: what it means, and how it ends.
fn stopped_message(signal: Signal, child: &Process) -> String {
    let how = if child.is_group() {
        "a signal to zklock (Ctrl-C, kill -TERM) is forwarded and continues it"
    } else {
        "kill -CONT or a SIGTERM to zklock continues it"
    };
    match signal {
        Signal::SIGTTIN | Signal::SIGTTOU if child.is_group() => format!(
            "the command (pid {}) is stopped by {signal}: it used the terminal, but runs in a \
             process group of its own, outside the terminal's foreground (run interactive \
             commands with --foreground); the lock stays held; {how}",
            child.pid()
        ),
        _ => format!(
            "the command (pid {}) is stopped by {signal}; the lock stays held; {how}",
            child.pid()
        ),
    }
}

/// Reports the lock lost once it is `Lost`, or `Suspended` for longer than the grace.
fn watch_state(
    client: &Client,
    guard: &impl Holding,
    policy: &Policy,
    stop: &CancelToken,
    events: &Sender<Event>,
) {
    let grace = &policy.suspended_grace;
    let mut suspended_since: Option<Instant> = None;
    while !stop.is_cancelled() {
        match guard.state() {
            LockState::Held => {
                if suspended_since.take().is_some() {
                    info!("connection to ZooKeeper back; lock still held");
                }
                // Returns at once when the lock turns Suspended or Lost (also when its node
                // is deleted: the guard watches it), or when the command is gone.
                guard.wait_lost(stop);
            }
            LockState::Suspended => {
                let since = *suspended_since.get_or_insert_with(|| {
                    warn!(
                        "connection to ZooKeeper lost; lock suspended (lost in {grace} unless it returns)"
                    );
                    Instant::now()
                });
                let down = since.elapsed();
                if down >= grace.value {
                    let _ = events.send(Event::Lost(format!(
                        "connection to ZooKeeper down for {} (--suspended-grace), the session may have expired",
                        format_duration(down)
                    )));
                    return;
                }
                thread::sleep((grace.value - down).min(SUSPENDED_POLL));
            }
            _ => {
                let _ = events.send(Event::Lost(lost_cause(client, guard)));
                return;
            }
        }
    }
}

/// Why a watched node's lock is `Lost`: its node was deleted while the session lives on, or
/// the session ended. Looked for within [`CAUSE_WAIT`].
fn lost_cause(client: &Client, guard: &impl Holding) -> String {
    let (client, node, session) = (
        client.clone(),
        guard.node_path().to_owned(),
        guard.session_id(),
    );
    let (tell, told) = mpsc::channel();
    let asked = node.clone();
    let _ = thread::Builder::new()
        .name("lost-cause".into())
        .spawn(move || {
            // An expired session is replaced by the read, which changes the client's id.
            let deleted =
                matches!(client.get_data(&asked), Ok(None)) && client.session_id() == session;
            let _ = tell.send(deleted);
        });
    if told.recv_timeout(CAUSE_WAIT) == Ok(true) {
        format!("node {node} was deleted (zklock break?)")
    } else {
        "ZooKeeper session expired".into()
    }
}

/// Reports a revocation request: as an event for `--on-revoke=release`, as a warning for
/// `--on-revoke=ignore` (the guard then keeps watching its node, so a later deletion still
/// reaches `watch_state`).
fn watch_revocation(
    guard: &impl Holding,
    path: &str,
    on_revoke: OnRevoke,
    stop: &CancelToken,
    events: &Sender<Event>,
) {
    // `false`: the command is gone (or the node or session is, which `watch_state` reports).
    if !guard.wait_revocation(stop) {
        return;
    }
    match on_revoke {
        OnRevoke::Release => {
            let _ = events.send(Event::Revoked);
        }
        OnRevoke::Ignore => {
            warn!("release of {path} requested (revocation); keeping the lock (--on-revoke=ignore)")
        }
    }
}

fn on_signal(signal: i32, phase: &Mutex<Phase>, events: &Sender<Event>) {
    let phase = lock(phase);
    match &*phase {
        Phase::Running if signal == SIGCHLD => {
            let _ = events.send(Event::ChildChanged);
        }
        Phase::Running => {
            let _ = events.send(Event::Signal(signal));
        }
        _ if signal == SIGCHLD => {}
        Phase::Connecting => std::process::exit(128 + signal),
        Phase::Acquiring(client) => {
            // `process::exit` runs no destructors: end the session first, so the contenders
            // behind us do not wait for it to time out.
            if let Err(err) = client.close() {
                log::debug!("closing the session on a signal: {err}");
            }
            std::process::exit(128 + signal);
        }
    }
    // Keep the phase locked until the process is gone, so the command never starts.
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
