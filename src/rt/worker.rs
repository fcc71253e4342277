//! Telling a blocking call made on an async runtime's worker thread, which can deadlock the
//! program: the worker cannot run the task that would release the lock it waits for (on tokio
//! with two workers, three tasks are enough). zklock says so where it will be seen: once per
//! process on stderr (a program without a logger hangs silently otherwise) and as a `warn!`;
//! later ones at `debug!`. With the `tokio` feature, on a multi-thread runtime's worker, the
//! wait also runs in `tokio::task::block_in_place`, which hands the worker's other tasks to
//! another thread first, so the call cannot starve the task that would release the lock.
//!
//! Which threads are workers:
//! - with the `tokio` feature, tokio's own answer ([`tokio::runtime::worker_index`]): a
//!   multi-thread runtime's workers and the thread driving a current-thread runtime, and
//!   never a `spawn_blocking` thread or the thread in a multi-thread runtime's `block_on`;
//! - without it, thread names, only where they are unambiguous: async-std's and
//!   async-global-executor's workers, smol's conventional `smol-` threads. tokio names its
//!   blocking-pool threads like its workers, so a tokio-named thread is only logged at
//!   `debug!`: a false alarm on every `spawn_blocking` call, the documented way out, would
//!   teach users to ignore the warning.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use log::{debug, warn};

/// Worker threads of runtimes whose blocking pools name their threads otherwise.
const WORKER_NAMES: [&str; 3] = ["async-std/runtime", "async-global-executor", "smol-"];

/// tokio's default name for every thread it starts, workers and blocking pool alike.
const TOKIO_NAMES: [&str; 2] = ["tokio-runtime-worker", "tokio-rt-worker"];

/// Says so when the calling thread is an async runtime's worker (see the module docs), and
/// tells the caller how to block: `true` to wait inside `tokio::task::block_in_place`.
pub(crate) fn check_blocking_call() -> bool {
    match classify() {
        Thread::Worker(which) => {
            report(&which, false);
            false
        }
        Thread::TokioMultiThreadWorker(which) => {
            report(&which, true);
            true
        }
        Thread::Ambiguous(name) => {
            debug!(
                "blocking zklock call on thread {name:?}, a tokio worker or a spawn_blocking \
                 thread (enable zklock's `tokio` feature to tell them apart)"
            );
            false
        }
        Thread::Other => false,
    }
}

/// What the calling thread is, as far as a blocking call is concerned.
#[derive(Debug, PartialEq, Eq)]
enum Thread {
    /// An async runtime's worker: blocking here can deadlock.
    Worker(String),
    /// A tokio multi-thread runtime's worker, which `block_in_place` can hand off.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    TokioMultiThreadWorker(String),
    /// Named like a tokio worker, but it may be a blocking-pool thread.
    Ambiguous(String),
    /// Anything else.
    Other,
}

fn classify() -> Thread {
    #[cfg(feature = "tokio")]
    if let Some(index) = tokio::runtime::worker_index() {
        use tokio::runtime::{Handle, RuntimeFlavor};
        return match Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(RuntimeFlavor::MultiThread) => Thread::TokioMultiThreadWorker(format!(
                "tokio multi-thread runtime, worker {index}"
            )),
            _ => Thread::Worker(format!("tokio current-thread runtime, worker {index}")),
        };
    }
    let current = thread::current();
    let Some(name) = current.name() else {
        return Thread::Other;
    };
    by_name(name, cfg!(feature = "tokio"))
}

/// Classifies a thread by its name; `tokio_asked` when tokio itself was asked (and said no).
fn by_name(name: &str, tokio_asked: bool) -> Thread {
    if WORKER_NAMES.iter().any(|w| name.starts_with(w)) {
        Thread::Worker(format!("thread {name:?}"))
    } else if !tokio_asked && TOKIO_NAMES.iter().any(|w| name.starts_with(w)) {
        Thread::Ambiguous(name.to_owned())
    } else {
        Thread::Other
    }
}

fn report(which: &str, handed_off: bool) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if WARNED.swap(true, Ordering::Relaxed) {
        debug!("blocking zklock call on an async worker thread ({which})");
        return;
    }
    let risk = if handed_off {
        "it waits in block_in_place, which costs a thread and stalls this task's other futures"
    } else {
        "this can deadlock the program"
    };
    let message = format!(
        "blocking zklock call on an async worker thread ({which}): {risk}; use the _async \
         calls (lock_async, ...) in async code, or spawn_blocking"
    );
    // Once per process, where it is seen without a logger too.
    eprintln!("zklock: warning: {message}");
    warn!("{message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tell_only_unambiguous_workers() {
        assert!(matches!(
            by_name("async-std/runtime", false),
            Thread::Worker(_)
        ));
        assert!(matches!(
            by_name("async-global-executor-3", true),
            Thread::Worker(_)
        ));
        assert!(matches!(by_name("smol-1", false), Thread::Worker(_)));
        // tokio's blocking pool shares its workers' name: never a warning by name.
        assert_eq!(
            by_name("tokio-runtime-worker", false),
            Thread::Ambiguous("tokio-runtime-worker".into())
        );
        // With the feature tokio itself answered no: a blocking-pool thread.
        assert_eq!(by_name("tokio-runtime-worker", true), Thread::Other);
        assert_eq!(by_name("main", false), Thread::Other);
        assert_eq!(by_name("blocking-1", false), Thread::Other);
    }
}
