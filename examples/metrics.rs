//! zklock's metrics as Prometheus text, served over HTTP on 127.0.0.1.
//!
//! Installs `metrics-exporter-prometheus`'s recorder (any exporter of the `metrics` facade
//! works the same), takes a lock a few times, finds it busy once, and then serves what was
//! recorded until interrupted:
//!
//! ```text
//! cargo run --example metrics --features metrics -- [CONNECT_STRING] [ROUNDS] [LOCK_PATH]
//! curl http://127.0.0.1:9464/metrics          # the port it prints; METRICS_PORT=0 picks one
//! ```
//!
//! The exporter renders the text; this example answers HTTP itself with `std::net`, as the
//! exporter's own listener would bring in an HTTP stack (hyper) that zklock does not need.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use zklock::{Client, DistributedMutex};

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let connect = args.next().unwrap_or_else(|| "127.0.0.1:2181".into());
    let rounds = args.next().map_or(Ok(5), |r| r.parse())?;
    let path = args
        .next()
        .unwrap_or_else(|| "/zklock-examples/metrics".into());
    let port = std::env::var("METRICS_PORT").map_or(Ok(9464), |p| p.parse())?;
    run(&connect, rounds, &path, port)
}

/// Installs the exporter, binds `127.0.0.1:port`, does the work, then serves until killed.
pub fn run(connect: &str, rounds: usize, path: &str, port: u16) -> Result<(), Failure> {
    let metrics = install()?;
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    println!("metrics at http://{}/metrics", listener.local_addr()?);
    let client = Client::builder(connect)
        .metrics_path_label(true) // one lock here: its path makes no cardinality problem
        .connect()?;
    work(&client, rounds, path)?;
    println!("took {path} {rounds} times and found it busy once; serving");
    loop {
        let (stream, _) = listener.accept()?;
        if let Err(err) = answer(stream, &metrics) {
            eprintln!("scrape failed: {err}");
        }
    }
}

/// The Prometheus recorder, installed as the process's `metrics` recorder; its handle renders
/// the text. Durations get histogram buckets (without them the exporter renders summaries).
pub fn install() -> Result<PrometheusHandle, Failure> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Prefix("zklock_".into()), zklock::metrics::BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)?;
    Ok(handle)
}

/// Takes the lock at `path` `rounds` times, holding it briefly, then tries it once while held.
pub fn work(client: &Client, rounds: usize, path: &str) -> zklock::Result<()> {
    let mutex = DistributedMutex::new(client, path)?;
    for _ in 0..rounds {
        let guard = mutex.lock()?;
        std::thread::sleep(Duration::from_millis(20));
        guard.unlock()?;
    }
    let _held = mutex.lock()?;
    assert!(mutex.try_lock()?.is_none(), "not busy while held");
    Ok(())
}

/// Answers one HTTP request with the metrics, whatever was asked.
fn answer(stream: TcpStream, metrics: &PrometheusHandle) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = BufReader::new(&stream);
    let mut line = String::new();
    // The request line and headers, up to the blank line.
    while request.read_line(&mut line)? > 0 && line.trim_end() != "" {
        line.clear();
    }
    let body = metrics.render();
    let mut out = &stream;
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}
