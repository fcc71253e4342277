//! Threads (and, when started several times at once, processes) increment a counter stored in
//! ZooKeeper, read-modify-write under a `DistributedMutex`. Without the lock, increments would
//! be lost; with it, the final count is exact.
//!
//! The write is fenced (`LockGuard::fenced_set_data`): the server applies it only while our lock
//! node exists, so a holder that was paused past its session (and lost the lock meanwhile) has
//! its write refused instead of overwriting the next holder's count. It then tries the round
//! again.
//!
//! Ctrl-C shuts it down cleanly, the way a service would on SIGTERM: waiting threads are
//! cancelled (their queued nodes are withdrawn at once), the client is closed (the session
//! ends now, not after its timeout), and the program says what it did.
//!
//! ```text
//! cargo run --example counter -- --threads 4 --rounds 25
//! # two processes at once: both print their increments, the counter ends at 2 x 4 x 25 more
//! cargo run --example counter & cargo run --example counter; wait
//! ```
//! Options: `--connect HOSTS` (default `$ZK_CONNECT` or 127.0.0.1:2181), `--threads N`,
//! `--rounds N`, `--path /lock/path`.

use std::time::Duration;

use anyhow::{bail, Context};
use zklock::{CancelToken, Client, DistributedMutex, Error, Wait};

struct Options {
    connect: String,
    threads: usize,
    rounds: usize,
    path: String,
}

fn parse_options() -> anyhow::Result<Options> {
    let mut options = Options {
        connect: std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into()),
        threads: 4,
        rounds: 25,
        path: "/zklock-examples/counter".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--connect" => options.connect = value()?,
            "--threads" => options.threads = value()?.parse()?,
            "--rounds" => options.rounds = value()?.parse()?,
            "--path" => options.path = value()?,
            other => {
                bail!("unknown option {other} (see the comment at the top of examples/counter.rs)")
            }
        }
    }
    Ok(options)
}

fn main() -> anyhow::Result<()> {
    env_logger::init();
    let options = parse_options()?;
    let client = Client::builder(&options.connect)
        .session_timeout(Duration::from_secs(6))
        .connect()?;
    let mutex = DistributedMutex::new(&client, &format!("{}/lock", options.path))?;
    let counter = format!("{}/value", options.path);
    let pid = std::process::id();

    // Ctrl-C: stop the waiting threads (a thread inside the lock finishes its round).
    let shutdown = CancelToken::new();
    {
        let shutdown = shutdown.clone();
        ctrlc::set_handler(move || shutdown.cancel())?;
    }

    let start = read(&client, &counter)?;
    let done = std::thread::scope(|s| -> anyhow::Result<usize> {
        let workers: Vec<_> = (0..options.threads)
            .map(|t| {
                let (client, mutex, counter, shutdown) = (&client, &mutex, &counter, &shutdown);
                s.spawn(move || -> anyhow::Result<usize> {
                    let mut round = 0;
                    while round < options.rounds {
                        let guard = match mutex.lock_with(Wait::forever().cancel_on(shutdown)) {
                            Ok(Some(guard)) => guard,
                            // `None` only comes after a timeout, and none was given.
                            Ok(None) | Err(Error::Cancelled) => break,
                            Err(err) => return Err(err.into()),
                        };
                        let value = read(client, counter)? + 1;
                        match guard.fenced_set_data(counter, value.to_string().as_bytes()) {
                            Ok(()) => {}
                            Err(Error::LockLost { .. }) => {
                                // Refused by the server: nothing was written. Take the lock
                                // again and read the count anew.
                                eprintln!(
                                    "pid {pid} thread {t}: lock lost before the write; retrying"
                                );
                                continue;
                            }
                            // `OutcomeUnknown` among them: the increment may or may not count,
                            // and an exact count cannot be promised any more.
                            Err(err) => return Err(err.into()),
                        }
                        println!(
                            "pid {pid} thread {t}: counter = {value} (fencing token {})",
                            guard.fencing()
                        );
                        guard.unlock()?;
                        round += 1;
                    }
                    Ok(round)
                })
            })
            .collect();
        let mut done = 0;
        for worker in workers {
            done += worker.join().expect("worker panicked")?;
        }
        Ok(done)
    })?;
    if shutdown.is_cancelled() {
        // Every thread is joined; ending the session now removes anything of ours at once.
        client.close()?;
        println!(
            "pid {pid}: interrupted after {done} increments; waiting threads were cancelled \
             (their queued nodes withdrawn) and the session closed"
        );
        return Ok(());
    }
    let end = read(&client, &counter)?;
    println!(
        "pid {pid}: {done} increments by this process; counter went from {start} to {end} (other processes may have added theirs)"
    );
    Ok(())
}

fn read(client: &Client, path: &str) -> anyhow::Result<u64> {
    Ok(match client.get_data(path)? {
        Some(data) => String::from_utf8(data)?.trim().parse()?,
        None => 0,
    })
}
