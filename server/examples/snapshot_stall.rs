//! How long a client's request waits while the server takes a snapshot of a large tree: a
//! server on a data directory (with `--fsync`) gets a tree of NODES nodes (default 200,000),
//! then one client writes 4 KiB nodes until the log passes the snapshot size while another
//! sends `exists` in a loop; prints the probe's latencies around the snapshot. Figures, not a
//! check.
//!
//! ```text
//! cargo run --release -p zklock-server --example snapshot_stall [NODES]
//! ```

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zklock_proto::{Acl, ConnectRequest, CreateRequest, PathWatchRequest, Request, Writer};
use zklock_server::{Config, Server};

fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0; 4];
    s.read_exact(&mut len).expect("a reply");
    let mut body = vec![0; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("a reply");
    body
}

fn session(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the server listens");
    s.set_nodelay(true).unwrap();
    let mut w = Writer::frame();
    w.record(&ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 30_000,
        session_id: 0,
        passwd: vec![0; 16],
        read_only: Some(false),
    });
    s.write_all(&w.finish()).unwrap();
    read_frame(&mut s);
    s
}

fn create(path: String, size: usize) -> Request {
    Request::Create(CreateRequest {
        path,
        data: vec![b'x'; size],
        acl: Acl::open(),
        flags: 0,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn has_snapshot(dir: &Path) -> bool {
    dir.join("snapshot").exists()
}

fn main() {
    let nodes: usize = std::env::args()
        .nth(1)
        .map_or(200_000, |n| n.parse().expect("NODES: a number"));
    let dir = std::env::temp_dir().join(format!("zklock-snapshot-stall-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let server = Server::start(Config {
        data_dir: Some(dir.clone()),
        fsync: true,
        snapshot_log_bytes: 64 << 20,
        ..Config::default()
    })
    .expect("a server");
    let port = server.port();

    // The tree, pipelined: a writer thread sends, this one reads the replies.
    let started = Instant::now();
    let mut s = session(port);
    let mut w = s.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let mut batch = Vec::new();
        for i in 0..nodes {
            batch.extend_from_slice(&create(format!("/n{i}"), 100).to_frame(i as i32 + 1));
            if batch.len() > 64 << 10 {
                w.write_all(&batch).unwrap();
                batch.clear();
            }
        }
        w.write_all(&batch).unwrap();
    });
    for _ in 0..nodes {
        read_frame(&mut s);
    }
    sender.join().unwrap();
    println!(
        "{nodes} nodes created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The probe: `exists` in a loop, each timed.
    let stop = Arc::new(AtomicBool::new(false));
    let probe = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut s = session(port);
            let mut times = Vec::new();
            let mut xid = 0;
            while !stop.load(Ordering::SeqCst) {
                xid += 1;
                let req = Request::Exists(PathWatchRequest {
                    path: "/n0".into(),
                    watch: false,
                });
                let t = Instant::now();
                s.write_all(&req.to_frame(xid)).unwrap();
                read_frame(&mut s);
                times.push(t.elapsed());
            }
            times
        })
    };

    // Writes of 4 KiB until a snapshot is in place, then a little more.
    let mut writes = Vec::new();
    let mut xid = nodes as i32 + 1;
    let mut done_at = None;
    while done_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_millis(500)) {
        xid += 1;
        let t = Instant::now();
        s.write_all(&create(format!("/big{xid}"), 4096).to_frame(xid))
            .unwrap();
        read_frame(&mut s);
        writes.push(t.elapsed());
        if done_at.is_none() && has_snapshot(&dir) {
            done_at = Some(Instant::now());
        }
    }
    stop.store(true, Ordering::SeqCst);
    let mut probes = probe.join().unwrap();
    let snapshot = std::fs::metadata(dir.join("snapshot")).map_or(0, |m| m.len());
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);

    probes.sort();
    writes.sort();
    let pct = |v: &[Duration], p: f64| ms(v[((v.len() - 1) as f64 * p) as usize]);
    println!("snapshot: {snapshot} bytes, fsync on");
    println!(
        "exists probes: {} ; p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms; over 50 ms: {}",
        probes.len(),
        pct(&probes, 0.5),
        pct(&probes, 0.99),
        ms(*probes.last().unwrap()),
        probes.iter().filter(|d| ms(**d) > 50.0).count()
    );
    println!(
        "4 KiB creates: {} ; p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
        writes.len(),
        pct(&writes, 0.5),
        pct(&writes, 0.99),
        ms(*writes.last().unwrap())
    );
}
