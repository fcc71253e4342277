//! ZooKeeper servers of a test binary's own, started and stopped through `scripts/start-zk.sh`
//! and `scripts/stop-zk.sh` on free ports (so two runs on one machine never meet), and the
//! four-letter-word probe of any server.
//!
//! The scripts take `ZK_WORKDIR` (and `JAVA`, `ZK_START_TIMEOUT`, ...) from this process's
//! environment: `scripts/test.sh` sets a work dir for its run and stops everything in it when
//! it ends. The variables that select a server (`ZK_PORT`, `ZK_ENSEMBLE_PORTS`, ...) are never
//! inherited: each call passes its own.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, Once};
use std::time::Duration;

/// The variables with which the scripts pick a server: removed from every script's
/// environment unless the call sets them.
const SELECTING: &[&str] = &[
    "ZK_PORT",
    "ZK_SECURE_PORT",
    "ZK_TLS_CLIENT_AUTH",
    "ZK_ENSEMBLE",
    "ZK_ENSEMBLE_BASE",
    "ZK_ENSEMBLE_PORTS",
    "ZK_JVM_OPTS",
    "ZK_HEAP",
];

/// A port on 127.0.0.1 that nothing listens on, for a server a test starts.
///
/// Picked at random below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), as
/// `scripts/test.sh` picks the main server's: the kernel never gives those ports to the local
/// end of an outgoing connection, whereas a port it hands out for `bind(0)` may be taken by
/// some client's connection in the second before the JVM binds it. A bind proves it free now;
/// no port is handed out twice in one process.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (lo, hi) = if ephemeral >= 16000 {
        (15000, ephemeral)
    } else {
        (1024, ephemeral)
    };
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    for _ in 0..1000 {
        let random = uuid::Uuid::new_v4().as_u128();
        let port = lo + (random % u128::from(hi - lo)) as u16;
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {lo}..{hi}");
}

/// `scripts/<name>` of the repository: the library's tests run in its root, the CLI's (which
/// share this fixture) one level below it, in `cli/`.
fn script(name: &str) -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .map(|dir| dir.join("scripts").join(name))
        .find(|script| script.is_file())
        .unwrap_or_else(|| panic!("no scripts/{name} above {}", manifest_dir.display()))
}

fn command(name: &str, args: &[&str], env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(script(name)).args(args).stdin(Stdio::null());
    for var in SELECTING {
        cmd.env_remove(var);
    }
    // start-zk.sh alone starts the embedded server; the tests' servers are Apache's 3.9.5
    // unless the run names its release (scripts/test.sh always does).
    if std::env::var_os("ZK_VERSION").is_none() && std::env::var_os("ZK_DIST").is_none() {
        cmd.env("ZK_VERSION", "3.9.5");
    }
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd
}

/// What a script printed: on stdout (start-zk.sh: the connect string, last) and on stderr.
#[derive(Debug)]
pub struct ScriptOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `scripts/<name> <args>` with `env`; panics with what it said if it fails.
pub fn run_script(name: &str, args: &[&str], env: &[(&str, String)]) -> ScriptOutput {
    let out = command(name, args, env)
        .output()
        .unwrap_or_else(|e| panic!("running scripts/{name}: {e}"));
    let output = ScriptOutput {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        out.status.success(),
        "scripts/{name} {args:?} with {env:?} failed ({}):\n{}",
        out.status,
        output.stderr
    );
    output
}

/// A `stop-zk.sh` call to make when this process exits (see [`Servers::keep_until_exit`]).
struct ExitStop {
    args: Vec<&'static str>,
    env: Vec<(&'static str, String)>,
}

static AT_EXIT: Mutex<Vec<ExitStop>> = Mutex::new(Vec::new());

extern "C" fn stop_at_exit() {
    let stops = std::mem::take(&mut *AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()));
    for ExitStop { args, env } in stops {
        stop_quietly(&args, &env);
    }
}

/// Runs `stop-zk.sh <args>` without panicking: at exit, or while a failed test unwinds, a panic
/// would abort. A failure is only reported; `scripts/test.sh` stops what is left.
fn stop_quietly(args: &[&str], env: &[(&str, String)]) {
    let stopped = command("stop-zk.sh", args, env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !stopped.is_ok_and(|s| s.success()) {
        eprintln!("scripts/stop-zk.sh {args:?} with {env:?} failed");
    }
}

/// Servers started by `scripts/start-zk.sh <flags>` with `env`, and stopped, their work dir
/// removed, by `scripts/stop-zk.sh <flags> --clean` with the same: when dropped, or when the
/// test process exits for those kept in a `static` ([`keep_until_exit`](Self::keep_until_exit)).
/// A process killed by a signal stops nothing: `scripts/test.sh` stops what its run left.
#[derive(Debug)]
pub struct Servers {
    flags: Vec<&'static str>,
    env: Vec<(&'static str, String)>,
    /// What start-zk.sh printed (stdout ends with the connect string).
    pub started: ScriptOutput,
    stop_on_drop: bool,
}

impl Servers {
    /// Starts the servers and waits until they serve, after stopping and deleting whatever an
    /// aborted earlier run left in their work dir (so this configuration really applies).
    pub fn start(flags: &[&'static str], env: &[(&'static str, String)]) -> Servers {
        let mut servers = Servers {
            flags: flags.to_vec(),
            env: env.to_vec(),
            started: ScriptOutput {
                stdout: String::new(),
                stderr: String::new(),
            },
            stop_on_drop: true,
        };
        servers.stop();
        // If this fails, dropping `servers` stops what did start.
        servers.started = servers.run("start-zk.sh", flags);
        servers
    }

    /// The connect string start-zk.sh printed last.
    pub fn connect_string(&self) -> String {
        self.started
            .stdout
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Runs `scripts/<name> <args>` with the servers' environment (their ports), e.g.
    /// `start-zk.sh --ensemble-member 2`.
    pub fn run(&self, name: &str, args: &[&str]) -> ScriptOutput {
        run_script(name, args, &self.env)
    }

    /// Stops the servers and deletes their work dir.
    pub fn stop(&self) {
        let mut args = self.flags.clone();
        args.push("--clean");
        self.run("stop-zk.sh", &args);
    }

    /// For servers that live in a `static` (shared by the tests of one binary, never
    /// dropped): stops them when the process exits (`atexit`), whether its tests passed or
    /// failed.
    pub fn keep_until_exit(mut self) -> Servers {
        static REGISTER: Once = Once::new();
        REGISTER.call_once(|| {
            // SAFETY: registers a plain function without arguments.
            let rc = unsafe { libc::atexit(stop_at_exit) };
            assert_eq!(rc, 0, "atexit failed");
        });
        let mut args = self.flags.clone();
        args.push("--clean");
        AT_EXIT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ExitStop {
                args,
                env: self.env.clone(),
            });
        self.stop_on_drop = false;
        self
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if self.stop_on_drop {
            let mut args = self.flags.clone();
            args.push("--clean");
            stop_quietly(&args, &self.env);
        }
    }
}

/// A standalone ZooKeeper server of one test's own on a free port of `127.0.0.1`, started by
/// `scripts/start-zk.sh` with extra JVM options (e.g. `-Dznode.container.checkIntervalMs=1000`)
/// and stopped, its work dir removed, when dropped. For tests that need a server whose settings
/// or lifetime they control, or whose server-wide counters nothing else may move.
pub struct PrivateServer {
    port: u16,
    _servers: Servers,
}

impl PrivateServer {
    /// Starts the server and waits until it serves.
    pub fn start(jvm_opts: &str) -> PrivateServer {
        Self::start_with(jvm_opts, &[])
    }

    /// Starts a server of ZooKeeper release `release` (`3.9.5`, `3.6.3`, `debian`: see
    /// `scripts/start-zk.sh --version`), whatever `ZK_VERSION` the run has.
    pub fn start_release(release: &str) -> PrivateServer {
        Self::start_with("", &[("ZK_VERSION", release.to_owned())])
    }

    /// Starts a server of release `release` with extra JVM options, whatever `ZK_VERSION` the
    /// run has (the differential test's Apache side while the run's servers are embedded).
    pub fn start_release_with(release: &str, jvm_opts: &str) -> PrivateServer {
        Self::start_with(jvm_opts, &[("ZK_VERSION", release.to_owned())])
    }

    fn start_with(jvm_opts: &str, env: &[(&'static str, String)]) -> PrivateServer {
        let port = free_port();
        let mut env = env.to_vec();
        env.extend([
            ("ZK_PORT", port.to_string()),
            ("ZK_JVM_OPTS", jvm_opts.to_owned()),
            ("ZK_HEAP", "128m".to_owned()),
        ]);
        let servers = Servers::start(&[], &env);
        PrivateServer {
            port,
            _servers: servers,
        }
    }

    /// The release the server reports (`srvr`: "3.9.5"), `None` if it does not answer.
    pub fn release(&self) -> Option<String> {
        version(&self.connect_string())
    }

    /// `127.0.0.1:<port>`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's work dir, where start-zk.sh keeps its data, logs and pid file.
    fn dir(&self) -> PathBuf {
        let root = std::env::var_os("ZK_WORKDIR")
            .map_or_else(|| std::env::temp_dir().join("zklock-zk"), PathBuf::from);
        root.join(self.port.to_string())
    }

    /// Where the server keeps its snapshots (`snapshot.<zxid>`): `version-2` in its dataDir.
    pub fn snapshot_dir(&self) -> PathBuf {
        self.dir().join("data").join("version-2")
    }

    /// The server's process id, from the pid file start-zk.sh wrote.
    pub fn pid(&self) -> i32 {
        let file = self.dir().join("zk.pid");
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        text.trim().parse().expect("a pid")
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is answered. Returns once
    /// every thread of the JVM has stopped: kill(2) only queues the signal, and a server thread
    /// running on another CPU could otherwise still answer a request sent right after.
    pub fn freeze(&self) {
        let pid = self.pid();
        signal(pid, libc::SIGSTOP);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !all_threads_stopped(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "server {pid} did not stop"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets a frozen server run again (SIGCONT).
    pub fn thaw(&self) {
        signal(self.pid(), libc::SIGCONT);
    }

    /// Stops the server, deletes its data and transaction logs, and starts a fresh one on the
    /// same port: an ensemble re-created from scratch, whose zxids begin again.
    pub fn wipe_and_restart(&self) {
        self._servers.stop();
        self._servers.run("start-zk.sh", &[]);
    }

    /// Stops the server (SIGTERM, as an operator's restart does) and keeps its data: a
    /// [`start_again`](Self::start_again) brings back every node and every live session.
    pub fn stop_keeping_data(&self) {
        self._servers.run("stop-zk.sh", &[]);
    }

    /// Starts the server stopped by [`stop_keeping_data`](Self::stop_keeping_data) again on the
    /// same port and data; returns once it serves.
    pub fn start_again(&self) {
        self._servers.run("start-zk.sh", &[]);
    }

    /// How many watches the server holds for session `session_id` (4lw `wchc`: each session's
    /// watched paths, data and child watches alike).
    pub fn watches_of(&self, session_id: i64) -> usize {
        watches_of(&self.connect_string(), session_id)
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        // A test that failed while the server was frozen: let it run, so it stops promptly.
        // SAFETY: as in `signal`; a failure (no such process) is of no consequence here.
        if let Ok(pid) = std::fs::read_to_string(self.dir().join("zk.pid")) {
            if let Ok(pid) = pid.trim().parse() {
                unsafe { libc::kill(pid, libc::SIGCONT) };
            }
        }
    }
}

/// Whether every thread of `pid` is stopped (state `T` in `/proc/<pid>/task/*/stat`).
fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            // The state follows the command name, which is in parentheses.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
                .is_some_and(|state| state == 'T' || state == 't')
        })
    })
}

/// Sends `signal` to process `pid`.
fn signal(pid: i32, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid read from the server's pid file; no memory is involved.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
}

/// Sends the four-letter word `cmd` to the server at `addr` (`host:port`) and returns its
/// whole answer (the server closes the connection after it).
pub fn four_letter(addr: &str, cmd: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(cmd.as_bytes())?;
    let mut out = String::new();
    stream.read_to_string(&mut out)?;
    Ok(out)
}

/// How many watches the server at `addr` holds for session `session_id`, from 4lw `wchc`
/// (`0x<session>` on a line, then one tab-indented path per watch). 0 if it does not answer.
pub fn watches_of(addr: &str, session_id: i64) -> usize {
    let Ok(answer) = four_letter(addr, "wchc") else {
        return 0;
    };
    // The data watches and the child watches are listed apart, each with its session lines.
    let header = format!("0x{session_id:x}");
    let mut ours = false;
    let mut count = 0;
    for line in answer.lines() {
        if line.starts_with('\t') {
            count += usize::from(ours);
        } else {
            ours = line.trim() == header;
        }
    }
    count
}

/// The server's `Mode:` (`standalone`, `leader`, `follower`, ...), `None` if it does not answer.
pub fn mode(addr: &str) -> Option<String> {
    four_letter(addr, "srvr")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Mode: ").map(|m| m.trim().to_owned()))
}

/// The release of the server at `addr` (`srvr`'s "Zookeeper version: 3.9.5-<hash>, built on
/// ..." gives "3.9.5"), `None` if it does not answer.
pub fn version(addr: &str) -> Option<String> {
    four_letter(addr, "srvr").ok()?.lines().find_map(|l| {
        let v = l.strip_prefix("Zookeeper version: ")?;
        Some(v.split(['-', ',']).next()?.trim().to_owned())
    })
}

/// The server's `mntr` values (counters and gauges as integers; others are left out).
pub fn mntr(addr: &str) -> HashMap<String, u64> {
    four_letter(addr, "mntr")
        .unwrap_or_else(|e| panic!("mntr from {addr}: {e}"))
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter_map(|(k, v)| Some((k.to_owned(), v.trim().parse::<f64>().ok()? as u64)))
        .collect()
}
