//! A deterministic simulation of ZooKeeper and of the network between it and zklock's
//! sessions, behind the core's [`ZkSession`](super::seam::ZkSession) seam.
//!
//! - [`world`] (one file per concept): ZooKeeper itself is zklock-server's model (the tree,
//!   sessions and their expiry, watches), driven on the virtual clock; around it each session's
//!   connection (loss with requests whose outcome is unknown, reconnects that keep or lose the
//!   session and may leave a watch out), the clients' watch registrations, the operator, and
//!   the virtual clock;
//! - [`client`]: a simulated session implementing the seam the way the real session does;
//! - the seeded single-threaded scheduler that runs several processes' acquisitions through
//!   the real core against it, with faults, checking the invariants after every step, sits
//!   above the recipes: `crate::sim`.
//!
//! The unit tests of the core drive the same world step by step through [`Sim`].

pub(crate) mod client;
pub(crate) mod held;
#[cfg(test)]
pub(crate) mod store;
pub(crate) mod world;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use parking_lot::Mutex;

use client::{Shared, SimSession};
use world::World;

/// The world driven by hand: unit tests poll a future, let every request and message move,
/// and poll again.
#[derive(Clone)]
pub(crate) struct Sim {
    pub(crate) world: Shared,
}

/// The session timeout of simulated sessions unless said otherwise.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(6);

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

#[cfg_attr(not(test), allow(dead_code))]
impl Sim {
    pub(crate) fn new(seed: u64) -> Sim {
        Sim {
            world: Arc::new(Mutex::new(World::new(seed))),
        }
    }

    /// A new session.
    pub(crate) fn session(&self) -> Arc<SimSession> {
        let id = self.world.lock().open_session(TIMEOUT);
        Arc::new(SimSession::new(&self.world, id))
    }

    /// Moves one request or message, the first session's first; `false` if none can move.
    pub(crate) fn pump(&self) -> bool {
        let mut world = self.world.lock();
        for id in world.movable() {
            if world.deliver(id) || world.process(id) {
                return true;
            }
        }
        false
    }

    /// Polls `future` until it ends, or until it waits with nothing left to move (`None`).
    pub(crate) fn poll<F: Future + ?Sized>(&self, mut future: Pin<&mut F>) -> Option<F::Output> {
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return Some(output);
            }
            if !self.pump() {
                return None;
            }
        }
    }

    /// Moves everything that can move (no future polled).
    pub(crate) fn settle(&self) {
        while self.pump() {}
    }

    /// Polls `future` until it ends, moving the clock whenever nothing else can move;
    /// `None` if it waits with nothing left to happen.
    pub(crate) fn run<F: Future + ?Sized>(&self, mut future: Pin<&mut F>) -> Option<F::Output> {
        loop {
            if let Some(output) = self.poll(future.as_mut()) {
                return Some(output);
            }
            let mut world = self.world.lock();
            let next = world.next_due()?;
            world.advance(next);
        }
    }
}
