//! The guardian: a small process that outlives zklock to stop the command when zklock dies.
//!
//! The command must not run on once zklock is gone: zklock's ZooKeeper session (and with it
//! the lock) ends one session timeout after zklock stops talking to the server, and then the
//! next waiter starts its own command. A SIGKILLed zklock can do nothing about that itself,
//! and PR_SET_PDEATHSIG only reaches the command's own process, not what it started.
//!
//! So before the command starts, zklock starts a guardian: zklock re-executed
//! (`/proc/self/exe __guardian ...`), single-threaded, holding one end of a socket pair whose
//! other end only zklock holds (close-on-exec, so the command never inherits it). The guardian
//! reads that socket and nothing else:
//!
//! - `pid N`: the command's pid (used where it has no process group of its own).
//! - `done`: zklock has reaped the command; the guardian exits quietly.
//! - end of file without `done`: zklock died (the kernel closed its end, whatever killed it).
//!   The guardian sends SIGTERM (and SIGCONT, so that a stopped job can act on it), waits
//!   `--kill-grace`, then sends SIGKILL, as zklock does for a lost lock. Within one session
//!   timeout the job is dead, before ZooKeeper can hand the lock to anyone else.
//!
//! Whom it signals: by default the command runs in a process group of its own, and the
//! guardian *leads* that group (the command joins it), so the group id cannot be reused while
//! the guardian lives, and `kill -KILL` of zklock's own process group (a shell's `kill -9 %1`)
//! does not take the guardian with it. The guardian blocks the signals zklock forwards to the
//! group (SIGINT, SIGTERM, SIGHUP, SIGQUIT) and the terminal's stop signals, from before it is
//! executed. With `--foreground` the command shares zklock's process group (and a pipeline's),
//! so the guardian signals the command's pid only, after checking that the pid still names the
//! same process (its start time in /proc), never a reused pid.
//!
//! What escapes: processes that leave the process group (`setsid`, daemons that double-fork,
//! `setpgid`); with `--foreground`, everything but the command itself. Run such jobs under a
//! cgroup-based supervisor (systemd's KillMode=control-group) as well. Nothing survives a
//! SIGKILL of the guardian together with zklock (e.g. `pkill -KILL zklock`) but the
//! PR_SET_PDEATHSIG the command itself gets (SIGTERM when zklock dies).

use std::ffi::{CStr, OsString};
use std::io::{BufRead as _, BufReader, ErrorKind, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, SigSet, Signal};
use nix::unistd::Pid;

/// The hidden first argument that makes `zklock` a guardian.
pub const ARG: &str = "__guardian";

/// How long zklock waits for a dismissed guardian to exit.
const DISMISS_WAIT: Duration = Duration::from_secs(1);

/// The signals a guardian never acts on: those zklock forwards to the command's process
/// group, and the terminal's.
fn blocked_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
        Signal::SIGPIPE,
    ] {
        set.add(signal);
    }
    set
}

/// zklock's handle on its guardian. Dropping it dismisses the guardian.
pub struct Guardian {
    child: Child,
    link: UnixStream,
    group: bool,
}

impl Guardian {
    /// Starts a guardian for a command about to be started. With `group`, the guardian leads a
    /// new process group for the command to join (see [`Guardian::group`]).
    pub fn start(group: bool, kill_grace: Duration, path: &str) -> std::io::Result<Guardian> {
        let (link, theirs) = UnixStream::pair()?;
        let blocked = blocked_signals();
        let mut command = Command::new("/proc/self/exe");
        command
            .arg0("zklock")
            .arg(ARG)
            .arg(if group { "group" } else { "pid" })
            .arg(kill_grace.as_millis().to_string())
            .arg(std::process::id().to_string())
            .arg(path)
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .current_dir("/");
        if group {
            command.process_group(0);
        }
        // SAFETY: the closure only calls pthread_sigmask, which is async-signal-safe, on a set
        // built before the fork. Blocking here, not in the guardian's main, leaves no window in
        // which a forwarded signal could kill it before it runs.
        unsafe {
            command.pre_exec(move || blocked.thread_block().map_err(std::io::Error::from));
        }
        let child = command.spawn()?;
        Ok(Guardian { child, link, group })
    }

    /// The process group the command must join: the guardian's (only with `group`).
    pub fn group(&self) -> Option<Pid> {
        self.group.then(|| Pid::from_raw(self.child.id() as i32))
    }

    /// Tells the guardian the command's pid.
    pub fn watch(&mut self, pid: Pid) {
        if let Err(err) = writeln!(self.link, "pid {pid}") {
            log::warn!("the guardian is gone ({err}); if zklock dies, the command runs on");
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // The guardian is already gone if a SIGKILL of the command's group took it along.
        let _ = writeln!(self.link, "done");
        let deadline = Instant::now() + DISMISS_WAIT;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                _ => return,
            }
        }
        log::debug!("the guardian did not exit after being dismissed");
    }
}

/// What the guardian was started for, from its arguments.
struct Orders {
    group: bool,
    kill_grace: Duration,
    zklock_pid: String,
    path: String,
}

impl Orders {
    fn parse(args: &[OsString]) -> Option<Orders> {
        let text = |i: usize| args.get(i).and_then(|a| a.to_str());
        Some(Orders {
            group: match text(0)? {
                "group" => true,
                "pid" => false,
                _ => return None,
            },
            kill_grace: Duration::from_millis(text(1)?.parse().ok()?),
            zklock_pid: text(2)?.to_owned(),
            path: text(3)?.to_owned(),
        })
    }
}

/// A process as the guardian knows it: its pid and its start time (field 22 of
/// /proc/PID/stat), which tells it apart from a later process given the same pid.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Target {
    pid: Pid,
    started: Option<u64>,
}

impl Target {
    fn new(pid: Pid) -> Target {
        Target {
            pid,
            started: start_time(pid),
        }
    }

    /// Whether the pid still names the process first seen (or nothing can be checked).
    fn is_same(&self) -> bool {
        self.started.is_none() || start_time(self.pid) == self.started
    }
}

fn start_time(pid: Pid) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may contain anything; the fields follow the last ')'.
    let fields = &stat[stat.rfind(')')? + 1..];
    fields.split_whitespace().nth(19)?.parse().ok()
}

/// The guardian process: `zklock __guardian group|pid GRACE_MS ZKLOCK_PID PATH`, its socket on
/// stdin. Never started by hand.
pub fn main(args: &[OsString]) -> ExitCode {
    // Also blocked before exec (see `Guardian::start`); this covers a guardian started some
    // other way.
    let _ = blocked_signals().thread_block();
    let _ = nix::sys::prctl::set_name(c"zklock-guardian" as &CStr);
    let Some(orders) = Orders::parse(args) else {
        eprintln!("zklock: {ARG} is internal to zklock run and zklock leader");
        return ExitCode::from(crate::code::ERROR);
    };
    let mut target: Option<Target> = None;
    for line in BufReader::new(std::io::stdin().lock()).lines() {
        match line.as_deref() {
            Ok("done") => return ExitCode::SUCCESS,
            Ok(line) => {
                if let Some(pid) = line.strip_prefix("pid ").and_then(|p| p.parse().ok()) {
                    target = Some(Target::new(Pid::from_raw(pid)));
                }
            }
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    // End of input without "done": zklock is gone.
    let grace = humantime::format_duration(orders.kill_grace);
    eprintln!(
        "zklock: warn: zklock (pid {}) died while holding {}; its session (and the lock) \
         ends within the session timeout: terminating the command (SIGKILL in {grace})",
        orders.zklock_pid, orders.path
    );
    let own_group = nix::unistd::getpgrp();
    let send = |signal: Signal| {
        if orders.group {
            let _ = killpg(own_group, signal);
        } else if let Some(target) = target.filter(Target::is_same) {
            let _ = kill(target.pid, signal);
        }
    };
    send(Signal::SIGTERM);
    send(Signal::SIGCONT);
    thread::sleep(orders.kill_grace);
    // In a group, this ends the guardian too.
    send(Signal::SIGKILL);
    ExitCode::SUCCESS
}
