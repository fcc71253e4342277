//! Log lines from zklock's runtime thread, written by a thread of their own.
//!
//! A `log` call runs the application's logger on the calling thread, and a logger can block
//! (a full stderr pipe, a synchronous network sink). On the runtime thread that would stop
//! every session's traffic and keepalives. So code on the runtime thread hands its lines to
//! [`io_log!`], which queues them without waiting; one process-wide `zklock-log` thread
//! writes them. If the queue is full (the logger is stuck), lines are dropped and counted,
//! and the count is logged once the logger takes lines again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};

use log::Level;

/// Lines queued at most; past that they are dropped rather than waited for.
const QUEUE: usize = 1024;

struct Line {
    level: Level,
    target: &'static str,
    text: String,
}

/// The queue to the log thread, and the process that started that thread: a forked child
/// starts its own (the parent's thread does not exist there).
static RELAY: parking_lot::Mutex<Option<(u32, SyncSender<Line>)>> = parking_lot::Mutex::new(None);
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Queues a line for the log thread; never blocks. Use through [`io_log!`].
pub(crate) fn queue(level: Level, target: &'static str, text: std::fmt::Arguments<'_>) {
    if level > log::max_level() {
        return;
    }
    let Some(relay) = relay() else { return };
    let line = Line {
        level,
        target,
        text: text.to_string(),
    };
    if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = relay.try_send(line) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// This process's queue to its log thread, started on first use.
fn relay() -> Option<SyncSender<Line>> {
    let pid = std::process::id();
    let mut relay = RELAY.lock();
    if let Some((owner, lines)) = relay.as_ref() {
        if *owner == pid {
            return Some(lines.clone());
        }
    }
    let (lines, receiver) = sync_channel(QUEUE);
    std::thread::Builder::new()
        .name("zklock-log".into())
        .spawn(move || write(receiver))
        .ok()?;
    *relay = Some((pid, lines.clone()));
    Some(lines)
}

fn write(lines: Receiver<Line>) {
    for line in lines {
        let dropped = DROPPED.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            log::warn!(target: "zklock", "{dropped} log lines from the runtime thread were dropped (logger too slow)");
        }
        log::log!(target: line.target, line.level, "{}", line.text);
    }
}

/// `log!` for code on zklock's runtime thread: queued, never blocking (see the module docs).
/// `io_log!(target: T, Level, ...)` gives the line a target other than its module's.
macro_rules! io_log {
    (target: $target:expr, $level:ident, $($arg:tt)+) => {
        $crate::rt::relay::queue(log::Level::$level, $target, format_args!($($arg)+))
    };
    ($level:ident, $($arg:tt)+) => {
        $crate::rt::relay::queue(log::Level::$level, module_path!(), format_args!($($arg)+))
    };
}
pub(crate) use io_log;
