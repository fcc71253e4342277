//! zklock's harness for the shared ZooKeeper lock anchors (`../shared/anchors`, see its README,
//! "Adding an implementation"), plus two scenarios of zklock's own.
//!
//! ```text
//! cargo build --release --example bench
//! target/release/examples/bench <scenario> <host:port> <lock path>
//! # scenario: uncontended | contended | herd | scale | many_locks | many_locks_plain |
//! #           many_locks_checks | hot |
//! #           hot_off | floor | floor_sequential | floor_many
//! ```
//!
//! `uncontended`, `contended` and `herd` follow `LockBench.java` of the anchors step by step
//! (same counts, warm-up, sampling points and arithmetic), so zklock is one more row of the
//! anchors table: every simulated client is one [`Client`] (one ZooKeeper session, 10 s session
//! timeout as the Java harness asks), all clients are threads of this process sharing one
//! monotonic clock, and the lock is used as a user would: `mutex.lock()?` then
//! `guard.unlock()?`. Server-side counts come from the `mntr` four-letter command, sampled by
//! opening a TCP connection, sending exactly the four bytes `mntr` and reading to EOF (the sample
//! itself counts as one received packet, which is subtracted as the Java harness does).
//!
//! Extra scenarios, in the same `RESULT key=value` form:
//! - `scale`: one holder (own session) holds `<lock path>/w<N>` while N = 10, 100, 1,000
//!   waiters queue behind it; it releases and every waiter, on getting the lock, releases it at
//!   once. Reported per N: hand-off latency (median, the contended scenario's definition) and
//!   watch notifications per release. Layout: every waiter is a thread with its own
//!   `DistributedMutex` (hence its own lock node), and waiter `i` uses shared session `i % 8`
//!   (8 [`Client`]s for all N, so only the queue length changes between levels); a waiter is
//!   one "client" of the hand-off definition. Each level runs one warm-up round, then rounds
//!   until it has 1,000 hand-offs (100 rounds of 10, 10 of 100, 1 of 1,000), so every median
//!   rests on as many samples; `mntr` is sampled around each round's release as in `herd`.
//! - `many_locks`: 10,000 distinct lock paths `<lock path>/l<i>`, each acquired and released
//!   once by one of 8 threads sharing one session (thread `t` takes paths `t, t+8, ...`, so the
//!   locks are never contended). Two passes: `cold` (the lock paths do not exist yet: the
//!   first acquisition creates them) and `warm` (the same paths again). Throughput, cycle
//!   latency and server requests per cycle for each. `many_locks_plain`: the same with
//!   `coalesce_requests(false)` (every request sent alone). `many_locks_checks`: a cold pass,
//!   then the warm pass three times on one client, each cycle checking its hold between lock
//!   and unlock as a holder between two steps would: `warm_none` (no check), `warm_lease`
//!   (`guard.lease_state()`, which sends nothing) and `warm_is_held` (`guard.is_held()`, whose
//!   first call on a guard sets a watch on its node, removed before the release); `ROUNDS=n`
//!   repeats the three, interleaved.
//! - `hot` and `hot_off` (local handoff): 2 processes of 8 threads each on one lock, one
//!   [`Client`] per process (a process is a session to ZooKeeper; here both are in this one OS
//!   process, sharing one clock and one overlap counter), 4,000 acquisitions in all, empty
//!   critical section; `hot` with local handoff (batch 128, or `ZKLOCK_HOT_BATCH`), `hot_off`
//!   without. Prints acquisitions per second, server requests per acquisition,
//!   `hot_max_remote_wait_holds` (the most holds of one process that began after a node of the
//!   other was created, as zklock's `creating` debug line before the create says, and before
//!   that node took the lock), `hot_max_remote_wait_holds_from_call` (the most holds of one
//!   process in a row while a thread of the other was inside `lock()`) and
//!   `hot_mutex=PASS|FAIL`.
//!
//! - `floor` and `floor_sequential`: not zklock at all, but the measuring stick of the
//!   uncontended cycle. A minimal blocking ZooKeeper client written out below (one
//!   `std::net::TcpStream`, TCP_NODELAY, jute framing by hand, no threads, no zklock) runs the
//!   protocol minimum of a lock cycle on `<lock path>`, with the counts of `uncontended`:
//!   `floor` sends create(EPHEMERAL_SEQUENTIAL) and getChildren back to back, reads both
//!   replies, then deletes (2 round trips); `floor_sequential` waits for each reply before the
//!   next request (3 round trips). Run right beside `uncontended` on the same server, the ratio
//!   of the two medians is what zklock's own layers cost over the wire (the target:
//!   at most 1.1x the pipelined floor).
//!
//! - `floor_many`: the bare client's limit for `many_locks`' warm pass (creates and deletes coalesced): the 10,000
//!   lock paths created up front, each cycled once (create EPHEMERAL_SEQUENTIAL, getChildren,
//!   delete) with W = 1, 8 and 32 cycles in flight: `plain` as individual requests (3 a
//!   cycle), `multi` with each wave's creates as one `multi` and its deletes as another
//!   (1 + 2/W a cycle). Then zklock's own warm pass (8 threads, one client), requests alone
//!   (`floor_many_zklock_plain`) and coalesced (`floor_many_zklock`), each with its ratio to
//!   the coalesced floor at W = 8.
//!
//! Every scenario also prints the process's peak RSS (`VmHWM` of `/proc/self/status`). The
//! server counts (`mntr`) are server-wide, so the extra scenarios also print how many other
//! clients were connected when they began: run them on a quiet server for clean counts.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use zklock::{Client, DistributedMutex, LockState};

// As in LockBench.java.
const WARMUP: usize = 200; // uncontended
const CYCLES: usize = 2000; // uncontended
const CLIENTS: usize = 8; // contended
const PER_CLIENT: usize = 250; // contended
const WAITERS: usize = 50; // herd
/// The Java harness's `new ZooKeeper(connect, 10_000, ..)`.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
const WATCH_KINDS: [&str; 4] = [
    "node_created",
    "node_deleted",
    "node_changed",
    "node_children",
];

// zklock's own scenarios.
const SCALE_LEVELS: [usize; 3] = [10, 100, 1000];
const SCALE_SESSIONS: usize = 8;
/// Hand-offs measured per level: 100 rounds of 10 waiters, 10 of 100, 1 of 1,000.
const SCALE_SAMPLES: usize = 1000;
const SCALE_QUEUE_TIMEOUT: Duration = Duration::from_secs(120);
const SCALE_WATCH_GRACE: Duration = Duration::from_secs(5);
const MANY_LOCKS: usize = 10_000;
const MANY_THREADS: usize = 8;

type Mntr = HashMap<String, f64>;
/// One acquisition: client, acquire() called, acquire() returned, release() called, release()
/// returned (nanoseconds on [`nano_time`]'s clock).
type Rec = [i64; 5];

static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// `System.nanoTime()`: a monotonic clock shared by every thread of the process.
fn nano_time() -> i64 {
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as i64
}

/// One client = one ZooKeeper session.
fn open(host_port: &str) -> anyhow::Result<Client> {
    Client::builder(host_port)
        .session_timeout(SESSION_TIMEOUT)
        .connect()
        .with_context(|| format!("connecting to {host_port}"))
}

/// Server-side counters from the `mntr` four-letter command (the command itself counts as 1
/// packet).
fn mntr(host_port: &str) -> anyhow::Result<Mntr> {
    let mut s = TcpStream::connect(host_port).with_context(|| format!("mntr: {host_port}"))?;
    s.write_all(b"mntr")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let mut m = Mntr::new();
    for line in text.split('\n') {
        let kv: Vec<&str> = line.split('\t').collect();
        if kv.len() == 2 {
            if let Ok(v) = kv[1].trim().parse::<f64>() {
                m.insert(kv[0].to_owned(), v);
            }
        }
    }
    Ok(m)
}

fn get(m: &Mntr, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(0.0)
}

fn delta(a: &Mntr, b: &Mntr, key: &str) -> f64 {
    get(b, key) - get(a, key)
}

/// Watch notifications the server fired between two samples (all event types).
fn watches_fired(a: &Mntr, b: &Mntr) -> f64 {
    WATCH_KINDS
        .iter()
        .map(|t| delta(a, b, &format!("zk_sum_{t}_watch_count")))
        .sum()
}

/// Nearest-rank percentile of an ascending slice.
fn pct(sorted: &[i64], q: f64) -> i64 {
    let rank = (q * sorted.len() as f64).ceil() as i64 - 1;
    sorted[rank.max(0) as usize]
}

fn result(key: &str, value: impl std::fmt::Display) {
    println!("RESULT {key}={value}");
}

fn f(v: f64) -> String {
    format!("{v:.2}")
}

fn us(ns: i64) -> String {
    f(ns as f64 / 1e3)
}

/// Peak resident set size of this process so far, in kB (`VmHWM`).
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn result_rss(prefix: &str) {
    result(&format!("{prefix}_peak_rss_kb"), peak_rss_kb());
}

/// The extra scenarios' server counts are server-wide: say how many other clients were
/// connected when the scenario began (0 on a private server; the `mntr` connection is not
/// counted).
fn result_other_connections(prefix: &str, host_port: &str) -> anyhow::Result<()> {
    let alive = get(&mntr(host_port)?, "zk_num_alive_connections");
    result(
        &format!("{prefix}_other_connections_at_start"),
        format!("{:.0}", (alive - 1.0).max(0.0)),
    );
    Ok(())
}

/// `CountDownLatch(1)`: threads wait until the main thread opens it.
#[derive(Default)]
struct Latch {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Latch {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn count_down(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// Hand-offs as `LockBench.contended` computes them. `done` must be sorted by acquire()
/// returning. Counts into `overlaps` every next acquisition that returned before the previous
/// holder called release(); returns (release() returned -> acquire() returned, release() called
/// -> acquire() returned) for consecutive pairs where the next holder is a different client that
/// was already waiting. Both in acquisition order (unsorted).
fn handoffs(done: &[Rec], overlaps: &AtomicUsize) -> (Vec<i64>, Vec<i64>) {
    let (mut handoffs, mut from_call) = (Vec::new(), Vec::new());
    for pair in done.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        if next[2] < prev[3] {
            overlaps.fetch_add(1, Ordering::SeqCst); // next got it before prev let go
        }
        if next[0] != prev[0] && next[1] < prev[3] {
            // next was already waiting
            handoffs.push(next[2] - prev[4]); // release() returned -> acquire() returned
            from_call.push(next[2] - prev[3]); // release() called   -> acquire() returned
        }
    }
    (handoffs, from_call)
}

// ---- a. uncontended ----
fn uncontended(host_port: &str, path: &str) -> anyhow::Result<()> {
    let client = open(host_port)?;
    let m = DistributedMutex::new(&client, path)?;
    for _ in 0..WARMUP {
        let guard = m.lock()?;
        guard.unlock()?;
    }
    let mut ns = Vec::with_capacity(CYCLES);
    let before = mntr(host_port)?;
    for _ in 0..CYCLES {
        let t0 = nano_time();
        let guard = m.lock()?;
        guard.unlock()?;
        ns.push(nano_time() - t0);
    }
    let after = mntr(host_port)?;
    ns.sort_unstable();
    let cycles = CYCLES as f64;
    result("unc_median_us", us(pct(&ns, 0.50)));
    result("unc_p99_us", us(pct(&ns, 0.99)));
    result(
        "unc_req_per_cycle",
        f((delta(&before, &after, "zk_packets_received") - 1.0) / cycles),
    );
    result(
        "unc_reads_per_cycle",
        f(delta(&before, &after, "zk_cnt_readlatency") / cycles),
    );
    result(
        "unc_writes_per_cycle",
        f(delta(&before, &after, "zk_cnt_updatelatency") / cycles),
    );
    drop(m);
    drop(client);
    result_rss("unc");
    Ok(())
}

// ---- b + c. contended throughput, mutual exclusion, hand-off latency ----
fn contended(host_port: &str, path: &str) -> anyhow::Result<()> {
    let clients = (0..CLIENTS)
        .map(|_| open(host_port))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mutexes = clients
        .iter()
        .map(|c| DistributedMutex::new(c, path))
        .collect::<zklock::Result<Vec<_>>>()?;
    let holders = AtomicI32::new(0);
    let overlaps = AtomicUsize::new(0);
    let errors = AtomicUsize::new(0);
    let go = Latch::default();

    let (per_client, before, wall, after) = thread::scope(|s| {
        let threads: Vec<_> = mutexes
            .iter()
            .enumerate()
            .map(|(id, mutex)| {
                let (holders, overlaps, errors, go) = (&holders, &overlaps, &errors, &go);
                s.spawn(move || {
                    let mut mine: Vec<Rec> = Vec::with_capacity(PER_CLIENT);
                    go.wait();
                    for _ in 0..PER_CLIENT {
                        let t0 = nano_time();
                        let guard = match mutex.lock() {
                            Ok(guard) => guard,
                            Err(e) => {
                                errors.fetch_add(1, Ordering::SeqCst);
                                eprintln!("client {id}: lock: {e}");
                                break;
                            }
                        };
                        let t1 = nano_time();
                        // Empty critical section: count holders.
                        if holders.fetch_add(1, Ordering::SeqCst) + 1 != 1 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        holders.fetch_sub(1, Ordering::SeqCst);
                        let t2 = nano_time();
                        if let Err(e) = guard.unlock() {
                            errors.fetch_add(1, Ordering::SeqCst);
                            eprintln!("client {id}: unlock: {e}");
                            break;
                        }
                        mine.push([id as i64, t0, t1, t2, nano_time()]);
                    }
                    mine
                })
            })
            .collect();
        // Sample first, then open the latch; never leave the threads waiting on an error.
        let before = mntr(host_port);
        let start = nano_time();
        go.count_down();
        let per_client: Vec<Vec<Rec>> = threads
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    errors.fetch_add(1, Ordering::SeqCst);
                    Vec::new()
                })
            })
            .collect();
        let wall = (nano_time() - start) as f64 / 1e9;
        (per_client, before, wall, mntr(host_port))
    });
    let (before, after) = (before?, after?);
    drop(mutexes);
    drop(clients);

    // In LockBench's record-array order (client by client), then by acquire() returning.
    let mut done: Vec<Rec> = per_client.into_iter().flatten().collect();
    done.sort_by_key(|r| r[2]);
    let (mut h, mut hc) = handoffs(&done, &overlaps);
    h.sort_unstable();
    hc.sort_unstable();
    let n = done.len();
    let (overlaps, errors) = (overlaps.into_inner(), errors.into_inner());
    let ok = errors == 0 && overlaps == 0 && n == CLIENTS * PER_CLIENT;
    result("con_wall_s", format!("{wall:.3}"));
    result("con_acq_per_s", format!("{:.0}", n as f64 / wall));
    result(
        "con_mutex",
        if ok {
            "PASS".to_owned()
        } else {
            format!("FAIL(overlaps={overlaps},errors={errors},done={n})")
        },
    );
    result(
        "con_req_per_acq",
        f((delta(&before, &after, "zk_packets_received") - 1.0) / n as f64),
    );
    result(
        "con_watch_per_acq",
        f(watches_fired(&before, &after) / n as f64),
    );
    if !h.is_empty() {
        result("con_handoff_med_us", us(pct(&h, 0.50)));
        result("con_handoff_call_med_us", us(pct(&hc, 0.50)));
        result("con_handoff_n", h.len());
    }
    result_rss("con");
    Ok(())
}

// ---- hot: 2 processes x 8 threads on one lock, local handoff ----
/// Local holds allowed while another process waits, in `hot` (the docs' suggestion);
/// `ZKLOCK_HOT_BATCH` sets another.
const HOT_BATCH: u32 = 128;

/// What `hot` saw, in the order it happened: holds, and the creates of lock nodes.
enum HotEvent {
    /// A hold of process `process`, the node's `local`-th handoff; whether another process had
    /// a thread inside `lock()` then.
    Hold {
        process: u8,
        local: u16,
        other_waits: bool,
    },
    /// zklock's `creating` line: a node of session `session` is about to be created.
    Creating { session: i64 },
}

static HOT_EVENTS: Mutex<Vec<HotEvent>> = Mutex::new(Vec::new());

/// The bench's logger, which also records zklock's `creating <lock path>/<prefix> (session
/// 0x..)` debug lines (logged before the create is sent, so before the node exists) as
/// [`HotEvent::Creating`]: holds counted from there are at least those that began after the
/// node's creation.
struct CreatesTap(env_logger::Logger);

impl log::Log for CreatesTap {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target() == "zklock::core::place" || self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record) {
        if record.target() == "zklock::core::place" {
            let line = record.args().to_string();
            let session = line
                .strip_prefix("creating ")
                .and_then(|rest| rest.rsplit_once("(session 0x"))
                .and_then(|(_, id)| i64::from_str_radix(id.trim_end_matches(')'), 16).ok());
            if let Some(session) = session {
                HOT_EVENTS
                    .lock()
                    .unwrap()
                    .push(HotEvent::Creating { session });
            }
        }
        if self.0.matches(record) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

fn hot_batch() -> u32 {
    std::env::var("ZKLOCK_HOT_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(HOT_BATCH)
}
const HOT_PROCESSES: usize = 2;
const HOT_THREADS: usize = 8;
const HOT_ACQUISITIONS: usize = 4000;

/// `hot`: 2 "processes" (each one [`Client`], i.e. one session, as ZooKeeper sees a process)
/// of 8 threads each on one lock, 4,000 acquisitions in all, empty critical section; with
/// local handoff (`batch` 128) unless `local` is false. Prints acquisitions per second, server
/// requests per acquisition (`mntr`), the most holds of one process that began after a node
/// of the other was created and before that node took the lock (`hot_max_remote_wait_holds`,
/// with local handoff), the most holds of one process in a row while the other had a thread
/// inside `lock()` (`hot_max_remote_wait_holds_from_call`), and PASS if no two holders
/// overlapped.
fn hot(host_port: &str, path: &str, local: bool) -> anyhow::Result<()> {
    let clients = (0..HOT_PROCESSES)
        .map(|_| open(host_port))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mutexes = clients
        .iter()
        .map(|c| {
            let mutex = DistributedMutex::new(c, path)?;
            Ok(if local {
                mutex.local_handoff(hot_batch())
            } else {
                mutex
            })
        })
        .collect::<zklock::Result<Vec<_>>>()?;
    let per_thread = HOT_ACQUISITIONS / (HOT_PROCESSES * HOT_THREADS);
    let holders = AtomicI32::new(0);
    let overlaps = AtomicUsize::new(0);
    let errors = AtomicUsize::new(0);
    // Per process: threads inside `lock()` now. The holders in order: `HOT_EVENTS`.
    let waiting: Vec<AtomicUsize> = (0..HOT_PROCESSES).map(|_| AtomicUsize::new(0)).collect();
    HOT_EVENTS.lock().unwrap().clear();
    let go = Latch::default();
    let (before, wall, after) = thread::scope(|s| {
        let threads: Vec<_> = (0..HOT_PROCESSES * HOT_THREADS)
            .map(|t| {
                let p = t % HOT_PROCESSES;
                let mutex = &mutexes[p];
                let (holders, overlaps, errors, go) = (&holders, &overlaps, &errors, &go);
                let waiting = &waiting;
                s.spawn(move || {
                    go.wait();
                    for _ in 0..per_thread {
                        waiting[p].fetch_add(1, Ordering::SeqCst);
                        let guard = mutex.lock();
                        waiting[p].fetch_sub(1, Ordering::SeqCst);
                        let guard = match guard {
                            Ok(guard) => guard,
                            Err(e) => {
                                errors.fetch_add(1, Ordering::SeqCst);
                                eprintln!("process {p}: lock: {e}");
                                break;
                            }
                        };
                        if holders.fetch_add(1, Ordering::SeqCst) + 1 != 1 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        // Did another process wait while this one held?
                        let other_waits = (0..HOT_PROCESSES)
                            .any(|q| q != p && waiting[q].load(Ordering::SeqCst) > 0);
                        HOT_EVENTS.lock().unwrap().push(HotEvent::Hold {
                            process: p as u8,
                            local: guard.fencing().local(),
                            other_waits,
                        });
                        holders.fetch_sub(1, Ordering::SeqCst);
                        if let Err(e) = guard.unlock() {
                            errors.fetch_add(1, Ordering::SeqCst);
                            eprintln!("process {p}: unlock: {e}");
                            break;
                        }
                    }
                })
            })
            .collect();
        let before = mntr(host_port);
        let start = nano_time();
        go.count_down();
        for t in threads {
            if t.join().is_err() {
                errors.fetch_add(1, Ordering::SeqCst);
            }
        }
        let wall = (nano_time() - start) as f64 / 1e9;
        (before, wall, mntr(host_port))
    });
    let (before, after) = (before?, after?);
    let events = std::mem::take(&mut *HOT_EVENTS.lock().unwrap());
    let sessions: Vec<i64> = clients.iter().map(Client::session_id).collect();
    // From creation: per process, the holds of the others since its node's `creating` line,
    // while that node waits (until a hold of it begins with local number 0: its claim).
    let mut pending: Vec<Option<usize>> = vec![None; HOT_PROCESSES];
    let mut worst_created = 0usize;
    // From the call: the longest run of one process's holds while another process had a
    // thread inside `lock()`.
    let (mut run, mut worst, mut last) = (0usize, 0usize, u8::MAX);
    let (mut n, mut turns) = (0usize, 0usize);
    for event in &events {
        match *event {
            HotEvent::Creating { session } => {
                if let Some(q) = sessions.iter().position(|&s| s == session) {
                    pending[q].get_or_insert(0);
                }
            }
            HotEvent::Hold {
                process: p,
                local,
                other_waits,
            } => {
                n += 1;
                if local == 0 {
                    pending[usize::from(p)] = None;
                }
                for (q, since) in pending.iter_mut().enumerate() {
                    if let Some(since) = since.as_mut().filter(|_| q != usize::from(p)) {
                        *since += 1;
                        worst_created = worst_created.max(*since);
                    }
                }
                if p != last {
                    turns += 1;
                }
                run = if p == last && other_waits { run + 1 } else { 1 };
                last = p;
                if other_waits {
                    worst = worst.max(run);
                }
            }
        }
    }
    let (overlaps, errors) = (overlaps.into_inner(), errors.into_inner());
    let ok = errors == 0 && overlaps == 0 && n == HOT_ACQUISITIONS;
    let prefix = if local { "hot" } else { "hot_off" };
    result(&format!("{prefix}_local_handoff"), local);
    result(
        &format!("{prefix}_batch"),
        if local { hot_batch() } else { 0 },
    );
    result(&format!("{prefix}_wall_s"), format!("{wall:.3}"));
    result(
        &format!("{prefix}_acq_per_s"),
        format!("{:.0}", n as f64 / wall),
    );
    result(
        &format!("{prefix}_req_per_acq"),
        f((delta(&before, &after, "zk_packets_received") - 1.0) / n as f64),
    );
    if local {
        // Without local handoff every thread has a node of its own: counted from the call.
        result(&format!("{prefix}_max_remote_wait_holds"), worst_created);
    }
    result(&format!("{prefix}_max_remote_wait_holds_from_call"), worst);
    result(&format!("{prefix}_turns"), turns);
    result(
        &format!("{prefix}_mutex"),
        if ok {
            "PASS".to_owned()
        } else {
            format!("FAIL(overlaps={overlaps},errors={errors},done={n})")
        },
    );
    result_rss(prefix);
    drop(mutexes);
    drop(clients);
    Ok(())
}

// ---- d. herd effect: 50 queued waiters, 50 hand-offs, count server watch notifications ----
fn herd(host_port: &str, path: &str) -> anyhow::Result<()> {
    let holder_client = open(host_port)?;
    let holder = DistributedMutex::new(&holder_client, path)?;
    let clients = (0..WAITERS)
        .map(|_| open(host_port))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mutexes = clients
        .iter()
        .map(|c| DistributedMutex::new(c, path))
        .collect::<zklock::Result<Vec<_>>>()?;
    let guard = holder.lock()?;
    let watches_base = get(&mntr(host_port)?, "zk_watch_count");
    let errors = AtomicUsize::new(0);

    let (queued_watches, before) = thread::scope(|s| -> anyhow::Result<(f64, Mntr)> {
        for m in &mutexes {
            let errors = &errors;
            s.spawn(move || {
                if let Err(e) = m.lock().and_then(|g| g.unlock()) {
                    errors.fetch_add(1, Ordering::SeqCst);
                    eprintln!("waiter: {e}");
                }
            });
        }
        // Queued = all 51 lock nodes exist and every waiter has a watch registered on the
        // server. (An early return drops `guard`, so the waiters still finish.)
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut queued_watches = 0.0;
        while Instant::now() < deadline {
            queued_watches = get(&mntr(host_port)?, "zk_watch_count") - watches_base;
            if holder.contenders()?.len() == WAITERS + 1 && queued_watches >= WAITERS as f64 {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(Duration::from_millis(200));
        let before = mntr(host_port)?;
        guard.unlock()?;
        Ok((queued_watches, before))
        // The scope joins every waiter here.
    })?;
    thread::sleep(Duration::from_millis(300)); // let any trailing async requests land
    let after = mntr(host_port)?;
    let fired = watches_fired(&before, &after);
    let waiters = WAITERS as f64;
    result("herd_watches_queued", f(queued_watches));
    result("herd_notifications", f(fired));
    result("herd_notif_per_release", f(fired / waiters));
    result(
        "herd_req_per_handoff",
        f((delta(&before, &after, "zk_packets_received") - 1.0) / waiters),
    );
    let errors = errors.into_inner();
    if errors > 0 {
        result("herd_errors", errors);
    }
    drop(holder);
    drop(holder_client);
    drop(mutexes);
    drop(clients);
    result_rss("herd");
    Ok(())
}

// ---- scale: hand-off latency and notifications per release with 10, 100, 1,000 waiters ----
fn scale(host_port: &str, path: &str) -> anyhow::Result<()> {
    result_other_connections("scale", host_port)?;
    let holder_client = open(host_port)?;
    let clients = (0..SCALE_SESSIONS)
        .map(|_| open(host_port))
        .collect::<anyhow::Result<Vec<_>>>()?;
    result("scale_waiter_sessions", SCALE_SESSIONS);
    result(
        "scale_layout",
        format!(
            "1_holder_session+{SCALE_SESSIONS}_shared_waiter_sessions;waiter_i=thread_on_session_i%{SCALE_SESSIONS}"
        ),
    );
    for n in SCALE_LEVELS {
        scale_level(
            host_port,
            &format!("{path}/w{n}"),
            &holder_client,
            &clients,
            n,
        )?;
    }
    drop(clients);
    drop(holder_client);
    result_rss("scale");
    Ok(())
}

/// What one round of [`scale_round`] measured.
struct Round {
    /// Hand-offs (release() returned -> acquire() returned), in acquisition order.
    handoffs: Vec<i64>,
    /// Hand-offs from the release() call, in acquisition order.
    from_call: Vec<i64>,
    queued_watches: f64,
    notifications: f64,
    requests: f64,
    /// From the holder's release() call until every waiter has released, seconds.
    drain_s: f64,
    overlaps: usize,
    errors: usize,
    completed: usize,
}

/// One level: a warm-up round, then enough rounds for about [`SCALE_SAMPLES`] hand-offs, so
/// the medians of all levels rest on as many samples.
fn scale_level(
    host_port: &str,
    path: &str,
    holder_client: &Client,
    clients: &[Client],
    n: usize,
) -> anyhow::Result<()> {
    let key = |k: &str| format!("scale_{n}_{k}");
    let rounds = SCALE_SAMPLES.div_ceil(n);
    scale_round(host_port, path, holder_client, clients, n)?; // warm-up
    let mut all = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        all.push(scale_round(host_port, path, holder_client, clients, n)?);
    }
    let sorted = |v: Vec<i64>| {
        let mut v = v;
        v.sort_unstable();
        v
    };
    let h = sorted(all.iter().flat_map(|r| r.handoffs.clone()).collect());
    let hc = sorted(all.iter().flat_map(|r| r.from_call.clone()).collect());
    // The queue shortens as it drains: hand-offs of the first and of the last tenth of it.
    let tenth = n.div_ceil(10);
    let first = sorted(
        all.iter()
            .flat_map(|r| r.handoffs.iter().take(tenth).copied())
            .collect(),
    );
    let last = sorted(
        all.iter()
            .flat_map(|r| r.handoffs.iter().rev().take(tenth).copied())
            .collect(),
    );
    let sum = |f: fn(&Round) -> f64| all.iter().map(f).sum::<f64>();
    let releases = (rounds * n) as f64;
    let overlaps: usize = all.iter().map(|r| r.overlaps).sum();
    let errors: usize = all.iter().map(|r| r.errors).sum();
    let completed: usize = all.iter().map(|r| r.completed).sum();
    let min_queued = all
        .iter()
        .map(|r| r.queued_watches)
        .fold(f64::INFINITY, f64::min);
    let ok = errors == 0 && overlaps == 0 && completed == rounds * n;
    result(&key("rounds"), rounds);
    result(&key("watches_queued_min"), f(min_queued));
    result(&key("notifications"), f(sum(|r| r.notifications)));
    result(
        &key("notif_per_release"),
        f(sum(|r| r.notifications) / releases),
    );
    result(&key("req_per_handoff"), f(sum(|r| r.requests) / releases));
    if !h.is_empty() {
        result(&key("handoff_med_us"), us(pct(&h, 0.50)));
        result(&key("handoff_p99_us"), us(pct(&h, 0.99)));
        result(&key("handoff_call_med_us"), us(pct(&hc, 0.50)));
        result(&key("handoff_n"), h.len());
        result(&key("handoff_first_tenth_med_us"), us(pct(&first, 0.50)));
        result(&key("handoff_last_tenth_med_us"), us(pct(&last, 0.50)));
    }
    result(
        &key("drain_med_s"),
        format!("{:.3}", {
            let mut d: Vec<f64> = all.iter().map(|r| r.drain_s).collect();
            d.sort_by(f64::total_cmp);
            d[d.len().div_ceil(2) - 1]
        }),
    );
    result(
        &key("mutex"),
        if ok {
            "PASS".to_owned()
        } else {
            format!("FAIL(overlaps={overlaps},errors={errors},done={completed})")
        },
    );
    // Peak so far; the levels grow, so this is about this level's peak.
    result(&key("peak_rss_kb"), peak_rss_kb());
    Ok(())
}

/// The herd scenario with `n` waiters as threads over the shared sessions: the holder takes the
/// lock, the waiters queue, `mntr` is sampled, the holder releases, the n hand-offs run, `mntr`
/// is sampled again.
fn scale_round(
    host_port: &str,
    path: &str,
    holder_client: &Client,
    clients: &[Client],
    n: usize,
) -> anyhow::Result<Round> {
    let holder = DistributedMutex::new(holder_client, path)?;
    let h0 = nano_time();
    let guard = holder.lock()?;
    let h1 = nano_time();
    let watches_base = get(&mntr(host_port)?, "zk_watch_count");
    let errors = AtomicUsize::new(0);

    let (queued_watches, before, holder_rec, waiters_done, records) =
        thread::scope(|s| -> anyhow::Result<_> {
            let mut threads = Vec::with_capacity(n);
            for i in 0..n {
                let (client, errors) = (&clients[i % clients.len()], &errors);
                let t = thread::Builder::new()
                    .name(format!("waiter-{i}"))
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || -> Option<Rec> {
                        let run = || -> zklock::Result<Rec> {
                            let mutex = DistributedMutex::new(client, path)?;
                            let t0 = nano_time();
                            let guard = mutex.lock()?;
                            let t1 = nano_time();
                            let t2 = nano_time();
                            guard.unlock()?;
                            Ok([i as i64, t0, t1, t2, nano_time()])
                        };
                        run()
                            .map_err(|e| {
                                errors.fetch_add(1, Ordering::SeqCst);
                                eprintln!("waiter {i}: {e}");
                            })
                            .ok()
                    })?;
                threads.push(t);
            }
            // Queued = all n+1 lock nodes exist and every waiter has its watch on the server.
            // The watch count is checked first so the (n+1)-node listing runs only at the end.
            // (An early return drops `guard`, so the waiters still finish.)
            // On a server shared with other clients the watch count moves with theirs too: after
            // SCALE_WATCH_GRACE, all n+1 nodes existing (plus a second to settle) is enough.
            let start = Instant::now();
            let queued_watches = loop {
                let queued_watches = get(&mntr(host_port)?, "zk_watch_count") - watches_base;
                let watches_ok = queued_watches >= n as f64;
                let patient = start.elapsed() >= SCALE_WATCH_GRACE;
                if (watches_ok || patient) && holder.contenders()?.len() == n + 1 {
                    if !watches_ok {
                        eprintln!(
                            "scale {n}: all nodes queued but the server's watch count rose by \
                             {queued_watches} < {n} (other clients on this server?); going on"
                        );
                        thread::sleep(Duration::from_secs(1));
                    }
                    break queued_watches;
                }
                if start.elapsed() >= SCALE_QUEUE_TIMEOUT {
                    eprintln!("scale {n}: waiters not all queued after {SCALE_QUEUE_TIMEOUT:?}");
                    break queued_watches;
                }
                thread::sleep(Duration::from_millis(if patient { 200 } else { 20 }));
            };
            thread::sleep(Duration::from_millis(200));
            let before = mntr(host_port)?;
            let h2 = nano_time();
            guard.unlock()?;
            let holder_rec: Rec = [-1, h0, h1, h2, nano_time()];
            let records: Vec<Rec> = threads
                .into_iter()
                .filter_map(|t| t.join().ok().flatten())
                .collect();
            let waiters_done = nano_time();
            Ok((queued_watches, before, holder_rec, waiters_done, records))
        })?;
    thread::sleep(Duration::from_millis(300)); // let any trailing async requests land
    let after = mntr(host_port)?;

    let completed = records.len();
    let mut done = records;
    done.push(holder_rec);
    done.sort_by_key(|r| r[2]);
    let overlaps = AtomicUsize::new(0);
    let (handoffs, from_call) = handoffs(&done, &overlaps);
    Ok(Round {
        handoffs,
        from_call,
        queued_watches,
        notifications: watches_fired(&before, &after),
        requests: delta(&before, &after, "zk_packets_received") - 1.0,
        drain_s: (waiters_done - holder_rec[3]) as f64 / 1e9,
        overlaps: overlaps.into_inner(),
        errors: errors.into_inner(),
        completed,
    })
}

// ---- many_locks: 10,000 distinct locks, 8 threads, one session ----
fn many_locks(host_port: &str, path: &str, coalesce: bool) -> anyhow::Result<()> {
    result_other_connections("many", host_port)?;
    let passes = [("cold", Check::None), ("warm", Check::None)];
    many_passes(host_port, path, coalesce, "many", &passes)?;
    result("many_threads", MANY_THREADS);
    result("many_sessions", 1);
    result("many_coalesce_requests", coalesce);
    result_rss("many");
    Ok(())
}

/// `many_locks_checks`: `many_locks`' warm pass three times on one client (after a cold pass
/// that creates the paths), each cycle checking its hold in between lock and unlock as a
/// holder between two steps would: not at all, with `lease_state()` (sends nothing), with
/// `is_held()` (its first call on a guard watches the node: two requests). `ROUNDS` (default
/// 1) repeats the three warm passes, interleaved, to show the run-to-run spread.
fn many_locks_checks(host_port: &str, path: &str) -> anyhow::Result<()> {
    result_other_connections("checks", host_port)?;
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let mut passes = vec![("cold", Check::None)];
    for round in 0..rounds {
        // Every other round the first two swap, so neither always runs first.
        let (none, lease) = (("warm_none", Check::None), ("warm_lease", Check::Lease));
        let (a, b) = if round % 2 == 0 {
            (none, lease)
        } else {
            (lease, none)
        };
        passes.extend([a, b, ("warm_is_held", Check::IsHeld)]);
    }
    let rates = many_passes(host_port, path, true, "checks", &passes)?;
    // All rounds of each check together: cycles over wall time.
    for (name, check) in [
        ("none", Check::None),
        ("lease", Check::Lease),
        ("is_held", Check::IsHeld),
    ] {
        let (cycles, wall) = rates
            .iter()
            .filter(|(c, _, _)| *c == check)
            .skip(usize::from(check == Check::None)) // the cold pass
            .fold((0.0, 0.0), |(n, w), (_, pn, pw)| (n + pn, w + pw));
        result(
            &format!("checks_all_{name}_cycles_per_s"),
            format!("{:.0}", cycles / wall),
        );
    }
    // The calls alone, on one held guard (`is_held` after its first call, which set the
    // watch): what a check adds to a cycle on this thread.
    let client = Client::builder(host_port)
        .session_timeout(SESSION_TIMEOUT)
        .connect()?;
    let guard = DistributedMutex::new(&client, &format!("{path}/calls"))?.lock()?;
    let _ = guard.is_held();
    const CALLS: u32 = 1_000_000;
    let per_call = |check: &dyn Fn() -> bool| {
        let start = nano_time();
        let mut held = 0u32;
        for _ in 0..CALLS {
            held += u32::from(std::hint::black_box(check()));
        }
        let ns = (nano_time() - start) as f64 / f64::from(CALLS);
        (ns, held)
    };
    let (lease_ns, lease_held) = per_call(&|| guard.lease_state() == LockState::Held);
    let (is_held_ns, is_held_held) = per_call(&|| guard.is_held());
    result("checks_lease_state_ns_per_call", format!("{lease_ns:.1}"));
    result(
        "checks_is_held_ns_per_call_after_the_first",
        format!("{is_held_ns:.1}"),
    );
    if lease_held != CALLS || is_held_held != CALLS {
        result(
            "checks_calls_not_held",
            (CALLS - lease_held) + (CALLS - is_held_held),
        );
    }
    guard.unlock()?;
    drop(client);
    result("checks_threads", MANY_THREADS);
    result("checks_rounds", rounds);
    result_rss("checks");
    Ok(())
}

/// What a `many_passes` cycle checks while it holds its lock.
#[derive(Clone, Copy, PartialEq)]
enum Check {
    None,
    /// `guard.lease_state()`: the lease alone, nothing sent.
    Lease,
    /// `guard.is_held()`: the lease, and a watch on the node set by the first call.
    IsHeld,
}

/// `many_locks`' passes on one client (requests coalesced or not), each named and with the
/// check its cycles make; each pass's check, cycles and wall time (s). A pass named again
/// adds its figures under the same keys, numbered (`warm_lease_2_...`).
fn many_passes(
    host_port: &str,
    path: &str,
    coalesce: bool,
    prefix: &str,
    passes: &[(&str, Check)],
) -> anyhow::Result<Vec<(Check, f64, f64)>> {
    let client = Client::builder(host_port)
        .session_timeout(SESSION_TIMEOUT)
        .coalesce_requests(coalesce)
        .connect()
        .with_context(|| format!("connecting to {host_port}"))?;
    let paths: Vec<String> = (0..MANY_LOCKS).map(|i| format!("{path}/l{i}")).collect();
    let mut rates = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for &(name, check) in passes {
        let n = seen.entry(name).or_default();
        *n += 1;
        let pass = if *n == 1 {
            name.to_owned()
        } else {
            format!("{name}_{n}")
        };
        let key = |k: &str| format!("{prefix}_{pass}_{k}");
        let errors = AtomicUsize::new(0);
        let before = mntr(host_port)?;
        let start = nano_time();
        let mut ns: Vec<i64> = thread::scope(|s| {
            let threads: Vec<_> = (0..MANY_THREADS)
                .map(|t| {
                    let (client, paths, errors) = (&client, &paths, &errors);
                    s.spawn(move || {
                        let mut mine = Vec::with_capacity(MANY_LOCKS / MANY_THREADS + 1);
                        for p in paths.iter().skip(t).step_by(MANY_THREADS) {
                            let t0 = nano_time();
                            let cycle = DistributedMutex::new(client, p).and_then(|m| {
                                let g = m.lock()?;
                                let held = match check {
                                    Check::None => true,
                                    Check::Lease => g.lease_state() == LockState::Held,
                                    Check::IsHeld => g.is_held(),
                                };
                                if !held {
                                    eprintln!("{p}: not held between the steps");
                                    errors.fetch_add(1, Ordering::SeqCst);
                                }
                                g.unlock()
                            });
                            match cycle {
                                Ok(()) => mine.push(nano_time() - t0),
                                Err(e) => {
                                    errors.fetch_add(1, Ordering::SeqCst);
                                    eprintln!("{p}: {e}");
                                }
                            }
                        }
                        mine
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap_or_default())
                .collect()
        });
        let wall = (nano_time() - start) as f64 / 1e9;
        let after = mntr(host_port)?;
        ns.sort_unstable();
        let cycles = ns.len() as f64;
        let rate = cycles / wall;
        rates.push((check, cycles, wall));
        result(&key("cycles"), ns.len());
        result(&key("wall_s"), format!("{wall:.3}"));
        result(&key("cycles_per_s"), format!("{rate:.0}"));
        if !ns.is_empty() {
            result(&key("cycle_med_us"), us(pct(&ns, 0.50)));
            result(&key("cycle_p99_us"), us(pct(&ns, 0.99)));
        }
        result(
            &key("req_per_cycle"),
            f((delta(&before, &after, "zk_packets_received") - 1.0) / cycles),
        );
        result(
            &key("reads_per_cycle"),
            f(delta(&before, &after, "zk_cnt_readlatency") / cycles),
        );
        result(
            &key("writes_per_cycle"),
            f(delta(&before, &after, "zk_cnt_updatelatency") / cycles),
        );
        let errors = errors.into_inner();
        if errors > 0 {
            result(&key("errors"), errors);
        }
    }
    drop(client);
    Ok(rates)
}

// ---- floor: the protocol minimum of a lock cycle, on a bare socket ----

// ZooKeeper opcodes and create flags (zookeeper.jute, ZooDefs.OpCode, CreateMode).
const OP_CREATE: i32 = 1;
const OP_DELETE: i32 = 2;
const OP_MULTI: i32 = 14;
const OP_GET_CHILDREN2: i32 = 12;
const OP_GET_DATA: i32 = 4;
const OP_GET_CHILDREN: i32 = 8;
const OP_MULTI_READ: i32 = 22;
const OP_CREATE2: i32 = 15;
const OP_CLOSE_SESSION: i32 = -11;
const PERSISTENT: i32 = 0;
const EPHEMERAL_SEQUENTIAL: i32 = 3;
const NODE_EXISTS: i32 = -110;

/// A minimal blocking ZooKeeper client: one session on one TCP connection, requests written
/// as they are made and replies read in order (the server answers a session in order). No
/// pings: the cycles keep the session busy.
struct Bare {
    stream: TcpStream,
    /// Replies are read through a buffer: two pipelined replies often arrive in one segment.
    replies: std::io::BufReader<TcpStream>,
    xid: i32,
}

/// Jute encoding: big-endian integers; strings and buffers are an int length and the bytes.
#[derive(Default)]
struct Jute(Vec<u8>);

impl Jute {
    fn int(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn long(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bool(mut self, v: bool) -> Self {
        self.0.push(v as u8);
        self
    }
    fn bytes(self, v: &[u8]) -> Self {
        let mut s = self.int(v.len() as i32);
        s.0.extend_from_slice(v);
        s
    }
    /// The frame: a 4-byte big-endian length, then the record.
    fn frame(self) -> Vec<u8> {
        let mut f = (self.0.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(&self.0);
        f
    }
}

/// Reads jute fields off a reply, failing (not panicking) on a short one.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        if self.0.len() < n {
            bail!("short reply");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn int(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
    fn long(&mut self) -> anyhow::Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into()?))
    }
    fn bytes(&mut self) -> anyhow::Result<&[u8]> {
        let n = self.int()?.max(0) as usize; // -1 is a null string
        self.take(n)
    }
}

impl Bare {
    fn connect(host_port: &str) -> anyhow::Result<Bare> {
        let stream =
            TcpStream::connect(host_port).with_context(|| format!("floor: {host_port}"))?;
        stream.set_nodelay(true)?; // else the pipelined getChildren waits for the create's reply
        stream.set_read_timeout(Some(SESSION_TIMEOUT))?;
        let replies = std::io::BufReader::new(stream.try_clone()?);
        let mut bare = Bare {
            stream,
            replies,
            xid: 0,
        };
        // ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
        let request = Jute::default()
            .int(0)
            .long(0)
            .int(SESSION_TIMEOUT.as_millis() as i32)
            .long(0)
            .bytes(&[0; 16])
            .bool(false);
        bare.stream.write_all(&request.frame())?;
        // ConnectResponse: protocolVersion, timeOut, sessionId, passwd, readOnly.
        let response = bare.read_frame()?;
        let mut r = Fields(&response);
        r.int()?;
        if r.int()? <= 0 {
            bail!("floor: the server refused the session");
        }
        r.long()?;
        Ok(bare)
    }

    fn read_frame(&mut self) -> anyhow::Result<Vec<u8>> {
        let mut len = [0; 4];
        self.replies.read_exact(&mut len)?;
        let mut frame = vec![0; i32::from_be_bytes(len).max(0) as usize];
        self.replies.read_exact(&mut frame)?;
        Ok(frame)
    }

    /// Writes one request (RequestHeader {xid, type}, then `body`) without waiting.
    fn send(&mut self, op: i32, body: Jute) -> anyhow::Result<()> {
        self.xid += 1;
        let mut request = Jute::default().int(self.xid).int(op);
        request.0.extend_from_slice(&body.0);
        self.stream.write_all(&request.frame())?;
        Ok(())
    }

    /// Reads the next reply: ReplyHeader {xid, zxid, err}, then the body. Returns (err, body).
    fn recv(&mut self) -> anyhow::Result<(i32, Vec<u8>)> {
        let mut frame = self.read_frame()?;
        let mut r = Fields(&frame);
        r.int()?;
        r.long()?;
        let err = r.int()?;
        frame.drain(..16);
        Ok((err, frame))
    }

    fn ok(&mut self) -> anyhow::Result<Vec<u8>> {
        match self.recv()? {
            (0, body) => Ok(body),
            (err, _) => bail!("floor: ZooKeeper error {err}"),
        }
    }

    /// create2 {path, data, acl (world:anyone, all perms), flags}.
    fn send_create(&mut self, path: &str, flags: i32) -> anyhow::Result<()> {
        let body = Jute::default()
            .bytes(path.as_bytes())
            .bytes(&[])
            .int(1)
            .int(31)
            .bytes(b"world")
            .bytes(b"anyone")
            .int(flags);
        self.send(OP_CREATE2, body)
    }

    /// getChildren2 {path, watch false}.
    fn send_children(&mut self, path: &str) -> anyhow::Result<()> {
        self.send(
            OP_GET_CHILDREN2,
            Jute::default().bytes(path.as_bytes()).bool(false),
        )
    }

    /// delete {path, version -1}.
    fn send_delete(&mut self, path: &str) -> anyhow::Result<()> {
        self.send(OP_DELETE, Jute::default().bytes(path.as_bytes()).int(-1))
    }
}

// ---- floor_many: the server's limit for many distinct locks on one session ----

/// A multi header {type, done, err}.
fn multi_header(j: Jute, op: i32, done: bool) -> Jute {
    j.int(op).bool(done).int(-1)
}

/// The created names in a multi reply of plain creates {header, path}*, closing header.
fn multi_created(body: &[u8]) -> anyhow::Result<Vec<String>> {
    let mut r = Fields(body);
    let mut names = Vec::new();
    loop {
        let kind = r.int()?;
        let done = r.take(1)?[0] != 0;
        r.int()?;
        if done {
            return Ok(names);
        }
        match kind {
            OP_CREATE => {
                let path = String::from_utf8(r.bytes()?.to_vec())?;
                names.push(path.rsplit('/').next().unwrap_or_default().to_owned());
            }
            other => bail!("floor_many: op {other} in a multi reply"),
        }
    }
}

/// How a floor wave sends its requests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Every create, getChildren and delete on its own.
    Plain,
    /// The creates as one multi, the getChildren each on its own, the deletes as one multi.
    Multi,
    /// As `Multi`, with every listing (getChildren and the lock path's getData) in one
    /// multiRead.
    MultiRead,
}

/// The children listed by each getChildren of a multiRead reply (its getData results are
/// passed over).
fn multi_read_children(body: &[u8]) -> anyhow::Result<Vec<Vec<String>>> {
    let mut r = Fields(body);
    let mut listed = Vec::new();
    loop {
        let kind = r.int()?;
        let done = r.take(1)?[0] != 0;
        r.int()?;
        if done {
            return Ok(listed);
        }
        match kind {
            OP_GET_CHILDREN => {
                let n = r.int()?;
                let mut names = Vec::new();
                for _ in 0..n {
                    names.push(String::from_utf8(r.bytes()?.to_vec())?);
                }
                listed.push(names);
            }
            OP_GET_DATA => {
                r.bytes()?;
                r.take(68)?;
            }
            other => bail!("floor_many: op {other} in a multiRead reply"),
        }
    }
}

/// One wave of `dirs.len()` warm cycles in flight on distinct lock paths: every create and
/// getChildren pipelined, then every delete; with `coalesced`, the creates go as one multi
/// and the deletes as another (1 + 2/W requests per cycle instead of 3).
fn floor_wave(bare: &mut Bare, dirs: &[String], shape: Shape) -> anyhow::Result<()> {
    let coalesced = shape != Shape::Plain;
    let names: Vec<String> = if coalesced {
        let mut multi = Jute::default();
        for dir in dirs {
            multi = multi_header(multi, OP_CREATE, false)
                .bytes(format!("{dir}/lock-").as_bytes())
                .bytes(&[])
                .int(1)
                .int(31)
                .bytes(b"world")
                .bytes(b"anyone")
                .int(EPHEMERAL_SEQUENTIAL);
        }
        bare.send(OP_MULTI, multi_header(multi, -1, true))?;
        if shape == Shape::MultiRead {
            let mut reads = Jute::default();
            for dir in dirs {
                reads = multi_header(reads, OP_GET_CHILDREN, false)
                    .bytes(dir.as_bytes())
                    .bool(false);
                reads = multi_header(reads, OP_GET_DATA, false)
                    .bytes(dir.as_bytes())
                    .bool(false);
            }
            bare.send(OP_MULTI_READ, multi_header(reads, -1, true))?;
            let names = multi_created(&bare.ok()?)?;
            let listed = multi_read_children(&bare.ok()?)?;
            for ((dir, name), children) in dirs.iter().zip(&names).zip(&listed) {
                if !children.contains(name) {
                    bail!("floor_many: the listing of {dir} lacks {name}");
                }
            }
            names
        } else {
            for dir in dirs {
                bare.send_children(dir)?;
            }
            let names = multi_created(&bare.ok()?)?;
            for (dir, name) in dirs.iter().zip(&names) {
                if !lists(&bare.ok()?, name)? {
                    bail!("floor_many: the listing of {dir} lacks {name}");
                }
            }
            names
        }
    } else {
        for dir in dirs {
            bare.send_create(&format!("{dir}/lock-"), EPHEMERAL_SEQUENTIAL)?;
            bare.send_children(dir)?;
        }
        let mut names = Vec::new();
        for dir in dirs {
            let name = created_name(&bare.ok()?)?;
            if !lists(&bare.ok()?, &name)? {
                bail!("floor_many: the listing of {dir} lacks {name}");
            }
            names.push(name);
        }
        names
    };
    if coalesced {
        let mut multi = Jute::default();
        for (dir, name) in dirs.iter().zip(&names) {
            multi = multi_header(multi, OP_DELETE, false)
                .bytes(format!("{dir}/{name}").as_bytes())
                .int(-1);
        }
        bare.send(OP_MULTI, multi_header(multi, -1, true))?;
        bare.ok()?;
    } else {
        for (dir, name) in dirs.iter().zip(&names) {
            bare.send_delete(&format!("{dir}/{name}"))?;
        }
        for _ in dirs {
            bare.ok()?;
        }
    }
    Ok(())
}

/// The bare-socket limit of `many_locks`' warm pass (10,000 existing lock paths, each cycled
/// once), W = 1, 8, 32 cycles in flight, requests individual and coalesced; then zklock's own
/// warm pass (8 threads, one client) with and without coalesced requests, and its ratio to the
/// coalesced floor at 8.
fn floor_many(host_port: &str, path: &str) -> anyhow::Result<()> {
    result_other_connections("floor_many", host_port)?;
    let mut bare = Bare::connect(host_port)?;
    let mut dir = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        dir = format!("{dir}/{part}");
        bare.send_create(&dir, PERSISTENT)?;
        match bare.recv()?.0 {
            0 | NODE_EXISTS => {}
            err => bail!("floor_many: creating {dir}: ZooKeeper error {err}"),
        }
    }
    // The same paths as many_locks (`<path>/l<i>`), created up front: every pass is warm.
    let dirs: Vec<String> = (0..MANY_LOCKS).map(|i| format!("{dir}/l{i}")).collect();
    for chunk in dirs.chunks(256) {
        for d in chunk {
            bare.send_create(d, PERSISTENT)?;
        }
        for d in chunk {
            match bare.recv()?.0 {
                0 | NODE_EXISTS => {}
                err => bail!("floor_many: creating {d}: ZooKeeper error {err}"),
            }
        }
    }
    let mut coalesced_at_8 = 0.0;
    for w in [1, 8, 32] {
        for shape in [Shape::Plain, Shape::Multi, Shape::MultiRead] {
            let name = match shape {
                Shape::Plain => "plain",
                Shape::Multi => "multi",
                Shape::MultiRead => "multiread",
            };
            let key = |k: &str| format!("floor_many_w{w}_{name}_{k}");
            let before = mntr(host_port)?;
            let start = nano_time();
            for wave in dirs.chunks(w) {
                floor_wave(&mut bare, wave, shape)?;
            }
            let wall = (nano_time() - start) as f64 / 1e9;
            let after = mntr(host_port)?;
            let rate = MANY_LOCKS as f64 / wall;
            if shape == Shape::Multi && w == 8 {
                coalesced_at_8 = rate;
            }
            result(&key("cycles_per_s"), format!("{rate:.0}"));
            result(
                &key("req_per_cycle"),
                f((delta(&before, &after, "zk_packets_received") - 1.0) / MANY_LOCKS as f64),
            );
        }
    }
    bare.send(OP_CLOSE_SESSION, Jute::default())?;
    bare.recv()?;
    for (coalesce, prefix) in [
        (false, "floor_many_zklock_plain"),
        (true, "floor_many_zklock"),
    ] {
        let rate = many_passes(host_port, path, coalesce, prefix, &[("warm", Check::None)])?
            .last()
            .map_or(0.0, |(_, cycles, wall)| cycles / wall);
        result(
            &format!("{prefix}_ratio_to_multi_w8"),
            format!("{:.2}", rate / coalesced_at_8),
        );
    }
    result_rss("floor_many");
    Ok(())
}

/// The created node's name from a create2 reply {path, stat}.
fn created_name(body: &[u8]) -> anyhow::Result<String> {
    let path = String::from_utf8(Fields(body).bytes()?.to_vec())?;
    Ok(path.rsplit('/').next().unwrap_or_default().to_owned())
}

/// Whether a getChildren2 reply {children, stat} lists `name` (the cycle's check that the
/// listing, as a lock's would be, sees the node just created).
fn lists(body: &[u8], name: &str) -> anyhow::Result<bool> {
    let mut r = Fields(body);
    let n = r.int()?;
    for _ in 0..n {
        if r.bytes()? == name.as_bytes() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One lock cycle on the bare client; returns its duration in ns.
fn floor_cycle(bare: &mut Bare, dir: &str, pipelined: bool) -> anyhow::Result<i64> {
    let t0 = nano_time();
    bare.send_create(&format!("{dir}/lock-"), EPHEMERAL_SEQUENTIAL)?;
    let (created, listing) = if pipelined {
        bare.send_children(dir)?;
        (bare.ok()?, bare.ok()?)
    } else {
        let created = bare.ok()?;
        bare.send_children(dir)?;
        (created, bare.ok()?)
    };
    let name = created_name(&created)?;
    if !lists(&listing, &name)? {
        bail!("floor: the listing of {dir} lacks {name}");
    }
    bare.send_delete(&format!("{dir}/{name}"))?;
    bare.ok()?;
    Ok(nano_time() - t0)
}

fn floor(host_port: &str, path: &str, pipelined: bool) -> anyhow::Result<()> {
    let prefix = if pipelined { "floor" } else { "floor_seq" };
    let mut bare = Bare::connect(host_port)?;
    // The lock path and its parents, as persistent nodes (existing ones are fine).
    let mut dir = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        dir = format!("{dir}/{part}");
        bare.send_create(&dir, PERSISTENT)?;
        match bare.recv()?.0 {
            0 | NODE_EXISTS => {}
            err => bail!("floor: creating {dir}: ZooKeeper error {err}"),
        }
    }
    for _ in 0..WARMUP {
        floor_cycle(&mut bare, &dir, pipelined)?;
    }
    let before = mntr(host_port)?;
    let mut ns = (0..CYCLES)
        .map(|_| floor_cycle(&mut bare, &dir, pipelined))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let after = mntr(host_port)?;
    bare.send(OP_CLOSE_SESSION, Jute::default())?;
    bare.recv()?;
    ns.sort_unstable();
    result(&format!("{prefix}_median_us"), us(pct(&ns, 0.50)));
    result(&format!("{prefix}_p99_us"), us(pct(&ns, 0.99)));
    result(
        &format!("{prefix}_req_per_cycle"),
        f((delta(&before, &after, "zk_packets_received") - 1.0) / CYCLES as f64),
    );
    result_rss(prefix);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).build();
    if args.first().is_some_and(|mode| mode.starts_with("hot")) {
        // `hot` reads zklock's own `creating` lines (see `CreatesTap`).
        log::set_max_level(logger.filter().max(log::LevelFilter::Debug));
        log::set_boxed_logger(Box::new(CreatesTap(logger)))?;
    } else {
        log::set_max_level(logger.filter());
        log::set_boxed_logger(Box::new(logger))?;
    }
    nano_time();
    let [mode, host_port, path] = args.as_slice() else {
        eprintln!(
            "usage: bench <uncontended|contended|herd|scale|many_locks|many_locks_plain|many_locks_checks|hot|hot_off|floor|floor_sequential|floor_many> \
             <host:port> <lock path>"
        );
        std::process::exit(2);
    };
    match mode.as_str() {
        "uncontended" => uncontended(host_port, path),
        "contended" => contended(host_port, path),
        "herd" => herd(host_port, path),
        "scale" => scale(host_port, path),
        "many_locks" => many_locks(host_port, path, true),
        "many_locks_plain" => many_locks(host_port, path, false),
        "many_locks_checks" => many_locks_checks(host_port, path),
        "floor_many" => floor_many(host_port, path),
        "hot" => hot(host_port, path, true),
        "hot_off" => hot(host_port, path, false),
        "floor" => floor(host_port, path, true),
        "floor_sequential" => floor(host_port, path, false),
        other => bail!("unknown scenario {other:?}"),
    }
}
