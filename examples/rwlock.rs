//! Readers share, writers exclude: threads (and, started several times, processes) read and
//! update a "config" stored in ZooKeeper under a `DistributedRwLock`. Readers overlap with each
//! other (the output shows several inside at once) but never with a writer, and a waiting
//! writer holds back readers that come after it.
//!
//! ```text
//! cargo run --example rwlock -- --readers 4 --writers 1 --rounds 5
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use zklock::{Client, DistributedRwLock};

fn main() -> anyhow::Result<()> {
    env_logger::init();
    let (mut readers, mut writers, mut rounds) = (4usize, 1usize, 5usize);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value: usize = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?
            .parse()?;
        match flag.as_str() {
            "--readers" => readers = value,
            "--writers" => writers = value,
            "--rounds" => rounds = value,
            other => bail!("unknown option {other}"),
        }
    }
    let connect = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::builder(&connect)
        .session_timeout(Duration::from_secs(6))
        .connect()?;
    let lock = DistributedRwLock::new(&client, "/zklock-examples/config/lock")?;
    let config = "/zklock-examples/config/value";
    let reading = AtomicUsize::new(0);

    std::thread::scope(|s| -> anyhow::Result<()> {
        let mut workers = Vec::new();
        for r in 0..readers {
            let (client, lock, reading) = (&client, &lock, &reading);
            workers.push(s.spawn(move || -> anyhow::Result<()> {
                for _ in 0..rounds {
                    let guard = lock.read()?;
                    let inside = reading.fetch_add(1, Ordering::SeqCst) + 1;
                    let value = client
                        .get_data(config)?
                        .map(String::from_utf8)
                        .transpose()?;
                    println!("reader {r}: config = {value:?} ({inside} reader(s) inside)");
                    std::thread::sleep(Duration::from_millis(50));
                    reading.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock()?;
                }
                Ok(())
            }));
        }
        for w in 0..writers {
            let (client, lock, reading) = (&client, &lock, &reading);
            workers.push(s.spawn(move || -> anyhow::Result<()> {
                for round in 0..rounds {
                    let guard = lock.write()?;
                    // Readers of this process are all outside while we write.
                    assert_eq!(
                        reading.load(Ordering::SeqCst),
                        0,
                        "a reader overlapped a writer"
                    );
                    let value = format!("v{round} by writer {w} of pid {}", std::process::id());
                    client.set_data(config, value.as_bytes())?;
                    println!(
                        "writer {w}: wrote {value:?} (fencing token {})",
                        guard.fencing()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                    guard.unlock()?;
                }
                Ok(())
            }));
        }
        for worker in workers {
            worker.join().expect("worker panicked")?;
        }
        Ok(())
    })?;
    println!("done: readers shared the lock, writers had it alone");
    Ok(())
}
