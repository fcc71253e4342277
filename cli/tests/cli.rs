//! The `zklock` binary against the real ZooKeeper: each test runs the built tool as separate
//! processes on a lock path of its own.

// The library's fixture (servers on free ports, a lock path per test, proxies), shared in place.
#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

fn zklock() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zklock"));
    cmd.env("ZKLOCK_CONNECT", common::connect_string())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

fn output(cmd: &mut Command) -> Output {
    cmd.output().expect("zklock runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A scratch directory of the test's own.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "zklock-cli-{test}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A background zklock process, ended (SIGCONT, SIGTERM, then SIGKILL) if the test leaves it.
struct Running(Child);

impl Running {
    fn spawn(cmd: &mut Command) -> Running {
        Running(cmd.spawn().expect("zklock starts"))
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.0.id() as i32)
    }

    fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).unwrap();
    }

    /// The exit status, if the process exits within `limit`.
    fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn exit_code(&mut self, limit: Duration) -> i32 {
        let status = self.wait_for(limit).expect("zklock did not exit in time");
        status
            .code()
            .unwrap_or_else(|| panic!("zklock died: {status:?}"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().unwrap().is_none() {
            let _ = kill(self.pid(), Signal::SIGCONT);
            let _ = kill(self.pid(), Signal::SIGTERM);
            if self.wait_for(Duration::from_secs(5)).is_none() {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }
}

/// `zklock run PATH -- sh -c SCRIPT sh ARGS...`, in the background.
fn run_sh(options: &[&str], path: &str, script: &str, args: &[&Path]) -> Running {
    Running::spawn(
        zklock()
            .arg("run")
            .args(options)
            .arg(path)
            .args(["--", "sh", "-c", script, "sh"])
            .args(args),
    )
}

/// Waits for a file the command writes once it holds the lock; returns its contents.
fn wait_for_file(file: &Path) -> String {
    assert!(
        common::eventually(Duration::from_secs(20), || std::fs::read_to_string(file)
            .is_ok_and(|s| s.ends_with('\n'))),
        "{} never written",
        file.display()
    );
    std::fs::read_to_string(file).unwrap()
}

/// What `zklock status --json` printed: exactly one line, one JSON object.
fn parse_json(out: &Output) -> Value {
    let text = stdout(out);
    assert!(
        text.ends_with('\n') && text.lines().count() == 1,
        "not one line: {text:?}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `zklock status --json <args>`, which must succeed, parsed.
fn status_json_of(args: &[&str]) -> Value {
    let out = output(zklock().args(["status", "--json"]).args(args));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    parse_json(&out)
}

fn status_json(path: &str) -> Value {
    status_json_of(&[path])
}

/// The `contenders` of a status, in queue order.
fn contenders_of(status: &Value) -> &[Value] {
    status["contenders"]
        .as_array()
        .unwrap_or_else(|| panic!("no contenders array: {status}"))
}

/// How many contenders have every one of `fields` (name, value).
fn count_where(status: &Value, fields: &[(&str, Value)]) -> usize {
    contenders_of(status)
        .iter()
        .filter(|c| fields.iter().all(|(name, value)| &c[*name] == value))
        .count()
}

/// The contenders' node names (relative to the lock path), in queue order.
fn nodes_of(status: &Value) -> Vec<String> {
    contenders_of(status)
        .iter()
        .map(|c| c["node"].as_str().expect("node is a string").to_owned())
        .collect()
}

fn contenders(path: &str) -> usize {
    contenders_of(&status_json(path)).len()
}

fn wait_for_contenders(path: &str, n: usize) {
    assert!(
        common::eventually(Duration::from_secs(20), || contenders(path) == n),
        "never {n} contenders: {}",
        status_json(path)
    );
}

/// What an exited process with piped stderr wrote there.
fn read_stderr(run: &mut Running) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.0.stderr.take().unwrap(), &mut err).unwrap();
    err
}

/// Whether `pid` is a live process: a zombie is dead (whoever inherited it may never reap it;
/// PID 1 in a container often does not).
fn process_exists(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// The state letter and process group of `pid`, from /proc/PID/stat.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

/// The live processes in process group `pgrp`.
fn group_members(pgrp: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| proc_stat(pid).is_some_and(|(_, group)| group == pgrp))
        .filter(|&pid| process_exists(pid))
        .collect()
}

/// Processes a test started indirectly, SIGKILLed when it ends (passing or not), so that a
/// failure cannot leave them running.
struct Leftovers(Vec<i32>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if process_exists(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Reads a pid a command wrote into `file`.
fn read_pid(file: &Path) -> i32 {
    wait_for_file(file).trim().parse().unwrap()
}

#[test]
fn runs_on_one_lock_never_overlap() {
    let path = common::lock_path("cli-overlap");
    let dir = scratch("overlap");
    let log = dir.join("log");
    let script = r#"echo "enter $ZKLOCK_FENCING_TOKEN" >> "$1"; sleep 0.2; echo "exit $ZKLOCK_FENCING_TOKEN" >> "$1""#;
    let mut runs: Vec<Running> = (0..6)
        .map(|_| run_sh(&[], &path, script, &[&log]))
        .collect();
    for run in &mut runs {
        assert_eq!(run.exit_code(Duration::from_secs(60)), 0);
    }
    let lines: Vec<(String, i64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| {
            let (what, token) = line.split_once(' ').unwrap();
            (what.to_owned(), token.parse().unwrap())
        })
        .collect();
    assert_eq!(lines.len(), 12, "{lines:?}");
    let mut last_token = 0;
    for pair in lines.chunks(2) {
        let (enter, exit) = (&pair[0], &pair[1]);
        assert_eq!(
            (enter.0.as_str(), exit.0.as_str()),
            ("enter", "exit"),
            "{lines:?}"
        );
        assert_eq!(enter.1, exit.1, "interleaved holders: {lines:?}");
        assert!(enter.1 > last_token, "fencing tokens must grow: {lines:?}");
        last_token = enter.1;
    }
    assert_eq!(contenders(&path), 0);
}

#[test]
fn nonblock_exits_123_when_busy_and_signals_reach_the_command() {
    let path = common::lock_path("cli-nonblock");
    let dir = scratch("nonblock");
    let ready = dir.join("ready");
    let mut holder = run_sh(&[], &path, r#"echo held > "$1"; exec sleep 60"#, &[&ready]);
    wait_for_file(&ready);

    let started = Instant::now();
    let out = output(zklock().args(["run", "--nonblock", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(123), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
    assert_eq!(contenders(&path), 1, "the busy attempt left a node");

    // SIGTERM is forwarded: the command dies of it, and zklock exits as a shell would.
    holder.signal(Signal::SIGTERM);
    assert_eq!(holder.exit_code(Duration::from_secs(10)), 128 + 15);
    assert_eq!(contenders(&path), 0);
    let out = output(zklock().args(["run", "-n", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn timeout_is_honoured() {
    let path = common::lock_path("cli-timeout");
    let dir = scratch("timeout");
    let ready = dir.join("ready");
    let _holder = run_sh(&[], &path, r#"echo held > "$1"; exec sleep 60"#, &[&ready]);
    wait_for_file(&ready);

    let started = Instant::now();
    let out = output(zklock().args(["run", "--timeout", "1500ms", &path, "--", "true"]));
    let waited = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    assert!(waited < Duration::from_secs(6), "{waited:?}");
    // Reported as given, not rounded to "1s".
    assert!(
        stderr(&out).contains("still busy after 1500ms"),
        "{}",
        stderr(&out)
    );
    assert_eq!(contenders(&path), 1, "the timed-out waiter left its node");

    // humantime's units, and a bare number as seconds.
    for timeout in ["1sec", "0.5"] {
        let out = output(zklock().args(["run", "-w", timeout, &path, "--", "true"]));
        assert_eq!(out.status.code(), Some(124), "{timeout}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("still busy after {timeout}\n")),
            "{}",
            stderr(&out)
        );
    }
    let out = output(zklock().args([
        "--session-timeout",
        "8sec",
        "run",
        "--kill-grace",
        "1h30m",
        "--suspended-grace",
        "1min",
        "-w",
        "5min",
        &common::lock_path("cli-timeout-units"),
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn command_exit_status_is_propagated() {
    let path = common::lock_path("cli-status");
    let code = |args: &[&str]| {
        let out = output(zklock().arg("run").arg(&path).arg("--").args(args));
        out.status.code().unwrap()
    };
    assert_eq!(code(&["true"]), 0);
    assert_eq!(code(&["sh", "-c", "exit 7"]), 7);
    assert_eq!(code(&["sh", "-c", "kill -USR1 $$"]), 128 + 10);
    assert_eq!(code(&["/nonexistent/zklock-test-command"]), 127);
    assert_eq!(code(&["/"]), 126);
    // Options after the lock path belong to the command.
    let out = output(zklock().args(["run", &path, "sh", "-c", "echo \"$0\"", "-x"]));
    assert_eq!(stdout(&out), "-x\n");
    assert_eq!(contenders(&path), 0);
}

#[test]
fn status_shows_holder_and_waiter_with_owner_data() {
    let path = common::lock_path("cli-show");
    let dir = scratch("show");
    let (ready, go) = (dir.join("ready"), dir.join("go"));
    let mut holder = run_sh(
        &[],
        &path,
        r#"echo held > "$1"; while [ ! -e "$2" ]; do sleep 0.05; done"#,
        &[&ready, &go],
    );
    wait_for_file(&ready);
    let mut waiter = run_sh(&[], &path, "true", &[]);
    wait_for_contenders(&path, 2);

    let status = status_json(&path);
    assert_eq!(status["path"], path.as_str(), "{status}");
    let queue = contenders_of(&status);
    assert_eq!(queue.len(), 2, "{status}");
    for (i, (who, standing)) in [(&holder, "holder"), (&waiter, "waiter")]
        .iter()
        .enumerate()
    {
        let c = &queue[i];
        assert_eq!(c["position"], i, "{status}");
        assert_eq!(c["standing"], *standing, "{status}");
        assert_eq!(c["pid"], who.pid().as_raw(), "{status}");
        assert_eq!(c["thread"], "main", "{status}");
        assert!(
            c["session_id"]
                .as_str()
                .is_some_and(|s| s.starts_with("0x")),
            "{status}"
        );
    }

    let out = output(zklock().args(["status", &path]));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("{path}: held, 1 waiting"), "{text}");
    assert!(lines[1].starts_with("POS  ROLE"), "{text}");
    assert!(
        lines[2].contains("holder") && lines[2].contains(&format!("pid={}", holder.pid())),
        "{text}"
    );
    assert!(
        lines[3].contains("waiter") && lines[3].contains(&format!("pid={}", waiter.pid())),
        "{text}"
    );
    assert!(
        lines[2].contains("0x") && lines[2].contains("lock-"),
        "{text}"
    );

    std::fs::write(&go, "").unwrap();
    assert_eq!(holder.exit_code(Duration::from_secs(10)), 0);
    assert_eq!(waiter.exit_code(Duration::from_secs(10)), 0);
    assert_eq!(
        stdout(&output(zklock().args(["status", &path]))),
        format!("{path}: free (no holder, no waiters)\n")
    );
}

#[test]
fn break_frees_a_lock_held_by_a_stopped_process() {
    let path = common::lock_path("cli-break");
    let dir = scratch("break");
    let (child_pid_file, log) = (dir.join("pid"), dir.join("log"));
    // A long session: without `break`, the waiter would wait for all of it.
    let mut holder = Running::spawn(
        zklock()
            .args(["run", "--session-timeout", "40s", &path, "--"])
            .args(["sh", "-c", r#"echo $$ > "$1"; exec sleep 120"#, "sh"])
            .arg(&child_pid_file)
            .stderr(Stdio::piped()),
    );
    let child_pid: i32 = wait_for_file(&child_pid_file).trim().parse().unwrap();
    // The holder hangs, its session alive as far as the server can tell for a while.
    holder.signal(Signal::SIGSTOP);
    kill(Pid::from_raw(child_pid), Signal::SIGSTOP).unwrap();
    let mut waiter = run_sh(&[], &path, r#"echo waiter ran >> "$1""#, &[&log]);
    wait_for_contenders(&path, 2);

    // Declining deletes nothing.
    let mut declined = zklock()
        .args(["break", &path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    declined.stdin.take().unwrap().write_all(b"n\n").unwrap();
    let out = declined.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("to delete: "), "{}", stdout(&out));
    assert!(
        !stdout(&out).contains("deleted /"),
        "declined, yet said deleted: {}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains(&format!("pid={}", holder.pid())),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("not deleted"), "{}", stdout(&out));
    assert_eq!(contenders(&path), 2);

    let started = Instant::now();
    let out = output(zklock().args(["break", "--yes", &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Said once done, with the node it deleted and who takes over.
    let said = stdout(&out);
    let lines: Vec<&str> = said.lines().collect();
    assert!(
        lines.len() == 2
            && lines[0].starts_with(&format!("deleted {path}/"))
            && lines[0].contains(&format!("pid={} ", holder.pid()))
            && lines[1].starts_with("the next waiter (")
            && lines[1].contains(&format!("pid={} ", waiter.pid())),
        "{said}"
    );
    assert_eq!(waiter.exit_code(Duration::from_secs(15)), 0);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "waiter ran\n");

    // When the hung holder wakes up, it finds its lock gone and kills its command.
    kill(Pid::from_raw(child_pid), Signal::SIGCONT).unwrap();
    holder.signal(Signal::SIGCONT);
    assert_eq!(holder.exit_code(Duration::from_secs(20)), 122);
    assert!(!process_exists(child_pid), "the command outlived the lock");
    let err = read_stderr(&mut holder);
    assert!(err.contains("was deleted"), "{err}");
    assert_eq!(contenders(&path), 0);
}

#[test]
fn lost_lock_kills_the_command() {
    let proxy = Proxy::start(&common::connect_string());
    let path = common::lock_path("cli-lost");
    let dir = scratch("lost");
    let child_pid_file = dir.join("pid");
    // The command ignores SIGTERM, so only the SIGKILL after the grace period stops it.
    let mut holder = Running::spawn(
        zklock()
            .args(["run", "--connect", &proxy.connect_string()])
            .args(["--session-timeout", "2s", "--kill-grace", "1s", &path, "--"])
            .args([
                "sh",
                "-c",
                r#"trap "" TERM; echo $$ > "$1"; while :; do sleep 0.1; done"#,
                "sh",
            ])
            .arg(&child_pid_file)
            .stderr(Stdio::piped()),
    );
    let child_pid: i32 = wait_for_file(&child_pid_file).trim().parse().unwrap();
    assert!(holder.wait_for(Duration::from_millis(500)).is_none());

    let blackholed = Instant::now();
    proxy.blackhole(true);
    let code = holder.exit_code(Duration::from_secs(20));
    eprintln!(
        "zklock exited {:?} after the blackhole",
        blackholed.elapsed()
    );
    assert_eq!(code, 122);
    assert!(!process_exists(child_pid), "the command outlived the lock");
    let err = read_stderr(&mut holder);
    assert!(err.contains("lost"), "{err}");
    assert!(err.contains("SIGKILL"), "{err}");

    // The server expired the silent session, so the lock is free for others.
    let out = output(zklock().args(["run", "--timeout", "10s", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn signal_while_waiting_leaves_the_queue_at_once() {
    let path = common::lock_path("cli-interrupt");
    let dir = scratch("interrupt");
    let ready = dir.join("ready");
    let _holder = run_sh(&[], &path, r#"echo held > "$1"; exec sleep 60"#, &[&ready]);
    wait_for_file(&ready);
    let mut waiter = run_sh(&["--session-timeout", "40s"], &path, "true", &[]);
    wait_for_contenders(&path, 2);
    waiter.signal(Signal::SIGINT);
    assert_eq!(waiter.exit_code(Duration::from_secs(5)), 128 + 2);
    // Not after the waiter's 40 s session timeout: its node was deleted before it exited.
    assert_eq!(contenders(&path), 1);
}

#[test]
fn bad_input_gives_one_line_errors() {
    let one_line_error = |out: &Output, needle: &str| {
        assert_eq!(out.status.code(), Some(125), "{}", stderr(out));
        let err = stderr(out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("zklock: ") && err.contains(needle), "{err}");
    };
    one_line_error(
        &output(zklock().args(["status", "locks/relative"])),
        "invalid lock path",
    );
    one_line_error(
        &output(zklock().args(["run", "/a//b", "--", "true"])),
        "invalid lock path",
    );
    one_line_error(
        &output(zklock().args([
            "--connect",
            "127.0.0.1:1",
            "--connect-timeout",
            "1s",
            "status",
            "/x",
        ])),
        "could not connect",
    );
    let path = common::lock_path("cli-bad");
    one_line_error(
        &output(zklock().args(["break", "--node", "no-such-node", &path])),
        "no node",
    );
    let out = output(zklock().args(["break", "--yes", &path]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("nothing to break"),
        "{}",
        stdout(&out)
    );

    // Usage errors come from the argument parser (several lines) but exit 125 too.
    let out = output(zklock().args(["run", "--timeout", "5parsecs", "/x", "true"]));
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("5parsecs"), "{}", stderr(&out));
    let out = output(zklock().args(["run", "--nonblock", "--timeout", "1s", "/x", "true"]));
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(output(zklock().arg("--help")).status.code(), Some(0));
}

#[test]
fn break_as_another_digest_identity_fails_on_a_creator_only_lock() {
    let path = common::lock_path("cli-acl");
    let dir = scratch("acl");
    let ready = dir.join("ready");
    // alice holds the lock; its nodes admit only alice (and let anyone read).
    let mut holder = Running::spawn(
        zklock()
            .env("ZKLOCK_PASSWORD", "alice-pw")
            .args([
                "--auth-digest",
                "alice",
                "--acl",
                "creator-read",
                "run",
                &path,
            ])
            .args(["--", "sh", "-c", r#"echo held > "$1"; exec sleep 60"#, "sh"])
            .arg(&ready)
            .stderr(Stdio::piped()),
    );
    wait_for_file(&ready);
    // The password is in the environment, not on the command line.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", holder.pid())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("alice-pw"));
    // Anyone can still look (creator-read)...
    assert_eq!(contenders(&path), 1);

    // ...but bob cannot break it: one clear line, exit 125, the node stays.
    let password_file = dir.join("bob-password");
    std::fs::write(&password_file, "bob-pw\n").unwrap();
    std::fs::set_permissions(
        &password_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let bob = |args: &[&str]| {
        output(
            zklock()
                .arg("--auth-digest")
                .arg("bob")
                .arg("--password-file")
                .arg(&password_file)
                .args(args),
        )
    };
    let out = bob(&["break", "--yes", &path]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("zklock: not allowed to delete ") && err.contains("ACL"),
        "{err}"
    );
    // Refused: nothing said it deletes, or deleted, or that anyone takes over.
    assert_eq!(stdout(&out), "", "a refused break announced the deletion");
    assert_eq!(contenders(&path), 1, "bob's break deleted the node");
    // Nor can he queue on it (an error, not "busy").
    let out = bob(&["run", "--nonblock", &path, "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    // Who was refused, and for what.
    assert!(
        stderr(&out).contains(&format!("not authorized (ACL): CREATE on {path} "))
            && stderr(&out).contains("refused for identity digest:bob"),
        "{}",
        stderr(&out)
    );

    // A wrong password is just another identity; no credentials at all fare no better.
    for (env, args) in [
        (Some("wrong"), &["--auth-digest", "alice"][..]),
        (None, &[][..]),
    ] {
        let mut cmd = zklock();
        if let Some(password) = env {
            cmd.env("ZKLOCK_PASSWORD", password);
        }
        let out = output(cmd.args(args).args(["break", "--yes", &path]));
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("not allowed to delete"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(contenders(&path), 1);

    // Usage errors: no password anywhere, creator ACLs without credentials.
    let out = output(zklock().env_remove("ZKLOCK_PASSWORD").args([
        "--auth-digest",
        "bob",
        "status",
        &path,
    ]));
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("ZKLOCK_PASSWORD"), "{}", stderr(&out));
    let out = output(zklock().args(["--acl", "creator", "run", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("--acl creator needs"),
        "{}",
        stderr(&out)
    );

    // alice herself (another session of the identity) can break it.
    let out = output(zklock().env("ZKLOCK_PASSWORD", "alice-pw").args([
        "--auth-digest",
        "alice",
        "break",
        "--yes",
        &path,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(holder.exit_code(Duration::from_secs(20)), 122);
    let err = read_stderr(&mut holder);
    assert!(err.contains("was deleted"), "{err}");
    assert_eq!(contenders(&path), 0);
}

/// The last segment of a node path.
fn node_name(node_path: &str) -> String {
    node_path.rsplit('/').next().unwrap().to_owned()
}

#[test]
fn status_and_break_read_write_locks() {
    use std::sync::mpsc;
    use zklock::DistributedRwLock;

    let path = common::lock_path("cli-rwlock");
    let (a, b) = (common::client(), common::client());
    let (lock_a, lock_b) = (
        DistributedRwLock::new(&a, &path).unwrap(),
        DistributedRwLock::new(&b, &path).unwrap(),
    );
    let reader_a = lock_a.read().unwrap();
    let reader_b = lock_b.read().unwrap();
    // A writer queues behind both readers.
    let (acquired, writer_got_it) = mpsc::channel();
    let (release, writer_may_go) = mpsc::channel::<()>();
    let writer_path = path.clone();
    let writer = std::thread::spawn(move || {
        let client = common::client();
        let lock = DistributedRwLock::new(&client, &writer_path).unwrap();
        let guard = lock.write_timeout(Duration::from_secs(30)).unwrap();
        acquired.send(guard.is_some()).unwrap();
        let _ = writer_may_go.recv();
    });
    wait_for_contenders(&path, 3);

    let status = status_json(&path);
    assert_eq!(status["layout"], "rwlock", "{status}");
    assert_eq!(status["permits"], Value::Null, "{status}");
    let read_held = [("type", json!("read")), ("holds", json!(true))];
    assert_eq!(count_where(&status, &read_held), 2, "{status}");
    let write_waits = [("type", json!("write")), ("holds", json!(false))];
    assert_eq!(count_where(&status, &write_waits), 1, "{status}");
    let third = &contenders_of(&status)[2];
    assert_eq!(
        (&third["position"], &third["standing"], &third["type"]),
        (&json!(2), &json!("waiter"), &json!("write")),
        "{status}"
    );
    let out = output(zklock().args(["status", &path]));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "{path}: read/write lock, held by 2 readers, 1 waiting\n"
        )),
        "{text}"
    );
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("POS  ROLE    TYPE"),
        "{text}"
    );
    assert!(text.contains("__WRIT__"), "{text}");

    // Two readers hold: which one to break must be named.
    let out = output(zklock().args(["break", "--yes", &path]));
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("--node"), "{}", stderr(&out));
    assert_eq!(contenders(&path), 3);

    for reader in [&reader_a, &reader_b] {
        let name = node_name(reader.node_path());
        let out = output(zklock().args(["break", "--yes", "--node", &name, &path]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("(holder, read,"), "{}", stdout(&out));
    }
    assert_eq!(
        writer_got_it.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "the writer never got the lock"
    );
    let text = stdout(&output(zklock().args(["status", &path])));
    assert!(
        text.starts_with(&format!(
            "{path}: read/write lock, held by a writer, no waiters\n"
        )),
        "{text}"
    );
    drop(release);
    writer.join().unwrap();
    drop((reader_a, reader_b));
    assert_eq!(contenders(&path), 0);
}

#[test]
fn status_and_break_semaphore_leases() {
    use std::sync::mpsc;
    use zklock::Semaphore;

    let path = common::lock_path("cli-semaphore");
    let (a, b) = (common::client(), common::client());
    let (sem_a, sem_b) = (
        Semaphore::new(&a, &path, 2).unwrap(),
        Semaphore::new(&b, &path, 2).unwrap(),
    );
    let permit_a = sem_a.acquire().unwrap();
    let _permit_b = sem_b.acquire().unwrap();
    let (acquired, third_got_it) = mpsc::channel();
    let (release, third_may_go) = mpsc::channel::<()>();
    let third_path = path.clone();
    let third = std::thread::spawn(move || {
        let client = common::client();
        let sem = Semaphore::new(&client, &third_path, 2).unwrap();
        let permit = sem.acquire_timeout(Duration::from_secs(30)).unwrap();
        acquired.send(permit.is_some()).unwrap();
        let _ = third_may_go.recv();
    });
    // Two leases held, the third taker's lease waited for, the taker queued on the gate.
    wait_for_contenders(&path, 4);

    let status = status_json_of(&["--permits", "2", &path]);
    assert_eq!(status["layout"], "semaphore", "{status}");
    assert_eq!(status["permits"], 2, "{status}");
    for (kind, holds, n) in [
        ("lease", true, 2),
        ("lease", false, 1),
        ("queued", false, 1),
    ] {
        let fields = [("type", json!(kind)), ("holds", json!(holds))];
        assert_eq!(count_where(&status, &fields), n, "{kind} {holds}: {status}");
    }
    let nodes = nodes_of(&status);
    let under = |dir: &str| nodes.iter().filter(|n| n.starts_with(dir)).count();
    assert_eq!((under("leases/"), under("locks/")), (3, 1), "{status}");
    let text = stdout(&output(zklock().args(["status", "--permits", "2", &path])));
    assert!(
        text.starts_with(&format!(
            "{path}: semaphore, 2 of 2 permits held, 2 waiting\n"
        )),
        "{text}"
    );
    // Without the permits, the leases cannot be told apart.
    let text = stdout(&output(zklock().args(["status", &path])));
    assert!(text.contains("3 leases held or waited for"), "{text}");
    assert!(text.contains("unknown"), "{text}");

    let out = output(zklock().args(["break", "--yes", &path]));
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("--node"), "{}", stderr(&out));
    let out = output(zklock().args(["revoke", &path]));
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("no revocation"), "{}", stderr(&out));

    // Breaking a held lease lets the waiting taker in.
    let lease = format!("leases/{}", node_name(permit_a.node_paths()[0]));
    let out = output(zklock().args(["break", "--yes", "--node", &lease, &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("deleted"), "{}", stdout(&out));
    assert_eq!(
        third_got_it.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "the third taker never got a lease"
    );
    drop(release);
    third.join().unwrap();
}

#[test]
fn leaders_run_one_at_a_time_and_hand_over() {
    let path = common::lock_path("cli-leader");
    let dir = scratch("leader");
    let log = dir.join("log");
    let script = r#"echo "start $1" >> "$2"; while [ ! -e "$3" ]; do sleep 0.05; done; echo "end $1" >> "$2"; exit "$4""#;
    let leader = |id: Option<&str>, name: &str, stop: &Path, code: &str| {
        let mut cmd = zklock();
        cmd.arg("leader");
        if let Some(id) = id {
            cmd.args(["--id", id]);
        }
        cmd.arg(&path)
            .args(["--", "sh", "-c", script, "sh", name])
            .arg(&log)
            .arg(stop)
            .arg(code)
            .stderr(Stdio::piped());
        Running::spawn(&mut cmd)
    };
    let (stop_a, stop_b) = (dir.join("stop-a"), dir.join("stop-b"));
    let mut a = leader(None, "a", &stop_a, "3");
    wait_for_file(&log);
    let mut b = leader(Some("replica-b"), "b", &stop_b, "0");
    wait_for_contenders(&path, 2);

    // A signal while waiting to lead leaves the election at once (not after 40 s).
    let mut c = Running::spawn(
        zklock()
            .args(["leader", "--session-timeout", "40s", &path, "--", "true"])
            .stderr(Stdio::piped()),
    );
    wait_for_contenders(&path, 3);
    c.signal(Signal::SIGINT);
    assert_eq!(c.exit_code(Duration::from_secs(5)), 128 + 2);
    assert_eq!(contenders(&path), 2);

    let status = status_json(&path);
    assert_eq!(status["layout"], "election", "{status}");
    assert_eq!(status["permits"], Value::Null, "{status}");
    let queue = contenders_of(&status);
    let leader_at = queue.iter().position(|c| c["pid"] == a.pid().as_raw());
    let follower_at = queue.iter().position(|c| c["owner"] == "replica-b");
    assert_eq!((leader_at, follower_at), (Some(0), Some(1)), "{status}");
    assert_eq!(queue[0]["standing"], "holder", "{status}");
    let follows = [("type", json!("participant")), ("holds", json!(false))];
    assert_eq!(count_where(&status, &follows), 1, "{status}");
    let text = stdout(&output(zklock().args(["status", &path])));
    assert!(
        text.starts_with(&format!("{path}: leader election, led by host="))
            && text.contains("latch-"),
        "{text}"
    );
    // Only the leader runs its command.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "start a\n");
    assert!(b.wait_for(Duration::ZERO).is_none());

    // The leader's command ends: it steps down with the command's status, the other takes over.
    std::fs::write(&stop_a, "").unwrap();
    assert_eq!(a.exit_code(Duration::from_secs(10)), 3);
    assert!(
        common::eventually(Duration::from_secs(10), || std::fs::read_to_string(&log)
            .unwrap()
            .ends_with("start b\n")),
        "b never took over"
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "start a\nend a\nstart b\n"
    );
    assert_eq!(contenders(&path), 1);

    // Leadership lost (its node broken, noticed at once): the command is killed, exit 122.
    let started = Instant::now();
    let out = output(zklock().args(["break", "--yes", &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(b.exit_code(Duration::from_secs(15)), 122);
    assert!(started.elapsed() < Duration::from_secs(5));
    let err = read_stderr(&mut b);
    assert!(
        err.contains("leadership of") && err.contains("was deleted"),
        "{err}"
    );
    assert!(!std::fs::read_to_string(&log).unwrap().contains("end b"));
    assert_eq!(contenders(&path), 0);
}

#[test]
fn revoke_reaches_a_holder_that_releases_on_request() {
    let path = common::lock_path("cli-revoke");
    let dir = scratch("revoke");
    let (child_pid_file, log) = (dir.join("pid"), dir.join("log"));
    let out = output(zklock().args(["revoke", &path]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing to revoke"),
        "{}",
        stdout(&out)
    );

    let mut holder = Running::spawn(
        zklock()
            .args(["run", "--on-revoke=release", &path, "--"])
            .args(["sh", "-c", r#"echo $$ > "$1"; exec sleep 120"#, "sh"])
            .arg(&child_pid_file)
            .stderr(Stdio::piped()),
    );
    let child_pid: i32 = wait_for_file(&child_pid_file).trim().parse().unwrap();
    let mut waiter = run_sh(&[], &path, r#"echo waiter ran >> "$1""#, &[&log]);
    wait_for_contenders(&path, 2);

    let started = Instant::now();
    let out = output(zklock().args(["revoke", &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("pid={}", holder.pid())),
        "{}",
        stdout(&out)
    );
    assert_eq!(holder.exit_code(Duration::from_secs(10)), 121);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!process_exists(child_pid), "the command outlived the lock");
    let err = read_stderr(&mut holder);
    assert!(err.contains("revocation"), "{err}");
    assert_eq!(waiter.exit_code(Duration::from_secs(10)), 0);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "waiter ran\n");
}

#[test]
fn revocation_is_ignored_by_default_but_a_break_still_stops_the_command() {
    let path = common::lock_path("cli-revoke-ignored");
    let dir = scratch("revoke-ignored");
    let ready = dir.join("ready");
    let mut holder = Running::spawn(
        zklock()
            .args(["run", &path, "--"])
            .args(["sh", "-c", r#"echo held > "$1"; exec sleep 120"#, "sh"])
            .arg(&ready)
            .stderr(Stdio::piped()),
    );
    wait_for_file(&ready);
    let out = output(zklock().args(["revoke", &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(holder.wait_for(Duration::from_millis(1500)).is_none());
    assert_eq!(contenders(&path), 1);

    // The guard keeps watching its node after the ignored request: a break is noticed at once.
    let started = Instant::now();
    let out = output(zklock().args(["break", "--yes", &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(holder.exit_code(Duration::from_secs(15)), 122);
    assert!(started.elapsed() < Duration::from_secs(5));
    let err = read_stderr(&mut holder);
    assert!(err.contains("--on-revoke=ignore"), "{err}");
    assert!(err.contains("was deleted"), "{err}");
}

#[test]
fn revoke_reaches_revocable_read_write_lock_holders() {
    use zklock::{DistributedRwLock, LockState};

    let path = common::lock_path("cli-revoke-rwlock");
    let (a, b) = (common::client(), common::client());
    let (lock_a, lock_b) = (
        DistributedRwLock::new(&a, &path).unwrap().revocable(),
        DistributedRwLock::new(&b, &path).unwrap().revocable(),
    );
    let reader_a = lock_a.read().unwrap();
    let reader_b = lock_b.read().unwrap();

    // Without --node, every holder is asked: both readers.
    let out = output(zklock().args(["revoke", &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).matches("(holder, read,").count(),
        2,
        "{}",
        stdout(&out)
    );
    for reader in [&reader_a, &reader_b] {
        assert!(
            reader.wait_revocation_timeout(Duration::from_secs(10)),
            "{} never heard the request",
            reader.node_path()
        );
        assert!(reader.is_held());
    }

    // A reader that ignored the request still learns at once that its node was broken.
    let name = node_name(reader_a.node_path());
    let out = output(zklock().args(["break", "--yes", "--node", &name, &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        reader_a.wait_lost_timeout(Duration::from_secs(10)),
        Some(LockState::Lost)
    );
    assert!(reader_b.is_held());
    drop((reader_a, reader_b));
    assert_eq!(contenders(&path), 0);
}

#[test]
fn break_a_semaphore_lease_taker_queued_on_its_gate() {
    use zklock::Semaphore;

    let path = common::lock_path("cli-semaphore-gate");
    let (a, b) = (common::client(), common::client());
    let sem_a = Semaphore::new(&a, &path, 1).unwrap();
    let permit_a = sem_a.acquire().unwrap();
    // The second taker holds the gate while it waits for a lease.
    let second_path = path.clone();
    let second = std::thread::spawn(move || {
        let sem = Semaphore::new(&b, &second_path, 1).unwrap();
        sem.acquire_timeout(Duration::from_secs(30))
            .map(|p| p.is_some())
    });
    // One lease held, one waited for, the taker on the gate.
    wait_for_contenders(&path, 3);
    let status = status_json(&path);
    let gate_node = nodes_of(&status)
        .iter()
        .find_map(|n| n.strip_prefix("locks/").map(str::to_owned))
        .unwrap_or_else(|| panic!("no node on the gate: {status}"));

    // The taker's node is deleted from the gate mutex at `<path>/locks`.
    let name = format!("locks/{gate_node}");
    let out = output(zklock().args(["break", "--yes", "--node", &name, &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("deleted {path}/locks/{gate_node}")),
        "{}",
        stdout(&out)
    );
    let status = status_json(&path);
    assert!(
        nodes_of(&status).iter().all(|n| !n.contains(&gate_node)),
        "{status}"
    );
    // Its lease is still waited for, and comes when the first is released.
    drop(permit_a);
    assert_eq!(second.join().unwrap().ok(), Some(true));
}

#[test]
fn sigkill_of_zklock_stops_the_job_and_its_children_before_anyone_else_acquires() {
    let path = common::lock_path("cli-sigkill");
    let dir = scratch("sigkill");
    let (job_file, grandchild_file, log) =
        (dir.join("job"), dir.join("grandchild"), dir.join("log"));
    // The job and its grandchild ignore SIGTERM: only the SIGKILL after --kill-grace ends them.
    let mut holder = Running::spawn(
        zklock()
            .args([
                "run",
                "--session-timeout",
                "4s",
                "--kill-grace",
                "500ms",
                &path,
                "--",
            ])
            .args([
                "sh",
                "-c",
                r#"trap "" TERM; sleep 120 & echo $! > "$2"; echo $$ > "$1"; wait"#,
                "sh",
            ])
            .arg(&job_file)
            .arg(&grandchild_file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let job = read_pid(&job_file);
    let grandchild = read_pid(&grandchild_file);
    let _leftovers = Leftovers(vec![job, grandchild]);
    let (_, group) = proc_stat(job).unwrap();
    assert_eq!(proc_stat(grandchild).unwrap().1, group);
    assert_ne!(
        group,
        holder.pid().as_raw(),
        "the job must have a group of its own"
    );
    // The guardian leads the job's group.
    let guardian = group;
    assert!(process_exists(guardian));

    // The next holder looks for survivors of the first job as soon as it holds the lock.
    let check = r#"for p in "$2" "$3"; do
        read -r _ _ state _ 2>/dev/null < "/proc/$p/stat" && [ "$state" != Z ] && echo "alive $p" >> "$1"
    done; echo checked >> "$1""#;
    let mut waiter = Running::spawn(
        zklock()
            .args(["run", "-w", "60s", &path, "--", "sh", "-c", check, "sh"])
            .arg(&log)
            .arg(job.to_string())
            .arg(grandchild.to_string()),
    );
    wait_for_contenders(&path, 2);

    let killed = Instant::now();
    holder.signal(Signal::SIGKILL);
    assert!(
        common::eventually(Duration::from_secs(10), || !process_exists(job)
            && !process_exists(grandchild)),
        "the job outlived zklock"
    );
    let gone = killed.elapsed();
    eprintln!("job and grandchild gone {gone:?} after SIGKILL of zklock (--kill-grace 500ms)");
    assert!(gone < Duration::from_secs(2), "{gone:?}");
    assert!(
        common::eventually(Duration::from_secs(5), || group_members(group).is_empty()),
        "left in the job's process group: {:?}",
        group_members(group)
    );
    let err = read_stderr(&mut holder);
    assert!(err.contains("died while holding"), "{err}");

    // The server expires the dead holder's session; only then does the waiter run.
    assert_eq!(waiter.exit_code(Duration::from_secs(30)), 0);
    assert!(killed.elapsed() > Duration::from_secs(2));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "checked\n");
    assert!(!process_exists(guardian));
}

#[test]
fn sigkill_of_zklock_stops_a_foreground_command() {
    let path = common::lock_path("cli-sigkill-fg");
    let dir = scratch("sigkill-fg");
    let job_file = dir.join("job");
    let holder = Running::spawn(
        zklock()
            .args(["run", "--foreground", "--kill-grace", "500ms", &path, "--"])
            .args([
                "sh",
                "-c",
                r#"trap "" TERM; echo $$ > "$1"; while :; do sleep 0.1; done"#,
                "sh",
            ])
            .arg(&job_file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let job = read_pid(&job_file);
    let _leftovers = Leftovers(vec![job]);
    assert_eq!(
        proc_stat(job).unwrap().1,
        proc_stat(holder.pid().as_raw()).unwrap().1
    );
    let killed = Instant::now();
    holder.signal(Signal::SIGKILL);
    assert!(
        common::eventually(Duration::from_secs(10), || !process_exists(job)),
        "the command outlived zklock"
    );
    let gone = killed.elapsed();
    eprintln!("foreground command gone {gone:?} after SIGKILL of zklock (--kill-grace 500ms)");
    assert!(gone < Duration::from_secs(2), "{gone:?}");
}

#[test]
fn forwarded_sigterm_escalates_to_sigkill_and_continues_a_stopped_command() {
    let path = common::lock_path("cli-term");
    let dir = scratch("term");
    let job_file = dir.join("job");

    // A command that ignores SIGTERM gets SIGKILL --kill-grace later, as with `timeout -k`.
    let mut holder = Running::spawn(
        zklock()
            .args(["run", "--kill-grace", "1s", &path, "--"])
            .args([
                "sh",
                "-c",
                r#"trap "" TERM; echo $$ > "$1"; while :; do sleep 0.1; done"#,
                "sh",
            ])
            .arg(&job_file)
            .stderr(Stdio::piped()),
    );
    let job = read_pid(&job_file);
    let signalled = Instant::now();
    holder.signal(Signal::SIGTERM);
    assert_eq!(holder.exit_code(Duration::from_secs(15)), 128 + 9);
    let took = signalled.elapsed();
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(!process_exists(job));
    let err = read_stderr(&mut holder);
    assert!(err.contains("sending SIGKILL"), "{err}");
    assert_eq!(contenders(&path), 0);

    // A stopped command is told that it is stopped, and continued after a forwarded signal.
    std::fs::remove_file(&job_file).unwrap();
    let mut holder = Running::spawn(
        zklock()
            .args(["run", &path, "--"])
            .args([
                "sh",
                "-c",
                r#"echo $$ > "$1"; kill -STOP $$; exec sleep 60"#,
                "sh",
            ])
            .arg(&job_file)
            .stderr(Stdio::piped()),
    );
    let job = read_pid(&job_file);
    assert!(
        common::eventually(Duration::from_secs(10), || proc_stat(job)
            .is_some_and(|(state, _)| state == 'T')),
        "the command never stopped"
    );
    // Give zklock a moment to notice before the signal.
    std::thread::sleep(Duration::from_millis(500));
    holder.signal(Signal::SIGINT);
    assert_eq!(holder.exit_code(Duration::from_secs(10)), 128 + 2);
    let err = read_stderr(&mut holder);
    assert!(err.contains("is stopped by SIGSTOP"), "{err}");
    assert_eq!(contenders(&path), 0);
}

/// A pseudo-terminal pair: (master, slave).
fn open_pty() -> (std::fs::File, std::os::fd::OwnedFd) {
    use nix::libc;
    use std::os::fd::FromRawFd as _;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors it opened into the two integers; the name and
    // settings pointers may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are open and owned by nothing else.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    }
}

#[test]
fn a_command_stopped_on_terminal_input_ends_on_ctrl_c() {
    use std::os::unix::process::CommandExt as _;

    let path = common::lock_path("cli-ttin");
    let dir = scratch("ttin");
    let job_file = dir.join("job");
    let (mut master, slave) = open_pty();
    // zklock in a session of its own with the pty as its controlling terminal, as a shell
    // would start it: zklock is in the terminal's foreground, its command (without
    // --foreground) in a background process group.
    let mut cmd = zklock();
    cmd.args(["run", &path, "--"])
        .args([
            "sh",
            "-c",
            r#"echo $$ > "$1"; read line; echo "read $line""#,
            "sh",
        ])
        .arg(&job_file)
        .stdin(Stdio::from(slave))
        .stderr(Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut holder = Running::spawn(&mut cmd);
    let job = read_pid(&job_file);
    // Reading the terminal from the background stops it (SIGTTIN).
    assert!(
        common::eventually(Duration::from_secs(10), || proc_stat(job)
            .is_some_and(|(state, _)| state == 'T')),
        "the command never stopped"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(holder.wait_for(Duration::ZERO).is_none());

    // Ctrl-C on the terminal reaches zklock, which forwards it and continues the command.
    master.write_all(b"\x03").unwrap();
    assert_eq!(holder.exit_code(Duration::from_secs(10)), 128 + 2);
    let err = read_stderr(&mut holder);
    assert!(
        err.contains("is stopped by SIGTTIN") && err.contains("--foreground"),
        "{err}"
    );
    assert!(!process_exists(job));
    assert_eq!(contenders(&path), 0);
}

#[test]
fn status_tells_a_path_that_is_not_a_lock_and_lists_the_locks_under_it() {
    use zklock::{DistributedMutex, DistributedRwLock};

    let parent = common::lock_path("cli-not-a-lock");
    let client = common::client();
    let mutex = DistributedMutex::new(&client, &format!("{parent}/a")).unwrap();
    let rwlock = DistributedRwLock::new(&client, &format!("{parent}/team/b")).unwrap();
    // Owner data with a newline (zklock stores the thread's name) must stay on one line.
    let (held, release) = (
        std::sync::mpsc::channel::<()>(),
        std::sync::mpsc::channel::<()>(),
    );
    let (acquired, may_release) = (held.0, release.1);
    let holder = std::thread::Builder::new()
        .name("evil\nPOS  ROLE".into())
        .spawn(move || {
            let guard = mutex.lock().unwrap();
            acquired.send(()).unwrap();
            let _ = may_release.recv();
            drop(guard);
            mutex
        })
        .unwrap();
    held.1.recv_timeout(Duration::from_secs(10)).unwrap();
    let reader = rwlock.read().unwrap();

    let out = output(zklock().args(["status", &format!("{parent}/a")]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains("thread=evil\\nPOS  ROLE"), "{text}");

    // A typo (with --must-exist), a parent of locks, ZooKeeper's own node: exit 1, never
    // "free".
    let typo = format!("{parent}/nope");
    let out = output(zklock().args(["status", "--must-exist", &typo]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(&format!("no lock at {typo}: no such node")),
        "{}",
        stdout(&out)
    );
    let out = output(zklock().args(["status", "/zookeeper"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("no lock at /zookeeper: it has"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("free"), "{}", stdout(&out));

    let out = output(zklock().args(["status", &parent]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "no lock at {parent}: it has 2 child nodes and no lock nodes\n\
             locks held or waited for under it:\n\
             {parent}/a: held, no waiters\n\
             {parent}/team/b: read/write lock, held by 1 reader, no waiters\n"
        )
    );
    let out = output(zklock().args(["status", "--json", &parent]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let lock = |path: String, layout: &str| json!({"path": path, "layout": layout, "contenders": 1, "holders": 1, "waiting": 0});
    assert_eq!(
        parse_json(&out),
        json!({
            "path": parent,
            "exists": true,
            "lock": false,
            "held": false,
            "layout": null,
            "layouts": [],
            "permits": null,
            "contenders": [],
            "locks": [lock(format!("{parent}/a"), "mutex"), lock(format!("{parent}/team/b"), "rwlock")],
            "truncated": false,
            "unreadable": [],
        })
    );
    let out = output(zklock().args(["break", "--yes", &typo]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("no lock at"), "{}", stdout(&out));

    // A released lock's node stays for a while: still a (free) lock.
    release.0.send(()).unwrap();
    drop(holder.join().unwrap());
    drop(reader);
    let out = output(zklock().args(["status", &format!("{parent}/a")]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{parent}/a: free (no holder, no waiters)\n")
    );
}

#[test]
fn completions_and_man_pages_come_from_the_argument_definitions() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = output(zklock().args(["completions", shell]));
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for word in ["zklock", "leader", "kill-grace", "completions"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    // The bash script is valid bash.
    let dir = scratch("completions");
    let bash = dir.join("zklock.bash");
    std::fs::write(&bash, output(zklock().args(["completions", "bash"])).stdout).unwrap();
    let out = output(Command::new("bash").arg("-n").arg(&bash));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = output(zklock().args(["completions", "tcsh"]));
    assert_eq!(out.status.code(), Some(125));

    let out = output(zklock().arg("man"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(page.contains(".TH zklock 1"), "{page}");
    assert!(page.contains("zklock\\-run(1)"), "{page}");
    let out = output(zklock().args(["man", "--dir"]).arg(&dir));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in [
        "zklock",
        "zklock-run",
        "zklock-leader",
        "zklock-status",
        "zklock-break",
    ] {
        let page = std::fs::read_to_string(dir.join(format!("{name}.1"))).unwrap();
        assert!(page.contains(&format!(".TH {name} 1")), "{name}: {page}");
    }
    let run = std::fs::read_to_string(dir.join("zklock-run.1")).unwrap();
    assert!(run.contains("\\-\\-kill\\-grace"), "{run}");
}

#[test]
fn verbose_waiting_run_says_who_holds_the_lock_and_when_that_changes() {
    let path = common::lock_path("cli-who-holds");
    let dir = scratch("who-holds");
    let (ready_a, go_a, ready_b, go_b) = (
        dir.join("ready-a"),
        dir.join("go-a"),
        dir.join("ready-b"),
        dir.join("go-b"),
    );
    let hold_until = r#"echo held > "$1"; while [ ! -e "$2" ]; do sleep 0.05; done"#;
    let mut a = run_sh(&[], &path, hold_until, &[&ready_a, &go_a]);
    wait_for_file(&ready_a);
    let mut b = run_sh(&[], &path, hold_until, &[&ready_b, &go_b]);
    wait_for_contenders(&path, 2);
    let mut c = Running::spawn(
        zklock()
            .args(["-v", "run", &path, "--", "true"])
            .stderr(Stdio::piped()),
    );
    wait_for_contenders(&path, 3);
    // The waiter reads the queue once a second; give it a few looks at each holder.
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(&go_a, "").unwrap();
    assert_eq!(a.exit_code(Duration::from_secs(10)), 0);
    wait_for_file(&ready_b);
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(&go_b, "").unwrap();
    assert_eq!(b.exit_code(Duration::from_secs(10)), 0);
    assert_eq!(c.exit_code(Duration::from_secs(10)), 0);

    let err = read_stderr(&mut c);
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(&format!("waiting for {path}, ")))
        .collect();
    assert_eq!(reports.len(), 2, "one report per holder: {err}");
    assert!(
        reports[0].contains("held by host=")
            && reports[0].contains(&format!("pid={} thread=main", a.pid()))
            && reports[0].contains("1 waiting ahead of us"),
        "{err}"
    );
    assert!(
        reports[1].contains("now held by host=")
            && reports[1].contains(&format!("pid={} thread=main", b.pid()))
            && reports[1].contains("we are next"),
        "{err}"
    );
    assert!(err.contains("acquired"), "{err}");

    // Without -v, nothing is said (and the queue is not read).
    let out = output(zklock().args(["run", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "");
}

/// Issue 21, item 3: once its command is dead, `zklock run` exits within the release bound
/// (one second) even when the server has gone silent, instead of waiting for the connection
/// to be declared dead and then for the background release. Here the command ends on its own
/// right after the connection was blackholed.
#[test]
fn run_exits_promptly_after_its_command_when_the_server_is_silent() {
    let proxy = Proxy::start(&common::connect_string());
    let path = common::lock_path("cli-silent-exit");
    let dir = scratch("silent-exit");
    let (pid_file, go) = (dir.join("pid"), dir.join("go"));
    let mut holder = Running::spawn(
        zklock()
            .args(["run", "--connect", &proxy.connect_string()])
            .args([
                "--session-timeout",
                "10s",
                "--kill-grace",
                "1s",
                &path,
                "--",
            ])
            .args([
                "sh",
                "-c",
                r#"echo $$ > "$1"; while [ ! -e "$2" ]; do sleep 0.02; done"#,
                "sh",
            ])
            .args([&pid_file, &go])
            .stderr(Stdio::piped()),
    );
    let child_pid = read_pid(&pid_file);
    proxy.blackhole(true);
    std::fs::write(&go, "").unwrap();
    assert!(
        common::eventually(Duration::from_secs(5), || !process_exists(child_pid)),
        "the command did not end"
    );
    let command_ended = Instant::now();
    let status = holder.wait_for(Duration::from_secs(30));
    let took = command_ended.elapsed();
    proxy.blackhole(false);
    eprintln!("zklock exited {status:?}, {took:?} after its command");
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    // One second for the release, and some slack for a busy machine.
    assert!(
        took < Duration::from_secs(3),
        "zklock exited {took:?} after its command"
    );
}

#[test]
fn read_only_commands_report_a_missing_chroot_and_create_nothing() {
    let chroot = common::lock_path("cli-typo-chroot");
    let connect = format!("{}{chroot}", common::connect_string());
    for args in [
        &["status", "/x"][..],
        &["status", "--json", "/x"],
        &["break", "--yes", "/x"],
        &["revoke", "/x"],
    ] {
        let out = output(zklock().arg("--connect").arg(&connect).args(args));
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains(&format!("chroot {chroot} does not exist")),
            "{err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
    }
    let raw = common::RawClient::connect(&common::connect_string());
    assert!(raw.stat(&chroot).is_none(), "{chroot} was created");
}

#[test]
fn a_refused_connection_fails_without_waiting_out_the_connect_timeout() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let connect = format!("127.0.0.1:{port}");
    for args in [&["status", "/x"][..], &["run", "/x", "--", "true"]] {
        let mut run = Running::spawn(
            zklock()
                .args(["--connect", &connect, "--connect-timeout", "10min"])
                .args(args)
                .stderr(Stdio::piped()),
        );
        // Far below the connect timeout: it gave up because the host refused, not because
        // the time ran out.
        let code = run.exit_code(Duration::from_secs(60));
        let err = read_stderr(&mut run);
        assert_eq!(code, 125, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("refused"), "{err}");
    }
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let path = common::lock_path("cli-sigpipe");
    let ready = scratch("sigpipe").join("ready");
    let _holder = run_sh(&[], &path, r#"echo held > "$1"; sleep 600"#, &[&ready]);
    wait_for_file(&ready);
    for args in [
        &["status", &path][..],
        &["status", "--json", &path],
        &["completions", "bash"],
    ] {
        // `zklock status | head` once head has exited: the pipe's read end is closed before
        // zklock writes anything.
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let out = output(zklock().args(args).stdout(Stdio::from(write)));
        assert_eq!(stderr(&out), "", "{args:?}");
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?}",
            out.status
        );
    }
}

#[test]
fn conflict_exit_code_and_wait_alias_follow_flock() {
    let path = common::lock_path("cli-conflict-code");
    let ready = scratch("conflict-code").join("ready");
    let _holder = run_sh(&[], &path, r#"echo held > "$1"; exec sleep 60"#, &[&ready]);
    wait_for_file(&ready);

    let code = |args: &[&str]| {
        let out = output(
            zklock()
                .arg("run")
                .args(args)
                .arg(&path)
                .args(["--", "true"]),
        );
        out.status
            .code()
            .unwrap_or_else(|| panic!("{args:?}: {:?}", out.status))
    };
    assert_eq!(code(&["-n", "-E", "0"]), 0);
    assert_eq!(code(&["--nonblock", "--conflict-exit-code", "3"]), 3);
    assert_eq!(code(&["--wait", "0.2", "-E", "7"]), 7);
    assert_eq!(code(&["-w", "0.2", "--conflict-exit-code=9"]), 9);
    // Without -E: flock's conventions do not replace zklock's own codes.
    assert_eq!(code(&["--wait", "0.2"]), 124);
    assert_eq!(code(&["-n"]), 123);
    assert_eq!(contenders(&path), 1, "a conflicting run left a node");
    let help = stdout(&output(zklock().arg("--help")));
    assert!(help.contains("flock -E / --conflict-exit-code N"), "{help}");
}

#[test]
fn shared_runs_hold_together_and_exclude_exclusive_ones() {
    let path = common::lock_path("cli-shared");
    let dir = scratch("shared");
    let (first, second) = (dir.join("first"), dir.join("second"));
    // Two readers at once: the second holds while the first still does.
    let a = run_sh(
        &["--shared"],
        &path,
        r#"echo held > "$1"; exec sleep 60"#,
        &[&first],
    );
    wait_for_file(&first);
    let mut b = run_sh(
        &["-s", "-n"],
        &path,
        r#"echo held > "$1"; exec sleep 60"#,
        &[&second],
    );
    wait_for_file(&second);
    let status = status_json(&path);
    assert_eq!(status["layout"], "rwlock", "{status}");
    assert_eq!(
        count_where(&status, &[("type", json!("read"))]),
        2,
        "{status}"
    );

    // A writer is kept out while readers hold.
    let out = output(zklock().args(["run", "--exclusive", "-n", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(123), "{}", stderr(&out));
    let out = output(zklock().args(["run", "-s", "-x", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(125), "-s with -x is a usage error");

    b.signal(Signal::SIGTERM);
    assert_eq!(b.exit_code(Duration::from_secs(10)), 128 + 15);
    drop(a);
    let out = output(zklock().args(["run", "-x", "-n", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn the_cli_feature_brings_the_tls_and_sasl_flags() {
    let help = stdout(&output(zklock().arg("--help")));
    for flag in [
        "--tls-ca",
        "--tls-cert",
        "--tls-key",
        "--sasl-user",
        "--auth-digest",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
    // Parsed, not rejected as unknown: the error is about the missing file.
    let out = output(zklock().args(["--tls-ca", "/nonexistent/ca.pem", "status", "/x"]));
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("--tls-ca /nonexistent/ca.pem"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_server_that_is_not_zookeeper_gives_one_line() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let connect = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            // An HTTP server's answer: a frame length ZooKeeper would never send, then junk.
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n\xff\xfe garbage");
        }
    });
    let out = output(zklock().args([
        "--connect",
        &connect,
        "--connect-timeout",
        "2s",
        "status",
        "/x",
    ]));
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("granted no session"), "{err}");
}

#[test]
fn permits_let_n_runs_hold_at_once_and_a_broken_lease_stops_its_command() {
    let path = common::lock_path("cli-permits");
    let dir = scratch("permits");
    let (first, second) = (dir.join("first"), dir.join("second"));
    // Each command writes its lease node, then holds.
    let script = r#"echo "$ZKLOCK_NODE" > "$1"; exec sleep 60"#;
    let mut a = run_sh(&["--permits", "2"], &path, script, &[&first]);
    let node_a = wait_for_file(&first);
    let _b = run_sh(&["--permits", "2", "-n"], &path, script, &[&second]);
    wait_for_file(&second);

    let out = output(zklock().args(["run", "--permits", "2", "-n", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(123), "{}", stderr(&out));
    let out = output(zklock().args(["status", "--permits", "2", &path]));
    assert!(
        stdout(&out).starts_with(&format!("{path}: semaphore, 2 of 2 permits held")),
        "{}",
        stdout(&out)
    );

    // A lease deleted under a running command is a lost lock: the command is stopped.
    let lease = format!("leases/{}", node_name(node_a.trim_end()));
    let out = output(zklock().args(["break", "--yes", "--node", &lease, &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(a.exit_code(Duration::from_secs(20)), 122);
    let out = output(zklock().args(["run", "--permits", "2", "-n", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_timed_run_cut_off_by_an_outage_names_the_servers_the_path_and_the_timeout() {
    let path = common::lock_path("cli-outage");
    let ready = scratch("outage").join("ready");
    let _holder = run_sh(&[], &path, r#"echo held > "$1"; exec sleep 60"#, &[&ready]);
    wait_for_file(&ready);
    let proxy = Proxy::start(&common::connect_string());
    // A session far longer than the wait: the outage, not an expiry, ends it.
    let mut waiter = Running::spawn(
        zklock()
            .args([
                "--connect",
                &proxy.connect_string(),
                "--session-timeout",
                "30s",
            ])
            .args(["run", "-w", "4s", &path, "--", "true"])
            .stderr(Stdio::piped()),
    );
    wait_for_contenders(&path, 2);
    proxy.refuse(true);
    proxy.sever();
    let code = waiter.exit_code(Duration::from_secs(30));
    let err = read_stderr(&mut waiter);
    assert_eq!(code, 125, "{err}");
    // Before it, the library may warn that our queued node is left for the server to remove.
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("zklock: waiting for "), "{err}");
    for fact in [path.as_str(), &proxy.connect_string(), "--timeout 4s"] {
        assert!(last.contains(fact), "{fact} missing: {err}");
    }
}

/// The top-level keys of a `status --json` object.
fn keys_of(status: &Value) -> std::collections::BTreeSet<String> {
    status
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {status}"))
        .keys()
        .cloned()
        .collect()
}

/// `zklock status --json <args>` with any exit code: the code and the parsed object.
fn status_json_any(args: &[&str]) -> (i32, Value) {
    let out = output(zklock().args(["status", "--json"]).args(args));
    let code = out.status.code().expect("zklock exits");
    (code, parse_json(&out))
}

#[test]
fn a_conflict_exit_code_makes_a_conflict_silent_as_flock_for_cron() {
    let path = common::lock_path("cli-cron");
    let ready = scratch("cron").join("ready");
    let mut holder = run_sh(&[], &path, r#"echo held > "$1"; exec sleep 60"#, &[&ready]);
    wait_for_file(&ready);

    // The guide's cron line on a busy lock: nothing printed (cron mails any output), exit N.
    for (args, expected) in [
        (&["-n", "-E", "0"][..], 0),
        (&["--nonblock", "-E", "123"], 123),
        (&["-w", "0.3", "-E", "0"], 0),
        (&["--wait", "0.3", "--conflict-exit-code", "7"], 7),
    ] {
        let out = output(
            zklock()
                .arg("run")
                .args(args)
                .arg(&path)
                .args(["--", "echo", "ran"]),
        );
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(stderr(&out), "", "{args:?}: a conflict with -E printed");
        assert_eq!(stdout(&out), "", "{args:?}: the command ran");
    }
    // Without -E a conflict says so; with -v, also with -E.
    let out = output(zklock().args(["run", "-n", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(123), "{}", stderr(&out));
    assert_eq!(stderr(&out), format!("zklock: {path} is busy\n"));
    let out = output(zklock().args(["-v", "run", "-n", "-E", "0", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{path} is busy")),
        "{}",
        stderr(&out)
    );
    assert_eq!(contenders(&path), 1, "a conflicting run left a node");

    // A free lock: the job runs, and its output is all there is.
    holder.signal(Signal::SIGTERM);
    assert_eq!(holder.exit_code(Duration::from_secs(10)), 128 + 15);
    let out = output(zklock().args(["run", "-n", "-E", "0", &path, "--", "echo", "ran"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        (stdout(&out).as_str(), stderr(&out).as_str()),
        ("ran\n", "")
    );
    // Failures still print, and so still mail: ZooKeeper unreachable.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = output(zklock().args([
        "--connect",
        &format!("127.0.0.1:{port}"),
        "run",
        "-n",
        "-E",
        "0",
        &path,
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("zklock: "), "{}", stderr(&out));
}

#[test]
fn a_missing_node_is_a_free_lock_unless_it_must_exist() {
    let path = common::lock_path("cli-missing");
    let out = output(zklock().args(["status", &path]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{path}: free (no holder, no waiters; no node at this path)\n")
    );
    let (code, free) = status_json_any(&[&path]);
    assert_eq!(code, 0, "{free}");
    assert_eq!(
        (&free["exists"], &free["lock"], &free["held"]),
        (&json!(false), &json!(true), &json!(false)),
        "{free}"
    );
    assert_eq!(free["contenders"], json!([]), "{free}");

    // --must-exist: no lock, exit 1, as before the sweep became invisible.
    let out = output(zklock().args(["status", "--must-exist", &path]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(&format!("no lock at {path}: no such node")),
        "{}",
        stdout(&out)
    );
    let (code, none) = status_json_any(&["--must-exist", &path]);
    assert_eq!(code, 1, "{none}");
    assert_eq!(
        (&none["exists"], &none["lock"], &none["held"]),
        (&json!(false), &json!(false), &json!(false)),
        "{none}"
    );
    assert_eq!(keys_of(&none), keys_of(&free));

    // A released lock whose node is still there reads the same, with --must-exist too.
    let out = output(zklock().args(["run", &path, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (code, released) = status_json_any(&["--must-exist", &path]);
    assert_eq!(code, 0, "{released}");
    assert_eq!(
        (&released["exists"], &released["lock"], &released["held"]),
        (&json!(true), &json!(true), &json!(false)),
        "{released}"
    );
    assert_eq!(keys_of(&released), keys_of(&free));
}

#[test]
fn status_json_has_the_same_keys_whatever_the_path_is() {
    use zklock::{DistributedMutex, LeaderElection, Semaphore};

    let root = common::lock_path("cli-json-keys");
    let client = common::client();
    let held = format!("{root}/held");
    let _held = DistributedMutex::new(&client, &held)
        .unwrap()
        .lock()
        .unwrap();
    let free = format!("{root}/free");
    DistributedMutex::new(&client, &free)
        .unwrap()
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let semaphore = format!("{root}/semaphore");
    let _permit = Semaphore::new(&client, &semaphore, 2)
        .unwrap()
        .acquire()
        .unwrap();
    let election = format!("{root}/election");
    let _leading = LeaderElection::new(&client, &election)
        .unwrap()
        .participate()
        .unwrap();
    // Two recipes at one path, as another client (or zklock before 0.2) could leave them.
    let mixed = format!("{root}/mixed");
    let _mixed = DistributedMutex::new(&client, &mixed)
        .unwrap()
        .lock()
        .unwrap();
    let _writer = common::raw::create_ephemeral(&format!(
        "{mixed}/_c_00000000-0000-4000-8000-000000000000-__WRIT__0000000009"
    ));
    let missing = format!("{root}/missing");

    // (arguments, exit code, held, layouts)
    let cases: [(&[&str], i32, bool, Value); 9] = [
        (&[&held], 0, true, json!(["mutex"])),
        (&[&free], 0, false, json!([])),
        (&[&missing], 0, false, json!([])),
        (&["--must-exist", &missing], 1, false, json!([])),
        (&[&semaphore], 0, true, json!(["semaphore"])),
        (
            &["--permits", "2", &semaphore],
            0,
            true,
            json!(["semaphore"]),
        ),
        (&[&election], 0, true, json!(["election"])),
        (&[&mixed], 0, true, json!(["mutex", "rwlock"])),
        // A parent of locks: no lock itself.
        (&[&root], 1, false, json!([])),
    ];
    let mut first: Option<std::collections::BTreeSet<String>> = None;
    for (args, code, is_held, layouts) in cases {
        let (exit, status) = status_json_any(args);
        assert_eq!(exit, code, "{args:?}: {status}");
        assert_eq!(status["held"], json!(is_held), "{args:?}: {status}");
        assert_eq!(status["layouts"], layouts, "{args:?}: {status}");
        let keys = keys_of(&status);
        match &first {
            None => first = Some(keys),
            Some(first) => assert_eq!(&keys, first, "{args:?}: {status}"),
        }
    }
    let (_, parent) = status_json_any(&[&root]);
    assert_eq!(
        parent["locks"].as_array().map(Vec::len),
        Some(4),
        "{parent}"
    );
}

#[test]
fn status_of_a_parent_reports_the_locks_it_may_not_read() {
    use zklock::acl::NodeAcl;
    use zklock::DistributedMutex;

    let parent = common::lock_path("cli-unreadable");
    let secret = format!("{parent}/secret");
    let open = format!("{parent}/open");
    // alice's lock admits only alice, even to look; another lock beside it is open.
    let alice = common::client_as("alice", NodeAcl::CreatorOnly);
    let _secret = DistributedMutex::new(&alice, &secret)
        .unwrap()
        .lock()
        .unwrap();
    let client = common::client();
    let _open = DistributedMutex::new(&client, &open)
        .unwrap()
        .lock()
        .unwrap();

    let out = output(zklock().args(["status", &parent]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..4],
        [
            format!("no lock at {parent}: it has 2 child nodes and no lock nodes").as_str(),
            "readable locks held or waited for under it:",
            format!("{open}: held, no waiters").as_str(),
            "1 node under it could not be read, and may be or hold locks:",
        ],
        "{text}"
    );
    assert!(
        lines[4].starts_with(&format!(
            "{secret}: not authorized (ACL): READ on {secret} "
        )),
        "{text}"
    );
    assert!(!text.contains("no lock is held"), "{text}");

    let (code, status) = status_json_any(&[&parent]);
    assert_eq!(code, 2, "{status}");
    let unreadable = status["unreadable"].as_array().expect("unreadable array");
    assert_eq!(unreadable.len(), 1, "{status}");
    assert_eq!(unreadable[0]["path"], json!(secret), "{status}");
    assert!(
        unreadable[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!("READ on {secret}"))),
        "{status}"
    );
    assert_eq!(
        status["locks"],
        json!([{"path": open, "layout": "mutex", "contenders": 1, "holders": 1, "waiting": 0}]),
        "{status}"
    );
    // The same keys as any other status.
    let (_, lock) = status_json_any(&[&open]);
    assert_eq!(keys_of(&status), keys_of(&lock));

    // As alice, everything is readable: both locks, exit 1 (the parent is no lock).
    let out = output(zklock().env("ZKLOCK_PASSWORD", "alice-password").args([
        "--auth-digest",
        "alice",
        "status",
        "--json",
        &parent,
    ]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = parse_json(&out);
    assert_eq!(status["unreadable"], json!([]), "{status}");
    assert_eq!(
        status["locks"].as_array().map(Vec::len),
        Some(2),
        "{status}"
    );
}

/// `status` on a lock with 20,000 queued nodes (Curator's names, from a raw session): more
/// than fit in ZooKeeper's default `jute.maxbuffer` as one listing, each node's data read in
/// batches. It answers with all of them, the first as holder, at once (the figure is printed;
/// the bound only catches a hang or a request per node on a loaded machine).
#[test]
fn status_reads_a_queue_of_20_000() {
    let count = 20_000;
    let path = common::lock_path("cli-long-queue");
    let raw = common::RawClient::connect(&common::connect_string());
    raw.mkdir_open(&path);
    let prefix = format!("{path}/_c_0e3c1a52-8a4e-4a55-9d51-1f6c2b7d9e10-lock-");
    assert_eq!(raw.create_sequential_burst(&prefix, count), count);
    let started = Instant::now();
    let status = status_json(&path);
    eprintln!("status --json on {count}: {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(30));
    let contenders = contenders_of(&status);
    assert_eq!(contenders.len(), count);
    assert_eq!(status["held"], json!(true), "{}", status["held"]);
    let holders: Vec<&Value> = contenders
        .iter()
        .filter(|c| c["holds"] == json!(true))
        .collect();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0], &contenders[0]);
}
