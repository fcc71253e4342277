//! A blocking call made on an async runtime's worker thread can deadlock the program; zklock
//! says so in a warning (this binary installs its own logger to read it).

use std::sync::{Mutex, OnceLock};

use log::{Level, Log, Metadata, Record};

mod common;

/// Keeps every line zklock logs at warn level or above.
struct Captured(Mutex<Vec<String>>);

impl Log for Captured {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= Level::Warn
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) && record.target().starts_with("zklock") {
            self.0.lock().unwrap().push(record.args().to_string());
        }
    }

    fn flush(&self) {}
}

fn captured() -> &'static Captured {
    static LOGGER: OnceLock<&'static Captured> = OnceLock::new();
    LOGGER.get_or_init(|| {
        let logger: &'static Captured = Box::leak(Box::new(Captured(Mutex::new(Vec::new()))));
        log::set_logger(logger).expect("the only logger of this test binary");
        log::set_max_level(log::LevelFilter::Warn);
        logger
    })
}

fn warnings_about_workers() -> usize {
    let lines = captured().0.lock().unwrap();
    lines
        .iter()
        .filter(|l| l.contains("async worker thread") && l.contains("_async"))
        .count()
}

#[test]
fn a_blocking_call_on_a_tokio_worker_is_warned_about_and_an_async_one_is_not() {
    let logger = captured();
    let client = zklock::Client::builder(&common::connect_string())
        .session_timeout(common::SESSION_TIMEOUT)
        .connect()
        .expect("connect");
    let mutex =
        zklock::DistributedMutex::new(&client, &common::lock_path("blocking-warn")).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // The async call on a worker: no warning.
    let m = mutex.clone();
    runtime.block_on(async move {
        tokio::spawn(async move { m.try_lock_async().await.unwrap().expect("free") })
            .await
            .unwrap()
            .unlock_async()
            .await
            .unwrap();
    });
    assert_eq!(
        warnings_about_workers(),
        0,
        "{:?}",
        logger.0.lock().unwrap()
    );

    // A blocking call on a worker (what the docs tell users not to do): warned about.
    let m = mutex.clone();
    runtime.block_on(async move {
        tokio::spawn(async move { drop(m.try_lock().unwrap()) })
            .await
            .unwrap();
    });
    assert_eq!(
        warnings_about_workers(),
        1,
        "{:?}",
        logger.0.lock().unwrap()
    );

    // The same call on a thread of its own: no more warnings.
    drop(mutex.try_lock().unwrap());
    assert_eq!(warnings_about_workers(), 1);
}
