//! Benchmarks of the async front-end, printing figures (not a test: nothing here asserts a
//! speed). Each scenario runs on a tokio runtime with 2 worker threads, against one server.
//!
//! ```text
//! scripts/start-zk.sh
//! cargo run --release --example async_bench -- [queue|timeouts|drop|service|all] [--tasks N]
//!     [--local-handoff BATCH]
//! ```
//!
//! `--local-handoff BATCH` runs `queue` and `timeouts` with local handoff: the
//! tasks of the client then queue in this process behind one node.
//!
//! - `queue` (default 10,000 tasks): every task queues on one lock held by another client,
//!   then the holder lets go and the queue drains. Prints the OS threads zklock added while
//!   they waited, the peak RSS, the server's watch notifications per release (`mntr`), the
//!   drain time, acquisitions and overlaps.
//! - `timeouts` (default 800 tasks): for 25 s, every task acquires one lock again and again
//!   with a random timeout of 5-400 ms, releasing at once; prints acquisitions, timeouts and
//!   the nodes left behind.
//! - `drop` (default 5,000): as many futures queue behind a holder, then every task is
//!   aborted; prints how long until their nodes were all withdrawn.
//! - `service` (default 2,000): tasks each take the lock briefly while another task reads a
//!   file with `tokio::fs` every 10 ms; prints the drain time and the worst delay of a read.
//!
//! Environment: `ZK_CONNECT` (default `127.0.0.1:2181`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use zklock::{Client, DistributedMutex};

fn connect_string() -> String {
    std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into())
}

/// The server's `mntr` counters.
fn mntr(host_port: &str) -> anyhow::Result<Vec<(String, f64)>> {
    let mut stream = TcpStream::connect(host_port).context("mntr")?;
    stream.write_all(b"mntr")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('\t')?;
            Some((key.to_owned(), value.trim().parse().ok()?))
        })
        .collect())
}

/// Watch notifications the server has fired, all event types.
fn notifications(host_port: &str) -> anyhow::Result<f64> {
    Ok(mntr(host_port)?
        .iter()
        .filter(|(k, _)| k.starts_with("zk_sum_node_") && k.ends_with("_watch_count"))
        .map(|(_, v)| v)
        .sum())
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn peak_rss_mb() -> f64 {
    status_mb("VmHWM:")
}

fn rss_mb() -> f64 {
    status_mb("VmRSS:")
}

fn status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn result(key: &str, value: impl std::fmt::Display) {
    println!("{key}={value}");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Polls until `n` nodes are queued at `path` (from this, a plain thread), counting its
/// children: a listing, not the per-node reads of `contenders()`.
fn wait_queued(client: &Client, path: &str, n: usize, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let queued = client.children(path)?.map_or(0, |c| c.len());
        if queued == n {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{queued} queued, not {n}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The mutex at `path`, with local handoff in batches of `local` if given.
fn mutex_at(client: &Client, path: &str, local: Option<u32>) -> anyhow::Result<DistributedMutex> {
    let mutex = DistributedMutex::new(client, path)?;
    Ok(match local {
        Some(batch) => mutex.local_handoff(batch),
        None => mutex,
    })
}

fn queue(tasks: usize, local: Option<u32>) -> anyhow::Result<()> {
    let connect = connect_string();
    let path = format!("/zklock-bench/async-queue-{}", std::process::id());
    let holder_client = Client::connect(&connect)?;
    let holder = DistributedMutex::new(&holder_client, &path)?.lock()?;
    let client = Client::connect(&connect)?;
    let mutex = mutex_at(&client, &path, local)?;
    let asked = Arc::new(AtomicUsize::new(0));
    let rt = runtime();
    let before = threads();
    let (acquired, inside, overlaps) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let mutex = mutex.clone();
            let (acquired, inside, overlaps) = (acquired.clone(), inside.clone(), overlaps.clone());
            let asked = asked.clone();
            rt.spawn(async move {
                asked.fetch_add(1, Ordering::SeqCst);
                let guard = mutex.lock_async().await?;
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                acquired.fetch_add(1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock_async().await
            })
        })
        .collect();
    if local.is_some() {
        // One node for all the tasks, which wait in this process: wait until every task
        // asked, and give the last ones a moment to be polled into the local queue.
        wait_queued(&holder_client, &path, 2, Duration::from_secs(600))?;
        while asked.load(Ordering::SeqCst) < tasks {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
    } else {
        wait_queued(&holder_client, &path, tasks + 1, Duration::from_secs(600))?;
    }
    result("async_queue_local_handoff", local.unwrap_or(0));
    result("async_queue_tasks", tasks);
    result("async_queue_enqueue_ms", started.elapsed().as_millis());
    result(
        "async_queue_threads_added",
        threads().saturating_sub(before),
    );
    result(
        "async_queue_rss_while_queued_mb",
        format!("{:.1}", rss_mb()),
    );
    result(
        "async_queue_peak_rss_while_queued_mb",
        format!("{:.1}", peak_rss_mb()),
    );
    let host = connect
        .split(['/', ','])
        .next()
        .unwrap_or(&connect)
        .to_owned();
    let fired_before = notifications(&host)?;
    let drain = Instant::now();
    holder.unlock()?;
    for handle in handles {
        rt.block_on(handle)??;
    }
    let drain = drain.elapsed();
    let fired = notifications(&host)? - fired_before;
    result("async_queue_drain_ms", drain.as_millis());
    result("async_queue_acquired", acquired.load(Ordering::SeqCst));
    result("async_queue_overlaps", overlaps.load(Ordering::SeqCst));
    // Releases: the holder's and every task's; the last one wakes nobody.
    result(
        "async_queue_notifications_per_release",
        format!("{:.2}", fired / tasks as f64),
    );
    result("async_queue_peak_rss_mb", format!("{:.1}", peak_rss_mb()));
    Ok(())
}

/// `timeouts`: `tasks` tasks of one client on one lock for 25 s, each acquiring again and again
/// with a random timeout of 5-400 ms and releasing at once; prints the acquisitions and
/// timeouts, and the nodes left at the lock path a second after the last task ended.
fn timeouts(tasks: usize, local: Option<u32>) -> anyhow::Result<()> {
    const RUN: Duration = Duration::from_secs(25);
    let connect = connect_string();
    let path = format!("/zklock-bench/async-timeouts-{}", std::process::id());
    let client = Client::connect(&connect)?;
    let mutex = mutex_at(&client, &path, local)?;
    let rt = runtime();
    let (acquired, timed_out, errors) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let mutex = mutex.clone();
            let (acquired, timed_out, errors) =
                (acquired.clone(), timed_out.clone(), errors.clone());
            rt.spawn(async move {
                // A small generator of its own per task (xorshift), seeded by the task.
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1);
                while started.elapsed() < RUN {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let timeout = Duration::from_millis(5 + x % 396);
                    match mutex.lock_with_async(zklock::Wait::timeout(timeout)).await {
                        Ok(Some(guard)) => {
                            acquired.fetch_add(1, Ordering::SeqCst);
                            let _ = guard.unlock_async().await;
                        }
                        Ok(None) => {
                            timed_out.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => {
                            errors.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        rt.block_on(handle)?;
    }
    let elapsed = started.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    let left = client.children(&path)?.map_or(0, |c| c.len());
    result("async_timeouts_local_handoff", local.unwrap_or(0));
    result("async_timeouts_tasks", tasks);
    result("async_timeouts_s", format!("{:.1}", elapsed.as_secs_f64()));
    result("async_timeouts_acquired", acquired.load(Ordering::SeqCst));
    result("async_timeouts_timed_out", timed_out.load(Ordering::SeqCst));
    result("async_timeouts_errors", errors.load(Ordering::SeqCst));
    result("async_timeouts_nodes_left", left);
    Ok(())
}

fn drop_queued(tasks: usize) -> anyhow::Result<()> {
    let connect = connect_string();
    let path = format!("/zklock-bench/async-drop-{}", std::process::id());
    let holder_client = Client::connect(&connect)?;
    let holder = DistributedMutex::new(&holder_client, &path)?.lock()?;
    let client = Client::connect(&connect)?;
    let mutex = DistributedMutex::new(&client, &path)?;
    let rt = runtime();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let mutex = mutex.clone();
            rt.spawn(async move { mutex.lock_async().await.map(drop) })
        })
        .collect();
    wait_queued(&holder_client, &path, tasks + 1, Duration::from_secs(600))?;
    let dropped = Instant::now();
    for handle in &handles {
        handle.abort();
    }
    wait_queued(&holder_client, &path, 1, Duration::from_secs(60))?;
    result("async_drop_tasks", tasks);
    result("async_drop_withdrawn_ms", dropped.elapsed().as_millis());
    drop(holder);
    Ok(())
}

fn service(tasks: usize) -> anyhow::Result<()> {
    let connect = connect_string();
    let path = format!("/zklock-bench/async-service-{}", std::process::id());
    let client = Client::connect(&connect)?;
    let mutex = DistributedMutex::new(&client, &path)?;
    let file = std::env::temp_dir().join(format!("zklock-bench-{}", std::process::id()));
    std::fs::write(&file, vec![7u8; 4096])?;
    let rt = runtime();
    let (worst, drain) = rt.block_on(async {
        let reading = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let reader = {
            let (reading, file) = (reading.clone(), file.clone());
            tokio::spawn(async move {
                let mut worst = Duration::ZERO;
                let began = Instant::now();
                while reading.load(Ordering::SeqCst) {
                    let asked = Instant::now();
                    tokio::fs::read(&file).await.expect("read");
                    let took = asked.elapsed();
                    if took > Duration::from_millis(20) && std::env::var_os("BENCH_TRACE").is_some()
                    {
                        eprintln!("slow read: {took:?} at {:?}", asked - began);
                    }
                    worst = worst.max(took);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                worst
            })
        };
        let started = Instant::now();
        let workers: Vec<_> = (0..tasks)
            .map(|_| {
                let mutex = mutex.clone();
                tokio::spawn(async move {
                    let guard = mutex.lock_async().await?;
                    tokio::task::yield_now().await;
                    guard.unlock_async().await
                })
            })
            .collect();
        for worker in workers {
            worker.await??;
        }
        let drain = started.elapsed();
        reading.store(false, Ordering::SeqCst);
        anyhow::Ok((reader.await?, drain))
    })?;
    std::fs::remove_file(&file).ok();
    result("async_service_tasks", tasks);
    result("async_service_drain_ms", drain.as_millis());
    result("async_service_worst_fs_read_ms", worst.as_millis());
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut scenario = "all".to_owned();
    let mut tasks = None;
    let mut local = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--tasks" => tasks = Some(args.next().context("--tasks N")?.parse()?),
            "--local-handoff" => {
                local = Some(args.next().context("--local-handoff BATCH")?.parse()?);
            }
            other => scenario = other.to_owned(),
        }
    }
    match scenario.as_str() {
        "queue" => queue(tasks.unwrap_or(10_000), local),
        "timeouts" => timeouts(tasks.unwrap_or(800), local),
        "drop" => drop_queued(tasks.unwrap_or(5_000)),
        "service" => service(tasks.unwrap_or(2_000)),
        "all" => {
            queue(tasks.unwrap_or(10_000), local)?;
            drop_queued(tasks.unwrap_or(5_000))?;
            service(tasks.unwrap_or(2_000))
        }
        other => anyhow::bail!("unknown scenario {other}: queue, timeouts, drop, service or all"),
    }
}
