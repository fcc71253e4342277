//! The nemesis: a Jepsen-style test of partitions, one-way loss, latency and pauses against a
//! three-server ensemble, judged by an independent checker.
//!
//! # Running it
//!
//! `scripts/nemesis.sh [--duration SECONDS] [--seed N]` is a Jepsen-style test: a three-server
//! ensemble and five client processes in a private network namespace, a seeded schedule of
//! faults with a heal after each, and an independent checker. CI (`.ci/run`) runs it for 60 s
//! after the test suite. It needs root (CI runs as root); when namespaces or the packet filter
//! are refused it says so and fails rather than skipping. Its servers run ZooKeeper 3.9.5 by
//! default (`--version 3.6.3` or `debian` for Debian's 3.8.0, as for `scripts/start-zk.sh`; the
//! runs of November 23-26 below were on 3.8.0). It installs what is missing from Debian
//! (nftables, iproute2, iptables, util-linux, a JRE; zookeeper for `--version debian`), builds
//! `examples/nemesis`, and removes everything it made when it ends (the namespace, every process
//! in it, `/tmp/zk-nemesis-*`; a failed run keeps its logs there and says where). The seed is
//! printed first and each fault with its time, so a run can be repeated; the last line is the
//! summary:
//!
//! ```text
//! $ scripts/nemesis.sh --duration 60 --seed 3202
//! nemesis: seed 3202, duration 60 s, 5 clients, session timeout 3000 ms
//!     3.0 s  fault 1 pause-server: SIGSTOP server 3 (leader) (pid 25106) for 2.2 s
//!     6.2 s  healed; every client acquired again within 1.0 s
//!     8.8 s  fault 2 cut-client: client 3 cut from server 1 only for 4.8 s
//!    ...
//!    48.9 s  fault 6 split: minority {server 1, clients [4, 3, 1]} | majority {servers [2, 3], clients [5, 2]} (holder client 4 with its server 1) for 6.4 s
//!    ...   (the checker's report: registers, each fault's effect, per-kind figures)
//! nemesis: 156 holds, 6 faults, 0 overlaps, 0 lost updates, 0 stale writes accepted, 4.4 s max unavailability
//! ```
//!
//! Other options: `--clients N` (up to 9), `--session-timeout-ms MS` (3000), `--bound SECONDS`
//! (progress bound, 30), `--faults KIND,...` (only these), `--keep` (keep the logs),
//! `--sync-limit TICKS` (the servers' syncLimit, 10 ticks of 200 ms), `--scenario NAME` (a
//! targeted scenario instead of the schedule, below) and `--sabotage MODE` (below).
//!
//! # The namespace
//!
//! Everything runs in a namespace `zk-nemesis-<pid>` made with `ip netns`, on its own loopback;
//! nothing is routed out of it, and the machine's loopback and network are never touched.
//!
//! | who | address | runs as | notes |
//! |---|---|---|---|
//! | server *i* (1-3) | `127.0.0.1i`: client port 2181, quorum 2888, election 3888 | uid 6101*i* | ZooKeeper 3.9.5 (`--version`), tickTime 200 ms, syncLimit 10, initLimit 25 |
//! | client *j* (1-5) | `127.0.0.2j` | uid 6102*j* | `examples/nemesis client`, a 3 s session to all three servers |
//! | the harness | — | root | never rewritten, never filtered: it can always ask `srvr`, `cons`, `wchc` |
//!
//! Every connection a server or a client opens leaves with its own address: the namespace's
//! nftables rewrite the source by the socket's uid (`meta skuid 61021 snat ip to 127.0.0.21`).
//! So each TCP connection's conntrack entry names both ends (the opener is `ct reply ip daddr`,
//! the other end `ct original ip daddr`), and a fault rule can cut exactly the links between two
//! groups, whichever side opened the connection, in one direction or both (the rules sit in a
//! postrouting chain after the rewrite). The servers' `cons` output then also shows which client
//! is connected where.
//!
//! # The faults
//!
//! One at a time, healed before the next, in a seeded shuffled order so that every kind comes
//! up; between faults a quiet 1-3 s and the wait until every client has acquired again. *T* is
//! the session timeout (3 s).
//!
//! | fault | how it is made | for |
//! |---|---|---|
//! | `isolate-leader` | the leader (`srvr`) cut from the other servers and from every client: nftables `drop` on both conntrack directions | 1.5-3 *T* |
//! | `split` | one server and some clients cut from the two others and the rest; half the time the minority is a follower together with a client that is holding a lock through it (found with `cons`) | 1.5-3 *T* |
//! | `cut-client` | one client cut from the server it is connected to (`cons`), and from nothing else | 1-2.5 *T* |
//! | `loss` | 30, 60 or 90 % loss in one direction only (nftables `numgen random mod 100 < p drop`): client → servers, servers → client, leader → followers or followers → leader | 3-8 s |
//! | `latency` | every packet of one client or one server held for 1.2-2 *T* (7 times in 10) or 0.3-0.6 *T*: iptables-legacy `NFQUEUE` and `nemesis delay`, which accepts each queued packet after the delay, in order | delay + 1-3 s |
//! | `pause-client` | `SIGSTOP` of a client past its session, then `SIGCONT`; 7 times in 10 a client in the middle of a hold | 1.3-2.5 *T* |
//! | `pause-server` | `SIGSTOP` of a server (the leader half of the time), then `SIGCONT` | 0.5-2.5 *T* |
//! | `kill-server` | `SIGKILL` of a server (the leader half of the time; 1 in 4 two servers, so no quorum), restarted after | 1-5 s |
//!
//! This kernel has no `sch_netem` (nor `prio`, `fq`, `sfq`: only `htb`, `tbf` and fifos), so
//! `tc netem` cannot delay or drop selected flows here; loss is made by nftables and latency by
//! NFQUEUE (nftables' own `queue` statement is not built either; the xtables `NFQUEUE` target
//! is). Each heal logs what the fault did (`dropped=N`, `delayed=N` packets).
//!
//! # The workload and the checker
//!
//! Each client process runs one session and loops: pick a recipe (mutex 60 %, write lock 15 %,
//! read lock 10 %, semaphore of 2 permits 15 %), acquire with a random timeout of 0.5-5 s, work,
//! release. An exclusive hold reads a register (`/nemesis/reg/mutex` or `/nemesis/reg/rw`,
//! holding `"<fencing token>:<value>"`), waits, and writes `token:value+1` with
//! `fenced_set_data`, 1-3 times; one hold in ten works for 2-6 s in steps, asking
//! `is_held()` before each 50 ms step, as a holder guarding real work does; one in five writes
//! without asking `is_held()` first, so only the fence stands between it and a stale write.
//! Clients decide nothing about safety: they log raw facts to `c<j>/client.log` with
//! `CLOCK_MONOTONIC` stamps (`clock_gettime`, one clock for every process of the machine):
//! each acquisition (call and return stamps, fencing token, session), each `is_held()` answer
//! with the stamp taken *before* the call, each register read, each fenced write's send and
//! return stamps and outcome (`acked`, `refused` = `LockLost`, `unknown` = `OutcomeUnknown`,
//! `notsent` = `ConnectionLoss`), each release. When told to stop they idle with their session
//! open, and the harness records every lock node and every watch (`wchc`) on the servers; then
//! they exit and the checker (`nemesis check`, which can also re-judge a kept run offline with
//! `--state <dir>/server-state`) reads the logs and the servers:
//!
//! 1. **No overlap.** A hold's belief interval runs from its acquisition stamp to the stamp of its
//!    last `true` from `is_held()` (clients ask right before every release). A frozen process's
//!    belief after resuming counts from its resume, because stamps are taken before each call.
//!    Mutex intervals must be pairwise disjoint, a write hold disjoint from every other hold of
//!    the read/write lock, at most 2 semaphore holds at any instant.
//! 2. **No lost update, no stale write accepted.** Acked writes must produce distinct values, none
//!    above the final register value; every value up to the final one must come from an acked
//!    or unknown-outcome write (so the register equals the acked increments plus some of the
//!    unknown ones); along the chain of values the writers' tokens never decrease; and no acked
//!    write was sent after a holder with a higher token had acquired (that holder could only
//!    acquire once our node was gone, so the fence had to refuse it).
//! 3. **Fencing tokens** strictly increase per lock along non-overlapping holds, and no two holds
//!    share one.
//! 4. **Progress.** After each heal, the time until every client's next acquisition; more than
//!    `--bound` (30 s) is a violation. This includes waiting for its turn behind other holders
//!    (long holds last up to about 12 s).
//! 5. **Nothing left.** No lock node and no watch while every client is idle with its session
//!    open; no lock node and no watch on any server after they exit; every client exited 0.
//!
//! # The checker has teeth
//!
//! `--sabotage` breaks the clients on purpose, and the checker catches it (such runs fail, as
//! they should). 30 s of `pause-client` faults (`--faults pause-client --seed 12`):
//!
//! | clients | last line |
//! |---|---|
//! | honest | `nemesis: 81 holds, 3 faults, 0 overlaps, 0 lost updates, 0 stale writes accepted, 3.3 s max unavailability` |
//! | `--sabotage blind`: believe without asking `is_held()` | `nemesis: 78 holds, 3 faults, 7 overlaps, 0 lost updates, 0 stale writes accepted, 3.5 s max unavailability` |
//! | `--sabotage blind,unfenced`: also write with the plain `Client::set_data`, from a copy of the register kept during the hold | `nemesis: 51 holds, 2 faults, 13 overlaps, 4 lost updates, 5 stale writes accepted, 6.8 s max unavailability` |
//!
//! The `blind` row is the second layer at work: the clients believe they hold a lock they lost,
//! yet the register stays exact, because the server refuses their late fenced writes.
//!
//! # Figures: a 10-minute run
//!
//! `scripts/nemesis.sh --duration 600 --seed 2028`, 2026-11-23, the 2-CPU development VM (shared:
//! another nemesis run and other engineers' builds ran at the same time), 5 clients, 3 s
//! sessions:
//!
//! ```text
//! nemesis: 1669 holds, 55 faults, 0 overlaps, 0 lost updates, 0 stale writes accepted, 9.0 s max unavailability
//! ```
//!
//! 2,299 fenced increments acked, 20 with an unknown outcome (4 of them applied, as the registers
//! show), 0 refused, 0 not sent; 0 token disorders, 0 orphan nodes or watches (idle or after
//! exit), every client exited 0. What each fault did (recovery: from the heal until *every*
//! client has acquired again, which includes waiting for its turn behind the other four; gap: the
//! longest time from the fault's start to that recovery in which nobody acquired anything;
//! acquisition latency: from calling `lock_timeout` etc. to its return, contention included):
//!
//! | fault | count | recovery mean / max | longest gap mean / max | acquisitions/s during | acquisition latency during, median / max |
//! |---|---|---|---|---|---|
//! | `cut-client` | 7 | 2.9 / 7.0 s | 2.2 / 3.4 s | 3.3 | 170 / 4,571 ms |
//! | `isolate-leader` | 7 | 4.0 / 9.0 s | 3.5 / 4.3 s | 2.0 | 674 / 4,138 ms |
//! | `kill-server` | 7 | 3.6 / 8.6 s | 2.2 / 5.9 s | 3.6 | 469 / 2,982 ms |
//! | `latency` | 7 | 4.0 / 6.4 s | 3.7 / 7.4 s | 2.5 | 444 / 4,615 ms |
//! | `loss` | 7 | 3.2 / 6.9 s | 2.7 / 4.8 s | 2.0 | 118 / 4,677 ms |
//! | `pause-client` | 6 | 3.0 / 4.7 s | 2.1 / 3.0 s | 2.7 | 147 / 4,183 ms |
//! | `pause-server` | 7 | 3.0 / 5.3 s | 3.0 / 4.0 s | 1.7 | 711 / 3,400 ms |
//! | `split` | 7 | 3.8 / 6.4 s | 3.0 / 3.9 s | 1.6 | 10 / 3,270 ms |
//! | between faults | | | | 3.1 | 309 / 4,730 ms |
//!
//! Reading it: the faults that take the leader away or split the quorum (`isolate-leader`,
//! `pause-server`, `split`) stop every acquisition for 3-4 s (one session timeout, or a
//! failover) and bring the rate to 1.6-2.0 acquisitions/s against 3.1 between faults;
//! `kill-server` costs less on average, since half the time it hits a follower and clients move
//! on at once. The faults that hit one client (`cut-client`, `pause-client`, `latency`, `loss`)
//! cost the others at most one session timeout, until the server expires the victim's session
//! and its lock moves on; a client cut from its server only reconnects elsewhere and keeps its
//! session (3.3 acquisitions/s: no loss at all). Latencies are dominated by contention (5
//! clients, holds of 0.1-6 s, timeouts of 0.5-5 s), which is why the median can drop during a
//! fault: fewer contenders get through.
//!
//! Other runs of the final script, 60 s each as in CI: `nemesis: 167 holds, 5 faults, 0 overlaps,
//! 0 lost updates, 0 stale writes accepted, 5.4 s max unavailability` (seed 3101), `156 holds, 6
//! faults, 0, 0, 0, 4.4 s` (3202), `156 holds, 6 faults, 0, 0, 0, 6.1 s` (3303). Earlier runs
//! while the harness grew: 10 minutes with short holds only, `2889 holds, 66 faults, 0, 0, 0,
//! 2.6 s` (seed 2026; there a careless holder frozen by `pause-client` 0.2 ms after reading the
//! register had its write refused by the fence 4.2 s later); 10 minutes with one hold in six up
//! to 12 s long, `1083 holds, 44 faults, 0, 0, 0, 15.3 s` (2027); 120 s with 9 clients and 2 s
//! sessions, `691 holds, 13 faults, 0, 0, 0, 7.3 s` (303). After the lease fix, on the final
//! code: 10 minutes, `1001 holds, 44 faults, 0 overlaps, 0 lost updates, 0 stale writes
//! accepted, 13.0 s max unavailability` (seed 1090794949; 1,314 fenced increments acked, 6
//! unknown), and in CI's 60 s `99 holds, 5 faults, 0, 0, 0, 11.1 s`.
//!
//! Those runs were on Debian's ZooKeeper 3.8.0. On 3.9.5 (the default since then), 2026-11-27,
//! the same shared VM under other builds (load 7-23): 60 s as in CI, `159 holds, 5 faults, 0
//! overlaps, 0 lost updates (fenced; 8 of 149 unfenced increments lost), 6 stale writes refused,
//! 0 accepted, 6.7 s max unavailability, no server data loss` (seed 1829705484); 20 s, `50 holds,
//! 2 faults, 0, 0, 0, 8.5 s` (seed 5). The 10-minute run above, repeated on 3.9.5 (seed 2028,
//! load 7-20): `1502 holds, 51 faults, 0 overlaps, 0 lost updates (fenced; 59 of 1524
//! unfenced lost), 23 stale writes refused, 0 accepted, 0 token, 0 timeout, 0 leftover, 13.0 s max
//! unavailability, no server data loss`, but it FAILED on one progress violation: the read lock
//! `rw/r` was wanted from 133.6 s and nobody acquired it for 38.0 s (bound 30 s). Its trace
//! was not kept. The same seed again on 3.9.5, 2026-12-07, on the final code of that day with
//! the machine at load 1-5 (the schedule is the seed's; the timings are the machine's):
//! `1647 holds, 51 faults, 0 overlaps, 0 lost updates (fenced; 91 of 1740 unfenced lost), 32
//! stale writes refused, 0 accepted, 0 token, 0 progress, 0 timeout, 0 leftover, 15.9 s max
//! unavailability, no server data loss`, PASS; `rw/r` 156 acquisitions, its longest
//! wanted-but-not-granted 13.2 s. The 38 s window of the failed run holds five faults back to
//! back, two of them taking the leader away: `cut-client` (client 5, 131.9 s), `loss` (to
//! client 4, 142.4 s), `pause-server` (the leader, 149.1 s), `isolate-leader` (160.5 s) and
//! `pause-client` (client 5, 170.8 s). Here `rw/r` was acquired at 128.7, 141.5, 155.2 and
//! 166.4 s through them (gaps of 12.8 and 13.7 s, with 56 readers queued behind a writer in
//! the run); under load 7-20 each recovery stretched enough that no reader got through
//! between them. That reading fits the schedule and the load; without the failed run's trace
//! it is not proof, and the progress bound stays as it is.
//!
//! # What it found
//!
//! A lease violation, now a test in `tests/leases.rs`, set up exactly by
//! `scripts/nemesis.sh --scenario follower-lease --sync-limit 25`: a holder connected to a
//! follower is partitioned, with that follower, from the leader and the other follower, while a
//! contender waits on the majority side. The follower goes on answering the holder (pings, reads,
//! zklock's lease keepalive) for `syncLimit × tickTime` after it lost the leader, and only then
//! closes its connections; the leader, which expires sessions, has heard nothing of the holder
//! since the partition, expires the session one session timeout after the follower last reported
//! it, and the contender acquires. zklock renewed the lease from the follower's answers and the
//! connection stayed up, so `is_held()` kept answering `true` (measured before the fix):
//!
//! | servers' syncLimit × tickTime (3 s sessions) | trials with `Held` after the contender acquired | by up to |
//! |---|---|---|
//! | 2 s (the nemesis default) | 0 of 5 | (ended 0.6-1.0 s before) |
//! | 3 s | 3 of 5 | 235 ms |
//! | 5 s | 5 of 5 | 2.2 s |
//!
//! A follower's answer proves that the follower is alive, not that the leader has heard from the
//! session, so the lease's premise ("the server cannot expire the session before a full session
//! timeout after the send time of an answered request") does not hold for it. ZooKeeper's
//! defaults (tickTime 2 s, syncLimit 5: 10 s) against zklock's default 10 s session are on the
//! border. Fenced writes are not affected: they need the leader, and a pending write also holds
//! back the follower's answers to that session's later requests, so a holder that writes stops
//! renewing its lease. That is why the random schedule did not show it even with
//! `--sync-limit 25` (4 splits that put a holder with its follower on the minority side, 120 s):
//! its holders write every few hundred milliseconds. The schedule keeps the servers' syncLimit
//! at 2 s, where the follower closes its connections before the leader can expire the session.
//!
//! **Fixed:** the lease is now renewed only by answers the leader has seen: writes, and a `sync`
//! as the keepalive (a follower must pass a sync on to the leader, so a cut-off follower leaves it
//! unanswered); reads no longer count. `tests/leases.rs` (module `behind_a_partitioned_follower`:
//! this scenario, syncLimit 5 s, 3 trials) passes and runs in CI, as does its version through a
//! proxy between a follower and the leader (found independently by a code review), beside it.
//!
//! Nothing else: in every run so far (60 s to 10 min, 5 or 9 clients, 2-3 s sessions) no
//! overlap, no lost update, no stale write accepted, no token out of order, no orphan node or
//! watch; the fence refused every stale write that reached the server.
#![doc = include_str!("../../examples/nemesis/FINDINGS.md")]
