//! How zklock is tested: real servers on loopback, the ZooKeeper releases and Curator versions
//! CI covers, what each test file proves, the unit tests, and the minimum Rust version; and
//! [how to test lock loss in your own tests](#testing-lock-loss-in-your-own-tests).
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
//! uses `ZK_CONNECT` or `127.0.0.1:2181` (`scripts/start-zk.sh`, which starts the embedded server
//! unless `--version` names an Apache release) as the main server, and Apache's 3.9.5 for the
//! servers the tests start unless `ZK_VERSION` names another.
//!
//! # Testing lock loss in your own tests
//!
//! Code that holds a lock must stop writing once the lock is lost. The simplest way to test
//! that is the embedded server, `zklock-server`, whose fault handles expire a session, silence,
//! close or reset a connection, delete a node or restart, from the test: see
//! [`testing_your_code`](super::testing_your_code). Against a real Apache server (a local one,
//! `scripts/start-zk.sh`), a session's password is not exposed, so ZooKeeper's usual trick of
//! closing the session from a second connection is out; three ways work, from the simplest:
//!
//! 1. **Break the node from a second client**, as an operator would: list the lock's
//!    [`contenders`](crate::DistributedMutex::contenders) and
//!    [`break_contender`](crate::DistributedMutex::break_contender) the holder. The server
//!    deletes the holder's node at once and lets the next contender in; the holder's fenced
//!    writes are refused from then on ([`Error::LockLost`](crate::Error::LockLost)), and
//!    [`state`](crate::LockGuard::state) / [`is_held`](crate::LockGuard::is_held) /
//!    [`wait_lost`](crate::LockGuard::wait_lost) report [`Lost`](crate::LockState::Lost) as
//!    soon as the server reports the deletion, once the guard is watched (their first call
//!    starts the watch). [`lease_state`](crate::LockGuard::lease_state) and
//!    [`lease_remaining`](crate::LockGuard::lease_remaining) see it only on a watched guard:
//!    they judge the lease, which a deleted node does not shorten. Nothing to install; the
//!    session stays alive, so it tests the node being gone, not the session.
//! 2. **Silence the connection through a TCP proxy you control** (a few dozen lines: accept,
//!    connect to the server, copy both ways, and a flag that stops copying without closing
//!    either socket), with a short session timeout on the client under test
//!    ([`session_timeout`](crate::ClientBuilder::session_timeout)). Silenced, the holder reads
//!    [`Suspended`](crate::LockState::Suspended) from every check once 2/3 of the session
//!    timeout has passed since its last answered write or sync, and the server expires the
//!    session after the full timeout and hands the lock on; resume copying after that and the
//!    holder reads `Lost`. This is what zklock's own `tests/faults.rs` does with
//!    `tests/common/proxy.rs` (a blackhole), which you may copy (MIT or Apache-2.0).
//! 3. **Freeze the holder's process** (`SIGSTOP`, then `SIGCONT` after more than the session
//!    timeout), with the holder in a child process: the GC-pause case. On resuming, the
//!    holder's first check reads not held (the lease is judged on the monotonic clock, which
//!    ran on), and its fenced writes are refused. `tests/fenced.rs` and `tests/leases.rs` do
//!    this.
//!
//! [`Client::close`](crate::Client::close) makes every guard of the client `Lost` at once, but
//! that is a shutdown, not a stale holder: the code under test is told, not surprised.
//!
//! The first way, as a test of your own code:
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock::{Client, DistributedMutex, Error, LockState};
//!
//! fn main() -> zklock::Result<()> {
//!     let app = Client::builder("127.0.0.1:2181")
//!         .session_timeout(Duration::from_secs(2))
//!         .connect()?;
//!     let operator = Client::connect("127.0.0.1:2181")?;
//!     let guard = DistributedMutex::new(&app, "/test/orders/1")?.lock()?;
//!     assert!(guard.is_held()); // also starts watching the node
//!
//!     // The lock is lost behind the holder's back.
//!     let lock = DistributedMutex::new(&operator, "/test/orders/1")?;
//!     let holder = lock.contenders()?.into_iter().find(|c| c.holds).expect("held");
//!     assert!(lock.break_contender(&holder)?);
//!
//!     // Now run the code under test with `guard` and check that it stops. What it can see:
//!     let written = guard.fenced_set_data("/test/orders/1-state", b"paid");
//!     assert!(matches!(written, Err(Error::LockLost { .. }))); // refused by the server
//!     assert_eq!(guard.wait_lost_timeout(Duration::from_secs(5)), Some(LockState::Lost));
//!     Ok(())
//! }
//! ```
//!
//! # Supported ZooKeeper releases
//!
//! zklock speaks ZooKeeper's wire protocol itself, so the releases it is tested against are its
//! compatibility promise. `scripts/start-zk.sh --version V` (or `ZK_VERSION=V`) starts any of
//! them (without a release, a plain `scripts/start-zk.sh` starts the embedded server below; with
//! `--ensemble`, `--sasl` or `--tls`, 3.9.5), standalone, as an ensemble, or as a secure server; `scripts/test.sh` runs every server of
//! its run, the ones the tests start included, on `ZK_VERSION` (default 3.9.5). Releases other than
//! Debian's come from Apache's jars inside PyPI's pinned `pyspark` sdists, fetched once and checked
//! by sha256 into `~/.cache/zklock` (`scripts/lib/dist.sh`), or from an Apache tarball named by
//! `ZK_DIST`.
//!
//! | release | where from | what `.ci/run` runs on it | Curator in `tests/interop.rs` |
//! |---|---|---|---|
//! | 3.9.5 (2026, current) | pyspark 4.3.0 | the whole suite; the 60 s nemesis (three-server ensemble) | 5.9.0 |
//! | 3.8.0 (Debian 12) | Debian's `zookeeper` package | the compatibility pass below; `tests/security.rs`'s `acls_on_each_release` in the main pass | 5.4.0 (Debian's `libcurator-*-java`) |
//! | 3.6.3 | pyspark 3.5.9 | the compatibility pass below | 2.13.0 |
//!
//! The compatibility pass (`.ci/run`, once per release) runs the binaries that touch the wire,
//! sessions, restarts, snapshots, ensembles, ACLs, TLS/SASL, `multi` replies and interop: `exclusion`, `scale`,
//! `faults`, `faults_ensemble`, `security`, `security_tls_sasl`, `fenced`, `coalesced_requests`, `bundled_reads` and
//! `interop`.
//! The one test the pass skips is `scale.rs`'s queue-up test (the client's keepalive against a
//! proxy that paces the replies: nothing in it depends on the release, and its one way to fail
//! is the test process falling behind its own 2,000 threads, see the table below).
//! `security.rs`'s `acls_on_each_release` starts a 3.9.5 and a 3.8.0 server of its own whatever
//! the run's release, so the ACL scenarios run on both in every run.
//!
//! What needs which release: zklock creates lock parents as container nodes and its nodes with
//! `create2` (the reply carries the stat), both ZooKeeper 3.5+; 3.4 is not supported. What differs between the releases zklock meets:
//! from 3.9 on, `exists` on a node whose ACL denies READ answers NoAuth where 3.8 answers its
//! stat; zklock reads either answer as "the node exists" (see
//! [`security`, "ZooKeeper releases"](super::security#zookeeper-releases)). Listings that wait
//! while the connection is busy go out as one `multiRead`, which 3.6 brought; a 3.5 server
//! answers it Unimplemented and closes the connection (read in ZooKeeper's
//! `UnimplementedRequestProcessor`; no 3.5 server runs here), after which the session, on its
//! next connection, sends its reads one by one.
//!
//! # The embedded server
//!
//! `ZK_VERSION=embedded` (or `scripts/start-zk.sh`, whose default it is for a plain standalone
//! server) runs zklock's own
//! ZooKeeper-protocol server, the workspace's `zklock-server` binary, wherever the scripts would
//! start an Apache server: in the same work dir (`$ZK_WORKDIR/<port>/` with `zk.pid` and
//! `server.log`), so `scripts/stop-zk.sh` stops it, and ready once `srvr` shows `Mode:`.
//! `scripts/test.sh` builds it once per run (dev profile; `ZK_EMBEDDED_PROFILE=release` for an
//! optimised build) and passes it on as `ZK_EMBEDDED_BIN`. It runs with the Apache servers'
//! settings (tickTime 200 ms, sessions of 400 ms to 60 s) and honours three JVM options of
//! `ZK_JVM_OPTS`: `-Dznode.container.checkIntervalMs`, `-Dznode.container.maxNeverUsedIntervalMs`
//! and `-Dzookeeper.extendedTypesEnabled`. What one in-memory node cannot be is refused with a
//! message saying so: `--ensemble`, `--ensemble-member`, `ZK_ENSEMBLE`, `--sasl`, `--tls`, a
//! snapshot to edit (`-Dzookeeper.digest.enabled`), any other JVM option, and the nemesis.
//!
//! The conformance pass (`.ci/run`) runs the suite on it: `ZK_VERSION=embedded scripts/test.sh`
//! over every test binary that needs no TLS, SASL, ensemble or server-side snapshot editing,
//! which is all of them but these:
//!
//! | left out | why |
//! |---|---|
//! | `faults_ensemble.rs`, `faults_chaos.rs` | a three-server ensemble |
//! | `security_tls_sasl.rs`, `cli/tests/secure.rs` | TLS and SASL servers |
//! | `differential.rs` | compares the embedded server with Apache's itself (below), in a pass of its own |
//! | `leases.rs`: `behind_a_partitioned_follower` | a private ensemble and a partitioned follower |
//! | `exclusion.rs`: `used_up_sequence_numbers` | edits a stopped server's snapshot |
//! | `async_api.rs`: `queued_futures_dropped_during_a_server_restart_leave_nothing`, `two_thousand_async_waiters_survive_a_server_restart`; `coalesced_requests.rs`: `a_server_restart_mid_batch_leaves_nothing_behind`; `observability.rs`: `a_server_restart_suspends_the_session_and_the_same_session_comes_back`; `scale.rs`: `busy_session_restart::ten_thousand_watches_with_long_paths_survive_a_server_restart` | restart a server and expect its nodes and sessions back: the embedded server keeps nothing across a restart (a data directory is the next issue's) |
//! | `security.rs`: `acls_on_each_release` | starts Apache 3.9.5 and 3.8.0 servers of its own whatever the run's release: the main pass runs it |
//!
//! Clients nobody here wrote hold it to ZooKeeper's behaviour: Apache Curator 5.9.0
//! (`interop.rs`: `InterProcessMutex`, `InterProcessReadWriteLock`, `InterProcessSemaphoreV2`,
//! `LeaderLatch` and revocation, each sharing its locks with zklock) and kazoo, Debian's
//! `python3-kazoo` (`interop_kazoo.rs`: `Lock`, `Semaphore` and `Election` with several sessions
//! contending and exclusion checked, and `DataWatch`, `ChildrenWatch`, one-shot `getData` and
//! `exists` watches). Both run in the conformance pass and, against 3.9.5, in the main pass.
//!
//! `differential.rs` sends the same seeded request sequences to a private Apache ZooKeeper 3.9.5
//! (TTL nodes on, container sweep out of the way; or `ZK_DIFF_APACHE`) and to the embedded
//! server (in the test's process; or `ZK_EMBEDDED_CONNECT`), each over raw connections encoded
//! with `zklock-proto`'s records, each sequence in a root of its own on both. A sequence is 15 to
//! 60 steps over up to three sessions: creates of every mode (sequential, ephemeral, container,
//! TTL, with bad paths and missing parents), deletes and setData with versions, exists, getData,
//! getChildren and getChildren2 with and without watches, persistent and persistent-recursive
//! watches, removeWatches and checkWatches, multis that fail part-way, multiRead, getACL and
//! setACL with creator-only and read-only ACLs, digest `addAuth`, sync, whoAmI, getEphemerals,
//! getAllChildrenNumber, `check`, and closeSession with the other sessions' view after it.
//! Every reply and every notification (kept with the reply it arrived before) is compared field
//! by field, after normalising what legitimately differs: zxids become their rank among the
//! zxids the transcript shows (stats, write replies, notifications), session ids the slot that
//! opened them, times are dropped, and the lists ZooKeeper promises no order for (children,
//! ephemerals, whoAmI's identities, ACL entries, the events of one closed session's
//! transaction) are compared as sets. A difference prints its seed, the lines before it and the
//! replay command (`ZK_DIFF_SEED`); `ZK_DIFF_SEQUENCES` sets the count (default 300, `.ci/run`
//! 10,000). The normalisation is itself tested: `apache_against_itself_shows_no_difference` runs
//! the sequences twice on the one Apache server and must find nothing. Three hand-written
//! sequences keep what the random ones found, by name: a container created by a `create` op in
//! a `multi`, a `check` outside a `multi`, and a closed session's ephemerals and their watchers.
//!
//! Measured on 7 December 2026 on the 2-core machine beside other builds, with the server of
//! the `server` branch at c24dbed:
//!
//! - the conformance pass: 270 tests passed, 0 failed (and the 8 cases of
//!   `async_blocking_calls.rs`), 20 skipped as listed above, 19 ignored (workers the tests run as
//!   child processes); 285 s of test time, 501 s with the embedded server's build and a rebuild
//!   of the test binaries (again at bc84b45: the same counts, 260 s of test time). Earlier runs that day, on the server before its expiry timer woke
//!   at least once a tick (it slept past sessions made later), failed the tests that need a
//!   silent session expired
//!   (`faults_between_steps`, two of `async_api.rs`'s `under_faults`, the CLI's lost lock),
//!   and `scale.rs`'s herd test while `mntr` lacked the watch-notification counters.
//! - Curator (`interop.rs`) 6 of 6 on the embedded server and on 3.9.5; kazoo
//!   (`interop_kazoo.rs`) 4 of 4 on both, 3 s.
//! - the differential test: 10,000 sequences, 496,161 replies and 32,854 notifications compared,
//!   in 153 s (4 sequences in flight); 71 sequences differ, all by one difference: a `create`
//!   op with the container flag inside a `multi` is answered by 3.9.5 as a create2 (type 15,
//!   path and stat) and by the embedded server as a plain create (path only). The self-check
//!   found 0 differences in 1,000 sequences (24 s). The differences it found earlier that day,
//!   since fixed in the server: a `check` outside a `multi` (3.9.5: Unimplemented, then the
//!   connection closed; the server: checked it), children and whoAmI identities in another
//!   order (now compared as sets, see above).
//!
//! # What each test proves
//!
//! The integration tests are grouped by what they prove: one file, and so one test binary, per
//! subject (`scripts/test.sh --test exclusion`), each part of a subject a module of that file, so
//! that a test's full name reads subject, part, behaviour (`scripts/test.sh --test exclusion
//! mutex::` runs one part). The shared fixtures are in `tests/common` (the test server's client
//! and lock paths, the loopback proxy, private servers and ensembles, a raw wire-protocol
//! session, secure servers, snapshot editing); the CLI crate's tests reach them by a `#[path]`
//! module. The tests of one binary run in parallel threads, so a file whose tests assume a
//! process of their own is a binary of its own: `faults_between_steps.rs` and
//! `hostile_server.rs` install the process's logger, `leases_stalled_threads.rs` a signal handler,
//! `async_blocking_calls.rs` runs each case in a process (its warning is once per process). Within
//! a binary, tests that would disturb each other's timing take a lock: the heavy tests of
//! `scale.rs` run one at a time, the tests on the shared ensemble of `faults_ensemble.rs` too, and
//! in `leases.rs` the healthy-holder test never runs beside a private ensemble. The chaos run has
//! a binary, and so an ensemble, of its own (the failover tests never run on the ensemble it has
//! just churned), and so do the SASL and TLS servers' tests
//! (`security_tls_sasl.rs`), which bound a connect to 3 s and would otherwise run beside the
//! server starts of `security.rs` (two releases).
//!
//! | subject | file: module | what it proves |
//! |---|---|---|
//! | exclusion | `exclusion.rs`: `basics` | the basics against the main server: lock, `try_lock`, `lock_timeout` and release leave no node behind; locking again while holding waits, like `std::sync::Mutex` |
//! | | `exclusion.rs`: `mutex` | 16 threads and 3 processes never overlap (exact counter, alternating enter/exit log); FIFO order; no orphan nodes after timeouts; a SIGKILLed holder is replaced after its session timeout; bad paths and connect strings are typed errors; ephemeral parent refused; chroot; breaking a stale holder; a waiter whose node was broken, or went just before its predecessor, never holds |
//! | | `exclusion.rs`: `one_session_many_waiters` | what the waiters of one session learn of a queue and share (a listing's lowest node, a holder with nothing ahead) is never wrong: one session's waiters among others' while nodes ahead withdraw, a swept and re-created lock path, a waiter's node deleted behind its back, reconnects during a drain; mutex, read/write lock, election and semaphore: never two holders, nobody stranded |
//! | | `exclusion.rs`: `used_up_sequence_numbers` | a lock path whose sequence counter (`cversion`) reached 2^31 (edited into a stopped private server's snapshot) queues no one |
//! | recipes | `recipes.rs`: `read_write_lock`, `semaphore`, `multi_lock`, `guards`, `revocation`, `election` | read/write exclusion across processes, writer fairness, semaphore limits and lease recovery, multi-lock without deadlock, revocation, election handover; 300 semaphore timeouts around a release on a healthy connection, none an error; a permit's and a multi-lock guard's state, lease, loss of one node, tokens and release; an empty multi-lock refused |
//! | | `recipes.rs`: `following_the_leader` | `LeaderElection::observe`: one observer sees the leader step down, the leader's process SIGKILLed (its session expiring) and an operator breaking the leader's node, in order, while a participant queued in `participate()` on the observer's own client keeps its node (same name and sequence) throughout and then leads on it; the first call reports the current leader, also of a path that does not exist yet, and sees its creation; a revocation request (a data change) is no change; a timeout, a cancel token and `close()` end a wait; a change made while the observer's connection was down is seen after the reconnect; a session expired while waiting ends the watch with `SessionExpired`; calls returned, timed out or dropped (tokio's timeout, a future polled and dropped) leave no watch (4lw `wchc`) and create nothing; `next_async` on tokio and `futures::executor` |
//! | | `recipes.rs`: `one_recipe_per_path` | a contender refuses to queue where another recipe's nodes are (`Error::RecipeConflict`, naming both), for every pair of recipes, blocking and async, leaving nothing behind; inspection reports every recipe at a path; a semaphore's empty nodes keep no other recipe out |
//! | fenced writes | `fenced.rs` | create/update/delete and transactions apply all or nothing; a broken holder's writes are refused and write nothing; a revocation request does not break them; a transaction whose reply is lost (proxy swallowing replies) is `OutcomeUnknown`, applied once by the server and never resent; a holder `SIGSTOP`ped past its session, resumed after another client took the lock and wrote, is refused by the server, also when its client already runs on a new session; fencing tokens keep increasing across a private server whose data dir is wiped between two holders; the bounded forms (`fenced_set_data_timeout`/`_with`, `fenced_delete_*`, `commit_timeout`/`commit_with`) on a blackholed connection return by their deadline (300 ms) or a cancel from another thread, plus 500 ms, with `OutcomeUnknown` (the write had left), while the plain form waits on; on a cut connection whose reconnects are refused, with `ConnectionLoss` naming the timeout or `Cancelled`, and nothing reaches the server; a token cancelled before the call sends nothing |
//! | faults and restarts | `faults.rs`: `connection_faults` | through a fault-injecting TCP proxy: a silenced holder reports not-held before a healthy contender acquires, then `Lost`, and the client recovers a new session; waiters survive severed connections; deadlines hold during outages; a reconnecting waiter never jumps the holder; dropping a guard on a frozen (`SIGSTOP`) private server returns within the release timeout, `unlock()` says the outcome is unknown, and the node is gone after `SIGCONT` |
//! | | `faults.rs`: `lost_replies`, `deadlines_in_outages` | a lost create reply is looked up after a `sync`, and the node found is adopted, never duplicated; a lost delete reply is not reported as "already gone"; a semaphore's `acquire_many` and a multi-lock keep their deadline in an outage |
//! | | `faults_deadlines.rs` | every timed acquisition (mutex, read and write lock, semaphore, multi-lock, election; blocking and async) returns within 300 ms of its deadline when its connection goes silent (blackhole), is reset or is closed and refused, with its create answered before the fault or lost to it (the overshoot table is printed with `--nocapture`); a timed lock whose create went unanswered on a silent connection returns by its deadline, and the node that create makes once the connection answers again is deleted (on main, 1 s late on every silent connection: the wait for the withdrawal's delete) |
//! | | `embedded_faults.rs` | the embedded server's fault handles, each used by a test that fails if the handle does nothing, and the examples a user's test can copy: an expired session (one, or all) makes the guard read `Lost` and its fenced write refused (also from `#[tokio::test]`); a timed lock on a silent session, or behind a holder on a silent server, returns by its deadline (plus the 100 ms a timed call may wait for its withdrawal) and takes the lock once it speaks; a silent holder is expired by the server and reads `Lost`; `unlock()` on a silent server says the outcome is unknown and the node goes once it speaks; an operator's delete of the held node makes `unlock()` say `LockLost`; a closed or reset connection (one, or all) resumes its session with the guard held; delayed replies come late and in order; a restart keeping sessions keeps the guard held, a wiping one expires it. Embedded forms of `faults.rs`' blackhole and `SIGSTOP` tests and `exclusion.rs`' deleted holder node, which stay on Apache ZooKeeper |
//! | | `server/tests/data_dir.rs` (crate `zklock-server`) | the server binary with `--data-dir`: 1,000 creates, `kill -9`, a restart on the directory, and all 1,000 nodes are there, the zxid went on, the first session resumes with its ephemeral; 8,000 rewrites past `--snapshot-log-bytes 128K`: several snapshots, the directory within two logs and two snapshots (one being written off the lock), all there after `kill -9`; a write the directory cannot take (`ulimit -f`) is neither acknowledged nor applied nor there after a restart; a directory that is not its own and a port in use are clear errors; SIGTERM exits 0 |
//! | | `faults_ensemble.rs` | leader failover and a restart of the only reachable server: holders keep their lock, waiters still acquire |
//! | | `faults_chaos.rs` | 4 processes × 2 threads for 30 s while holders are SIGKILLed, servers restarted and connections severed: no overlap among holders that still believed in their lock, progress for every survivor, no nodes left |
//! | | `faults_between_steps.rs` | a session expiring between the steps of a multi-lock or a semaphore acquisition fails the whole acquisition and leaves nothing behind |
//! | | `scale.rs`: `busy_session_restart` | 10,000 data watches on 290-character paths on one session survive a restart of a private server (data kept, down about 2 s, 10 s session): every watch back on the server, 500 holders learn of a revocation through the watch they set before the restart, 10,000 waiters then acquire in queue order, nothing expires; 2,000 waiters of a holder's session queue up through the proxy while it paces the server's replies (one per 20 ms for 6 s, longer than the lease: a server far behind, made sure instead of left to the machine's load), judged on the wire by the proxy's timestamps: the holder's keepalive sync goes out within a third of the session timeout of falling due by its own sampled lease, ahead of the requests queued before it, and the holder reads `Held` (sampled every 2 ms) whenever the server had answered a keepalive sent within the lease (`Suspended` only while it had not); queued up means 2,001 nodes under the lock path (counted on a session of its own) and a read behind every waiter's requests answered, not a count of server watches (waiters behind a node of their own session may set none); what it can still catch is the client process itself falling behind as the paced replies flood back and its 2,000 waiters wake (on 28 November 2026, 2 of 8 runs alone under a load average of 23 to 25 from other builds: a keepalive sent 3.4 s after due, and an answer the holder had not taken 2 s after the proxy handed it over; probed once, it was the session's I/O thread that read a sync's answer 2.7 s after the proxy had handed it to its socket, the runtime thread took it 0.4 ms later; in three other runs (one failing alike, 2 s) a plain thread of the test process never overslept a 10 ms sleep by more than 0.42 s: the I/O thread falls behind, which the machine's load alone does not seem to explain; not yet understood); a holder reads `Held` after a cut connection while the 2,000 all re-list |
//! | | `scale.rs`: `long_queues` | queues of 20,000 and 50,000 nodes (listings over ZooKeeper's default `jute.maxbuffer`) are read, listed and inspected whole while other locks of the client stay held; over the client's own limit each call fails alone with `ReplyTooLarge`, at once, leaving nothing; nodes whose data is too large to read in one batch are read one by one |
//! | | `scale.rs`: `herd` | one watch notification per release (server `mntr` counters, private server); after a reconnect, the waiters of one session share one listing (getChildren counted through the proxy) |
//! | coalesced requests | `coalesced_requests.rs` | lock-node creates and deletes coalesced into `multi`s (the proxy parses each multi's operations): 8 threads on 400 paths and 16 threads on one path never hold together and their fencing tokens strictly increase, never two creates under one lock path in one multi; each coalesced create's token is its node's own czxid and its lock path's ctime as the server shows them (made from the reply header's zxid before 3.9); every fallback gives each caller its own outcome (a node deleted by an operator, a lock path deleted between cycles, an ACL refusal of a delete or of a create, compared with `coalesce_requests(false)`); the connection cut with creates or deletes in flight (never a second node, nothing left) and a server restart mid-batch |
//! | bundled reads | `bundled_reads.rs` | listings that wait while the connection is busy go out as one `multiRead` (seen on the wire; the 8-thread tests of `coalesced_requests.rs` check that each listing in one is a getChildren followed by a getData of its lock path, and that the tokens' generations, which come from that getData, are the lock paths' ctimes); a batch answered with more than the client's reply limit is listed again one by one and `contenders()` sees every queue whole; a listing refused by its lock path's ACL in a batch fails its caller as it does with `coalesce_requests(false)`, and the other path's calls see their queue; reads whose `multiRead` is over the limit, read again alone, never see a write called after them (the write waits for the `multiRead`'s answer; it once went out in the same batch, and the read returned its data) |
//! | local handoff | `local_handoff.rs` | the callers of one client passing one node on (`DistributedMutex::local_handoff`): 4 processes of 8 callers (blocking and async) never overlap, and fencing tokens only go up; another process waits at most a batch of local holds, also with every reply to the holders 20 ms late; a process killed mid-batch frees the lock once its session expires; a connection cut mid-batch stops the handoffs once the lease lapses, and every local holder after the cut reads `Lost` or `Suspended`; a node broken by an operator ends the batch (no local hold overlaps the other client's, the broken holder's `unlock()` is `LockLost`, a fresh node follows); local waiters get `SessionExpired` as waiters on the server would; local waiters that give up send nothing, and the last one, cancelled, returns once the node queued for it is withdrawn; a revocable guard hears revocation beside a plain mutex of the same path |
//! | | `local_handoff.rs`: `a_cancelled_last_local_waiter_returns_once_the_parked_node_is_deleted` | a node parked between local holders (batch 1, the check that would allow the next hold kept unanswered by the proxy) and released by its last local waiter's cancel is deleted before that call returns: the proxy holds the requests until the call has returned or had 60 ms to, and the node is listed from another client as the call returns (10 runs of 10 failed with the parked node released in the background, unregistered with the withdrawals, as before 9fce75a; 40 of 40 passed with it registered, the call returning about 62 ms after its cancel, of the 200 ms a cancelled call waits) |
//! | sessions and leases | `leases.rs`: `call_time_lease` | a holder frozen (SIGSTOP) past its session never reads held after another process acquired (every answer stamped with `CLOCK_MONOTONIC` before the call; directly and through the proxy); `lease_remaining()` shrinks in a blackhole and returns with the server; a thousand `lease_state()` and `lease_remaining()` calls send nothing (the proxy's record) and do not see an operator breaking the node, while `is_held()` sends a request about the node and from then on every check reads `Lost`; a healthy loaded holder never reads `Suspended` in 20 s |
//! | | `leases.rs`: `behind_a_partitioned_follower` | a holder behind a follower cut off from the leader never reads held after the quorum expired it: the nemesis's scenario (root, private network namespace) and a private ensemble with the follower cut off through the proxy |
//! | | `leases_stalled_threads.rs` | zklock's runtime and I/O threads stalled from outside (a signal whose handler sleeps on that thread): a holder reads `Suspended` on its own clock before the next holder can acquire, never `Held` after it, and the state thread reports it without waiting for the stalled threads |
//! | | `observability.rs` | `Client::state`, `wait_state_change` and the listener across a blackhole, a server restart, an expiry and `close()`; a dead port named refused, tried for the connect timeout (not the session timeout), the elapsed time as the message says; failing fast; DNS failures; the example's Prometheus text scraped over HTTP; a debugging recorder's counts after known work |
//! | cancellation and lifecycle | `lifecycle.rs`: `cancel_and_close` | cancelling a waiter (node withdrawn while the session is open; a pre-cancelled token sends nothing; cancel during an outage returns at once), `Client::close()` under threads waiting in every recipe or for a revocation, concurrent closes, a watchdog's waits ended by its token, guards moved across threads and returned from functions, 16 tokio tasks through `spawn_blocking`, a process's session ending with it |
//! | | `lifecycle.rs`: `on_a_silent_connection` | a cancelled multi-lock or semaphore taker and a thread blocked in `unlock` return promptly while the connection is blackholed |
//! | | `lifecycle.rs`: `forked_children`, `listener_threads` | a forked child gets `Error::Forked` from an inherited client (`close()` too, at once) and locks with a new one; state listeners' threads end with their clients (the process's thread count, counted in `/proc/self/task`, does not grow) |
//! | | `lifecycle.rs`: `long_lived_chroot` | the chroot survives the container sweep and is recreated if deleted |
//! | | `lifecycle.rs`: `close_on_signals` | `Client::close_on_signals` (feature `signals`): a holder sent SIGTERM releases at once, so the next holder acquires within 1 s (and does not without it) |
//! | | `cancel_token.rs` | `CancelToken::cancelled()`: a `select!` of `lock_async()` and the token ends within 1 s of the cancel while the waiter's connection is silent (the proxy's blackhole), and its node is withdrawn once the connection is back; with no server: ready at once when already cancelled, woken within 1 s of a cancel from another thread on `futures::executor`, a tokio task spawned on it and a `select!` on it stop when a plain thread cancels; a thousand futures dropped unpolled or pending leave the token working (the unit test counts the token's registrations: none for unpolled futures, one per pending one, none once dropped); one `Wait::until` deadline shared by two acquisitions; the waits other than acquisitions, on a connection whose requests the proxy holds back: `unlock_with` cancelled returns `Cancelled` within 1 s and its node goes once the requests pass, the session alive; `unlock_with_async` past its deadline returns `OutcomeUnknown` and releases; `close_with` given a past deadline returns within 1 s and the server ends the session; `close_with` cancelled returns `Cancelled`, the close goes on and a later `close()` reports it; `wait_state_change_with` (and its async form) returns the state unchanged at its deadline or on a cancel, and `Closed` on a close |
//! | async | `async_api.rs`: `acquisitions` | 300 tasks on a 2-worker tokio runtime and 50 on a current-thread one take turns with 0 overlaps; `futures::executor` and smol's executor drive them; blocking threads and async tasks share one lock; `tokio::time::timeout`, `select!` and a cancelled token leave no node (an abandoned waiter never acquires for nobody); a future dropped at every one of its await points, free or queued behind a holder, leaves no node and no lock taken; guards move between tasks and threads; `wait_lost_async` sees a broken node; fenced writes and transactions await; every recipe's async forms; `connect_async`/`close_async` never block a current-thread runtime's only worker; the futures are `Send` |
//! | | `async_api.rs`: `other_calls` | the `_async` forms of inspection, data, break, revocation and state calls, each on tokio and on `futures::executor` and agreeing with its blocking twin: `contenders_async` of every recipe, `current_leader_async`, `inspect_async` (a mutex and a semaphore), `get_data_async`/`set_data_async`/`children_async` (a bad path and an oversized write refused), `break_contender_async` on each recipe (the holders see their loss), `request_revocation_async` waking `wait_revocation_async`, `wait_state_change_async` across a blackhole, a reconnect and `close()`; every one `Error::Closed` on a closed client; futures polled once and dropped leave no watch (4lw `wchc`) and no node; all `Send` |
//! | | `async_api.rs`: `under_faults` | futures dropped while the connection is blackholed, severed, refused, while create replies are lost and across a server restart leave no node; 2,000 async waiters survive a server restart with 0 overlaps; an expiry ends every waiter and tells the holder; `close_async` ends 310 waiters within milliseconds; timed waits hold during outages; semaphore and multi-lock futures dropped half-way release what they took; an `unlock_async` dropped or timed out early still releases (it did not, when it was dropped while stopping its own-node watch); a SIGSTOPped async holder learns its loss on SIGCONT |
//! | | `async_blocking_calls.rs` | (feature `tokio`; each case a process of its own) a blocking call on a tokio worker, multi-thread or current-thread, is warned about once per process on stderr and in the log, naming the `_async` calls; none on `spawn_blocking` threads, a multi-thread runtime's `block_on` thread, plain threads or for async calls; two workers, an async holder and two tasks calling `lock()` no longer deadlock (`block_in_place`) |
//! | security | `security.rs`: `acls`, `shared_parents` | creator-only ACLs keep other identities from breaking or joining a lock; refusals name the identity, the permission and the node; credentials never show; parents created on the way, by a lock or inside a fenced write's transaction, let other identities create siblings |
//! | | `security.rs`: `acls_on_each_release` | on a 3.9.5 and a 3.8.0 server each: `require_chroot(true)` through a chroot that denies READ, `fenced_set_data` below a parent that lets anyone create but not read, and another identity's `try_lock`, timed wait, inspection, break, revocation, semaphore, read/write lock and election on creator-only nodes: the same answer on both (a typed `NoAuth` naming CREATE or READ, within 3 s, nothing left behind, the holder undisturbed; with READ for everyone, inspection shows the holder) |
//! | | `security_tls_sasl.rs` | private SASL and TLS servers (`scripts/start-zk.sh --sasl --tls`): wrong SASL password is `AuthFailed` in under 3 s, locks over TLS, untrusted CA or missing client certificate is `Error::Tls` within the connect timeout |
//! | bad input and messages | `errors.rs`: `bad_input` | bad paths, unicode, long paths, oversized data, garbage connect strings and credentials through every entry point: typed errors, no panic, no node left |
//! | | `errors.rs`: `messages` | a wrong digest password is told it is another identity; a release after `close` is `Closed`, not lost; a connect failing fast says how long it took; inside a chroot a refusal names the node the server refused |
//! | hostile server | `hostile_server.rs` | a fake server on loopback (no ZooKeeper needed) that grants a session, then sends bodies cut short, replies of the wrong type or to no request, frames announced at 2 GiB (skipped, its request failed) or over the client's limit answering no request, half a frame, a reply trickled a byte at a time, a garbled notification, garbage behind the handshake; or answers the handshake with a bogus `ConnectResponse`: every call ends by its deadline, the client resets the connection (logged) and comes back on a new one with the same session, memory stays bounded, a bad handshake is a failed attempt followed by the next |
//! | interop | `interop_kazoo.rs` | kazoo's (Debian's `python3-kazoo`) `Lock`, `Semaphore` and `Election` with several sessions contending, exclusion counted, and its `DataWatch`, `ChildrenWatch`, one-shot and exists watches, against the test server (`tests/kazoo/recipes.py`) |
//! | conformance | `differential.rs` | the embedded server answers seeded request sequences as Apache ZooKeeper 3.9.5 does, every reply and notification field by field (see "The embedded server" above) |
//! | | `interop.rs` | the same locks, read/write locks, semaphores, elections and revocations shared with Apache Curator running in a JVM: 5.9.0, 5.4.0 or 2.13.0 (`ZK_CURATOR`, else the one of `ZK_VERSION`'s jars) |
//! | examples | `examples_run.rs` | `examples/leader.rs` (SIGINT) and `examples/async_leader.rs` (SIGTERM) built and run as two instances against the test server: the second waits on one node (same name and sequence after 1.5 s; the old timeout loop failed this, going from sequence 2 to 4) and names the leader it follows; the leader signalled steps down and exits 0, the other leads on the node it queued first; a queued instance signalled leaves the queue; each step bounded at 30 s |
//! | CLI | `cli/tests/cli.rs` | the `zklock` binary (crate `zklock-cli`, sharing `tests/common` by a `#[path]` module): exclusion, exit codes, signals, status, break, lost lock; a SIGKILLed `zklock run` takes its job and the job's children with it; stopped children; status on paths that are not locks; durations; completions and man pages; `zklock run` exits within the release bound once its command is dead, also with a silent server |
//! | | `cli/tests/secure.rs` | the `zklock` binary's `--tls-*` and `--sasl-user` options against the same secure servers (fixture `tests/common/secure.rs`) |
//! | nemesis | `scripts/nemesis.sh` (`examples/nemesis`) | Jepsen-style: partitions, one-way loss, latency, SIGSTOP and SIGKILL against a three-server ensemble in a private network namespace, judged by an independent checker (see [`nemesis`](super::nemesis); run by `.ci/run` for 60 s) |
//!
//! ## Where the older test files went
//!
//! Until 0.2 the files were named by the history that added them. Every test and assertion moved
//! (in `tests/` and `cli/tests/`, before and after: 288 tests, 18 of them ignored workers run as
//! child processes, plus the 8 cases of `async_blocking_calls.rs`; 1,553
//! `assert!`/`assert_eq!`/`assert_ne!` and 89 `panic!`), under the same function names but for
//! three: `chaos_run` is now
//! `holders_never_overlap_while_processes_are_killed_servers_restarted_and_connections_cut`, and
//! the CLI's `tls_options` and `sasl_options` say what they check.
//!
//! | old file | now |
//! |---|---|
//! | `smoke.rs`, `mutex.rs`, `queue_knowledge.rs`, `sequence_exhaustion.rs` | `exclusion.rs`: `basics`, `mutex`, `one_session_many_waiters`, `used_up_sequence_numbers` |
//! | `recipes.rs`, `leader_watch.rs`, `mixed_recipes.rs` | `recipes.rs`: `read_write_lock`, `semaphore`, `multi_lock`, `guards`, `revocation`, `election`; `following_the_leader`; `one_recipe_per_path` |
//! | `faults.rs` | `faults.rs`: `connection_faults` |
//! | `ensemble.rs` | `faults_ensemble.rs` |
//! | `chaos.rs` | `faults_chaos.rs` |
//! | `between_steps.rs` | `faults_between_steps.rs` |
//! | `restart.rs`, `long_queue.rs`, `herd.rs` | `scale.rs`: `busy_session_restart`, `long_queues`, `herd` |
//! | `lease.rs`, `follower_lease.rs` | `leases.rs`: `call_time_lease`, `behind_a_partitioned_follower` |
//! | `stalled_runtime.rs` | `leases_stalled_threads.rs` |
//! | `observe.rs` | `observability.rs` |
//! | `cancel.rs`, `shutdown.rs` | `lifecycle.rs`: `cancel_and_close`, `close_on_signals` |
//! | `lifecycle.rs` | the follower-partition test to `leases.rs` (`behind_a_partitioned_follower`); fenced writes' parents to `security.rs` (`shared_parents`); the rest stays in `lifecycle.rs`: `cancel_and_close` (close waking a revocation wait, a watchdog's cancel, concurrent closes), `on_a_silent_connection`, `forked_children`, `listener_threads` |
//! | `uptime.rs` | lost replies and deadlines in outages to `faults.rs` (`lost_replies`, `deadlines_in_outages`); creator-only parents to `security.rs` (`shared_parents`); the chroot and the forked child to `lifecycle.rs` (`long_lived_chroot`, `forked_children`) |
//! | `async_locks.rs`, `async_calls.rs`, `async_faults.rs` | `async_api.rs`: `acquisitions`, `other_calls`, `under_faults` |
//! | `blocking_in_async.rs` | `async_blocking_calls.rs` |
//! | `security.rs`, `acl_releases.rs` | `security.rs`: `acls`, `acls_on_each_release` |
//! | `secure_servers.rs` | `security_tls_sasl.rs` |
//! | `fuzz_input.rs`, `messages.rs` | `errors.rs`: `bad_input`, `messages` |
//! | `fenced.rs`, `hostile_server.rs`, `interop.rs`, `examples_run.rs`, `cli/tests/*` | unchanged |
//!
//! # Unit tests
//!
//! Unit tests in the crate cover the pure parts (paths, connect strings, node order across the
//! sequence wrap, the lease arithmetic, the one rule that decides a lock's state,
//! cancellation, the timers), through the `NodeStore` seam every outcome of placing a node in
//! the queue, and through the `ZkSession` seam the wait loop itself against the simulated ZooKeeper
//! (`core/sim`, below): handoff, a node ahead withdrawing, readers ignoring readers, a writer
//! behind readers, the re-check after a reconnect whose notification was lost, our own node
//! deleted while waiting, the ownership check at the claim, a semaphore's lease count, a multi-lock
//! taking its locks in the order of their paths and releasing them when one is busy, and a
//! semaphore's one pass for several leases and its refusal of another recipe's path; property tests (proptest) feed arbitrary bytes to the
//! wire's decoders and framing. `cargo test --lib` needs no server. One unit test keeps the
//! house plan: every `crate::`/`super::` import in `src/` points down the layers (random, error,
//! metrics, rt, znode, wire, session, core, client, recipes, sim) and no files import each other.
//! ## The outbox's order
//!
//! One property test (`wire/conn/outbox/props.rs`, 10,000 cases, about 22 s in the dev profile
//! on a quiet machine) drives the transport's outbox (`wire/conn/outbox.rs`, the one owner of
//! the order, through its interface: queue, take a batch, an answer, a dropped connection;
//! failed batches through the reply handlers of `multi.rs` and `bundle.rs`) without a socket or
//! a thread: three callers queue bursts of reads and writes (getData, getChildren2 and exists,
//! with and without a watch; setData, deletes and lock-node creates, coalescible or not) of
//! related and unrelated nodes (parents, children, siblings, a grandchild, another tree), one
//! burst in seven being writes that may be coalesced followed by reads that may be bundled,
//! mostly of the node they write (a `multiRead` behind a `multi`, rare among bursts drawn from
//! all kinds and paths); a model server executes what the planner lets out, in order, and
//! answers it; `multi`s fail as a whole, `multiRead`s and single requests are answered over the
//! reply limit, answers are delayed, the connection drops (after the server executed some
//! requests whose answers are lost) and comes back. Checked from the callers' side: every
//! request answered exactly once and none left waiting once the server answers everything; no
//! write applied twice, and none answered done that was not applied; a caller's writes apply in
//! the order of its calls (those of one burst where related, those of successive bursts all); a
//! read sees every write its caller queued before it that it can see; no read sees a write
//! queued after it, except that a read answered behind a `multi` that failed and wrote what it
//! sees is queued again at the back, and reads as of then (found by this test: today that
//! second answer can show a write queued after the read, even by its own caller; no call of the
//! crate pipelines a write behind a read); and the planner holds nothing back for no reason
//! (the first write waits only for an unsettled `multi` or `multiRead` of a related node, or,
//! coalescible, for the replies queued before it; a read waits only for a write ahead of it
//! that it sees, or, if it may be bundled, that it relates to). The relations are written out
//! again in the test, apart from the planner's.
//!
//! Each past ordering fix was reverted by hand, one at a time, in the code as it is since the
//! outbox became one type behind one lock, and the test run three times (fresh random seeds,
//! no saved failures: `proptest-regressions/` moved aside); the last column gives, per run, the
//! case that failed first, out of 10,000 (7 December 2026, with the bursts above). The last
//! two rows break the redo the one type took over from the reply handlers' shared flags.
//! Before one burst in seven was drawn that way, the last row's mutant survived one run of
//! three (none in 10,000, then 5402 and 5366), and the test took about 11.0 s of CPU where it
//! takes 12.2 now (three runs each, dev profile).
//!
//! | the rule broken | where | caught by | the case that failed first |
//! |---|---|---|---|
//! | a `multiRead` on the wire not unsettled (075f3f5: its reads, sent again alone, see a later write) | `outbox.rs` (`Outbox::write_multi_read`) | a read saw a write queued after it | 129, 67, 51 |
//! | siblings related again (8082639: a create held behind its sibling's `multi`) | `coalesce.rs` (`related`) | the first write waits for nothing | 24, 16, 9 |
//! | a read that may be bundled neither holds related writes behind it in its batch nor waits for them (fd91353) | `coalesce.rs` (`plan`) | a read saw a write queued after it | 244, 372, 13 |
//! | the two reads' wait rules swapped (e7d2da7 picked one relation per kind of read; no behaviour change, so its mutant is the wrong pick) | `coalesce.rs` (`plan`) | a read waits for no write ahead of it | 9, 47, 51 |
//! | a `multi` answered over the reply limit left unsettled (the fix that came with this test) | `multi.rs` (`settle`) | the first write waits for nothing | 258, 158, 259 |
//! | a read written behind a `multi` that fails not read again | `outbox.rs` (`Outbox::multi_failed`) | a read missed its caller's earlier write | 464, 234, 461 |
//! | the same for a read in a `multiRead` | `outbox.rs` (`Outbox::multi_failed`) | a read missed its caller's earlier write | 31, 40, 87 |
//!
//!
//! # Simulation
//!
//! `cargo run --profile sim --example simulate -- --seeds N [--from S]` (the `sim` profile: zklock
//! and the simulated ZooKeeper optimized, the other dependencies not) runs N seeded schedules of a deterministic simulation (issue
//! 34). Two or three simulated processes, each a session with one to three tasks, take locks
//! through the core's own code against a simulated ZooKeeper, on a virtual clock: a mutex, a
//! read/write lock or a leader election through `contend`; a semaphore (one to three permits; a
//! taker asks for one lease or for several) through `take_permits`, the gate-then-leases pass the
//! recipe runs (`core/permits.rs`); a multi-lock (two or three paths, each a mutex's or a write
//! lock's, the members given in a random order) through `take_in_order` (`core/ordered.rs`), beside
//! single acquisitions of the same paths. Waits are for ever, `try` or timed, and futures are
//! dropped after a few polls. One seed in four sends revocation requests to holders, half of which
//! are revocable and release on them; one queueing seed in five uses a single lock path, left empty
//! between acquisitions and swept every 100 to 500 ms, so that its numbers start again below what
//! the sessions learnt of it.
//!
//! The simulated ZooKeeper is the embedded server's model (`zklock_server::model`, the one copy of
//! ZooKeeper's semantics: the data tree with its stats, `cversion` numbering and its stop at
//! 2^31-1, containers and their sweep, ephemeral nodes and session expiry, one-shot watches and
//! setWatches on a reconnect), driven on the virtual clock by `core/sim/world/`, one file per
//! concept: each request written as zklock-proto's record and answered by the model
//! (`server.rs`); the clients' watch registrations, fired by the notifications the model sends
//! (`watches.rs`); connections that drop with requests applied or not, silent partitions noticed
//! late, frozen processes, reconnects that resume the session at the model (`sessions.rs`);
//! requests and replies in order on each connection, and background deletes retried until
//! settled (`requests.rs`); an operator deleting, replacing and writing nodes, and the container
//! sweep, through the model's handles (`operator.rs`); the clock, whose keepalives and expiries
//! are the model's (`clock.rs`). Three faults go beyond what ZooKeeper does: a client that
//! leaves some watches out of its SetWatches (they never fire), listings shuffled (clients must
//! not rely on the server's order), and create replies that report another owner (a stale or
//! lying reply). A simulated session (`core/sim/client.rs`) implements the core's seam as the
//! real session does, and after a reconnect lets its waiters share a listing by the contract of
//! `session/listing.rs` (any listing sent after the waiter's instant). One seeded generator
//! picks every poll, every request the server processes, every reply or notification
//! delivered, every clock step and every fault (dropped or silent connections, frozen
//! processes, stale replies); the same seed gives the same run, byte for byte (`--trace SEED`
//! prints it). Checked after every step: no two holders reading `Held` at once (nor a writer
//! and a reader, nor more leases than permits); fencing tokens rising in the order their
//! holders first read `Held`; no claim of a node the task had read an answer about after its
//! deletion, nor of another session's node; once the faults stop, every acquisition ends
//! (so two multi-locks never wait for each other), no node and no watch is left (a multi-lock
//! or a semaphore that fails half-way released what it took), and every error is one the docs
//! list. Every acquisition runs through the front end's wait for its withdrawals
//! (`Budget::run_on`, on the virtual clock), some are cancelled through their `Wait`'s token
//! (one in five of those that wait, after 0 to 3 s), and a timed or cancelled one waits at most
//! 250 ms in all past its deadline or its cancel, whichever is first (its own waits, from a
//! poll that leaves it pending to its next wake; not the scheduler's delay in polling it),
//! also on a connection gone silent that still looks connected. In half the schedules a process takes the mutex or the write lock through local
//! handoff (batch 1 to 4, `sim/local.rs`): no node is passed on while its lease does not read
//! `Held`, and when a hold begins no other node of the lock path was created before more than
//! `batch` of that node's holds began (creation and holds ordered by the server's zxid, not by
//! when a notification was read). With the rule that counted `batch` from the reading of a
//! child-watch notification, 23 seeds of 0 to 19,999 failed this check (each by one hold); with
//! the listing-based bound, none (2026-11-28). A failing seed is printed with its replay command and the last steps before the
//! violation; the run ends with `simulate: N schedules, V violations` (exit 1 if V > 0). The
//! seeds that found real defects are kept as unit tests (`sim.rs`), `cargo test --lib` runs
//! 300 schedules, and the core's unit tests drive the same simulated ZooKeeper step by step.
//!
//! Measured on the 2-core build machine on 27 November 2026, with four other builds and test
//! runs on it (load average 36 to 52): seeds 0 to 99,999 in 193 s of wall time, 518
//! schedules/s on 2 threads, but 35 s of CPU (about 2,900 schedules per CPU-second) and 3 MB
//! resident; no violation. The long sweep, seeds 0 to 1,999,999 (load average 13 at its start,
//! 32 at its end): 3,322 s of wall time, 602 schedules/s on 2 threads, 768 s of CPU (about
//! 2,600 schedules per CPU-second), 3 MB resident; 5 seeds failed, all on faults of the
//! simulation itself, not of the core: four claims decided on a listing that another task of
//! the session had asked for, which the checks did not count as read by the claimer, and a
//! process frozen for no time at all, which the clock never thawed. Both are fixed and the
//! five seeds kept as a unit test (`sim.rs`). The 10,000,000-seed sweep, seeds 0 to 9,999,999
//! (28 November 2026, 14:18-16:14 UTC, on 9a285c6 with the fix below, beside other builds and
//! tests for most of it): 6,923 s of wall time, 1,444 schedules/s on 2 threads, 5,688 s of CPU
//! (about 1,760 schedules per CPU-second), 3.3 MB resident, 17,737,958 local handoffs; **no
//! violation**. A run of the same seeds on 9a285c6 without the fix (the day before) had
//! failed one, seed 8496650 (it still fails there, checked again), on a fault of the
//! simulation: a run was declared quiet while a process was
//! frozen (SIGSTOP) with the answer to its create unread in its inbox, so the node it deletes
//! when it resumes looked left behind. A run is now quiet only once no process is frozen, and
//! the seed is kept with the others (`sim.rs`). On the code after local handoff's bound
//! (`core/cohort.rs`), `.ci/run`'s 100,000 seeds: 0 violations in 32.0 s (3,129/s). With the
//! server's model as the simulated ZooKeeper (7 December 2026, 2 threads, load average about 2,
//! the two builds run back to back twice): 29.0 and 35.1 s of wall time, 50.6 s of CPU, 3.9 MB
//! resident, against 20.9 and 24.0 s, 35 to 39 s of CPU, for the simulation's own copy of the
//! semantics before it; 0 violations either way. Earlier figures, on the simulation before multi-locks, several
//! permits, revocations and path reuse: 100,000 schedules in 44 s (2,261/s); seeds 100,000 to
//! 1,099,999 in 157 s (6,373/s, quiet machine); no violation.
//!
//! ## Mutation check
//!
//! Each rule below was broken by hand, one at a time, the simulation run on seeds 0 to 9,999,
//! and the change reverted (at commit 272ebad; the harness applies each change to a copy of
//! the tree and rebuilds). "First seed" is the lowest failing seed, so the count of seeds it
//! took is one more.
//!
//! | the rule broken | where | first seed | seeds failing of 10,000 |
//! |---|---|---|---|
//! | `gone()` always true (every node in the way taken as gone) | `core/contend.rs` | 1 | 4,395 |
//! | what a session learns of a queue keyed by the path only, not by the path's incarnation | `core/contend.rs` (`QueueId`) | 33 | 123 |
//! | the own-node read on the handoff without a listing skipped | `core/contend.rs` | 11 | 298 |
//! | that read's `czxid` comparison dropped | `core/contend.rs` | 2 | 420 |
//! | learning our own number without checking that every other node ahead is gone | `core/contend.rs` | 11 | 133 |
//! | learning from the last listed node instead of the first | `core/contend.rs` | 1 | 4,395 |
//! | the "connected" condition of the handoff without a listing dropped | `core/contend.rs` | none | 0 |
//! | claiming with one node still ahead | `core/contend.rs` | 1 | 8,378 |
//! | the lease ignored (held while connected, however long ago the last answer) | `core/standing.rs` | 41 | 201 |
//! | no withdrawal on a timeout | `core/contend.rs` | 1 | 7,080 |
//! | the ownership check at the claim skipped | `core/claim.rs` | 20 | 307 |
//! | the `SequenceExhausted` check removed | `core/contend.rs` | 34 | 78 |
//! | a multi-lock's members taken in the order given, not by path (a deadlock) | `core/ordered.rs` | 44 | 300 |
//! | one permit node too many admitted | `core/permits.rs` | 28 | 1,062 |
//! | a timed acquisition's wait for its withdrawals not bounded by its deadline (the grace, 1 s, from when it stops) | `core/wait.rs` (`settle_until`) | 5 | 973 |
//! | a cancelled acquisition's wait for its withdrawals 1 s instead of 200 ms | `core/withdraw.rs` (`CANCEL_WITHDRAW_WAIT`) | 11 | 295 |
//! | local handoff: the own-node watch not set at the claim, and a check listing without our node read only as "another node" (a node the operator deleted handed on; at d4d42d5) | `core/cohort.rs` | 8 | 258 |
//! | local handoff: the batch's session end not watched by its waiters, and a node handed on before that end taken anyway (a waiter outlives its session; at d4d42d5) | `core/cohort.rs` | 2 | 34 |
//!
//! The two deadline rows and the two local-handoff rows were measured later than the others, on
//! the code that bounds those waits and checks those batches (each rule broken by hand, seeds 0
//! to 9,999), once the simulation checked deadlines, cancels, operator deletes of held nodes and
//! expiry with local waiters. On the merged code (both together) the same three mutants (the
//! deadline cap, local handoff's watch and `Gone`, its session end) failed 999, 275 and 32 of
//! 10,000 seeds. Seed 5 is a process frozen while connected; seed 13 (kept as a unit test) a
//! connection gone silent at 0.225 s, whose timed acquisition waits 943 ms past its deadline.
//!
//! Two notes on the table. Keying what a session learns of a queue by the path alone (not by
//! the path's incarnation) was first caught at seed 6,398; with the schedules that reuse one
//! swept path it is caught at seed 33. Dropping the "connected" condition of the handoff
//! without a listing (`core/contend.rs`) breaks no invariant in any schedule, and no server
//! model consistent with ZooKeeper's guarantees can make it: a waiter that skips the listing
//! still reads its own node, which waits for a live connection (a session expired meanwhile
//! fails the read), and trusts only two facts, that the blocker's deletion was notified (a
//! notification follows a committed change) and what its session learnt of the queue (from
//! listings, each of which shows every node created before the lowest one it lists, however
//! far its server lags). A follower behind the notification after a reconnect still has both
//! the waiter's node and the nodes the session listed, since a client only reconnects to a
//! server that has seen what it has. Without the condition, the handoff ran 95 times while
//! the session was not connected in seeds 0 to 9,999 (86 times disconnected, 9 times ended;
//! counted in a build that printed each), and nothing broke. So the condition is a belt on
//! braces, kept because it costs nothing (a disconnected waiter waits for the connection to
//! read either way). The simulation has no follower-lag model: by the argument above, one
//! would have nothing to find here.
//!
//! What the simulation decides about a node the operator makes again under a contender's
//! name: see [`protocol`](super::protocol#a-node-made-again-under-a-contenders-name).
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
