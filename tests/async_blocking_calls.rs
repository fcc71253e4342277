//! A blocking call made on an async runtime's worker thread can deadlock the program. zklock
//! says so once per process on stderr (seen without a logger) and in a `warn!`, never on a
//! `spawn_blocking` thread (the documented way out), and with the `tokio` feature runs the
//! wait in `block_in_place` on a multi-thread runtime, so the classic deadlock (two workers,
//! an async holder, two tasks calling `lock()`) no longer hangs.
//!
//! The warning is once per process, so each case runs in a process of its own: this binary
//! (`harness = false`) runs itself with the case's name and reads what the child printed.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const WARNING: &str = "zklock: warning: blocking zklock call on an async worker thread";

fn main() {
    if let Some(case) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) {
        child(&case);
        return;
    }
    if !cfg!(feature = "tokio") {
        // Without the feature a tokio worker cannot be told from a blocking-pool thread, so
        // nothing is warned on tokio threads; the unit tests cover the names.
        println!("blocking_in_async: needs --features tokio; 0 passed, 0 failed");
        return;
    }
    // (case, warnings expected on stderr, what the warning must say)
    let cases: [(&str, usize, &str); 8] = [
        ("async_call_on_worker", 0, ""),
        (
            "blocking_on_multi_thread_worker",
            1,
            "multi-thread runtime, worker",
        ),
        (
            "blocking_on_current_thread_runtime",
            1,
            "current-thread runtime",
        ),
        ("spawn_blocking_multi_thread", 0, ""),
        ("spawn_blocking_current_thread", 0, ""),
        ("block_on_thread_of_multi_thread_runtime", 0, ""),
        ("plain_thread", 0, ""),
        (
            "two_workers_two_blocking_lockers_and_an_async_holder",
            1,
            "block_in_place",
        ),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (case, expected, says) in cases {
        match run_child(case, expected, says) {
            Ok(()) => {
                println!("test {case} ... ok");
                passed += 1;
            }
            Err(why) => {
                println!("test {case} ... FAILED: {why}");
                failed += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}

fn run_child(case: &str, expected: usize, says: &str) -> Result<(), String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg(case)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("still running after 60 s (deadlocked?)".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = reader.join().unwrap();
    if !status.success() {
        return Err(format!("child failed ({status}): {text}"));
    }
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with(WARNING)).collect();
    if warnings.len() != expected {
        return Err(format!(
            "{} warnings on stderr, expected {expected}: {text}",
            warnings.len()
        ));
    }
    if let Some(w) = warnings.first() {
        if !w.contains(says) || !w.contains("_async") {
            return Err(format!(
                "the warning does not say {says:?} and name _async: {w}"
            ));
        }
    }
    // The same once as a log line, for programs that have a logger (the child installs one).
    let logged = text.lines().filter(|l| l.starts_with("log WARN")).count();
    if logged != expected {
        return Err(format!(
            "{logged} warnings logged, expected {expected}: {text}"
        ));
    }
    Ok(())
}

/// Prints zklock's warnings as `log WARN ...` on stderr.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn && metadata.target().starts_with("zklock")
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("log {} {}", record.level(), record.args());
        }
    }
    fn flush(&self) {}
}

fn child(case: &str) {
    log::set_logger(&StderrLogger).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let client = zklock::Client::builder(&common::connect_string())
        .session_timeout(common::SESSION_TIMEOUT)
        .connect()
        .expect("connect");
    let mutex = zklock::DistributedMutex::new(&client, &common::lock_path(case)).unwrap();
    let multi = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    let current = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    // Twice, to see that the warning is once per process.
    let twice = move |m: zklock::DistributedMutex| {
        for _ in 0..2 {
            drop(m.try_lock().unwrap().expect("free"));
        }
    };
    let m = mutex.clone();
    match case {
        "async_call_on_worker" => multi().block_on(async move {
            tokio::spawn(async move {
                let guard = m.try_lock_async().await.unwrap().expect("free");
                guard.unlock_async().await.unwrap();
            })
            .await
            .unwrap()
        }),
        "blocking_on_multi_thread_worker" => {
            multi().block_on(async move { tokio::spawn(async move { twice(m) }).await.unwrap() })
        }
        "blocking_on_current_thread_runtime" => current().block_on(async move { twice(m) }),
        "spawn_blocking_multi_thread" => multi()
            .block_on(async move { tokio::task::spawn_blocking(move || twice(m)).await.unwrap() }),
        "spawn_blocking_current_thread" => current()
            .block_on(async move { tokio::task::spawn_blocking(move || twice(m)).await.unwrap() }),
        "block_on_thread_of_multi_thread_runtime" => multi().block_on(async move { twice(m) }),
        "plain_thread" => std::thread::spawn(move || twice(m)).join().unwrap(),
        "two_workers_two_blocking_lockers_and_an_async_holder" => {
            // Without block_in_place this hangs: both workers block in lock() while the
            // holder's task, which would unlock, waits for a worker.
            multi().block_on(async move {
                let guard = m.lock_async().await.unwrap();
                let lockers: Vec<_> = (0..2)
                    .map(|_| {
                        let m = m.clone();
                        tokio::spawn(async move { drop(m.lock().unwrap()) })
                    })
                    .collect();
                let holder = tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    guard.unlock_async().await.unwrap();
                });
                holder.await.unwrap();
                for locker in lockers {
                    locker.await.unwrap();
                }
            })
        }
        other => panic!("no case {other}"),
    }
    client.close().unwrap();
}
