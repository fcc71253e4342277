//! `zklock`: run a command under a ZooKeeper lock or while leader, inspect a lock, break a
//! stale one, ask a holder to let go.
//!
//! The library never prints; this binary owns stdout and stderr. Diagnostics go to stderr
//! through `log` (`-v`, `RUST_LOG`), results of `status`, `break` and `revoke` to stdout.

mod child;
mod docs;
mod guardian;
mod inspect;
mod run;
mod security;
mod status;
mod supervise;
mod text;
mod waiting;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use text::Dur;
use zklock::Client;

/// Exit codes of zklock itself. `run` otherwise exits with its command's status.
mod code {
    /// `break`: nothing was deleted (declined, no holder, or the node changed or vanished);
    /// `revoke`: no holder, or its node vanished; `status`: LOCKPATH is no lock.
    pub const NOTHING_DONE: u8 = 1;
    /// `status`: some nodes under LOCKPATH could not be read (listed as unreadable), so the
    /// locks shown may not be all there are.
    pub const INCOMPLETE: u8 = 2;
    /// `run --on-revoke=release`: revocation was requested while the command ran; the command
    /// was stopped and the lock released.
    pub const REVOKED: u8 = 121;
    /// `run`: the lock was lost while the command ran (the command was killed unless
    /// `--on-lost=ignore`); `leader`: leadership was lost and the command killed.
    pub const LOST: u8 = 122;
    /// `run --nonblock`: the lock is busy.
    pub const BUSY: u8 = 123;
    /// `run --timeout`: the lock stayed busy until the timeout.
    pub const TIMEOUT: u8 = 124;
    /// zklock failed: bad usage or input, ZooKeeper unreachable or refusing.
    pub const ERROR: u8 = 125;
    /// `run`, `leader`: the command was found but could not be started.
    pub const CANNOT_EXECUTE: u8 = 126;
    /// `run`, `leader`: the command was not found.
    pub const NOT_FOUND: u8 = 127;
}

const EXIT_CODES: &str = "\
Exit codes:
  0        success (run, leader: the command exited 0)
  1..=120  run, leader: the command's own exit status; 128+N if it was killed by signal N
  1        break: nothing deleted (declined, no holder, node changed or already gone);
           revoke: no holder, or its node is already gone;
           status: no lock at LOCKPATH (a node that is not a lock; with --must-exist,
           also no node)
  2        status: nodes under LOCKPATH could not be read (no permission, connection
           lost): the locks listed may not be all there are
  121      run --on-revoke=release: revocation was requested; the command was stopped
  122      run: the lock was lost while the command ran; the command was killed
           leader: leadership was lost while the command ran; the command was killed
  123      run --nonblock: the lock is busy (with -E N: N, and nothing printed)
  124      run --timeout: the lock was still busy when the timeout ran out (with -E N:
           N, and nothing printed)
  125      zklock failed: bad usage or input, ZooKeeper unreachable, authentication
           failed or not allowed by the node's ACL, unknown node, several holders and
           no --node, revoke on a semaphore or election
  126      run, leader: the command could not be executed
  127      run, leader: the command was not found";

/// `zklock --help`: the tools an operator may know already.
const CORRESPONDENCES: &str = "\
From flock(1), etcdctl lock, consul lock:
  flock FILE CMD              zklock run LOCKPATH CMD
  flock -n / --nonblock       zklock run -n / --nonblock     (exit 123, or -E N)
  flock -w / --wait SECS      zklock run -w / --wait DUR     (exit 124, or -E N)
  flock -E / --conflict-exit-code N
                              zklock run -E / --conflict-exit-code N
  flock -s / --shared         zklock run -s / --shared       (read side of a read/write lock)
  flock -x / --exclusive      zklock run -x / --exclusive    (its write side; plain `run` is a
                                                              mutex, which -s does not exclude)
  etcdctl lock NAME CMD       zklock run LOCKPATH CMD
  etcdctl elect NAME PROPOSAL zklock leader --id PROPOSAL LOCKPATH CMD
  consul lock PREFIX CMD      zklock run LOCKPATH CMD
  consul lock -n N PREFIX CMD zklock run --permits N LOCKPATH CMD (one of N leases)
  consul lock -timeout DUR    zklock run -w DUR
  (holder inspection)         zklock status LOCKPATH; zklock break LOCKPATH to free a hung holder
As with etcdctl and consul, COMMAND is stopped (SIGTERM, then SIGKILL) when the lock is lost;
unlike flock, the lock outlives no process: zklock's own death ends it too.";

/// Distributed locks on Apache ZooKeeper, from the shell.
///
/// Locks are ZooKeeper's lock recipe (Curator-compatible `_c_<uuid>-lock-<seq>` nodes), so
/// `zklock`, Rust programs using the zklock crate and Java programs using Curator's
/// InterProcessMutex exclude each other on the same path. Elections (`zklock leader`) are
/// Curator LeaderLatch-compatible `_c_<uuid>-latch-<seq>` nodes.
#[derive(Debug, Parser)]
#[command(
    name = "zklock",
    version,
    after_help = EXIT_CODES,
    after_long_help = format!("{CORRESPONDENCES}\n\n{EXIT_CODES}")
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    global: Global,
}

#[derive(Debug, Args)]
struct Global {
    /// ZooKeeper connect string, `host:port[,host:port...][/chroot]`.
    /// [default: $ZKLOCK_CONNECT, else 127.0.0.1:2181]
    #[arg(long, short = 'c', global = true, value_name = "HOSTS")]
    connect: Option<String>,

    /// Session timeout to ask for (the server may clamp it). A holder that loses contact for
    /// this long loses the lock; a dead holder's lock is freed after this long.
    #[arg(long, global = true, value_name = "DUR", default_value = "10s", value_parser = duration_value)]
    session_timeout: Duration,

    /// How long to try to reach ZooKeeper before failing with exit code 125.
    #[arg(long, global = true, value_name = "DUR", default_value = "15s", value_parser = duration_value)]
    connect_timeout: Duration,

    /// Log more to stderr (-v: lock events, and while `run` or `leader` waits, who holds the
    /// lock and when that changes; -vv: protocol details). RUST_LOG also works.
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(flatten)]
    security: security::SecurityArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(RunArgs),
    Leader(LeaderArgs),
    Status(StatusArgs),
    Break(BreakArgs),
    Revoke(RevokeArgs),
    Completions(CompletionsArgs),
    Man(ManArgs),
}

/// Acquire LOCKPATH, run COMMAND while holding it, release it when COMMAND exits.
///
/// Exits with COMMAND's status. Waits for the lock as long as it takes unless --nonblock or
/// --timeout is given. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to COMMAND (zklock
/// then waits for it to exit), followed by SIGCONT so that a stopped COMMAND acts on them; a
/// forwarded SIGTERM is followed by SIGKILL after --kill-grace if COMMAND is still running
/// (as with `timeout -k`). A signal while still waiting for the lock withdraws from the queue
/// and exits 128+N.
///
/// If zklock itself dies (even by SIGKILL), its lock ends with its session, so COMMAND must
/// not run on: a small guardian process started with COMMAND sees zklock go and sends
/// COMMAND's process group SIGTERM, then SIGKILL after --kill-grace, well before the session
/// can expire. Processes that leave the process group (setsid, daemons) escape it.
///
/// COMMAND runs in a process group of its own, so that a lost lock stops the whole job
/// (pipelines, scripts' children). The lock is considered lost when the session expires,
/// when the lock node is deleted (`zklock break`; noticed at once), or when the connection to
/// ZooKeeper has been down (Suspended) for longer than --suspended-grace: a Suspended session
/// may already have expired on the server, handing the lock to someone else. With the
/// defaults (both graces 1/5 of the session timeout) COMMAND is dead before the server can
/// expire the session: the connection is reported down after 2/5 of it, SIGTERM follows 1/5 later and
/// SIGKILL another 1/5 later. Larger graces trade that guarantee for tolerance of slow
/// reconnects.
///
/// COMMAND gets ZKLOCK_LOCK_PATH, ZKLOCK_NODE, ZKLOCK_SESSION_ID, ZKLOCK_FENCING and
/// ZKLOCK_FENCING_TOKEN in its environment; pass ZKLOCK_FENCING (32 hex digits that compare as
/// strings in token order, also across a re-created ensemble) to resources that can reject
/// stale holders. ZKLOCK_FENCING_TOKEN is the lock node's zxid alone, in decimal, which starts
/// again when an ensemble's data is wiped.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
struct RunArgs {
    /// Fail at once with exit code 123 (or --conflict-exit-code, silently) if the lock is
    /// busy.
    #[arg(long, short = 'n', conflicts_with = "timeout")]
    nonblock: bool,

    /// Give up with exit code 124 (or --conflict-exit-code) if the lock is still busy after
    /// DUR (e.g. 500ms, 10s, 5min, 1h30m; a bare number is seconds).
    #[arg(long, short = 'w', visible_alias = "wait", value_name = "DUR", value_parser = duration)]
    timeout: Option<Dur>,

    /// The exit code when --nonblock finds the lock busy or --timeout runs out, instead of
    /// 123 and 124 (as flock -E); such a conflict then prints nothing (as flock), so `-E 0`
    /// makes a cron job skip a run without a word, and `-E 123` only silences `-n`. Errors
    /// (ZooKeeper unreachable, not allowed) still print and exit 125; -v logs the conflict.
    #[arg(long, short = 'E', value_name = "N")]
    conflict_exit_code: Option<u8>,

    /// Take the lock shared, with other --shared runs: the read side of a read/write lock at
    /// LOCKPATH (flock -s; Curator's InterProcessReadWriteLock). It excludes --exclusive runs,
    /// not plain ones: a mutex and a read/write lock on one path are different locks.
    #[arg(long, short = 's', conflicts_with = "exclusive")]
    shared: bool,

    /// Take one of N leases of a semaphore at LOCKPATH instead of a lock: at most N runs at
    /// once (consul lock -n N; Curator's InterProcessSemaphoreV2, which must use the same N:
    /// ZooKeeper does not store it). No fencing token (ZKLOCK_FENCING is not set) and no
    /// revocation; a lease deleted by `zklock break` counts as lost.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..),
        conflicts_with_all = ["shared", "exclusive", "on_revoke"]
    )]
    permits: Option<u32>,

    /// Take the write side of the read/write lock at LOCKPATH, excluding --shared runs and
    /// other --exclusive ones (flock -x, when readers use -s).
    #[arg(long, short = 'x')]
    exclusive: bool,

    /// What to do if the lock is lost while COMMAND runs.
    #[arg(long, value_enum, default_value_t = OnLost::Kill, value_name = "ACTION")]
    on_lost: OnLost,

    /// What to do when another process asks for the lock to be released (`zklock revoke`,
    /// Curator's Revoker): ignore it (log a warning), or stop COMMAND as for a lost lock
    /// (SIGTERM, SIGKILL after --kill-grace), release the lock and exit 121.
    #[arg(long, value_enum, default_value_t = OnRevoke::Ignore, value_name = "ACTION")]
    on_revoke: OnRevoke,

    #[command(flatten)]
    supervision: Supervision,

    /// The lock, an absolute ZooKeeper path such as /locks/nightly-report.
    #[arg(value_name = "LOCKPATH")]
    path: String,

    /// The command and its arguments (put `--` before it if it has options of its own).
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<std::ffi::OsString>,
}

/// How `run` and `leader` watch over COMMAND once the lock or leadership is theirs.
#[derive(Debug, Args)]
struct Supervision {
    /// How long COMMAND gets between SIGTERM and SIGKILL: after the lock (or leadership) is
    /// lost, after a forwarded SIGTERM, and after zklock itself died. [default: 1/5 of the
    /// session timeout]
    #[arg(long, value_name = "DUR", value_parser = duration)]
    kill_grace: Option<Dur>,

    /// How long the connection may stay down (lock Suspended) before the lock (or leadership)
    /// counts as lost. [default: 1/5 of the session timeout]
    #[arg(long, value_name = "DUR", value_parser = duration)]
    suspended_grace: Option<Dur>,

    /// Keep COMMAND in zklock's process group, so it can read the terminal and gets Ctrl-C
    /// directly (use it for interactive commands). Only SIGTERM is forwarded then, and a lost
    /// lock (or zklock's death) kills COMMAND but not processes it started. Without it, a
    /// COMMAND that reads the terminal is stopped (SIGTTIN): zklock warns, and continues it
    /// after forwarding a signal (Ctrl-C).
    #[arg(long)]
    foreground: bool,
}

impl Supervision {
    /// The policy for a session whose granted timeout is `session_timeout`.
    fn policy(
        &self,
        on_lost: OnLost,
        on_revoke: Option<OnRevoke>,
        session_timeout: Duration,
    ) -> supervise::Policy {
        let fifth = || Dur::computed(session_timeout / 5);
        supervise::Policy {
            on_lost,
            on_revoke,
            kill_grace: self.kill_grace.clone().unwrap_or_else(fifth),
            suspended_grace: self.suspended_grace.clone().unwrap_or_else(fifth),
            group: !self.foreground,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnLost {
    /// SIGTERM COMMAND's process group, SIGKILL after --kill-grace; exit 122.
    Kill,
    /// Log a warning and let COMMAND finish; exit with its status.
    Ignore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnRevoke {
    /// Log a warning and keep holding the lock.
    Ignore,
    /// SIGTERM COMMAND's process group, SIGKILL after --kill-grace, release; exit 121.
    Release,
}

/// Join the leader election at LOCKPATH, run COMMAND once this process leads, step down when
/// COMMAND exits.
///
/// Exits with COMMAND's status. Waits to lead as long as it takes; participants queue, and the
/// next one takes over when the leader steps down or dies. Signals, and zklock's own death,
/// are handled as by `run` (a signal while waiting leaves the election and exits 128+N).
///
/// Leadership is lost, and COMMAND's process group gets SIGTERM (SIGKILL after --kill-grace)
/// and zklock exits 122, when the session expires, when our election node is deleted
/// (`zklock break`; noticed at once), or when the connection to ZooKeeper has been down for
/// longer than --suspended-grace: as `run --on-lost=kill`. Run it under a supervisor
/// (systemd, a shell loop) to keep a service running on whichever host leads.
///
/// COMMAND gets ZKLOCK_LOCK_PATH, ZKLOCK_NODE, ZKLOCK_SESSION_ID, ZKLOCK_FENCING and
/// ZKLOCK_FENCING_TOKEN, as with `run`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
struct LeaderArgs {
    /// The participant id stored in our election node and shown by `zklock status` (Curator's
    /// LeaderLatch id). [default: host=HOST pid=PID thread=main]
    #[arg(long, value_name = "ID")]
    id: Option<String>,

    #[command(flatten)]
    supervision: Supervision,

    /// The election, an absolute ZooKeeper path such as /elections/indexer.
    #[arg(value_name = "LOCKPATH")]
    path: String,

    /// The command and its arguments (put `--` before it if it has options of its own).
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<std::ffi::OsString>,
}

/// Show the holders and the waiters of LOCKPATH, in queue order.
///
/// Reads every layout, told apart by the nodes under LOCKPATH: a mutex (`zklock run`,
/// `-lock-` nodes), a read/write lock (`__READ__`/`__WRIT__` nodes; the leading readers, or
/// the leading writer, hold it), a semaphore (`leases/` and `locks/` children) or a leader
/// election (`zklock leader`, `-latch-` nodes).
///
/// For each contender: its position, standing (holder, waiter; `unknown` for a semaphore's leases
/// without --permits), type (exclusive, read, write, lease, queued, participant), age (server
/// creation time against the local clock), session id, node name and owner (`host=.. pid=..
/// thread=..` for zklock nodes, the participant id in an election; control characters such as
/// newlines escaped). A semaphore's nodes are named `leases/NAME` (leases, held or waited for)
/// and `locks/NAME` (lease takers queued).
///
/// An empty node is a free lock (a released lock's node stays until the server sweeps it),
/// and so is a path with no node (the server sweeps a free lock's node after about a minute):
/// exit 0. With --must-exist a path with no node is no lock ("no lock at LOCKPATH: no such
/// node", exit 1), which catches a typo. A node with children but no lock nodes (a parent of
/// locks, /zookeeper) is no lock: status says so and exits 1, listing the locks held or waited
/// for up to 4 levels below it. A node below it that zklock may not read (a creator-only lock
/// of another identity) or fails to read (connection lost) is listed as unreadable, with the
/// error, and status exits 2: the locks listed may not be all there are.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
struct StatusArgs {
    /// Print one JSON object, with the same keys whatever LOCKPATH is: {"path", "exists"
    /// (there is a node), "lock" (LOCKPATH is a lock, held or free: exit 0), "held" (something
    /// holds it: a holder, a reader, a leader, a semaphore's lease), "layout" ("mutex",
    /// "rwlock", "semaphore", "election", or null: no lock nodes), "layouts" (every recipe whose
    /// nodes are there; more than one is a misuse), "permits" (null unless given),
    /// "contenders": [{"position", "standing", "node", "sequence", "session_id", "owner",
    /// "host", "pid", "thread", "created_ms", "age_ms", "fencing_token", "version", "type",
    /// "holds"}], "locks": [{"path", "layout", "contenders", "holders", "waiting"}] (held or
    /// waited-for locks found below a LOCKPATH that is no lock), "truncated" (that search
    /// stopped early), "unreadable": [{"path", "error"}] (nodes it could not read: exit 2)}.
    /// host, pid and thread are null for non-zklock owners; holds is null where unknown.
    #[arg(long)]
    json: bool,

    /// A path with no node is no lock (exit 1) rather than a free one: catches a typo in
    /// LOCKPATH.
    #[arg(long)]
    must_exist: bool,

    /// The semaphore's number of permits (ZooKeeper does not store it), to tell held leases
    /// from the one being waited for.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    permits: Option<u32>,

    /// The lock, an absolute ZooKeeper path.
    #[arg(value_name = "LOCKPATH")]
    path: String,
}

/// Delete the holder's node of LOCKPATH (or another contender's), to free a lock whose holder
/// is hung but still connected (a dead holder's node vanishes by itself after its session
/// timeout).
///
/// Works for every layout `zklock status` reads. Where several hold (readers of a read/write
/// lock, a semaphore's leases) name the node with --node. Shows the node and asks for
/// confirmation on stdin unless --yes. The node is deleted only if it is unchanged since it was
/// shown. A `zklock run` or `zklock leader` holding it notices at once and kills its command;
/// other programs holding it may learn it only when they release (zklock's revocable locks and
/// elections at once).
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
struct BreakArgs {
    /// The node to delete (as shown by `zklock status`) instead of the holder's.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,

    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    yes: bool,

    /// The lock, an absolute ZooKeeper path.
    #[arg(value_name = "LOCKPATH")]
    path: String,
}

/// Ask the holder of LOCKPATH (or the contender --node NAME) to release the lock.
///
/// Writes Curator's revocation marker into the node. Nothing is released by force: a
/// `zklock run --on-revoke=release` holder stops its command and releases (exit 121); a
/// program holding a revocable zklock mutex or read/write lock, or a Curator holder with a
/// RevocationListener, decides for itself; other holders ignore it. For mutexes and read/write
/// locks (without --node, every holder is asked: all the readers of a read lock); semaphores
/// and elections have no revocation protocol. The marker replaces the owner data
/// `zklock status` shows for the node.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
struct RevokeArgs {
    /// The node to ask (as shown by `zklock status`) instead of the holder's.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,

    /// The lock, an absolute ZooKeeper path.
    #[arg(value_name = "LOCKPATH")]
    path: String,
}

/// Print a completion script for SHELL to stdout.
///
/// bash: `zklock completions bash > ~/.local/share/bash-completion/completions/zklock`;
/// zsh: `zklock completions zsh > "${fpath[1]}/_zklock"`; fish: `zklock completions fish >
/// ~/.config/fish/completions/zklock.fish`.
#[derive(Debug, Args)]
struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    shell: clap_complete::Shell,
}

/// Print the zklock(1) man page (roff) to stdout, or write it and one page per subcommand
/// (zklock-run(1), ...) into --dir.
///
/// `zklock man --dir /usr/local/share/man/man1` installs them all for `man zklock-run`.
#[derive(Debug, Args)]
struct ManArgs {
    /// Write zklock.1 and zklock-SUBCOMMAND.1 into DIR instead.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

/// A duration option that messages quote as given.
fn duration(text: &str) -> Result<Dur, String> {
    text::parse_duration(text)
}

/// A duration option that messages never quote.
fn duration_value(text: &str) -> Result<Duration, String> {
    text::parse_duration(text).map(|d| d.value)
}

/// A failure that ends zklock with an exit code and, unless silent, a one-line message.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    /// What goes to stderr; `None` for an outcome the caller asked to be quiet about.
    message: Option<String>,
}

impl Failure {
    /// Exit code 125 with `message`.
    pub fn error(message: impl Into<String>) -> Failure {
        Failure::with_code(code::ERROR, message)
    }

    /// Exit code `code` with `message`.
    pub fn with_code(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: Some(message.into()),
        }
    }

    /// Exit code `code` and nothing on stderr.
    pub fn silent(code: u8) -> Failure {
        Failure {
            code,
            message: None,
        }
    }
}

impl From<zklock::Error> for Failure {
    fn from(err: zklock::Error) -> Failure {
        Failure::error(security::explain(&err))
    }
}

/// What a subcommand ends with: an exit code, or a failure to report.
pub type Outcome = Result<u8, Failure>;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == guardian::ARG) {
        return guardian::main(&args[2..]);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { code::ERROR } else { 0 });
        }
    };
    init_logging(cli.global.verbose);
    if !matches!(cli.command, Command::Run(_) | Command::Leader(_)) {
        die_quietly_on_broken_pipe();
    }
    let outcome = match &cli.command {
        Command::Run(args) => run::run(&cli.global, args),
        Command::Leader(args) => run::leader(&cli.global, args),
        Command::Status(args) => status::status(&cli.global, args),
        Command::Break(args) => inspect::break_lock(&cli.global, args),
        Command::Revoke(args) => inspect::revoke(&cli.global, args),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
    };
    let _ = std::io::stdout().flush();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            if let Some(message) = &failure.message {
                eprintln!("zklock: {message}");
            }
            ExitCode::from(failure.code)
        }
    }
}

/// `zklock status | head`: once the reader is gone, end as `cat` does, killed by SIGPIPE
/// without a word, instead of panicking in `println!` on EPIPE (Rust ignores SIGPIPE). Not for
/// `run` and `leader`: a closed stderr must not kill a lock holder, which has a job to stop
/// and a lock to release first (their commands get the default disposition back anyway).
fn die_quietly_on_broken_pipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: SIG_DFL installs no handler, so no code of ours runs in signal context.
    if let Err(err) = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) } {
        log::debug!("restoring SIGPIPE: {err}");
    }
}

fn init_logging(verbose: u8) {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    match verbose {
        0 => {}
        1 => {
            builder.filter_module("zklock", log::LevelFilter::Info);
        }
        _ => {
            builder.filter_level(log::LevelFilter::Debug);
        }
    }
    builder
        .format(|buf, record| {
            writeln!(
                buf,
                "zklock: {}: {}",
                record.level().as_str().to_ascii_lowercase(),
                record.args()
            )
        })
        .init();
}

impl Global {
    /// `--connect`, else `$ZKLOCK_CONNECT`, else the local default.
    fn connect_string(&self) -> String {
        self.connect
            .clone()
            .or_else(|| std::env::var("ZKLOCK_CONNECT").ok())
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "127.0.0.1:2181".to_owned())
    }

    /// Connects, trying for at most `limit` when given (and the connect timeout otherwise).
    fn connect(&self, limit: Option<Duration>) -> Result<Client, Failure> {
        self.open(limit, false)
    }

    /// Connects for a command that only looks at (or deletes) what exists: a missing chroot
    /// is an error, never created, so a typo in it cannot show an empty namespace where
    /// every lock looks free.
    fn connect_existing(&self) -> Result<Client, Failure> {
        self.open(None, true)
    }

    fn open(&self, limit: Option<Duration>, require_chroot: bool) -> Result<Client, Failure> {
        // A lock timeout bounds the connect too, but not below a second: `--timeout 0` means
        // "try once", not "fail to connect".
        let connect_timeout = limit.map_or(self.connect_timeout, |l| {
            l.max(Duration::from_secs(1)).min(self.connect_timeout)
        });
        // A mistyped host or port is refused at once; waiting out the connect timeout for it
        // would cost every command-line call 15 s.
        let builder = Client::builder(&self.connect_string())
            .session_timeout(self.session_timeout)
            .connect_timeout(connect_timeout)
            .fail_fast_if_refused(true)
            .require_chroot(require_chroot);
        let client = self.security.apply(builder)?.connect()?;
        log::debug!(
            "session {:#x}, timeout {:?}",
            client.session_id(),
            client.session_timeout()
        );
        Ok(client)
    }
}
