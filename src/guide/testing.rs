//! How zklock is tested: real servers on loopback, the ZooKeeper releases and Curator versions
//! CI covers, what each test file proves, the unit tests, and the minimum Rust version.
//!
//! # Running the suite
//!
//! `scripts/test.sh` (which runs `cargo test --workspace --all-features`: the library and the
//! `zklock-cli` crate) runs everything against real servers
//! on loopback: a standalone server it starts itself, and the three-server ensemble, private and
//! secure servers that tests start for themselves through the same script. Every port is a free
//! one, picked at random below the kernel's ephemeral port range and checked with a bind: the main
//! server's by `test.sh`, which passes it to the tests as `ZK_CONNECT`; the others' by
//! `tests/common/servers.rs` (an ensemble's once per test binary, so a restarted member comes back
//! where its clients expect it). So two runs on one machine never collide, and no run meets a
//! server on the scripts' default ports, such as the demo's on 2181. All servers of a run live in a
//! work dir of its own (`ZK_WORKDIR`); those a test binary keeps for all its tests are stopped when
//! it exits, and `test.sh` stops whatever is left in its work dir when it ends, after a failure or
//! Ctrl-C too, and nothing else. After a failure the work dir, with the servers' logs, is kept.
//! With `ZK_CONNECT` set, `test.sh` uses that server instead of starting one; `cargo test` alone
//! uses `ZK_CONNECT` or `127.0.0.1:2181` (`scripts/start-zk.sh`) as the main server.
//!
//! # Supported ZooKeeper releases
//!
//! zklock speaks ZooKeeper's wire protocol itself, so the releases it is tested against are its
//! compatibility promise. `scripts/start-zk.sh --version V` (or `ZK_VERSION=V`) starts any of
//! them, standalone, as an ensemble, or as a secure server; `scripts/test.sh` runs every server of
//! its run, the ones the tests start included, on `ZK_VERSION` (default 3.9.5). Releases other than
//! Debian's come from Apache's jars inside PyPI's pinned `pyspark` sdists, fetched once and checked
//! by sha256 into `~/.cache/zklock` (`scripts/lib/dist.sh`), or from an Apache tarball named by
//! `ZK_DIST`.
//!
//! | release | where from | what `.ci/run` runs on it | Curator in `tests/interop.rs` |
//! |---|---|---|---|
//! | 3.9.5 (2026, current) | pyspark 4.3.0 | the whole suite; the 60 s nemesis (three-server ensemble) | 5.9.0 |
//! | 3.8.0 (Debian 12) | Debian's `zookeeper` package | the compatibility pass below; `tests/acl_releases.rs` in the main pass | 5.4.0 (Debian's `libcurator-*-java`) |
//! | 3.6.3 | pyspark 3.5.9 | the compatibility pass below | 2.13.0 |
//!
//! The compatibility pass (`.ci/run`, once per release) runs the binaries that touch the wire,
//! sessions, restarts, snapshots, ensembles, ACLs, TLS/SASL and interop: `smoke`, `mutex`,
//! `restart`, `faults`, `ensemble`, `security`, `secure_servers`, `fenced`,
//! `sequence_exhaustion` and `interop`. `tests/acl_releases.rs` starts a 3.9.5 and a 3.8.0 server
//! of its own whatever the run's release, so the ACL scenarios run on both in every run.
//!
//! What needs which release: zklock creates lock parents as container nodes and its nodes with
//! `create2` (the reply carries the stat), both ZooKeeper 3.5+; 3.4 is not supported. What differs between the releases zklock meets:
//! from 3.9 on, `exists` on a node whose ACL denies READ answers NoAuth where 3.8 answers its
//! stat; zklock reads either answer as "the node exists" (see
//! [`security`, "ZooKeeper releases"](super::security#zookeeper-releases)).
//!
//! # What each test proves
//!
//! | file | what it proves |
//! |---|---|
//! | `tests/smoke.rs` | the basics against the main server: lock, `try_lock`, `lock_timeout` and release leave no node behind; locking again while holding waits, like `std::sync::Mutex` |
//! | `tests/mutex.rs` | 16 threads and 3 processes never overlap (exact counter, alternating enter/exit log); FIFO order; no orphan nodes after timeouts; a SIGKILLed holder is replaced after its session timeout; bad paths and connect strings are typed errors; ephemeral parent refused; chroot; breaking a stale holder |
//! | `tests/fenced.rs` | fenced writes: create/update/delete and transactions apply all or nothing; a broken holder's writes are refused and write nothing; a revocation request does not break them; a transaction whose reply is lost (proxy swallowing replies) is `OutcomeUnknown`, applied once by the server and never resent; a holder `SIGSTOP`ped past its session, resumed after another client took the lock and wrote, is refused by the server, also when its client already runs on a new session; fencing tokens keep increasing across a private server whose data dir is wiped between two holders |
//! | `tests/herd.rs` | one watch notification per release (server `mntr` counters, private server); after a reconnect, the waiters of one session share one listing (getChildren counted through the proxy) |
//! | `tests/restart.rs` | 10,000 data watches on 290-character paths on one session survive a restart of a private server (data kept, down about 2 s, 10 s session): every watch back on the server, 500 holders learn of a revocation through the watch they set before the restart, 10,000 waiters then acquire in queue order, nothing expires; a holder reads `Held` (sampled every 2 ms) while 2,000 waiters of its session queue up, and after a cut connection while they all re-list |
//! | `tests/faults.rs` | through a fault-injecting TCP proxy: a silenced holder reports not-held before a healthy contender acquires, then `Lost`, and the client recovers a new session; waiters survive severed connections; deadlines hold during outages; a reconnecting waiter never jumps the holder; dropping a guard on a frozen (`SIGSTOP`) private server returns within the release timeout, `unlock()` says the outcome is unknown, and the node is gone after `SIGCONT` |
//! | `tests/ensemble.rs` | leader failover and a restart of the only reachable server: holders keep their lock, waiters still acquire |
//! | `tests/chaos.rs` | 4 processes × 2 threads for 30 s while holders are SIGKILLed, servers restarted and connections severed: no overlap among holders that still believed in their lock, progress for every survivor, no nodes left |
//! | `tests/recipes.rs` | read/write exclusion across processes, writer fairness, semaphore limits and lease recovery, multi-lock without deadlock, revocation, election handover; 300 semaphore timeouts around a release on a healthy connection, none an error; a permit's and a multi-lock guard's state, lease, loss of one node, tokens and release; an empty multi-lock refused |
//! | `tests/security.rs` | creator-only ACLs keep other identities from breaking or joining a lock |
//! | `tests/acl_releases.rs` | on a 3.9.5 and a 3.8.0 server each: `require_chroot(true)` through a chroot that denies READ, `fenced_set_data` below a parent that lets anyone create but not read, and another identity's `try_lock`, timed wait, inspection, break, revocation, semaphore, read/write lock and election on creator-only nodes: the same answer on both (a typed `NoAuth` naming CREATE or READ, within 3 s, nothing left behind, the holder undisturbed; with READ for everyone, inspection shows the holder) |
//! | `tests/secure_servers.rs` | private SASL and TLS servers (`scripts/start-zk.sh --sasl --tls`): wrong SASL password is `AuthFailed` in under 3 s, locks over TLS, untrusted CA or missing client certificate is `Error::Tls` within the connect timeout |
//! | `cli/tests/secure.rs` | the `zklock` binary's `--tls-*` and `--sasl-user` options against the same servers (fixture `tests/common/secure.rs`) |
//! | `tests/fuzz_input.rs` | bad paths, unicode, long paths, oversized data, garbage connect strings and credentials through every entry point: typed errors, no panic, no node left |
//! | `tests/hostile_server.rs` | a fake server on loopback (no ZooKeeper needed) that grants a session, then sends bodies cut short, replies of the wrong type or to no request, frames announced at 2 GiB (skipped, its request failed) or over the client's limit answering no request, half a frame, a reply trickled a byte at a time, a garbled notification, garbage behind the handshake; or answers the handshake with a bogus `ConnectResponse`: every call ends by its deadline, the client resets the connection (logged) and comes back on a new one with the same session, memory stays bounded, a bad handshake is a failed attempt followed by the next |
//! | `tests/interop.rs` | the same locks, read/write locks, semaphores, elections and revocations shared with Apache Curator running in a JVM: 5.9.0, 5.4.0 or 2.13.0 (`ZK_CURATOR`, else the one of `ZK_VERSION`'s jars) |
//! | `cli/tests/cli.rs` | the `zklock` binary (crate `zklock-cli`, sharing `tests/common` by a `#[path]` module): exclusion, exit codes, signals, status, break, lost lock; a SIGKILLed `zklock run` takes its job and the job's children with it; stopped children; status on paths that are not locks; durations; completions and man pages; `zklock run` exits within the release bound once its command is dead, also with a silent server |
//! | `tests/lease.rs` | the call-time lease: a holder frozen (SIGSTOP) past its session never reads held after another process acquired (every answer stamped with `CLOCK_MONOTONIC` before the call; directly and through the proxy); `lease_remaining()` shrinks in a blackhole and returns with the server; a healthy loaded holder never reads `Suspended` in 20 s |
//! | `tests/stalled_runtime.rs` | zklock's runtime and I/O threads stalled from outside (a signal whose handler sleeps on that thread): a holder reads `Suspended` on its own clock before the next holder can acquire, never `Held` after it, and the state thread reports it without waiting for the stalled threads |
//! | `tests/between_steps.rs` | a session expiring between the steps of a multi-lock or a semaphore acquisition fails the whole acquisition and leaves nothing behind |
//! | `tests/cancel.rs` | cancelling a waiter (node withdrawn while the session is open; a pre-cancelled token sends nothing; cancel during an outage returns at once), `Client::close()` under threads waiting in every recipe, guards moved across threads and returned from functions, 16 tokio tasks through `spawn_blocking`, a process's session ending with it |
//! | `tests/async_locks.rs` | the `_async` calls: 300 tasks on a 2-worker tokio runtime and 50 on a current-thread one take turns with 0 overlaps; `futures::executor` and smol's executor drive them; blocking threads and async tasks share one lock; `tokio::time::timeout`, `select!` and a cancelled token leave no node (an abandoned waiter never acquires for nobody); a future dropped at every one of its await points, free or queued behind a holder, leaves no node and no lock taken; guards move between tasks and threads; `wait_lost_async` sees a broken node; fenced writes and transactions await; every recipe's async forms; `connect_async`/`close_async` never block a current-thread runtime's only worker; the futures are `Send` |
//! | `tests/async_calls.rs` | the `_async` forms of inspection, data, break, revocation and state calls, each on tokio and on `futures::executor` and agreeing with its blocking twin: `contenders_async` of every recipe, `current_leader_async`, `inspect_async` (a mutex and a semaphore), `get_data_async`/`set_data_async`/`children_async` (a bad path and an oversized write refused), `break_contender_async` on each recipe (the holders see their loss), `request_revocation_async` waking `wait_revocation_async`, `wait_state_change_async` across a blackhole, a reconnect and `close()`; every one `Error::Closed` on a closed client; futures polled once and dropped leave no watch (4lw `wchc`) and no node; all `Send` |
//! | `tests/leader_watch.rs` | `LeaderElection::observe`: one observer sees the leader step down, the leader's process SIGKILLed (its session expiring) and an operator breaking the leader's node, in order, while a participant queued in `participate()` on the observer's own client keeps its node (same name and sequence) throughout and then leads on it; the first call reports the current leader, also of a path that does not exist yet, and sees its creation; a revocation request (a data change) is no change; a timeout, a cancel token and `close()` end a wait; a change made while the observer's connection was down is seen after the reconnect; a session expired while waiting ends the watch with `SessionExpired`; calls returned, timed out or dropped (tokio's timeout, a future polled and dropped) leave no watch (4lw `wchc`) and create nothing; `next_async` on tokio and `futures::executor` |
//! | `tests/examples_run.rs` | `examples/leader.rs` (SIGINT) and `examples/async_leader.rs` (SIGTERM) built and run as two instances against the test server: the second waits on one node (same name and sequence after 1.5 s; the old timeout loop failed this, going from sequence 2 to 4) and names the leader it follows; the leader signalled steps down and exits 0, the other leads on the node it queued first; a queued instance signalled leaves the queue; each step bounded at 30 s |
//! | `tests/blocking_in_async.rs` | (feature `tokio`; each case a process of its own) a blocking call on a tokio worker, multi-thread or current-thread, is warned about once per process on stderr and in the log, naming the `_async` calls; none on `spawn_blocking` threads, a multi-thread runtime's `block_on` thread, plain threads or for async calls; two workers, an async holder and two tasks calling `lock()` no longer deadlock (`block_in_place`) |
//! | `tests/async_faults.rs` | the async front-end under real faults: futures dropped while the connection is blackholed, severed, refused, while create replies are lost and across a server restart leave no node; 2,000 async waiters survive a server restart with 0 overlaps; an expiry ends every waiter and tells the holder; `close_async` ends 310 waiters within milliseconds; timed waits hold during outages; semaphore and multi-lock futures dropped half-way release what they took; an `unlock_async` dropped or timed out early still releases (it did not, when it was dropped while stopping its own-node watch); a SIGSTOPped async holder learns its loss on SIGCONT |
//! | `tests/uptime.rs` | long-uptime bugs: the chroot survives the container sweep and is recreated if deleted; a lost create reply is looked up after a `sync`, and the node found is adopted, never duplicated; a lost delete reply is not reported as "already gone"; creator-only identities share parents; a forked child gets `Error::Forked` from an inherited client and locks with a new one; timed multi-step calls keep their deadline in an outage |
//! | `tests/observe.rs` | `Client::state`, `wait_state_change` and the listener across a blackhole, a server restart, an expiry and `close()`; a dead port named refused, tried for the connect timeout (not the session timeout), the elapsed time as the message says; failing fast; DNS failures; the example's Prometheus text scraped over HTTP; a debugging recorder's counts after known work |
//! | `scripts/nemesis.sh` (`examples/nemesis`) | Jepsen-style: partitions, one-way loss, latency, SIGSTOP and SIGKILL against a three-server ensemble in a private network namespace, judged by an independent checker (see [`nemesis`](super::nemesis); run by `.ci/run` for 60 s) |
//! | `tests/follower_lease.rs` | the nemesis's targeted scenario (root, private namespace): a holder behind a follower partitioned from the leader never reads held after the hand-over |
//! | `tests/lifecycle.rs` | what an adversarial review found: the lease behind a follower cut off from the leader, cancel and close on a silent connection, close in a forked child, concurrent closes, fenced writes' parent ACL; state listeners' threads end with their clients (the process's thread count, counted in `/proc/self/task`, does not grow) |
//! | `tests/shutdown.rs` | `Client::close_on_signals` (feature `signals`): a holder sent SIGTERM releases at once, so the next holder acquires within 1 s (and does not without it) |
//!
//! # Unit tests
//!
//! Unit tests in the crate cover the pure parts (paths, connect strings, node order across the
//! sequence wrap, the lease arithmetic, the one rule that decides a lock's state,
//! cancellation, the timers), through the `NodeStore` seam every outcome of placing a node in
//! the queue, and through the `ZkSession` seam the wait loop itself against the simulated ZooKeeper
//! (`core/sim`, below): handoff, a node ahead withdrawing, readers ignoring readers, a writer
//! behind readers, the re-check after a reconnect whose notification was lost, our own node
//! deleted while waiting, the ownership check at the claim, and a semaphore's lease count; property tests (proptest) feed arbitrary bytes to the
//! wire's decoders and framing. `cargo test --lib` needs no server. One unit test keeps the
//! house plan: every `crate::`/`super::` import in `src/` points down the layers (random, error,
//! metrics, rt, znode, wire, session, core, client, recipes, sim) and no files import each other.
//!
//! # Simulation
//!
//! `cargo run --release --example simulate -- --seeds N [--from S]` runs N seeded schedules of
//! a deterministic simulation (issue 34): two or three simulated processes, each a session with
//! one to three tasks, acquire a mutex, a read/write lock, a leader election or a semaphore
//! (one to three permits) through the real waiting core (`contend`, `take_permit_node`) against a
//! simulated ZooKeeper (`core/sim`: the data tree with its `cversion` numbering and its stop at
//! 2^31-1, one-shot watches fired as `DataTree` fires them, containers and their sweep,
//! sessions that expire, connections that drop with requests applied or not, reconnects whose
//! re-armed watches may miss a change, an operator deleting, replacing and writing nodes),
//! on a virtual clock. One seeded generator picks every poll, every request the server
//! processes, every reply or notification delivered, every clock step and every fault
//! (dropped or silent connections, frozen processes, stale replies); the same seed gives the
//! same run, byte for byte (`--trace SEED` prints it). Checked after every step: no two
//! holders reading `Held` at once (nor a writer and a reader, nor more leases than permits);
//! fencing tokens rising in the order their holders first read `Held`; no claim of a node the
//! task had read an answer about after its deletion, nor of another session's node; once the
//! faults stop, every acquisition ends, no node and no watch is left, and every error is one
//! the docs list. A failing seed is printed with its replay command and the last steps before
//! the violation; the run ends with `simulate: N schedules, V violations` (exit 1 if V > 0).
//! Measured on the 2-core build machine (other builds running): 100,000 schedules in 44 s
//! (2,261/s on 2 threads, 27 s of CPU, 3 MB resident), no violation; seeds 100,000 to
//! 299,999 in 38 s, none either; after the 0.2 merges, seeds 100,000 to 1,099,999 in 157 s
//! (6,373/s, quiet machine), none either. Breaking the core's rules by hand, one at a time, the
//! simulation catches each within 10,000 seeds but one (dropping the "connected" condition of
//! the listing-free handoff: with one server, no schedule breaks an invariant without it). The seeds that found real defects are kept as unit
//! tests (`sim.rs`), and `cargo test --lib` runs 300 schedules.
//!
//! # Documentation
//!
//! The README's code blocks, the crate documentation's and every example on these guide pages
//! are compiled as doctests (`cargo test --doc`, part of `scripts/test.sh`); those that need a
//! server are `no_run`, so they are built but not run. `.ci/run` builds the documentation with
//! `RUSTDOCFLAGS="-D warnings"`, so a link to an item that was renamed or removed fails the build
//! instead of rotting.
//!
//! # Minimum Rust version
//!
//! Minimum Rust version: 1.82 (`rust-version` in `Cargo.toml`). `Cargo.lock` is resolved with
//! cargo's MSRV-aware resolver (`.cargo/config.toml`: `incompatible-rust-versions = "fallback"`,
//! read by cargo 1.84 and later), so it only holds versions that declare support for 1.82, and
//! `.ci/check-msrv` (run by `.ci/run`) fails if a locked package declares a newer `rust-version`
//! or an edition after 2021. A user's fresh resolve must hold too, and cargo 1.82 ignores
//! `rust-version` when it resolves: so the script also locks, from scratch in a temporary
//! directory and with the resolver ignoring `rust-version`, a throwaway dependent of the library
//! (every feature on) and the `zklock-cli` manifest (what `cargo install zklock-cli` resolves),
//! and checks every package they build the same way. Dependencies whose newest release needs a
//! newer Rust are bounded in the manifests (`zeroize` under `tls`; clap and env_logger in the
//! CLI). What is verified: those declarations, and clippy's `incompatible_msrv` lint on our own
//! use of the standard library. What is not: CI builds with the current stable toolchain only,
//! never with 1.82 itself, and a dependency that declares no `rust-version` is checked for its
//! edition only.
