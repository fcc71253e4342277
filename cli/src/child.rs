//! The command zklock runs under a lock: starting it with its guardian, signalling it, and
//! watching it stop, continue and exit.

use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::Duration;

use log::{debug, warn};
use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::guardian::Guardian;
use crate::Failure;

/// What became of the command since it was last looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It exited with this status, or 128+N when signal N killed it (as a shell reports it).
    Exited(u8),
    /// It was stopped by this signal (SIGTTIN when it read from a terminal it does not own).
    Stopped(Signal),
    /// It was continued after a stop.
    Continued,
}

/// The running command.
pub struct Process {
    pid: Pid,
    /// Its process group, when it has one of its own (not `--foreground`).
    group: Option<Pid>,
    /// Stops the command if zklock dies; dropped (dismissed) once the command is reaped.
    guardian: Option<Guardian>,
    /// The signal that stopped it, while it is stopped.
    stopped: Option<Signal>,
}

impl Process {
    /// Starts `command`, in a process group of its own with `group`. Call it from the main
    /// thread: the command's PR_SET_PDEATHSIG fires when the thread that forked it ends.
    ///
    /// The command gets SIGTERM from the kernel the moment zklock dies (PR_SET_PDEATHSIG),
    /// and the guardian (see `guardian.rs`) signals its process group, or the command itself
    /// with `--foreground`: SIGTERM, then SIGKILL after `kill_grace`.
    pub fn spawn(
        command: &mut Command,
        group: bool,
        kill_grace: Duration,
        path: &str,
    ) -> io::Result<Process> {
        let guardian = match Guardian::start(group, kill_grace, path) {
            Ok(guardian) => Some(guardian),
            Err(err) => {
                warn!(
                    "cannot start the guardian ({err}): if zklock dies, only the command itself \
                     gets SIGTERM; processes it started run on"
                );
                None
            }
        };
        let guardian_group = guardian.as_ref().and_then(Guardian::group);
        if group {
            // Join the guardian's group, or lead a new one without a guardian.
            command.process_group(guardian_group.map_or(0, Pid::as_raw));
        }
        let zklock = nix::unistd::getpid();
        // SAFETY: the closure only makes two system calls (prctl, getppid), both safe between
        // fork and exec, and allocates nothing.
        unsafe {
            command.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
                // zklock may have died before the prctl: then nothing would ever fire.
                if nix::unistd::getppid() != zklock {
                    return Err(io::Error::from(Errno::ESRCH));
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pids fit in i32"));
        let mut guardian = guardian;
        if let Some(guardian) = &mut guardian {
            guardian.watch(pid);
        }
        Ok(Process {
            pid,
            group: group.then(|| guardian_group.unwrap_or(pid)),
            guardian,
            stopped: None,
        })
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Whether signals reach a process group (the command and what it started), not the
    /// command alone.
    pub fn is_group(&self) -> bool {
        self.group.is_some()
    }

    /// Sends `signal` to the command's process group, or to the command alone.
    pub fn send(&self, signal: Signal) {
        let sent = match self.group {
            Some(group) => killpg(group, signal),
            None => kill(self.pid, signal),
        };
        if let Err(err) = sent {
            debug!("sending {signal} to the command: {err}");
        }
    }

    /// Sends `signal`, then SIGCONT so that a stopped process acts on it: stopped processes
    /// act on nothing but SIGKILL and SIGCONT. A process group always gets SIGCONT, as a
    /// stopped grandchild (`sh -c cat` reading the terminal) is invisible to us.
    pub fn deliver(&self, signal: Signal) {
        self.send(signal);
        if signal != Signal::SIGKILL && (self.group.is_some() || self.stopped.is_some()) {
            self.send(Signal::SIGCONT);
        }
    }

    /// The next change of the command's state, if there is one; never blocks.
    pub fn poll(&mut self) -> Result<Option<Change>, Failure> {
        let flags = WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED | WaitPidFlag::WCONTINUED;
        loop {
            let change = match waitpid(self.pid, Some(flags)) {
                Ok(WaitStatus::StillAlive) => return Ok(None),
                Ok(WaitStatus::Exited(_, code)) => Change::Exited((code & 0xff) as u8),
                Ok(WaitStatus::Signaled(_, signal, _)) => Change::Exited(128 + signal as u8),
                Ok(WaitStatus::Stopped(_, signal)) => {
                    self.stopped = Some(signal);
                    Change::Stopped(signal)
                }
                Ok(WaitStatus::Continued(_)) => {
                    self.stopped = None;
                    Change::Continued
                }
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(err) => return Err(Failure::error(format!("waiting for the command: {err}"))),
            };
            if let Change::Exited(_) = change {
                // Reaped: nothing is left for the guardian to stop.
                self.guardian = None;
            }
            return Ok(Some(change));
        }
    }
}
