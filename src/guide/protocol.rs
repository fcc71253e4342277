//! How zklock takes a lock on ZooKeeper, how it shares locks with Apache Curator, and why it
//! speaks ZooKeeper's wire protocol itself.
//!
//! # The lock recipe
//!
//! ZooKeeper's lock recipe: each contender creates an ephemeral sequential node under the lock
//! path; the lowest sequence number holds the lock; every other contender watches only the node
//! just before its own (a `getData` watch), so a release wakes exactly one waiter. A crashed
//! process's node vanishes with its session. Node names are Apache Curator's protected names,
//! `_c_<uuid>-lock-<sequence>`, and the queue is ordered by the sequence suffix only, so zklock
//! and Curator's `InterProcessMutex` exclude each other on the same path. A node whose `create`
//! reply was lost is found again by its uuid instead of being created twice. Lock paths and
//! missing parents are created as container nodes, which the server removes when they are
//! empty.
//!
//! All recipes share one waiting core and differ only in whom a contender must wait for.
//!
//! Two refinements save work without weakening anything: the `create` and the listing of the
//! lock path are sent back to back on the same session (ZooKeeper executes one session's requests
//! in order, so the listing contains our node and every node before it), which makes an
//! uncontended acquire one round trip; and a waiter whose only predecessor is deleted need not
//! list the queue again (sequence numbers only grow, so nothing can be ahead of it): it only reads
//! its own node, to be sure nobody deleted it meanwhile. After a reconnect, when every waiter
//! looks at the queue again, the waiters of one session on one lock path share one listing
//! instead of each fetching the whole queue (`tests/scale.rs`: 40 waiters on one session sent 40
//! listings after their connection was cut, now 1).
//!
//! ## A node made again under a contender's name
//!
//! A contender decides from a listing, and a listing carries names, not creation zxids: a node
//! that an operator (or a tool restoring a backup) deletes and creates again under the same
//! name is, to a listing, the contender's own. zklock's decision is to take the name as the
//! contender's place in the queue and not to read the node's stat before every claim: a
//! contender that decides on a listing claims what carries its name; one that decides on a read
//! of its own node (the handoff without a listing above) compares the node's `czxid` with its
//! create's and reports [`Error::LockLost`](crate::Error::LockLost) if it changed. A read before
//! every claim would cost the uncontended acquire the second round trip that pipelining saves,
//! to notice something nothing but a hand-made change inside a lock path does, and the nodes
//! under a lock path belong to the lock (to break a stuck holder,
//! [`break_contender`](crate::DistributedMutex::break_contender) deletes its node and makes
//! none). What it costs when someone does it anyway: between the delete and the create, the
//! waiter behind the contender sees its predecessor gone and may take the lock, and the
//! contender, listing after the create, takes it too; and the contender's release deletes the
//! replacement. The simulation keeps the decision honest both ways (`sim/worker.rs`): a claim
//! decided on a listing may hold a replaced node; a claim decided on a read of the node never
//! does.
//!
//! # Sharing locks with Curator
//!
//! Each recipe uses the node layout of its Curator counterpart, so Java services using Curator
//! can take part in the same locks (`tests/interop.rs` runs them against Curator 5.4 in a JVM):
//!
//! | zklock | Curator | nodes under the lock path |
//! |---|---|---|
//! | [`DistributedMutex`] | `InterProcessMutex` | `_c_<uuid>-lock-<seq>` |
//! | [`DistributedRwLock`] | `InterProcessReadWriteLock` | `_c_<uuid>-__READ__<seq>`, `_c_<uuid>-__WRIT__<seq>`; the leading readers or the leading writer hold it |
//! | [`Semaphore`] | `InterProcessSemaphoreV2` | lease takers queue on a mutex at `locks/`; leases are nodes under `leases/`. ZooKeeper does not store the number of permits: every process must use the same |
//! | [`MultiLock`] | `InterProcessMultiLock` | the mutexes' (or write locks') own nodes, taken in one global order |
//! | [`LeaderElection`] | `LeaderLatch` | `_c_<uuid>-latch-<seq>`; the holder leads |
//! | revocation ([`DistributedMutex::revocable`], [`DistributedMutex::request_revocation`]) | `makeRevocable`, `Revoker` | the marker `__REVOKE__` written into the holder's node |
//!
//! Following an election from outside ([`LeaderElection::observe`]) is reads and one watch at
//! a time, so it works on Curator's elections too and needs only READ: the leader's node is
//! read with a data watch, which fires when it is deleted (the leader stepped down, its
//! session ended, an operator broke it); a later node can never overtake it, so no other
//! change can make a new leader. With nobody queued, the watch is a child watch on the
//! election path, and with no path, a child watch on its nearest existing ancestor. Each
//! firing, and each reconnect, re-reads the leader. Curator's `LeaderLatchListener` tells only
//! a participant whether it leads; this tells anyone who leads.
//!
//! The sequence counter is a signed 32-bit number; zklock orders by serial-number arithmetic on
//! the 2^32 circle, so a wrapped (negative) sequence queues behind the holder. Curator compares
//! the suffixes as text and disagrees after a wrap (about 1.07e9 acquisitions on a path never
//! emptied): do not mix Curator peers with a path that can wrap.
//!
//! # Why zklock speaks the ZooKeeper protocol itself
//!
//! The design called for the blocking `zookeeper` crate (0.8). Measured under real faults on
//! ZooKeeper 3.8, it kept a session across a server restart but silently lost every watch, lost a
//! busy session in a one-second restart, never noticed a hung server, and silently swapped in a new
//! session after an expiry. zklock then used the async `zookeeper-client` (0.11), which got those
//! right but lost a *busy* session on a short restart: it re-arms watches in several SetWatches
//! requests that all carry xid -8, keeps pending requests in a map keyed by xid, drops the
//! connection at the second reply, and does so again on every attempt until the session expires
//! (3,000 waiters on one session, or 500 with 290-character paths, were enough). It also sets no
//! TCP_NODELAY and writes each request only when its task dequeues it, so two requests cannot be
//! pipelined.
//!
//! So zklock owns its wire, as kazoo and go-zookeeper do (`src/wire/`):
//! - the jute encoding of exactly the requests zklock sends; a reader that checks every length
//!   against the frame, so a broken or hostile server gets a reset connection, never a panic or
//!   an unbounded allocation; replies bounded by the client's own limit
//!   (`ClientBuilder::max_reply_size`, 16 MiB: the server bounds what it accepts by its
//!   `jute.maxbuffer`, not what it sends, and a long queue's listing passes 1 MiB), and a reply
//!   over it skipped, failing its own request alone, never the connection every other call
//!   shares;
//! - one I/O thread per session that reads replies and notifications, pings, notices a silent
//!   connection after 2/5 of the session timeout, and reconnects across the connect string's hosts
//!   (DNS names resolved again at every attempt), with the session id, password and last zxid;
//! - callers queue their requests in one outbox, in the order of their calls, and whichever finds
//!   the socket free writes what it holds (TCP_NODELAY), so a create and a listing really travel
//!   back to back and no caller waits for another's write; at most 256 requests are unanswered on
//!   the wire (a writer thread writes the rest as answers make room), and the keepalive sync and
//!   pings go ahead of them, so a holder's lease never waits behind its waiters' traffic; replies
//!   are matched by a FIFO, the order in which the server answers one session's requests, so any
//!   number of SetWatches requests (128 KiB of paths each) are each answered in turn;
//! - every request is one completion, which a blocked thread or a task can wait on;
//! - TLS (rustls) and SASL DIGEST-MD5 of its own (features `tls`, `sasl`).
//!
//! The public API stays synchronous. zklock's background tasks (keepalives, the watches that wake
//! blocked waiters, background releases) run on one runtime thread per process, a park/unpark loop
//! with a timer heap that keeps no process-wide I/O state, so a forked child can open a client of
//! its own.
//!
//! # Threads
//!
//! | thread | how many | what it does |
//! |---|---|---|
//! | `zklock-io` | one per session | reads replies and notifications, pings, reconnects |
//! | `zklock-write` | one per session | writes the requests that had to wait for room on the wire; a caller that finds the socket free writes its own |
//! | `zklock-rearm` | while reconnecting with watches | sets the session's watches again, while the I/O thread goes on reading |
//! | `zklock-runtime` | one per process | background tasks: keepalives, own-node watches of holders, background releases and withdrawals |
//! | `zklock-timer` | one per process, once a future polled on another executor (tokio, smol) sets a timer | wakes those futures' timers; a blocked caller keeps its own timers on its own thread |
//! | `zklock-connect`, `zklock-close`, `zklock-renew` | short-lived, one per `connect_async`, `close_async` or renewal of an expired session | the blocking steps of those calls (DNS, TCP, TLS, the handshake; waiting for a close), so no executor thread blocks on them |
//! | `zklock-state` | one per client | watches the session and publishes its changes: log lines, metrics, the listener |
//! | `zklock-listener` | one per client with a listener | runs the [`on_state_change`] listener |
//! | `zklock-log` | one per process | writes the log lines made on zklock's I/O and runtime threads, so a slow logger never stalls the network |
//! | `zklock-signals` | with `Client::close_on_signals` (feature `signals`) | closes the client on SIGTERM or SIGINT |
//!
//! zklock never runs the application's code (a listener, a logger, a metrics recorder) on its
//! network or runtime threads. The session's threads end with the client ([`Client::close`] or
//! the last drop).
//!
//! [`DistributedMutex`]: crate::DistributedMutex
//! [`DistributedMutex::revocable`]: crate::DistributedMutex::revocable
//! [`DistributedMutex::request_revocation`]: crate::DistributedMutex::request_revocation
//! [`DistributedRwLock`]: crate::DistributedRwLock
//! [`Semaphore`]: crate::Semaphore
//! [`MultiLock`]: crate::MultiLock
//! [`LeaderElection`]: crate::LeaderElection
//! [`LeaderElection::observe`]: crate::LeaderElection::observe
//! [`on_state_change`]: crate::ClientBuilder::on_state_change
//! [`Client::close`]: crate::Client::close
