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
//! node layouts, so Java services using Curator can take part in the same locks:
//! - [`DistributedMutex`] (Curator `InterProcessMutex`), returning a [`LockGuard`];
//! - [`DistributedRwLock`] (`InterProcessReadWriteLock`): [`ReadGuard`], [`WriteGuard`];
//! - [`Semaphore`] (`InterProcessSemaphoreV2`): [`Permit`];
//! - [`MultiLock`] (`InterProcessMultiLock`): several locks in a deadlock-free order;
//! - [`LeaderElection`] (`LeaderLatch`): [`Leadership`];
//! - revocation ([`DistributedMutex::revocable`], [`DistributedMutex::request_revocation`]) and
//!   inspection (`contenders()`, `leases()`, `participants()`, returning [`Contender`]s).
//!
//! # Cargo features
//! - `tls`: TLS to the servers' secure port (`ClientBuilder::tls`).
//! - `sasl`: SASL DIGEST-MD5 authentication (`ClientBuilder::sasl_digest_md5`).
//! - `cli`: the `zklock` command-line tool (run a command under a lock, inspect, break).
//! - `metrics`: metrics through the [`metrics`](https://docs.rs/metrics) facade (0.24): wait
//!   and hold histograms, acquisitions and lost locks by cause, session state, reconnects and
//!   expirations (names and labels in the README's "Operating zklock").
//!
//! Digest authentication and creator-only ACLs ([`ClientBuilder::auth_digest`],
//! [`ClientBuilder::acl`], [`NodeAcl`]) need no feature.
//!
//! # How it works
//! Each contender creates an ephemeral sequential node under the lock path; the lowest
//! sequence number holds the lock and every other contender watches only the node just before
//! its own, so a release wakes one waiter. A crashed process's node vanishes with its session.
//! Node names follow Apache Curator's protected form (`_c_<uuid>-lock-<seq>`): a node whose
//! `create` reply was lost is found again by its uuid instead of being created twice, and
//! Curator's `InterProcessMutex` on the same path excludes zklock and vice versa.
//!
//! # Failures
//! - Every call that talks to ZooKeeper is bounded: [`DistributedMutex::lock_timeout`] and
//!   [`DistributedMutex::try_lock`] return in time even when no server is reachable, and
//!   [`DistributedMutex::lock`] returns [`Error::SessionExpired`] once the session is gone.
//! - A holder must check [`LockGuard::is_held`] (or [`LockGuard::state`]): decided when
//!   called from a lease on the monotonic clock, it turns false once 2/3 of the session
//!   timeout has passed since the send time of the latest write or sync the server answered, before
//!   the server can expire the session and give the lock to another process, even if this
//!   process was frozen or zklock's network thread stalled. Use [`LockGuard::fencing`]
//!   where the resource can check it.
//! - Blocking acquisitions can be stopped from another thread with a [`CancelToken`]
//!   (`lock_cancellable`, `*_with(Wait)`), and [`Client::close`] ends the session and wakes
//!   every blocked call with [`Error::Closed`]. The shutdown recipe: on SIGTERM, cancel (or
//!   close), join your threads, exit; `std::process::exit` runs no destructors, so close the
//!   client before it.
//! - Guards own what they need (no lifetime): return them from functions or `spawn_blocking`,
//!   move them across threads and tasks. Locks are not reentrant: as with `std::sync::Mutex`,
//!   locking again while holding waits.
//! - After `fork()`, a client made before the fork returns [`Error::Forked`] in the child (its
//!   threads stayed in the parent); a new [`Client`] made in the child works.
//! - Releasing never panics. Dropping a guard blocks at most the
//!   [release timeout](ClientBuilder::release_timeout) (one second by default), even with a
//!   frozen or slow server; a delete not confirmed by then is retried in the background until
//!   the node is gone or the session has ended. [`LockGuard::unlock`] waits longer (up to the
//!   session timeout) and says when the outcome is unknown ([`Error::OutcomeUnknown`]).
//! - After a session expiry the [`Client`] opens a new session on the next call.
//!
//! # Three layers against a stale holder
//! A holder can lose its lock without noticing at once: a long GC pause, a `SIGSTOP`, a network
//! partition longer than the session timeout. Meanwhile the server expires its session, deletes
//! its node and lets the next contender in, and the old holder, once it runs again, may be in
//! the middle of a write. zklock offers three layers, from the cheapest to the strongest:
//!
//! 1. **The lease: know quickly.** [`LockGuard::is_held`] and [`LockGuard::state`] answer
//!    without asking the server, from the session's lease (see above), and
//!    [`LockGuard::lease_remaining`] says how much of it is left: check it against the time
//!    the next step needs before taking it. Use them to stop work early and to skip writes
//!    that would be refused anyway. They are a belief held by
//!    this process: a check that passed just before the process froze cannot stop the write
//!    that follows it.
//! 2. **Fenced writes: ZooKeeper data stays safe even after a pause.**
//!    [`LockGuard::fenced_set_data`], [`LockGuard::fenced_delete`] and
//!    [`LockGuard::transaction`] send each write in one atomic transaction with a check that
//!    our lock node still exists. The server applies it only if the node is there when the
//!    write is executed, and the node is gone before anyone else can acquire the lock. No
//!    clock or flag of this process takes part, so a holder resumed after its session expired
//!    is refused by the server ([`Error::LockLost`]), even if its client has opened a new
//!    session since.
//! 3. **The fencing token: for stores outside ZooKeeper.** [`LockGuard::fencing`] returns a
//!    [`FencingToken`] that increases from one holder of a lock to the next. A database or
//!    service that remembers the highest token it has seen and refuses lower ones protects its
//!    data the same way. A token is the lock path's generation (its node's creation time)
//!    followed by the holder node's creation zxid, so it keeps increasing when an ensemble is
//!    re-created from scratch and its zxids begin again, provided the servers' clocks are not
//!    set back across that re-creation (see [`FencingToken`]).
//!
//!    **Migrating from `fencing_token()`.** [`LockGuard::fencing_token`] still returns the
//!    zxid alone (an `i64`), which goes *backwards* when an ensemble's data is wiped: a store
//!    keeping the highest one would then refuse every new holder. Send `fencing()` instead, in
//!    one of the forms of [`FencingToken`] (a `u128`, or 32 hex digits that sort as strings);
//!    a store that already holds zxids can compare `(generation, zxid)` pairs and treat a
//!    stored zxid as generation 0.
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
//! [`LockGuard`] are `Send + Sync`. Each session has one I/O thread of zklock's own, which reads
//! replies and watch events, pings and reconnects; the calling thread writes its own requests.
//! zklock's background tasks run on one runtime thread per process. zklock never runs user code
//! on either.
//!
//! Every method here blocks the calling thread. Do not call them on a worker thread of an async
//! runtime: a `lock()` there can starve the very task that would release the lock (on tokio
//! with two workers, three tasks are enough to deadlock). Use `spawn_blocking` for short calls,
//! and keep a blocking `lock()` off the runtime.
//!
//! # Operating it
//! [`Client::state`] says whether the session is [`SessionState::Connected`], `Suspended`,
//! `Expired` or `Closed`, decided when called from the same lease as the guards';
//! [`Client::wait_state_change`] waits for a change, and a listener registered with
//! [`ClientBuilder::on_state_change`] is told of each one on a thread of its own. Each client
//! has a `zklock-state` thread that watches the session and publishes its changes: log lines,
//! metrics (feature `metrics`) and the listener. Both threads end when the client is closed or
//! its last clone dropped (a listener busy at that moment is waited for up to one second). A
//! listener that needs the client should capture a [`WeakClient`] ([`Client::downgrade`]): one
//! holding a [`Client`] keeps the session open until [`Client::close`].
//!
//! Logging goes through the `log` crate, with the lock path, node and session in each message:
//! info when a session is suspended and when it recovers (with how long it was out), warnings
//! on expiry and on a lost lock, debug lines with the wait and hold time of each acquisition.
//! Lines made on zklock's own I/O and runtime threads (reconnects, resets after a malformed
//! frame, a session's end) are queued to a `zklock-log` thread, so a slow logger never stalls
//! the network.
//!
//! [`Error::Connect`] says how long connecting was tried (the connect timeout, whatever the
//! session timeout) and why each host gave no session ([`HostFailure`], [`ConnectCause`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod guide;

mod cancel;
mod client;
mod connect;
mod dial;
mod election;
mod error;
mod fence;
mod guard;
mod inspect;
mod layout;
mod lease;
mod listing;
pub mod metrics;
mod multi;
mod mutex;
mod observe;
mod path;
mod queue;
mod recipe;
mod relay;
mod runtime;
mod rwlock;
mod seam;
mod security;
mod semaphore;
mod session;
#[cfg(feature = "signals")]
mod shutdown;
mod state;
mod token;
mod wait;
mod watch;
mod wire;

pub use cancel::CancelToken;
pub use client::{
    Client, ClientBuilder, WeakClient, DEFAULT_CONNECT_TIMEOUT, DEFAULT_RELEASE_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
};
pub use dial::{ConnectCause, HostFailure};
pub use election::{LeaderElection, Leadership};
pub use error::{Error, Result};
pub use fence::FencedTransaction;
pub use guard::LockGuard;
pub use inspect::{Contender, Owner};
pub use multi::{MultiGuard, MultiLock};
pub use mutex::DistributedMutex;
pub use recipe::{LockState, Role};
pub use rwlock::{DistributedRwLock, ReadGuard, WriteGuard};
pub use security::{NodeAcl, ParentAcl};
pub use semaphore::{Permit, Semaphore};
#[cfg(feature = "signals")]
pub use shutdown::CloseOnSignals;
pub use state::{SessionState, StateChange};
pub use token::FencingToken;
pub use wait::Wait;
