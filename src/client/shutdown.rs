//! Graceful shutdown on SIGTERM and SIGINT, on request only (feature `signals`): zklock never
//! installs a signal handler that its user did not ask for.

use std::thread::JoinHandle;
use std::time::Duration;

use log::{debug, warn};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use crate::client::Client;
use crate::error::{Error, Result};

/// How long closing may take before the process ends anyway: the server's confirmation that
/// the session (and with it every lock node) is gone usually comes in one round trip.
const CLOSE_BOUND: Duration = Duration::from_secs(2);

/// The handler installed by [`Client::close_on_signals`]; it stays installed while this value
/// lives. Dropping it stops closing the client on signals (and ends its thread).
#[must_use = "dropping it stops closing the client on SIGTERM/SIGINT"]
#[derive(Debug)]
pub struct CloseOnSignals {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

impl Client {
    /// On SIGTERM or SIGINT, closes this client, which releases every lock held through it at
    /// once (the server deletes the session's nodes as it closes it, so the next contender
    /// acquires without waiting for the session timeout), and then ends the process as the
    /// signal would have (killed by it, exit status 128+N in a shell).
    ///
    /// The one line a threaded program needs so that a stop by systemd, Kubernetes or Ctrl-C
    /// hands its locks (or leadership) over at once instead of after the session timeout:
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// let _shutdown = client.close_on_signals()?;
    /// let leadership = zklock::LeaderElection::new(&client, "/services/indexer")?.participate()?;
    /// // ... lead until stopped ...
    /// # drop(leadership); Ok(()) }
    /// ```
    ///
    /// The signals are handled on a thread of the helper's own (`zklock-signals`), through
    /// `signal-hook`, so this works whatever the other threads are doing. Closing is bounded
    /// (about two seconds if the server does not answer; the session then ends on the server
    /// after its timeout). Calls blocked on the client meanwhile return
    /// [`Error::Closed`], and held locks read
    /// [`LockState::Lost`](crate::LockState::Lost) (counted as lost with cause `closed` in the
    /// metrics).
    ///
    /// For a program with shutdown work of its own (finish a request, flush), do not use this:
    /// register for the signals yourself (`signal-hook`, `ctrlc`, `tokio::signal`), stop the
    /// work, then call [`Client::close`] (or drop the guards) before exiting. An async program
    /// does the same from its signal future: `tokio::signal::ctrl_c().await` then
    /// `client.close_async().await`.
    ///
    /// The handler does not keep the client alive; if the client is gone when a signal comes,
    /// the process just ends as the signal would have.
    ///
    /// # Errors
    /// [`Error::Runtime`] if the handler or its thread cannot be set
    /// up.
    pub fn close_on_signals(&self) -> Result<CloseOnSignals> {
        let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(|e| Error::Runtime {
            reason: format!("installing SIGTERM/SIGINT handlers: {e}"),
        })?;
        let handle = signals.handle();
        let client = self.downgrade();
        let thread = std::thread::Builder::new()
            .name("zklock-signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    if let Some(client) = client.upgrade() {
                        debug!("signal {signal}: closing the client, releasing its locks");
                        if let Err(err) = client.close_timeout(CLOSE_BOUND) {
                            warn!("closing the client on signal {signal}: {err}");
                        }
                    }
                    if let Err(err) = signal_hook::low_level::emulate_default_handler(signal) {
                        warn!("ending the process on signal {signal}: {err}");
                        std::process::exit(128 + signal);
                    }
                }
            })
            .map_err(|e| Error::Runtime {
                reason: format!("starting the signal thread: {e}"),
            })?;
        Ok(CloseOnSignals {
            handle,
            thread: Some(thread),
        })
    }
}

impl Drop for CloseOnSignals {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
