//! The `zklock` tool's TLS and SASL options against secure servers that this test starts itself
//! (the library's fixture, `tests/common/secure.rs`: `scripts/start-zk.sh --tls` and `--sasl` on
//! free ports; skipped without java, keytool or openssl, failing instead under `CI=true`).

// The library's fixture, shared in place.
#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::secure::{lock_path, sasl_server, tls_server};

fn zklock(connect: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zklock"));
    cmd.args(["--connect", connect, "--connect-timeout", "3s"])
        .env_remove("ZKLOCK_PASSWORD")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

fn run(cmd: &mut Command) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out: Output = cmd.output().expect("zklock runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn tls_flags_lock_over_tls_and_bad_material_is_a_one_line_error() {
    let Some(server) = tls_server("tls_flags_lock_over_tls_and_bad_material_is_a_one_line_error")
    else {
        return;
    };
    let file = |name: &str| server.dir.join(name);
    let path = lock_path("cli-tls");
    let (code, err, _) = run(zklock(&server.connect)
        .arg("--tls-ca")
        .arg(file("ca.pem"))
        .arg("--tls-cert")
        .arg(file("client.pem"))
        .arg("--tls-key")
        .arg(file("client-key.pem"))
        .args(["run", "--nonblock", &path, "--", "true"]));
    assert_eq!(code, Some(0), "{err}");

    let (code, err, took) = run(zklock(&server.connect)
        .arg("--tls-ca")
        .arg(file("other-ca.pem"))
        .arg("--tls-cert")
        .arg(file("client.pem"))
        .arg("--tls-key")
        .arg(file("client-key.pem"))
        .args(["status", &path]));
    assert_eq!(code, Some(125), "{err}");
    assert!(err.starts_with("zklock: TLS to ZooKeeper failed"), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");

    let (code, err, _) = run(zklock(&server.connect)
        .arg("--tls-ca")
        .arg(file("ca.pem"))
        .arg("--tls-cert")
        .arg(file("client.pem"))
        .args(["status", &path]));
    assert_eq!(code, Some(125), "{err}");
    assert!(err.contains("--tls-key"), "{err}");
}

#[test]
fn sasl_flags_lock_and_a_wrong_password_is_a_one_line_error() {
    let Some(server) = sasl_server("sasl_flags_lock_and_a_wrong_password_is_a_one_line_error")
    else {
        return;
    };
    let path = lock_path("cli-sasl");
    let (code, err, _) = run(zklock(&server.connect)
        .env("ZKLOCK_PASSWORD", "alice-secret")
        .args(["--sasl-user", "alice", "--acl", "creator-read"])
        .args(["run", "--nonblock", &path, "--", "true"]));
    assert_eq!(code, Some(0), "{err}");

    let (code, err, took) = run(zklock(&server.connect)
        .env("ZKLOCK_PASSWORD", "wrong")
        .args(["--sasl-user", "alice", "status", &path]));
    assert_eq!(code, Some(125), "{err}");
    assert!(err.contains("authentication failed"), "{err}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}
