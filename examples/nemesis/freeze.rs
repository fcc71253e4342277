//! A client freezing itself: `raise(SIGSTOP)`, resumed by a forked child's SIGCONT.
//!
//! A careful holder that resumes asks `is_held()` at once. Whether zklock's own threads have
//! run by then (and seen the connection drop) is a race, which after a SIGSTOP the network
//! thread mostly won (5 of 7 careful pauses in one run): a check that ignored the lease was
//! then right by luck. The case the lease exists for is the other one, a holder that looks
//! before the library's threads have run after a freeze (a GC or VM pause, a loaded host). So a
//! careful pause also parks every other thread of the process in a signal handler (blocking on
//! a pipe) from just before the freeze until the holder has asked; the child that sends the
//! SIGCONT releases them too, [`WATCHDOG`] later, in case the holder's check waits on one of
//! them.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use crate::mono_ns;

/// The parked threads are released by the SIGCONT child this long after the SIGCONT, whatever
/// the holder does.
const WATCHDOG: Duration = Duration::from_millis(300);

/// The read end of the pipe parked threads block on (-1: none).
static PARK_FD: AtomicI32 = AtomicI32::new(-1);
static PARKED: AtomicUsize = AtomicUsize::new(0);
static UNPARKED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn park(_: libc::c_int) {
    // Only async-signal-safe calls here; errno is restored for the interrupted code.
    // SAFETY: __errno_location() is this thread's errno; read(2) on a pipe we own.
    unsafe {
        let saved = *libc::__errno_location();
        PARKED.fetch_add(1, Ordering::SeqCst);
        let fd = PARK_FD.load(Ordering::SeqCst);
        let mut byte = 0u8;
        while fd >= 0
            && libc::read(fd, (&mut byte as *mut u8).cast(), 1) < 0
            && *libc::__errno_location() == libc::EINTR
        {}
        UNPARKED.fetch_add(1, Ordering::SeqCst);
        *libc::__errno_location() = saved;
    }
}

/// Installs the handler that parks a thread (SIGUSR1). Call once, early.
pub fn install() {
    // SAFETY: a zeroed sigaction with our handler, SA_RESTART so that interrupted system calls
    // resume; `park` is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = park as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
    }
}

/// Every thread of this process but the calling one.
fn other_threads() -> Vec<libc::pid_t> {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&tid| tid != me)
                .collect()
        })
        .unwrap_or_default()
}

/// Stops this whole process for `time`; a forked child sends the SIGCONT. With `parked`, every
/// other thread stays parked after the SIGCONT until [`Frozen::release`] (or the watchdog).
/// `None` if no child could be made (then nothing was stopped).
pub fn freeze(time: Duration, parked: bool) -> Option<Frozen> {
    // SAFETY: getpid(2) has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut pipe = [-1; 2];
    let mut threads = 0;
    if parked {
        // SAFETY: pipe2(2) into a valid array.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
            PARK_FD.store(pipe[0], Ordering::SeqCst);
            PARKED.store(0, Ordering::SeqCst);
            UNPARKED.store(0, Ordering::SeqCst);
            for tid in other_threads() {
                // SAFETY: tgkill(2) to a thread of our own process.
                if unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1) } == 0 {
                    threads += 1;
                }
            }
            let limit = mono_ns() + 200_000_000;
            while PARKED.load(Ordering::SeqCst) < threads && mono_ns() < limit {
                std::thread::yield_now();
            }
        }
    }
    let ts = |d: Duration| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    let (sleep, watchdog) = (ts(time), ts(WATCHDOG));
    let release = vec![0u8; threads.max(1)];
    let t_stop = mono_ns();
    // SAFETY: the child of a multi-threaded process calls only async-signal-safe functions
    // (nanosleep, kill, write, _exit) on memory prepared before the fork.
    let child = unsafe { libc::fork() };
    if child < 0 {
        let frozen = Frozen {
            t_stop,
            t_resume: t_stop,
            pipe,
            threads,
            child: 0,
        };
        frozen.release();
        return None;
    }
    if child == 0 {
        // SAFETY: as above.
        unsafe {
            libc::nanosleep(&sleep, std::ptr::null_mut());
            libc::kill(pid, libc::SIGCONT);
            if pipe[1] >= 0 {
                libc::nanosleep(&watchdog, std::ptr::null_mut());
                libc::write(pipe[1], release.as_ptr().cast(), release.len());
            }
            libc::_exit(0);
        }
    }
    // SAFETY: raise(3) on ourselves; the child above resumes us.
    unsafe { libc::raise(libc::SIGSTOP) };
    Some(Frozen {
        t_stop,
        t_resume: mono_ns(),
        pipe,
        threads,
        child,
    })
}

/// A freeze that is over; the other threads may still be parked.
pub struct Frozen {
    pub t_stop: u64,
    pub t_resume: u64,
    pipe: [libc::c_int; 2],
    threads: usize,
    child: libc::pid_t,
}

impl Frozen {
    /// Lets the parked threads go on, reaps the child and closes the pipe.
    pub fn release(self) {
        if self.pipe[1] >= 0 {
            let bytes = vec![0u8; self.threads.max(1)];
            // SAFETY: write(2) to our own pipe.
            unsafe { libc::write(self.pipe[1], bytes.as_ptr().cast(), bytes.len()) };
            let limit = mono_ns() + 1_000_000_000;
            while UNPARKED.load(Ordering::SeqCst) < self.threads && mono_ns() < limit {
                std::thread::yield_now();
            }
        }
        if self.child > 0 {
            // SAFETY: waitpid(2) on our own child, so that it leaves no zombie.
            unsafe { libc::waitpid(self.child, std::ptr::null_mut(), 0) };
        }
        PARK_FD.store(-1, Ordering::SeqCst);
        for fd in self.pipe {
            if fd >= 0 {
                // SAFETY: closing the pipe we made; no parked thread is left reading it.
                unsafe { libc::close(fd) };
            }
        }
    }
}
