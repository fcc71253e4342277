//! A three-server ensemble on loopback for the tests of one binary: started by
//! `scripts/start-zk.sh --ensemble` on free ports the first time a test asks for it, its
//! members stopped and restarted by PID through the scripts, and stopped when the test binary
//! exits. The ports are picked once per binary, so a restarted member comes back where the
//! clients expect it.

use std::sync::{Mutex, MutexGuard, OnceLock};

use super::servers::{self, Servers};

/// Members 1..=3.
pub const SIZE: usize = 3;

static EXCLUSIVE: Mutex<()> = Mutex::new(());

/// Client, quorum and election port of each member, picked once per test binary.
fn ports() -> &'static [(u16, u16, u16); SIZE] {
    static PORTS: OnceLock<[(u16, u16, u16); SIZE]> = OnceLock::new();
    PORTS.get_or_init(|| {
        [(); SIZE].map(|()| {
            (
                servers::free_port(),
                servers::free_port(),
                servers::free_port(),
            )
        })
    })
}

/// The ensemble, started on first use.
fn servers() -> &'static Servers {
    static SERVERS: OnceLock<Servers> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let spec = ports()
            .iter()
            .map(|(c, q, e)| format!("{c}:{q}:{e}"))
            .collect::<Vec<_>>()
            .join(",");
        Servers::start(&["--ensemble"], &[("ZK_ENSEMBLE_PORTS", spec)]).keep_until_exit()
    })
}

/// Starts the ensemble if needed (also every member a failed test left stopped) and
/// serialises the tests that stop its servers.
pub fn ensemble() -> (String, MutexGuard<'static, ()>) {
    let guard = EXCLUSIVE.lock().unwrap_or_else(|e| e.into_inner());
    servers().run("start-zk.sh", &["--ensemble"]);
    (connect_string(), guard)
}

/// Client port of member `id` (1-based).
pub fn client_port(id: usize) -> u16 {
    ports()[id - 1].0
}

/// Client ports of members 1..=3.
pub fn client_ports() -> [u16; SIZE] {
    ports().map(|(client, _, _)| client)
}

pub fn connect_string() -> String {
    client_ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `Mode:` of member `id` (1-based), or `None` if it does not answer.
pub fn mode(id: usize) -> Option<String> {
    servers::mode(&format!("127.0.0.1:{}", client_port(id)))
}

pub fn leader() -> usize {
    (1..=SIZE)
        .find(|&id| mode(id).as_deref() == Some("leader"))
        .expect("no leader")
}

pub fn stop_member(id: usize) {
    servers().run("stop-zk.sh", &["--ensemble-member", &id.to_string()]);
}

/// Starts member `id` again and waits until it serves.
pub fn start_member(id: usize) {
    servers().run("start-zk.sh", &["--ensemble-member", &id.to_string()]);
}
