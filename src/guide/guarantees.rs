//! What zklock guarantees, and what holders and waiters see when things fail.
//!
//! - [What a guard promises](#what-a-guard-promises)
//! - [Guarantees and failure semantics](#guarantees-and-failure-semantics): the table
//! - [After an expiry](#after-an-expiry)
//! - [Three layers against a stale holder](#three-layers-against-a-stale-holder): the lease,
//!   fenced writes, the fencing token
//!
//! How the queue itself works (ephemeral sequential nodes, one watch per waiter, Curator's
//! names) is in [`protocol`](super::protocol); the tests that exercise each row below are
//! listed in [`testing`](super::testing), and the nemesis that attacks them all at once in
//! [`nemesis`](super::nemesis).
//!
//! # What a guard promises
//!
//! Every guard ([`LockGuard`], and its aliases [`ReadGuard`], [`WriteGuard`], [`Leadership`];
//! [`Permit`]; [`MultiGuard`]) owns what it needs, with no lifetime: it can outlive the lock
//! object it came from, be returned from a function or a task, and move to any
//! thread or task. It deletes its node on drop (a guard from a blocking call blocks at most the
//! client's [`release_timeout`], 1 s by default, and a delete not confirmed by then goes on in
//! the background; a guard from an `_async` call never blocks: it releases in the background),
//! and offers
//! - [`unlock()`](crate::LockGuard::unlock), which reports the outcome;
//! - [`fencing()`](crate::LockGuard::fencing), a [`FencingToken`]: the lock path's generation, then
//!   the node's creation zxid; increasing from one holder to the next, also across a
//!   re-created ensemble;
//! - [`state()`](crate::LockGuard::state) ([`Held`], [`Suspended`], [`Lost`]) and
//!   [`is_held()`](crate::LockGuard::is_held), decided when called from a lease on the monotonic
//!   clock;
//! - [`lease_state()`](crate::LockGuard::lease_state) and
//!   [`lease_remaining()`](crate::LockGuard::lease_remaining): the lease alone, and how long
//!   the holder can still be sure; they send nothing and set no watch, so they are the check
//!   between steps, while the first `state()`/`is_held()` of a guard sends up to two requests
//!   per node (a watch on it, set and later removed) and so also sees someone deleting the node;
//! - [`wait_lost()`](crate::LockGuard::wait_lost) / [`wait_lost_timeout(d)`](crate::LockGuard::wait_lost_timeout)
//!   to learn of trouble without polling.
//!
//! Releasing never panics. [`LockGuard::unlock`] waits longer than a drop (up to the session
//! timeout) and says when the outcome is unknown ([`Error::OutcomeUnknown`]).
//!
//! One typed [`Error`] (`#[non_exhaustive]`, `Send + Sync + 'static`, works with `?` into
//! `anyhow`): invalid path, argument or connect string, connect failure, connection loss,
//! session expired, lock lost, cancelled, closed, no node, no chroot, node exists, not empty,
//! node changed, outcome unknown (a write whose reply was lost), a client used after `fork()`,
//! ephemeral parent, no auth, auth failed, TLS, zklock's runtime failing, and other ZooKeeper
//! errors with their numeric code. Contention is not an error: `try_*` and `*_timeout` return
//! `Ok(None)`.
//!
//! Every call that talks to ZooKeeper is bounded:
//! [`lock_timeout`](crate::DistributedMutex::lock_timeout) and
//! [`try_lock`](crate::DistributedMutex::try_lock) return in time even when no server is reachable,
//! and [`lock`](crate::DistributedMutex::lock) waits as long as the lock is busy but returns
//! [`Error::SessionExpired`] once its session is gone: no call blocks forever on a dead
//! connection. Blocking acquisitions can be stopped from another thread with a
//! [`CancelToken`] (`*_with(`[`Wait`]`)`), and [`Client::close`] ends the
//! session and wakes every blocked call with [`Error::Closed`].
//!
//! Locks are not reentrant, and like `std::sync::Mutex` a thread that locks again while it holds
//! a guard waits for that guard: use `lock_timeout` or `lock_with` where that can happen.
//! zklock never reports a deadlock it cannot be sure of (async tasks sharing a thread, a guard
//! moved to another thread, several threads on one mutex all simply queue).
//!
//! # Guarantees and failure semantics
//!
//! | event | holder | waiter |
//! |---|---|---|
//! | process crashes or is killed | node vanishes when its session times out; the next waiter acquires | node vanishes likewise; the queue moves on |
//! | connection drops, session survives (server restart, network blip shorter than the session timeout) | `state()` is `Suspended` while disconnected, `Held` again after reconnecting, same node | keeps its place; watches are re-armed and it re-checks the queue on reconnect |
//! | connection silent (hung server, partition) | `Suspended` once 2/3 of the session timeout has passed since the send time of the latest write or sync the server answered (the lease; reads do not count, since a follower cut off from the leader keeps answering them while the leader expires the session — `tests/leases.rs`), or earlier when zklock's transport drops the connection (2/5 of the timeout without a reply) — before the server can expire the session (at 1× the timeout after it last heard from us) and hand the lock on. Measured with a 2 s session through a blackholing proxy: not-held after 0.90 s, the next holder acquired after 2.0–2.1 s | keeps waiting; `lock_timeout` returns on time ([`Error::ConnectionLoss`] if still disconnected then) |
//! | zklock's network thread stalled (a blocking log sink on it, a starved host) | the lease is judged on the caller's thread, so `is_held()` turns false 2/3 of the session timeout after the last answer even though the network thread reports nothing; the keepalive that renews the lease runs on that thread and stops with it. The test `tests/leases_stalled_threads.rs` (an in-crate test until the house plan): 2 s session, runtime thread blocked for 8 s, the holder read not-held before the next holder acquired and never `Held` after it (without the lease: 233 `Held` answers in the 500 ms after the hand-over). zklock's own log lines from that thread go through a non-blocking queue to a `zklock-log` thread | — |
//! | leader of the ensemble killed | `Suspended` for the failover (about 1 s here), then `Held`, same session and node | keeps its place and acquires in order |
//! | someone deletes the holder's node (`break`) | `Lost` as soon as the server reports it, once the guard has been asked for its state (the first `state()`/`is_held()`/`wait_lost()` watches the node; a `revocable()` lock watches from the start); otherwise noticed at `unlock()` ([`Error::LockLost`]) | the next waiter never claims with its node gone, whether its node and the holder's are deleted back to back or in one `multi`, in either order: it reads its node after the deletion instead of trusting the event order (ZooKeeper 3.8's notifications carry no zxid) |
//! | fenced write by a stale holder (its node deleted by expiry or `break`) | refused by the server: [`Error::LockLost`], nothing written, not even missing parents — also when its client has opened a new session since | — |
//! | process frozen past its session (GC pause, `SIGSTOP`) | the server expires the session and the next contender acquires. When the frozen holder runs again, its first `is_held()` is already false: the lease is judged against the monotonic clock, which kept running during the pause (`tests/leases.rs`: every `is_held()` answer stamped with `CLOCK_MONOTONIC` before the call; none stamped after the other process acquired was true, directly and through the proxy; without the lease, one `true` 300 ms after the hand-over). Its fenced writes are refused (in `tests/fenced.rs`, a holder stopped with `SIGSTOP` past a 2 s session got [`Error::LockLost`] and the data kept its successor's value); a write already on the dead connection comes back [`Error::OutcomeUnknown`], and could only have been applied while the node existed. Writes to other systems are safe only if they check the fencing token; plain [`Client::set_data`] is not checked at all | acquires once the session has expired |
//! | acquisition cancelled ([`CancelToken::cancel`]) | — | returns [`Error::Cancelled`] promptly and its node is deleted before it returns (within 200 ms of waiting for the reply; during an outage it returns at once and the node is deleted in the background when the connection is back) |
//! | [`Client::close()`](crate::Client::close) | every guard `Lost`; the session's nodes are gone at once (closeSession) | every blocked call on every clone returns [`Error::Closed`] within milliseconds; later calls too |
//! | a multi-step acquisition's session expires half-way ([`MultiLock`], [`Semaphore`]) | — | the whole call fails ([`Error::SessionExpired`]): every step runs on the session it started with, never a fresh one beside lost nodes |
//! | idle for minutes (container sweep) | lock paths and their empty parents are swept; the chroot is persistent (and recreated if deleted by hand), so the next call just works | — |
//! | sequence counter wraps (about 1.07e9 acquisitions on a path never emptied) | order is serial-number arithmetic on the 2^32 circle, so a wrapped (negative) sequence queues behind the holder. Curator compares the suffixes as text and disagrees after a wrap: do not mix Curator peers with a path that can wrap | — |
//! | `fork()` after connecting | the child's calls on the inherited client return [`Error::Forked`] (its copy has no network thread) and dropping it returns at once; a new [`Client`] made in the child works (zklock keeps no process-wide I/O state) | — |
//! | session expires | `Lost`; `unlock()` returns [`Error::LockLost`]; the node is gone | [`Error::SessionExpired`]; the node is gone with the session |
//! | `create` reply lost to a connection drop | — | the node is found again by its uuid after reconnecting; never created twice |
//! | timeout, `try_lock` on a busy lock, or an error while waiting | — | our node is deleted before returning; a node created late during an outage is deleted in the background when the connection returns |
//! | a timed acquisition whose connection goes silent (no FIN, no RST: it still looks connected), is reset or is refused, its create answered or not | — | returns by its deadline plus at most 100 ms (the wait for its node's delete; a silent connection answers none, and the delete, or the lookup of a late node by its protected name, goes on in the background). `tests/faults_deadlines.rs`, timeout 700 ms, every recipe, blocking and async: 100–103 ms past the deadline on a silent connection (1,000 ms before the fix: the release timeout), 1–22 ms on a reset one, 0–17 ms on a refused one ([`Error::ConnectionLoss`]) |
//! | release while disconnected, or the server frozen (`SIGSTOP`) or slow | dropping the guard returns within the client's [`release_timeout`] (1 s by default; `tests/faults.rs`: 1.0 s on a frozen server with a 10 s session, where it used to wait 4.5 s for the connection to be declared dead, and on a live but slow connection up to the whole session timeout); `unlock()` waits up to the session timeout and returns [`Error::OutcomeUnknown`] (it used to be [`Error::ConnectionLoss`]) if the delete is not confirmed. Either way the delete is retried in the background until the node is gone or the session has ended; until then the next waiter still waits. `zklock run` exits within its release bound once its command is dead | — |
//! | ensemble re-created from scratch (data dirs wiped), servers back on the same addresses | the old sessions are refused: `Lost`. zxids begin again, so the zxid alone ([`FencingToken::zxid`](crate::FencingToken::zxid)) goes backwards; [`fencing()`](crate::LockGuard::fencing) does not: its generation (the lock path's creation time) is later than any token of the old ensemble's (`tests/fenced.rs`), as long as the servers' clocks were not set back across the re-creation | acquires on a new session |
//! | another process's callers hold through [local handoff](crate::DistributedMutex::local_handoff) (batch `b`) while its replies or notifications are late (a loaded host, a slow link) | — | waits at most `b` local holds from its node's creation: each hold of the other process's node is allowed by a listing, sent at most `b` holds before it, that did not show the waiter's node; however late that process reads anything, it never counts from when it read a notification (`tests/local_handoff.rs`: every reply 20 ms late, batch 8, at most 8; the rule it replaced let 20 through). In an ensemble "creation" is when the server that answers the holder's listings has the node: a follower that lags adds its lag |
//! | someone deletes (`break`) the node a process passes between its local holders ([local handoff](crate::DistributedMutex::local_handoff)) | the holder whose node it was gets [`Error::LockLost`] from `unlock()`; no hold begins on the node once the process can know of the deletion (its own-node watch, set at the claim, fires, or a check listing lacks the node): the local callers queue a fresh node behind the other processes | a local hold may still begin in the moment between the deletion and this process reading its notification, as a hold in progress when the node is broken goes on: only a check per hold could close that window, which is what local handoff saves (`tests/local_handoff.rs` counts such holds: 0 or 1 per run, against every hold of the second before) |
//! | a local waiter cancelled ([`CancelToken::cancel`]) while it is the last one of its process | — | returns [`Error::Cancelled`] once the node queued for its process is withdrawn (within 200 ms, as without local handoff); a waiter that is not the last leaves only the local queue |
//! | a request of a timed acquisition still on its way at the deadline, connection healthy | — | `Ok(None)` (a timeout), never [`Error::ConnectionLoss`]: `tests/recipes.rs` releases a 1-permit semaphore around a waiter's 30 ms deadline 300 times (14 errors before the fix) |
//!
//! These rows are what `tests/faults.rs`, `tests/faults_ensemble.rs` and `tests/faults_chaos.rs`
//! exercise; the chaos run (kills, restarts and severed connections every 1.5–3 s for 30 s) has
//! completed 1,700–2,400 holds per run with no overlap among holders that still believed in their
//! lock.
//!
//! # After an expiry
//!
//! After an expiry the [`Client`] opens a new session on its next call, so the same client and
//! mutex keep working. Dropping the last `Client` waits (at most its [`release_timeout`]) for
//! background releases, then closes the session, which removes any ephemeral node left, and
//! stops the client's threads: a state listener busy at that moment is given one second to
//! return, then left to finish on its own thread (logged). A listener that needs its client
//! should capture [`client.downgrade()`](crate::Client::downgrade) (a [`WeakClient`]): one holding a
//! `Client` keeps the session open until `close()`.
//!
//! What a holder must do: treat `Suspended` as "stop touching the resource until `Held` again",
//! and `Lost` as final. No lock service can stop a paused process (GC, SIGSTOP) from acting on a
//! lock it lost while paused; pass [`fencing()`](crate::LockGuard::fencing) to the resource where it
//! can check it.
//!
//! # Three layers against a stale holder
//!
//! A holder can lose its lock without noticing at once: a long GC pause, a `SIGSTOP`, a partition
//! longer than the session timeout. The server expires its session, deletes its node and lets the
//! next contender in, while the old holder, once it runs again, may be halfway through a write.
//! zklock gives three layers, from the cheapest to the strongest, each for a different job:
//!
//! 1. **The lease: know quickly.** [`is_held()`](crate::LockGuard::is_held) /
//!    [`state()`](crate::LockGuard::state) answer without a round trip, decided when called, on the
//!    calling thread: `Held` only while less than 2/3 of the session timeout has passed
//!    (monotonic clock) since the send time of the latest write or sync the leader answered,
//!    since the leader cannot expire the session before a full timeout after that. A keepalive
//!    (a `sync`) renews it after 1/3 of the timeout without other writes.
//!    [`lease_remaining()`](crate::LockGuard::lease_remaining) says how much is left: check it against
//!    the time your next step needs before taking it. Use them to stop work early and to skip
//!    writes that would be refused anyway. A frozen process or a stalled network thread reads
//!    "not held" as soon as it looks. It is still the process's own belief: a check that passed
//!    just before the process froze cannot stop the write that follows it.
//! 2. **Fenced writes: ZooKeeper data stays safe even after a pause.**
//!    [`fenced_set_data`](crate::LockGuard::fenced_set_data),
//!    [`fenced_delete`](crate::LockGuard::fenced_delete) and [`transaction()`](crate::LockGuard::transaction)
//!    send every write in one atomic ZooKeeper transaction (`multi`) together with a check that
//!    our lock node still exists. The server applies it only if the node is there when it
//!    executes the write, and the node is gone before anyone else can acquire. The check is the
//!    server's, not ours (no clock or flag of this process takes part): the write goes through
//!    the client's current session, so even a guard whose session expired, on a client that has
//!    reconnected since, is refused ([`Error::LockLost`]).
//! 3. **The fencing token: for stores outside ZooKeeper.** [`fencing()`](crate::LockGuard::fencing)
//!    returns a [`FencingToken`] that increases from one holder to the next. A database or
//!    service that remembers the highest token it has seen *per lock path* and refuses lower
//!    ones for that path gets the same protection. Tokens compare only within one lock path:
//!    those of different lock paths are unrelated and may even be equal (lock nodes created in
//!    one coalesced `multi`, each on its own lock path, share its zxid), so a store with
//!    per-entity locks that keeps one highest token for all of them refuses valid writes;
//!    [`FencingToken`] shows a store keyed by lock path. The token is the lock path's generation (the creation time of its node, set
//!    by the server's clock) followed by the holder node's creation zxid. Within a generation
//!    only zxids decide, and they grow across the whole ensemble. The generation changes only
//!    when the lock path's node is created again: after the ensemble was re-created from
//!    scratch (its zxids begin again) or after the server removed the idle container; the new
//!    generation is later, so its tokens are higher than every older one. The one assumption:
//!    the servers' clocks are not set back, across that re-creation, by more than the time since
//!    the previous lock path node was created. With
//!    [local handoff](crate::DistributedMutex::local_handoff) the callers of one client pass
//!    one node from one to the next, and a third number, the node's
//!    [`local()`](crate::FencingToken::local) count of handoffs (0 for the holder that took it
//!    from the server), orders them; a later node's zxid is higher, so tokens still increase
//!    from every holder to the next. A store can keep the token as a `u128`
//!    ([`to_u128()`](crate::FencingToken::to_u128)), as 32 hex digits that sort as strings
//!    (`to_string()`, parsed back with `parse()`), or as the triple
//!    ([`generation()`](crate::FencingToken::generation), [`zxid()`](crate::FencingToken::zxid),
//!    [`local()`](crate::FencingToken::local)).
//!
//!    *Migrating from `fencing_token()`.* zklock 0.1's `LockGuard::fencing_token()` returned
//!    the zxid alone (an `i64`, now `fencing().zxid()`), which increases from holder to
//!    holder while the ensemble keeps its data; but when an ensemble is re-created its zxids begin again, and a store keeping the
//!    highest one would refuse every new holder until the new zxids pass the old. Send
//!    `fencing()` instead; a store that already holds zxids can compare `(generation, zxid)`
//!    pairs and read a stored zxid as generation 0, which every new token passes, as long as
//!    no holder uses [local handoff](crate::DistributedMutex::local_handoff). With it, the
//!    local holders of one node share its `(generation, zxid)`, and only
//!    [`local()`](crate::FencingToken::local) orders them: such a store must compare the
//!    whole triple `(generation, zxid, local)` (or `to_u128()`, or the 32 hex digits), read a
//!    stored zxid as `(0, zxid, 0)`, and refuse a write whose triple is below the highest it
//!    has seen. Compared by pairs, a late write of local holder `k` passes after holder
//!    `k + 1` has written. `zklock run`
//!    passes both: `$ZKLOCK_FENCING` (the token, 32 hex digits) and `$ZKLOCK_FENCING_TOKEN`
//!    (the zxid, decimal).
//!
//! ```no_run
//! # fn main() -> zklock::Result<()> {
//! # let client = zklock::Client::connect("127.0.0.1:2181")?;
//! let mutex = zklock::DistributedMutex::new(&client, "/locks/report")?;
//! let guard = mutex.lock()?;
//! if guard.is_held() {
//!     // Written only if we still hold the lock when the server executes it.
//!     guard.fenced_set_data("/reports/latest", b"totals: 42")?;
//!     guard
//!         .transaction() // all or nothing, same check
//!         .create("/reports/2026-11-30", b"totals: 42")
//!         .delete("/reports/draft")
//!         .commit()?;
//!     // For another store: send the lock path and `guard.fencing()` along, and let it refuse
//!     // tokens older than the highest it has seen for that lock path.
//!     let token: u128 = guard.fencing().to_u128();
//!     # let _ = token;
//! }
//! # Ok(()) }
//! ```
//!
//! ## Details of fenced writes
//!
//! - The check is on the node's existence, not its data version: Curator's revocation request
//!   writes into the holder's node (bumping its version), and the lock is still ours after it.
//!   Existence is enough because our node's name carries a random uuid and a server-assigned
//!   sequence number: once deleted, no contender ever creates that name again.
//! - [`fenced_set_data`](crate::LockGuard::fenced_set_data) creates a missing node (persistent) and its
//!   missing parents in the same transaction, so a stale holder creates nothing. If the node
//!   appears or disappears between the update and the create, the other form is tried again;
//!   every refused attempt applied nothing.
//! - A write whose reply is lost (the connection failed after sending it) is never resent: the
//!   call returns [`Error::OutcomeUnknown`]. Resending could apply it twice, or after a later
//!   write of ours, and no read can tell our write from the same bytes written by someone else.
//!   Whatever happened, it happened while our node existed. [`Error::ConnectionLoss`] from a
//!   fenced write means it was not sent at all.
//! - They block like [`Client::set_data`]: one round trip (a few when creating), waiting at
//!   most the session timeout for a lost connection.
//! - Fencing protects data that every writer changes through fenced writes, or otherwise only
//!   while holding the lock; a plain [`Client::set_data`] is not checked.
//!
//! [`LockGuard`]: crate::LockGuard
//! [`ReadGuard`]: crate::ReadGuard
//! [`WriteGuard`]: crate::WriteGuard
//! [`Leadership`]: crate::Leadership
//! [`Permit`]: crate::Permit
//! [`MultiGuard`]: crate::MultiGuard
//! [`MultiLock`]: crate::MultiLock
//! [`Semaphore`]: crate::Semaphore
//! [`FencingToken`]: crate::FencingToken
//! [`Held`]: crate::LockState::Held
//! [`Suspended`]: crate::LockState::Suspended
//! [`Lost`]: crate::LockState::Lost
//! [`release_timeout`]: crate::ClientBuilder::release_timeout
//! [`Error`]: crate::Error
//! [`Error::OutcomeUnknown`]: crate::Error::OutcomeUnknown
//! [`Error::SessionExpired`]: crate::Error::SessionExpired
//! [`Error::ConnectionLoss`]: crate::Error::ConnectionLoss
//! [`Error::LockLost`]: crate::Error::LockLost
//! [`Error::Closed`]: crate::Error::Closed
//! [`Error::Cancelled`]: crate::Error::Cancelled
//! [`Error::Forked`]: crate::Error::Forked
//! [`DistributedMutex`]: crate::DistributedMutex
//! [`CancelToken`]: crate::CancelToken
//! [`CancelToken::cancel`]: crate::CancelToken::cancel
//! [`Wait`]: crate::Wait
//! [`Client`]: crate::Client
//! [`WeakClient`]: crate::client::WeakClient
//! [`Client::close`]: crate::Client::close
//! [`Client::set_data`]: crate::Client::set_data
//! [`LockGuard::unlock`]: crate::LockGuard::unlock
