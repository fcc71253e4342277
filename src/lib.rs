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
//!         // ... touch the shared resource; between steps, `guard.lease_state()` is the
//!         // check that sends nothing (see "What a holder must do") ...
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
//!   inspection (every recipe's `contenders()` and `break_contender()`, [`mod@inspect`]).
//!
//! Every kind of acquisition comes in the same seven forms, here for the mutex's `lock`
//! (the read/write lock's `read` and `write`, the semaphore's `acquire` and
//! `acquire_many(count)`, the multi-lock's `lock` and the election's `participate` alike):
//!
//! | | blocks until held | never waits | up to a timeout | as a [`Wait`] says (timeout, [`CancelToken`]) |
//! |---|---|---|---|---|
//! | blocking | [`lock`](DistributedMutex::lock) | [`try_lock`](DistributedMutex::try_lock) | [`lock_timeout`](DistributedMutex::lock_timeout) | [`lock_with`](DistributedMutex::lock_with) |
//! | async | [`lock_async`](DistributedMutex::lock_async) | [`try_lock_async`](DistributedMutex::try_lock_async) | a runtime's timeout | [`lock_with_async`](DistributedMutex::lock_with_async) |
//!
//! Every guard ([`LockGuard`], [`Permit`], [`MultiGuard`]) offers the same calls: `unlock`,
//! `unlock_timeout`, `unlock_with`, `unlock_async`, `unlock_with_async`, `state`, `is_held`, `lease_state`, `lease_remaining`, `wait_lost`,
//! `wait_lost_timeout`, `wait_lost_with`, `wait_lost_async`, `fencing`, `tokens` and
//! `session_id`.
//!
//! Contention is not an error: `try_*`, `*_timeout` and `*_with` calls return `Ok(None)`.
//! Failures are one [`Error`]. Every call that talks to ZooKeeper is bounded, blocking
//! acquisitions can be stopped from another thread with a [`CancelToken`]
//! (`lock_with(Wait::forever().cancel_on(&token))`), and [`Client::close`] wakes every
//! blocked call.
//!
//! # What a holder must do
//! A holder can lose its lock without noticing at once: a long GC pause, a `SIGSTOP`, a
//! partition longer than the session timeout. zklock gives three layers against acting on a
//! lost lock ([`guide::guarantees`] has the details and the full table of failures):
//!
//! 1. **Check the lease.** Every check answers without waiting for a round trip, decided when
//!    called on the monotonic clock: `Held` only while less than 2/3 of the session timeout
//!    has passed since the send time of the latest write or sync the leader answered (a
//!    keepalive `sync` renews it after 1/3 of the timeout), so it turns false before the
//!    server can expire the session and hand the lock on, even if this process was frozen or
//!    zklock's network thread stalled. Treat `Suspended` as "stop touching the resource until
//!    `Held` again" and `Lost` as final. What each check costs and sees:
//!
//!    | check | requests sent | watches set | sees |
//!    |---|---|---|---|
//!    | [`LockGuard::lease_state`], [`LockGuard::lease_remaining`] | none | none | the lease: frozen process, outage, stalled thread, known expiry, `close()`; someone deleting the node only once a watch is set |
//!    | [`LockGuard::is_held`], [`LockGuard::state`] | up to two per node for the guard's first call (a watch set in the background, removed before the release), none after | one per node | also someone deleting the node ([`break_contender`](DistributedMutex::break_contender)), as soon as the server reports it |
//!    | [`LockGuard::wait_lost`] and its forms | as `is_held` | as `is_held` | as `is_held`, without polling |
//!
//!    The cheap check between steps is `lease_state()` (or `lease_remaining()` against the
//!    time the next step needs): on short per-entity holds, a call per hold costs nothing
//!    measurable, where the first `is_held()` of each guard cost 6-27% of the cycles per
//!    second ([`guide::performance`]). A lock made
//!    [`revocable`](DistributedMutex::revocable), and an election, watch from the start, so
//!    there every check sees a broken node at no extra cost.
//! 2. **Write ZooKeeper data through the lock.** [`LockGuard::fenced_set_data`],
//!    [`LockGuard::fenced_delete`] and [`LockGuard::transaction`] are applied by the server
//!    only while our lock node exists; a stale holder's write is refused
//!    ([`Error::LockLost`]).
//! 3. **Pass the fencing token to other stores.** [`LockGuard::fencing`] returns a
//!    [`FencingToken`] that increases from one holder of a lock to the next; a store that
//!    keeps the highest token it has seen *per lock path* and refuses lower ones for that path
//!    is safe from stale holders too. Tokens compare only within one lock path: those of
//!    different paths are unrelated and may be equal, so a store with per-entity locks keys
//!    its highest token by lock path ([`FencingToken`] shows one).
//!
//! ```no_run
//! # fn main() -> zklock::Result<()> {
//! # let client = zklock::Client::connect("127.0.0.1:2181")?;
//! let mutex = zklock::DistributedMutex::new(&client, "/locks/report")?;
//! let guard = mutex.lock()?;
//! let report = b"totals: 42";
//! if guard.lease_state() == zklock::LockState::Held {
//!     // Written only if we still hold the lock when the server executes it.
//!     guard.fenced_set_data("/reports/latest", report)?;
//!     // For another store: send the lock path and `guard.fencing()` along, and let it
//!     // refuse tokens lower than the highest it has seen for that lock path.
//! }
//! # Ok(()) }
//! ```
//!
//! # Speed: local handoff
//! Where many threads or tasks of one process take turns on one lock, turn on
//! [local handoff](DistributedMutex::local_handoff) (also
//! [`DistributedRwLock::local_handoff`] for writers): the callers of one [`Client`] queue in
//! the process behind one lock node, and a release passes the lock to the next local caller
//! without a request to the server. On one shared lock it ran at 32,034–33,172
//! acquisitions/s (`examples/bench.rs hot`, two sessions of 8 threads, batch 128) against 778
//! without it ([`guide::performance`]).
//! Each guard still has its own state, lease, fenced writes and a token one higher than the
//! previous local holder's.
//!
//! ```no_run
//! # fn main() -> zklock::Result<()> {
//! # let client = zklock::Client::connect("127.0.0.1:2181")?;
//! let mutex = zklock::DistributedMutex::new(&client, "/locks/orders")?.local_handoff(128);
//! let guard = mutex.lock()?; // from any number of threads: mostly handed over locally
//! # drop(guard);
//! # Ok(()) }
//! ```
//!
//! **The batch, and its trade-off.** `batch` bounds how long other processes wait: a node of
//! another process waits at most `batch` local holds from its creation. The cost: a process
//! alone sends one listing per `batch / 2` holds and runs at most about `batch` holds per
//! round trip, so a smaller batch lets other processes in sooner and drains slower. 128 is the
//! suggested batch: it drained 10,000 queued tasks in a median of 129 ms (32: 208 ms) and
//! kept two busy sessions at 0.05 server requests per acquisition. Do not use it where fairness between
//! processes matters more than throughput (another process waits up to `batch` holds where it
//! would wait one), where each caller should queue on the server like a caller of another
//! process (a caller's place is among its own process's callers), or for locks taken once per
//! path (per-entity locks: there is nobody local to hand to). Off by default.
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
//! tokio with two workers, three tasks are enough to deadlock). zklock says so, once per
//! process on stderr (seen without a logger) and as a `warn!`, when a blocking call runs on a
//! runtime's worker: with the `tokio` feature it asks tokio, which tells a worker (of a
//! multi-thread or a current-thread runtime) from a `spawn_blocking` thread, and on a
//! multi-thread worker it waits inside `tokio::task::block_in_place`, so the call cannot
//! starve the task that would release the lock. Without the feature it goes by thread names
//! where they are unambiguous (async-std, async-global-executor, `smol-`); tokio names its
//! blocking-pool threads like its workers, so tokio threads are not warned about.
//! Async code uses the `_async` calls below.
//!
//! # Async
//! Every call that does I/O or waits has an async form with the same name plus `_async`,
//! returning a `Send` future and the same owned types:
//! - acquisitions: [`DistributedMutex::lock_async`], [`DistributedRwLock::read_async`] and
//!   [`DistributedRwLock::write_async`], [`Semaphore::acquire_async`] and
//!   [`Semaphore::acquire_many_async`], [`MultiLock::lock_async`],
//!   [`LeaderElection::participate_async`], each with its `try_` and `_with` forms (a
//!   timeout is the runtime's, or a [`Wait`]);
//! - on guards: [`LockGuard::unlock_async`], [`LockGuard::wait_lost_async`],
//!   [`LockGuard::wait_revocation_async`], [`LockGuard::fenced_set_data_async`],
//!   [`LockGuard::fenced_delete_async`] and [`FencedTransaction::commit_async`] (and the
//!   first two on [`Permit`] and [`MultiGuard`]);
//! - inspection and operator calls: every recipe's `contenders_async` and
//!   `break_contender_async` (e.g. [`DistributedMutex::contenders_async`]),
//!   [`DistributedMutex::request_revocation_async`] (and the read/write lock's),
//!   [`LeaderElection::current_leader_async`], [`Client::inspect_async`];
//! - following an election's leader: [`LeaderElection::observe`] gives an
//!   [`inspect::LeaderWatch`], whose [`next_async`](inspect::LeaderWatch::next_async) returns
//!   each new leader as a watch reports it;
//! - stopping on a [`CancelToken`] (the same one the blocking calls stop on):
//!   [`CancelToken::cancelled`], a future ready once it is cancelled;
//! - the client: [`ClientBuilder::connect_async`], [`Client::close_async`],
//!   [`Client::close_with_async`], [`Client::wait_state_change_async`],
//!   [`Client::wait_state_change_with_async`], [`Client::get_data_async`],
//!   [`Client::set_data_async`], [`Client::children_async`].
//!
//! They run the same protocol core as the blocking calls (which wait on the very same futures
//! on their own thread), on any executor: tokio (multi- or current-thread), smol,
//! `futures::executor`; zklock depends on none of them. There are no `_timeout_async` forms:
//! a runtime's timeout (or `select!`) drops the future, which is always safe.
//!
//! Cancelling is dropping the future: at any await point, a queued node is withdrawn in the
//! background, a watch the call set is removed, and a lock taken at that moment released (a
//! write already sent, such as `set_data_async` or `break_contender_async`, may or may not
//! have been applied, as after a lost connection). So
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
//! with shutdown, and a clean close on Ctrl-C. `examples/async_leader.rs` is an election
//! member: it queues once, follows the leader while it waits, leads, and steps down on
//! SIGTERM.
//!
//! # Cargo features
//! - `tls`: TLS to the servers' secure port (`ClientBuilder::tls`).
//! - `sasl`: SASL DIGEST-MD5 authentication (`ClientBuilder::sasl_digest_md5`).
//! - `tokio`: tells a blocking call on a tokio worker from one on a `spawn_blocking` thread
//!   (warned about, see [Threads](#threads)) and keeps it from deadlocking a multi-thread
//!   runtime. Needs tokio 1.54 and so Rust 1.85.
//! - `signals`: `Client::close_on_signals`, which releases every lock at once on SIGTERM or
//!   SIGINT ([`guide::operating`]).
//! - `metrics`: metrics through the [`metrics`](https://docs.rs/metrics) facade (0.24): wait
//!   and hold histograms, acquisitions and lost locks by cause, session state, reconnects and
//!   expirations (names and labels in [`mod@metrics`]).
//!
//! Digest authentication and creator-only ACLs ([`ClientBuilder::auth_digest`],
//! [`ClientBuilder::acl`], [`acl::NodeAcl`]) need no feature ([`guide::security`]).
//!
//! # Modules
//! The crate root holds the locks, their guards, the [`Client`], [`Error`], [`Wait`] and the
//! fencing types; the rest lives in small modules: [`mod@inspect`] (looking at a lock's
//! queue), [`acl`] (who may touch the nodes), [`client`] (session state, listener events,
//! [`client::WeakClient`]), [`error`] (what an error carries), [`mod@metrics`].
//!
//! The `zklock` command-line tool (run a command under a lock, inspect, break; [`guide::cli`])
//! is a crate of its own, `zklock-cli`, so none of its dependencies reach library users:
//! `cargo install zklock-cli`.
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

pub mod client;
mod core;
// The simulation is test code: compiled for zklock's own tests and examples only (the
// `simulation` feature, switched on by the self dev-dependency in Cargo.toml), so a user's
// build, the CLI's and a release build contain none of it.
#[cfg(any(test, feature = "simulation"))]
mod sim;

/// The deterministic simulation of the protocol core, for `examples/simulate.rs`:
/// not part of the API, no stability promised.
#[cfg(feature = "simulation")]
#[doc(hidden)]
pub mod __simulation {
    pub use crate::sim::{simulate, Report};
}
pub mod error;
#[cfg(test)]
mod house_plan;
pub mod metrics;
mod random;
mod recipes;
mod rt;
mod session;
mod wire;
mod znode;

pub use crate::core::held::DEFAULT_RELEASE_TIMEOUT;
pub use crate::core::standing::LockState;
pub use crate::core::wait::Wait;
pub use client::builder::{ClientBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_SESSION_TIMEOUT};
#[cfg(feature = "signals")]
pub use client::shutdown::CloseOnSignals;
pub use client::Client;
pub use error::{Error, Result};
pub use recipes::election::{LeaderElection, Leadership};
pub use recipes::fence::FencedTransaction;
pub use recipes::guard::LockGuard;
pub use recipes::multi::{MultiGuard, MultiLock};
pub use recipes::mutex::DistributedMutex;
pub use recipes::rwlock::{DistributedRwLock, ReadGuard, WriteGuard};
pub use recipes::semaphore::{Permit, Semaphore};
pub use rt::cancel::CancelToken;
pub use znode::token::FencingToken;

pub mod inspect {
    //! Looking at a lock's queue from outside: who holds, who waits, and what kind of lock a
    //! path is.
    //!
    //! Each recipe lists its queue with `contenders()` ([`DistributedMutex::contenders`],
    //! [`DistributedRwLock::contenders`], [`Semaphore::contenders`],
    //! [`LeaderElection::contenders`]), as [`Contender`]s with their [`Role`] and the
    //! [`Owner`] data stored in their node, and deletes a stale one with `break_contender()`.
    //! [`Client::inspect`] looks at any lock path without knowing its recipe: an
    //! [`Inspection`] of [`InspectedNode`]s, of the [`LockKind`] its children show. Each of
    //! these has an `_async` form. [`LeaderElection::observe`] follows an election's leader
    //! as it changes: a [`LeaderWatch`] yielding [`LeaderChange`]s.
    //!
    //! [`DistributedMutex::contenders`]: crate::DistributedMutex::contenders
    //! [`DistributedRwLock::contenders`]: crate::DistributedRwLock::contenders
    //! [`Semaphore::contenders`]: crate::Semaphore::contenders
    //! [`LeaderElection::contenders`]: crate::LeaderElection::contenders
    //! [`Client::inspect`]: crate::Client::inspect
    //! [`LeaderElection::observe`]: crate::LeaderElection::observe

    pub use crate::core::kind::Role;
    pub use crate::recipes::catalogue::LockKind;
    pub use crate::recipes::inspect::{Contender, InspectedNode, Inspection, Owner};
    pub use crate::recipes::observe::{LeaderChange, LeaderWatch};
}

pub mod acl {
    //! Who may touch zklock's nodes: the ACL of lock nodes ([`NodeAcl`], set with
    //! [`ClientBuilder::acl`](crate::ClientBuilder::acl)), of the parents zklock creates
    //! ([`ParentAcl`], [`ClientBuilder::parent_acl`](crate::ClientBuilder::parent_acl)), and the
    //! [`Permission`] a refused call lacked ([`Error::NoAuth`](crate::Error::NoAuth)). See
    //! [`guide::security`](crate::guide::security).

    pub use crate::error::Permission;
    pub use crate::session::security::{NodeAcl, ParentAcl};
}
