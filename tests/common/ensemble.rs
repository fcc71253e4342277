//! A three-server ensemble on loopback, started (idempotently) by `scripts/start-zk.sh
//! --ensemble`; members are stopped and restarted by PID through the scripts.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Client ports of members 1..=3 (the scripts' defaults).
pub const PORTS: [u16; 3] = [2281, 2282, 2283];

static EXCLUSIVE: Mutex<()> = Mutex::new(());

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

fn run(name: &str, args: &[&str]) {
    let status = Command::new("bash")
        .arg(script(name))
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{name} {args:?} failed");
}

/// Starts the ensemble if needed and serialises the tests that stop its servers.
pub fn ensemble() -> (String, MutexGuard<'static, ()>) {
    let guard = EXCLUSIVE.lock().unwrap_or_else(|e| e.into_inner());
    run("start-zk.sh", &["--ensemble"]);
    (connect_string(), guard)
}

pub fn connect_string() -> String {
    PORTS
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `Mode:` of member `id` (1-based), or `None` if it does not answer.
pub fn mode(id: usize) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", PORTS[id - 1])).ok()?;
    stream.write_all(b"srvr").ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    out.lines()
        .find_map(|l| l.strip_prefix("Mode: ").map(str::to_owned))
}

pub fn leader() -> usize {
    (1..=3)
        .find(|&id| mode(id).as_deref() == Some("leader"))
        .expect("no leader")
}

pub fn stop_member(id: usize) {
    run("stop-zk.sh", &["--ensemble-member", &id.to_string()]);
}

/// Starts member `id` again and waits until it serves.
pub fn start_member(id: usize) {
    run("start-zk.sh", &["--ensemble-member", &id.to_string()]);
}
