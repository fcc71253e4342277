//! `zklock run`: hold a lock for the lifetime of a child process.
//!
//! Three threads besides the main one: the signal thread (signal-hook) turns signals into
//! events, a watcher turns the guard's state into a "lost" event (a long `Suspended` counts),
//! and a prober notices our node being deleted, which the guard does not report. The main
//! thread owns the child and acts on the events, so only it ever signals or reaps the child.

use std::io::ErrorKind;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;
use zklock::{Client, DistributedMutex, Error, LockGuard, LockState};

use crate::text::{format_duration, session_hex};
use crate::{code, open, Failure, Global, OnLost, Outcome, RunArgs};

/// How often the prober checks that our lock node still exists.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the watcher looks at a `Held` lock between state changes (to notice the end).
const WATCH_INTERVAL: Duration = Duration::from_millis(250);
/// How often the watcher re-checks a `Suspended` lock.
const SUSPENDED_POLL: Duration = Duration::from_millis(20);
/// The supervisor's longest sleep: SIGCHLD normally wakes it at once.
const SUPERVISE_TICK: Duration = Duration::from_millis(500);
/// How long a signal while waiting for the lock waits for our node to be deleted.
const WITHDRAW_WAIT: Duration = Duration::from_secs(2);

enum Event {
    Signal(i32),
    ChildChanged,
    Lost(String),
}

/// What the signal thread does with a signal depends on how far the run has got.
enum Phase {
    Connecting,
    Acquiring { client: Client, path: String },
    Running,
}

pub fn run(global: &Global, args: &RunArgs) -> Outcome {
    let started = Instant::now();
    let (events, inbox) = mpsc::channel();
    let phase = Arc::new(Mutex::new(Phase::Connecting));
    // Installed before anything else, so no signal falls between two regimes.
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

    let (client, mutex) = open(global, &args.path, args.timeout)?;
    *lock(&phase) = Phase::Acquiring {
        client: client.clone(),
        path: args.path.clone(),
    };
    let guard = acquire(&mutex, args, started)?;
    let fifth = client.session_timeout() / 5;
    let policy = Policy {
        on_lost: args.on_lost,
        kill_grace: args.kill_grace.unwrap_or(fifth),
        suspended_grace: args.suspended_grace.unwrap_or(fifth),
        group: !args.foreground,
    };
    info!(
        "acquired {} (fencing token {}, session {})",
        guard.node_path(),
        guard.fencing_token(),
        session_hex(guard.session_id())
    );

    let mut command = Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("ZKLOCK_LOCK_PATH", &args.path)
        .env("ZKLOCK_NODE", guard.node_path())
        .env("ZKLOCK_SESSION_ID", session_hex(guard.session_id()))
        .env("ZKLOCK_FENCING_TOKEN", guard.fencing_token().to_string());
    if policy.group {
        command.process_group(0);
    }
    let spawned = {
        let mut phase = lock(&phase);
        *phase = Phase::Running;
        command.spawn()
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            let name = args.command[0].to_string_lossy();
            return Err(Failure {
                code: match err.kind() {
                    ErrorKind::NotFound => code::NOT_FOUND,
                    _ => code::CANNOT_EXECUTE,
                },
                message: format!("cannot run {name:?}: {err}"),
            });
        }
    };
    debug!("started command, pid {}", child.id());

    let stop_watching = AtomicBool::new(false);
    let (stop_probing, probe_stop) = mpsc::channel::<()>();
    let supervised = thread::scope(|s| {
        let watcher_events = events.clone();
        let guard = &guard;
        let stop = &stop_watching;
        s.spawn(move || watch_state(guard, policy.suspended_grace, stop, &watcher_events));
        let prober_events = events.clone();
        let client = &client;
        s.spawn(move || probe_node(client, guard, &probe_stop, &prober_events));
        let supervised = supervise(&mut child, &inbox, &policy, &args.path);
        stop_watching.store(true, Ordering::Relaxed);
        drop(stop_probing);
        supervised
    });
    let (status, mut lost) = supervised?;

    match guard.unlock() {
        Ok(()) => debug!("released {}", args.path),
        Err(Error::LockLost { .. }) if lost.is_none() => {
            warn!("the lock was lost before the command finished (its node was gone at release)");
            lost = Some("node gone at release".into());
        }
        Err(Error::LockLost { .. }) => {}
        Err(err) => warn!(
            "releasing {}: {err} (the server removes the node when the session ends)",
            args.path
        ),
    }
    Ok(match (lost, policy.on_lost) {
        (Some(_), OnLost::Kill) => code::LOST,
        _ => exit_code(status),
    })
}

/// Waits for the lock as the options say.
fn acquire<'m>(
    mutex: &'m DistributedMutex,
    args: &RunArgs,
    started: Instant,
) -> Result<LockGuard<'m>, Failure> {
    loop {
        let attempt = if args.nonblock {
            mutex.try_lock()
        } else if let Some(timeout) = args.timeout {
            mutex.lock_timeout(timeout.saturating_sub(started.elapsed()))
        } else {
            mutex.lock().map(Some)
        };
        match attempt {
            Ok(Some(guard)) => return Ok(guard),
            Ok(None) if args.nonblock => {
                return Err(Failure {
                    code: code::BUSY,
                    message: format!("{} is busy", args.path),
                })
            }
            Ok(None) => {
                return Err(Failure {
                    code: code::TIMEOUT,
                    message: format!(
                        "{} still busy after {}",
                        args.path,
                        format_duration(args.timeout.unwrap_or_default())
                    ),
                })
            }
            // The session expired while we waited (a long outage): our place in the queue is
            // gone, but the client opens a new session, so queue again while time remains.
            Err(Error::SessionExpired)
                if !args.nonblock && args.timeout.is_none_or(|t| started.elapsed() < t) =>
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

#[derive(Debug, Clone, Copy)]
struct Policy {
    on_lost: OnLost,
    kill_grace: Duration,
    suspended_grace: Duration,
    /// The child leads a process group of its own, which receives our signals.
    group: bool,
}

/// Acts on events until the child exits. Returns its status and why the lock was lost, if it
/// was.
fn supervise(
    child: &mut Child,
    inbox: &Receiver<Event>,
    policy: &Policy,
    path: &str,
) -> Result<(ExitStatus, Option<String>), Failure> {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pids fit in i32"));
    let send = |signal: Signal| {
        let sent = if policy.group {
            killpg(pid, signal)
        } else {
            kill(pid, signal)
        };
        if let Err(err) = sent {
            debug!("sending {signal} to the command: {err}");
        }
    };
    let mut lost: Option<String> = None;
    let mut kill_at: Option<Instant> = None;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if lost.is_some() && policy.on_lost == OnLost::Kill && policy.group {
                    // The leader is gone; nothing it started may go on without the lock.
                    let _ = killpg(pid, Signal::SIGKILL);
                }
                return Ok((status, lost));
            }
            Ok(None) => {}
            Err(err) => return Err(Failure::error(format!("waiting for the command: {err}"))),
        }
        let now = Instant::now();
        if kill_at.is_some_and(|at| now >= at) {
            warn!(
                "command still running {} after SIGTERM; sending SIGKILL",
                format_duration(policy.kill_grace)
            );
            send(Signal::SIGKILL);
            kill_at = None;
        }
        let wait = kill_at.map_or(SUPERVISE_TICK, |at| {
            at.saturating_duration_since(now).min(SUPERVISE_TICK)
        });
        match inbox.recv_timeout(wait) {
            Ok(Event::Signal(number)) => {
                // In the foreground, terminal signals reach the command directly.
                if policy.group || number == SIGTERM {
                    if let Ok(signal) = Signal::try_from(number) {
                        debug!("forwarding {signal} to the command");
                        send(signal);
                    }
                }
            }
            Ok(Event::Lost(reason)) if lost.is_none() => {
                match policy.on_lost {
                    OnLost::Kill => {
                        error!(
                            "lock {path} lost: {reason}; terminating the command (SIGKILL in {})",
                            format_duration(policy.kill_grace)
                        );
                        send(Signal::SIGTERM);
                        kill_at = Some(Instant::now() + policy.kill_grace);
                    }
                    OnLost::Ignore => {
                        warn!("lock {path} lost: {reason}; the command keeps running (--on-lost=ignore)");
                    }
                }
                lost = Some(reason);
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => unreachable!("run() keeps a sender"),
        }
    }
}

/// Reports the lock lost once it is `Lost`, or `Suspended` for longer than `grace`.
fn watch_state(guard: &LockGuard<'_>, grace: Duration, stop: &AtomicBool, events: &Sender<Event>) {
    let mut suspended_since: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        match guard.state() {
            LockState::Held => {
                if suspended_since.take().is_some() {
                    info!("connection to ZooKeeper back; lock still held");
                }
                guard.wait_lost_timeout(WATCH_INTERVAL);
            }
            LockState::Suspended => {
                let since = *suspended_since.get_or_insert_with(|| {
                    warn!(
                        "connection to ZooKeeper lost; lock suspended (lost in {} unless it returns)",
                        format_duration(grace)
                    );
                    Instant::now()
                });
                let down = since.elapsed();
                if down >= grace {
                    let _ = events.send(Event::Lost(format!(
                        "connection to ZooKeeper down for {} (--suspended-grace), the session may have expired",
                        format_duration(down)
                    )));
                    return;
                }
                thread::sleep((grace - down).min(SUSPENDED_POLL));
            }
            _ => {
                let _ = events.send(Event::Lost("ZooKeeper session expired".into()));
                return;
            }
        }
    }
}

/// Reports the lock lost if our node disappears while the session lives (`zklock break`):
/// the guard only reports session trouble.
fn probe_node(client: &Client, guard: &LockGuard<'_>, stop: &Receiver<()>, events: &Sender<Event>) {
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(PROBE_INTERVAL) {
        if !guard.is_held() {
            continue; // The watcher deals with connection trouble.
        }
        match client.get_data(guard.node_path()) {
            Ok(Some(_)) => {}
            Ok(None) => {
                let _ = events.send(Event::Lost(format!(
                    "lock node {} was deleted (zklock break?)",
                    guard.node_path()
                )));
                return;
            }
            Err(err) => debug!("checking {}: {err}", guard.node_path()),
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
        Phase::Acquiring { client, path } => {
            withdraw(client, path);
            std::process::exit(128 + signal);
        }
    }
    // Keep the phase locked until the process is gone, so the command never starts.
}

/// Deletes our queued (or just acquired) node before exiting on a signal, so the waiters
/// behind us do not wait for our session to time out. The blocked `lock()` call cannot be
/// cancelled; our node is found by our session id instead.
fn withdraw(client: &Client, path: &str) {
    // The library logs every broken node as a warning; here it is our own, on purpose.
    log::set_max_level(log::LevelFilter::Error);
    let (done, finished) = mpsc::channel();
    let client = client.clone();
    let path = path.to_owned();
    let _ = thread::Builder::new()
        .name("withdraw".into())
        .spawn(move || {
            if let Ok(mutex) = DistributedMutex::new(&client, &path) {
                let session = client.session_id();
                if let Ok(contenders) = mutex.contenders() {
                    for ours in contenders.iter().filter(|c| c.session_id == session) {
                        let _ = mutex.break_contender(ours);
                    }
                }
            }
            let _ = done.send(());
        });
    let _ = finished.recv_timeout(WITHDRAW_WAIT);
}

/// A shell's view of an exit status: the code, or 128+N for death by signal N.
fn exit_code(status: ExitStatus) -> u8 {
    // Unix exit codes are the low 8 bits of the status; signal numbers are below 128.
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => return code::ERROR,
    };
    u8::try_from(code & 0xff).unwrap_or(code::ERROR)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
