//! A node held through a simulated session, as the core's acquisitions of several keep it
//! (see `core/hold.rs`): released in the background when released or dropped, as a guard's
//! `Held` is on a real session.

use std::future::Future;
use std::time::Duration;

use crate::core::claim::Claimed;
use crate::core::hold::{Hold, Holds};
use crate::core::seam::{SessionFacts, ZkSession};
use crate::session::Liveness;

use super::client::SimSession;

/// A claimed node of a simulated session, released (in the background) once.
pub(crate) struct SimHeld {
    pub(crate) claimed: Claimed<SimSession>,
    released: bool,
}

impl Hold for SimHeld {
    fn node_path(&self) -> &str {
        &self.claimed.node_path
    }
    fn liveness(&self) -> Liveness {
        self.claimed.session.liveness()
    }
    fn release_in_background(&mut self, done: impl Send + 'static) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        if self.liveness() != Liveness::Ended {
            let session = &self.claimed.session;
            session.withdraw_in_background(&self.claimed.node_path, done);
        }
    }
    /// Handed to the background at once: what a release waits for changes no one's view of
    /// the lock (the server deletes the node when it deletes it).
    fn release_logged(&mut self, _wait: Duration) -> impl Future<Output = ()> + Send + '_ {
        self.release_in_background(());
        std::future::ready(())
    }
}

impl Drop for SimHeld {
    fn drop(&mut self) {
        self.release_in_background(());
    }
}

impl Holds for SimSession {
    type Held = SimHeld;
    fn hold(claimed: Claimed<SimSession>, _lock_path: &str) -> SimHeld {
        SimHeld {
            claimed,
            released: false,
        }
    }
}
