//! Secure servers for the tests of zklock and its CLI, started with `scripts/start-zk.sh --sasl`
//! (SASL DIGEST-MD5 required of every session; users alice and bob) and `scripts/start-zk.sh
//! --tls` (TLS client port, client certificates required), each on free ports of its own, once
//! per test binary by the first test that needs it, and stopped when the binary exits. Without
//! the tools they need (java, and for TLS keytool and openssl) the tests skip, or fail under
//! `CI=true` ([`super::skip_unless_ci`]).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::servers::{self, Servers};

/// A secure server started by `scripts/start-zk.sh`.
#[derive(Debug)]
pub struct Server {
    /// The connect string start-zk.sh printed last.
    pub connect: String,
    /// The server's work dir (where --tls leaves ca.pem, client.pem, ...).
    pub dir: PathBuf,
    /// The plain client port (of the `--tls` server: left open for 4lw probes).
    pub port: u16,
    /// The TLS client port of the `--tls` server.
    pub secure_port: u16,
    _servers: Servers,
}

/// `name` as an executable file in one of the `PATH` directories.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The java binary start-zk.sh would use: `$JAVA`, `$JAVA_HOME/bin/java`, or `java` on PATH.
pub fn java() -> Option<PathBuf> {
    if let Some(java) = std::env::var_os("JAVA").filter(|j| !j.is_empty()) {
        return Some(PathBuf::from(java));
    }
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let java = Path::new(&home).join("bin/java");
        if java.is_file() {
            return Some(java);
        }
    }
    on_path("java")
}

/// keytool next to that java (every JRE has one), else on PATH.
pub fn keytool() -> Option<PathBuf> {
    java()
        .and_then(|j| std::fs::canonicalize(j).ok())
        .and_then(|j| j.parent().map(|d| d.join("keytool")))
        .filter(|k| k.is_file())
        .or_else(|| on_path("keytool"))
}

/// Why the secure servers cannot be started here, if they cannot.
pub fn missing_tools(tls: bool) -> Option<String> {
    let mut missing = Vec::new();
    if java().is_none() {
        missing.push("java (Debian: default-jre-headless)");
    }
    if tls && keytool().is_none() {
        missing.push("keytool (part of the JRE)");
    }
    if tls && on_path("openssl").is_none() {
        missing.push("openssl (Debian: openssl)");
    }
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// Runs `scripts/start-zk.sh <flag>` on free ports, for the rest of this test binary; panics
/// with the script's output if it fails.
pub fn start(flag: &'static str) -> Server {
    let (port, secure_port) = (servers::free_port(), servers::free_port());
    let servers = Servers::start(
        &[flag],
        &[
            ("ZK_PORT", port.to_string()),
            ("ZK_SECURE_PORT", secure_port.to_string()),
            ("ZK_TLS_CLIENT_AUTH", "need".to_owned()),
        ],
    )
    .keep_until_exit();
    let connect = servers.connect_string();
    // "start-zk: TLS material: <dir> (ca.pem, ...)"; the --sasl server's dir by its layout.
    let dir = servers
        .started
        .stderr
        .lines()
        .find_map(|l| l.split_once("TLS material: "))
        .and_then(|(_, rest)| rest.rsplit_once(" (").map(|(dir, _)| PathBuf::from(dir)))
        .unwrap_or_default();
    eprintln!("{flag} server: {connect} {}", dir.display());
    Server {
        connect,
        dir,
        port,
        secure_port,
        _servers: servers,
    }
}

/// The `--sasl` server, started once per test process; `None` (after saying why) if the tools
/// are missing, a failure under `CI=true`.
pub fn sasl_server(test: &str) -> Option<&'static Server> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    server(&SERVER, test, "--sasl")
}

/// The `--tls` server, as `sasl_server`.
pub fn tls_server(test: &str) -> Option<&'static Server> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    server(&SERVER, test, "--tls")
}

pub fn server(
    cell: &'static OnceLock<Option<Server>>,
    test: &str,
    flag: &'static str,
) -> Option<&'static Server> {
    super::init_logging();
    let server = cell
        .get_or_init(|| match missing_tools(flag == "--tls") {
            Some(_) => None,
            None => Some(start(flag)),
        })
        .as_ref();
    if server.is_none() {
        super::skip_unless_ci(
            test,
            &format!(
                "the {flag} ZooKeeper cannot be started here, missing: {}",
                missing_tools(flag == "--tls").unwrap_or_default()
            ),
        );
    }
    server
}

/// A lock path of its own directly under the root, so no parent node (and its ACL) is shared
/// between tests or identities.
pub fn lock_path(test: &str) -> String {
    format!("/zklock-secure-{test}-{}", uuid::Uuid::new_v4().simple())
}
