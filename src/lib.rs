//! Distributed locks on Apache ZooKeeper with a blocking API as plain as `std::sync::Mutex`.
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock::{Client, DistributedMutex};
//!
//! fn main() -> zklock::Result<()> {
//!     let client = Client::connect("127.0.0.1:2181")?;
//!     let mutex = DistributedMutex::new(&client, "/locks/orders")?;
//!
//!     {
//!         let guard = mutex.lock()?; // blocks until this process holds the lock
//!         println!("holding {} with fencing token {}", guard.node_path(), guard.fencing());
//!         // ... touch the shared resource, checking guard.is_held() between steps ...
//!     } // released here
//!
//!     match mutex.lock_timeout(Duration::from_millis(500))? {
//!         Some(_guard) => println!("got it"),
//!         None => println!("busy for 500 ms"),
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # Recipes
//! All recipes share one waiting core and the same failure behaviour, and use Apache Curator's
//! node layouts, so Java services using Curator can take part in the same locks
//! ([`guide::protocol`]):
//! - [`DistributedMutex`] (Curator `InterProcessMutex`), returning a [`LockGuard`];
//! - [`DistributedRwLock`] (`InterProcessReadWriteLock`): [`ReadGuard`], [`WriteGuard`];
//! - [`Semaphore`] (`InterProcessSemaphoreV2`): [`Permit`];
//! - [`MultiLock`] (`InterProcessMultiLock`): several locks in a deadlock-free order;
//! - [`LeaderElection`] (`LeaderLatch`): [`Leadership`];
//! - revocation ([`DistributedMutex::revocable`], [`DistributedMutex::request_revocation`]) and
//!   inspection (`contenders()`, `leases()`, `participants()`, returning [`Contender`]s).
//!
//! Contention is not an error: `try_*` and `*_timeout` calls return `Ok(None)`. Failures are
//! one [`Error`]. Every call that talks to ZooKeeper is bounded, blocking acquisitions can be
//! stopped from another thread with a [`CancelToken`], and [`Client::close`] wakes every
//! blocked call.
//!
//! # What a holder must do
//! A holder can lose its lock without noticing at once: a long GC pause, a `SIGSTOP`, a
//! partition longer than the session timeout. zklock gives three layers against acting on a
//! lost lock ([`guide::guarantees`] has the details and the full table of failures):
//!
//! 1. **Check the lease.** [`LockGuard::is_held`] and [`LockGuard::state`] answer without a
//!    round trip, decided when called on the monotonic clock: `Held` only while less than 2/3
//!    of the session timeout has passed since the send time of the latest write or sync the
//!    leader answered (a keepalive `sync` renews it after 1/3 of the timeout), so they turn
//!    false before the server can expire the session and hand the lock on, even if this
//!    process was frozen or zklock's network thread stalled. Treat `Suspended` as "stop
//!    touching the resource until `Held` again" and `Lost` as final.
//! 2. **Write ZooKeeper data through the lock.** [`LockGuard::fenced_set_data`],
//!    [`LockGuard::fenced_delete`] and [`LockGuard::transaction`] are applied by the server
//!    only while our lock node exists; a stale holder's write is refused
//!    ([`Error::LockLost`]).
//! 3. **Pass the fencing token to other stores.** [`LockGuard::fencing`] returns a
//!    [`FencingToken`] that increases from one holder to the next; a store that refuses lower
//!    tokens than it has seen is safe from stale holders too.
//!
//! ```no_run
//! # fn main() -> zklock::Result<()> {
//! # let client = zklock::Client::connect("127.0.0.1:2181")?;
//! let mutex = zklock::DistributedMutex::new(&client, "/locks/report")?;
//! let guard = mutex.lock()?;
//! let report = b"totals: 42";
//! if guard.is_held() {
//!     // Written only if we still hold the lock when the server executes it.
//!     guard.fenced_set_data("/reports/latest", report)?;
//!     // For another store: send `guard.fencing()` along, and let it refuse stale ones.
//! }
//! # Ok(()) }
//! ```
//!
//! # Threads
//! [`Client`] is a cheap handle to one session; clone it freely. [`DistributedMutex`] and
//! [`LockGuard`] are `Send + Sync`. Guards own what they need (no lifetime): return them from
//! functions or tasks, move them across threads and tasks. Locks are not reentrant:
//! as with `std::sync::Mutex`, locking again while holding waits. zklock does its network I/O
//! and background work on threads of its own ([`guide::protocol`] lists them) and never runs
//! the application's code (listeners, loggers, metrics recorders) on its network or runtime
//! threads.
//!
//! The blocking methods block the calling thread. Never call them on a worker thread of an
//! async runtime: a `lock()` there can starve the very task that would release the lock (on
//! tokio with two workers, three tasks are enough to deadlock). zklock logs a warning when a
//! blocking call runs on a thread that a runtime recognisably named (tokio, async-std, smol).
//! Async code uses the `_async` calls below.
//!
//! # Async
//! Every call that can wait has an async twin with the same name plus `_async`, returning a
//! `Send` future and the same owned guards: [`DistributedMutex::lock_async`],
//! [`DistributedRwLock::read_async`] and [`DistributedRwLock::write_async`],
//! [`Semaphore::acquire_async`] and [`Semaphore::acquire_many_async`],
//! [`MultiLock::lock_async`], [`LeaderElection::participate_async`], each with its `try_`,
//! `_timeout`, `_cancellable` and `_with` forms; on guards [`LockGuard::unlock_async`],
//! [`LockGuard::wait_lost_async`], [`LockGuard::fenced_set_data_async`],
//! [`LockGuard::fenced_delete_async`] and [`FencedTransaction::commit_async`];
//! [`ClientBuilder::connect_async`] and [`Client::close_async`]. They run the same protocol
//! core as the blocking calls (which wait on it on their own thread), on any executor: tokio
//! (multi- or current-thread), smol, `futures::executor`; zklock depends on none of them.
//!
//! Cancelling is dropping the future: at any await point, a queued node is withdrawn in the
//! background, its watch removed, and a lock taken at that moment released. So
//! `tokio::time::timeout` and `select!` just work. Guards taken by an async call release in
//! the background when dropped (a drop must not block a worker); await `unlock_async` for
//! the outcome.
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock::{Client, DistributedMutex};
//!
//! # async fn run() -> zklock::Result<()> {
//! let client = Client::builder("127.0.0.1:2181").connect_async().await?;
//! let mutex = DistributedMutex::new(&client, "/locks/orders")?;
//! match tokio::time::timeout(Duration::from_secs(5), mutex.lock_async()).await {
//!     Ok(guard) => {
//!         let guard = guard?;
//!         tokio::select! {
//!             _ = tokio::time::sleep(Duration::from_millis(10)) => {} // the work
//!             lost = guard.wait_lost_async() => eprintln!("lock {lost:?}: stop"),
//!         }
//!         guard.unlock_async().await?;
//!     }
//!     Err(_) => eprintln!("busy for 5 s (our queued node is withdrawn)"),
//! }
//! client.close_async().await
//! # }
//! ```
//!
//! `examples/async_service.rs` is a whole tokio service: many tasks, a timeout, a `select!`
//! with shutdown, and a clean close on Ctrl-C.
//!
//! # Cargo features
//! - `tls`: TLS to the servers' secure port (`ClientBuilder::tls`).
//! - `sasl`: SASL DIGEST-MD5 authentication (`ClientBuilder::sasl_digest_md5`).
//! - `signals`: `Client::close_on_signals`, which releases every lock at once on SIGTERM or
//!   SIGINT ([`guide::operating`]).
//! - `metrics`: metrics through the [`metrics`](https://docs.rs/metrics) facade (0.24): wait
//!   and hold histograms, acquisitions and lost locks by cause, session state, reconnects and
//!   expirations (names and labels in [`mod@metrics`]).
//! - `cli`: the `zklock` command-line tool (run a command under a lock, inspect, break;
//!   [`guide::cli`]).
//!
//! Digest authentication and creator-only ACLs ([`ClientBuilder::auth_digest`],
//! [`ClientBuilder::acl`], [`NodeAcl`]) need no feature ([`guide::security`]).
//!
//! # The guide
//! The long form lives in [`guide`]:
//! - [`guide::guarantees`]: what a guard promises, what holders and waiters see in every
//!   failure, and the three layers against a stale holder;
//! - [`guide::protocol`]: the lock recipe, Curator interop, the wire and zklock's threads;
//! - [`guide::security`]: authentication, ACLs, TLS;
//! - [`guide::operating`]: session state, graceful shutdown, metrics, log lines, connect errors;
//! - [`guide::cli`]: the `zklock` command-line tool;
//! - [`guide::performance`], [`guide::testing`], [`guide::nemesis`]: figures, the test suite
//!   and the Jepsen-style test.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod guide;

/// The README's examples, compiled as doctests so that they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod client;
mod core;
mod sim;

/// The deterministic simulation of the protocol core (issue 34), for `examples/simulate.rs`:
/// not part of the API, no stability promised.
#[doc(hidden)]
pub mod __simulation {
    pub use crate::sim::{simulate, Report};
}
mod error;
#[cfg(test)]
mod house_plan;
pub mod metrics;
mod recipes;
mod rt;
mod session;
mod wire;
mod znode;

pub use crate::core::held::DEFAULT_RELEASE_TIMEOUT;
pub use crate::core::kind::Role;
pub use crate::core::standing::LockState;
pub use crate::core::wait::Wait;
pub use client::builder::{ClientBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_SESSION_TIMEOUT};
#[cfg(feature = "signals")]
pub use client::shutdown::CloseOnSignals;
pub use client::state::{SessionState, StateChange};
pub use client::{Client, WeakClient};
pub use error::{ConnectCause, Error, HostFailure, Permission, Result};
pub use recipes::catalogue::LockKind;
pub use recipes::election::{LeaderElection, Leadership};
pub use recipes::fence::FencedTransaction;
pub use recipes::guard::LockGuard;
pub use recipes::inspect::{Contender, InspectedNode, Inspection, Owner};
pub use recipes::multi::{MultiGuard, MultiLock};
pub use recipes::mutex::DistributedMutex;
pub use recipes::rwlock::{DistributedRwLock, ReadGuard, WriteGuard};
pub use recipes::semaphore::{Permit, Semaphore};
pub use rt::cancel::CancelToken;
pub use session::security::{NodeAcl, ParentAcl};
pub use znode::token::FencingToken;
