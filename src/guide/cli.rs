//! The `zklock` command-line tool: run a command under a lock or while leader, inspect a
//! lock, break a stale holder, ask a holder to let go.
//!
//! # Installing
//!
//! The `zklock` binary, for using and debugging locks from the shell and modelled on `flock(1)`,
//! is the crate `zklock-cli` (the `cli/` directory of zklock's repository), built on this
//! library's public API; its dependencies (an argument parser, a logger) never reach library
//! users. Install it from crates.io with `cargo install zklock-cli`, or from a checkout with
//!
//! ```sh
//! scripts/install-cli.sh            # cargo install --locked --path cli, checked
//! ```
//!
//! or `cargo build --release -p zklock-cli` and take `target/release/zklock`. It always has TLS
//! and SASL. The locks are the library's, so the tool, Rust programs and Curator's
//! `InterProcessMutex` all exclude each other on the same path, and `zklock leader` takes part in
//! the same elections as `LeaderElection` and Curator's `LeaderLatch`.
//!
//! # Usage
//!
//! ```text
//! zklock run    [-n | -w|--wait DUR] [-E N] [-s|--shared | -x|--exclusive | --permits N]
//!               [--on-lost kill|ignore] [--on-revoke ignore|release]
//!               [--kill-grace DUR] [--suspended-grace DUR] [--foreground] LOCKPATH [--] COMMAND [ARGS...]
//! zklock leader [--id ID] [--kill-grace DUR] [--suspended-grace DUR] [--foreground]
//!               LOCKPATH [--] COMMAND [ARGS...]
//! zklock status [--json] [--permits N] [--must-exist] LOCKPATH
//! zklock break  [--node NAME] [--yes] LOCKPATH
//! zklock revoke [--node NAME] LOCKPATH
//! zklock completions bash|zsh|fish|elvish|powershell
//! zklock man    [--dir DIR]
//! global:       [-c|--connect HOSTS] [--session-timeout DUR] [--connect-timeout DUR] [-v]
//! security:     [--auth-digest USER | --sasl-user USER] [--password-file FILE]
//!               [--acl open|creator|creator-read] [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]
//! ```
//!
//! `--connect` defaults to `$ZKLOCK_CONNECT`, then `127.0.0.1:2181` (a `/chroot` suffix works;
//! `status`, `break` and `revoke` report a missing chroot instead of creating it, and a host that
//! refuses the connection fails at once rather than after `--connect-timeout`). `zklock --help`
//! shows the equivalents of `flock`, `etcdctl lock/elect` and `consul lock` options.
//! Durations are written as `humantime` reads them: `500ms`, `10s`, `90sec`, `5min`, `1h30m`,
//! `1.5s`; a bare number is seconds. Messages quote them as given (`-w 1500ms` times out "still busy
//! after 1500ms"). `zklock help run` has the details.
//!
//! # Completions and man pages
//!
//! Shell completions and man pages are generated from the same definitions as `--help`:
//!
//! ```sh
//! zklock completions bash > ~/.local/share/bash-completion/completions/zklock
//! zklock completions zsh  > "${fpath[1]}/_zklock"            # a directory on zsh's $fpath
//! zklock completions fish > ~/.config/fish/completions/zklock.fish
//! sudo zklock man --dir /usr/local/share/man/man1             # zklock.1, zklock-run.1, ...
//! zklock man | man -l -                                       # read zklock(1) without installing
//! ```
//!
//! # Commands
//!
//! - `run` acquires the lock (waiting as long as it takes, `-n/--nonblock` not at all,
//!   `-w/--wait/--timeout DUR` at most that long; `-E N` makes both conflicts exit N instead of
//!   123 or 124, as `flock -E` does, and print nothing, as `flock` does (`-v` still logs them); `-s/--shared` takes the read side of a read/write lock at
//!   LOCKPATH and `-x/--exclusive` its write side, as `flock -s`/`-x`: a plain `run` is a mutex,
//!   which `-s` runs do not exclude; `--permits N` takes one of N leases of a semaphore, as
//!   `consul lock -n N`, with no fencing token and no revocation), runs the command with `ZKLOCK_LOCK_PATH`,
//!   `ZKLOCK_NODE`, `ZKLOCK_SESSION_ID`, `ZKLOCK_FENCING` (the full token, 32 hex digits) and
//!   `ZKLOCK_FENCING_TOKEN` (the zxid alone, decimal) in its environment, releases
//!   when it exits and exits with its status. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded,
//!   each followed by SIGCONT so that a stopped command acts on it; a forwarded SIGTERM is
//!   followed by SIGKILL after `--kill-grace` if the command still runs (as `timeout -k` does). A
//!   signal while still waiting removes our node from the queue and exits 128+N.
//! - With `-v`, a waiting `run` (or `leader`) says who holds the lock, and says it again when
//!   the holder changes: `zklock: info: waiting for /locks/deploy/prod, held by host=ci-7
//!   pid=31337 thread=main (session 0x100000a1b2c0003, node _c_…-lock-0000000041, in the queue
//!   for 1h12m); 1 waiting ahead of us`, then `... now held by ...`. It reads the queue as
//!   `status` does, once a second, only with `-v` (the library has no public watch on a queue).
//! - If the lock is lost while the command runs, the command's process group gets SIGTERM, then
//!   SIGKILL after `--kill-grace`, and `run` exits 122. Lost means: the session expired, the node
//!   was deleted (`zklock break`; noticed at once through a watch on the node), or the connection
//!   has been down for longer than `--suspended-grace`. That last rule is what keeps a job from
//!   running on without the lock: a silent connection shows up after 2/5 of the session timeout
//!   (and the lease, judged on the supervisor's own thread, runs out at 2/3 even if zklock's
//!   network thread is starved), and with the default graces (1/5 of the session timeout each) the command is dead by 4/5 of
//!   it, before the server can expire the session and let the next holder in. `--on-lost=ignore`
//!   only logs.
//! - `--on-revoke=release` makes the holder honour revocation requests (`zklock revoke`, or
//!   Curator's `Revoker`): the command is stopped as for a lost lock (SIGTERM, SIGKILL after
//!   `--kill-grace`), the lock released, and `run` exits 121. By default (`ignore`) a request is
//!   logged and the lock kept.
//! - The command runs in a process group of its own so that a kill reaches everything it started.
//!   An interactive command that reads the terminal needs `--foreground` (it then stays in
//!   zklock's group, gets Ctrl-C from the terminal directly, and only SIGTERM is forwarded).
//!   Without it, such a command is stopped by the kernel (SIGTTIN) when it reads: zklock warns
//!   ("stopped by SIGTTIN ... run interactive commands with --foreground"), and Ctrl-C, forwarded
//!   and followed by SIGCONT, ends it.
//! - If zklock itself dies while the command runs (`kill -KILL`, the OOM killer, a crash), the
//!   lock goes with its session one session timeout later, so the command must be gone by then.
//!   zklock starts a small guardian process with every command: it holds one end of a socket
//!   pair whose other end only zklock holds, and when that end closes without a goodbye (the
//!   kernel closes it whatever killed zklock), the guardian sends the command's process group
//!   SIGTERM, then SIGKILL after `--kill-grace`. The guardian leads that process group and
//!   ignores the signals zklock forwards, so `kill -9 %1` of zklock's own group does not take it
//!   along; the command itself also gets SIGTERM from the kernel when zklock dies
//!   (`PR_SET_PDEATHSIG`), in case the guardian is gone too. Measured here (`--session-timeout 4s
//!   --kill-grace 500ms`, three runs each): after `kill -KILL` of zklock, a job and the
//!   grandchild it started were gone 15–21 ms later, or 516–534 ms later when both ignore
//!   SIGTERM; the next waiter's command ran 3.8–3.9 s after the kill, once the server had expired
//!   the dead holder's session. What still
//!   escapes: processes that leave the process group (`setsid`, daemons that double-fork), and,
//!   with `--foreground`, everything but the command itself (the guardian then signals the
//!   command's pid only); run such jobs under a cgroup-based supervisor as well (systemd's
//!   `KillMode=control-group`). A `pkill -KILL zklock` kills the guardian with zklock and leaves
//!   only the kernel's SIGTERM to the command itself. When the command exits normally, processes
//!   it left in the background are not stopped.
//! - `leader` joins the election at LOCKPATH (participant id `--id ID`, by default
//!   `host=.. pid=.. thread=main`), waits until it leads, then runs the command like `run` and
//!   steps down when it exits, exiting with its status; the next participant takes over. If
//!   leadership is lost meanwhile (session expired, node deleted — noticed at once, connection
//!   down past `--suspended-grace`) the command is killed as by `run --on-lost=kill` and `leader` exits 122.
//!   Put it under a supervisor (systemd `Restart=always`, a shell loop) on every host to keep one
//!   instance of a service running.
//! - `status` lists holders and waiters in queue order with standing (`holder`, `waiter`), type, age,
//!   session id, node name and owner (`host=.. pid=.. thread=..`, or an election's participant
//!   id); `--json` prints one object for scripts (its keys are in "status --json" below). It reads every layout and tells
//!   them apart by the nodes under LOCKPATH: a mutex (`…-lock-N` nodes, type `exclusive`), a
//!   read/write lock (`__READ__`/`__WRIT__`, types `read`/`write`; the leading readers or the
//!   leading writer hold it), a semaphore (`leases/` and `locks/` children; nodes shown as
//!   `leases/NAME`, type `lease`, and `locks/NAME`, type `queued` for lease takers waiting their
//!   turn) and an election (`…-latch-N`, type `participant`; the holder leads). ZooKeeper does
//!   not store a semaphore's size: with `--permits N` the first N leases show as holders and the
//!   rest as waiting, without it their standing is `unknown`. Control characters in owner data (a
//!   newline) are shown escaped (`\n`), so each node stays on one line.
//! - An empty node is a free lock: "PATH: free (no holder, no waiters)", exit 0. So is a path
//!   with no node ("PATH: free (no holder, no waiters; no node at this path)", exit 0): the
//!   server sweeps a free lock's empty node after about a minute, and a lock must not change its
//!   answer when it does. That also makes a typo look free: `--must-exist` turns a missing node
//!   into "no lock at PATH: no such node", exit 1.
//! - `status` on a node that is no lock ("no lock at PATH: it has N child nodes and no lock
//!   nodes": a parent of locks, `/zookeeper`) says so and exits 1, followed by the locks held or
//!   waited for up to 4 levels below it, one summary line each. What it cannot read below it is
//!   listed, never passed over: a node its ACL does not let us read (a creator-only lock of
//!   another identity: `PATH: not authorized (ACL): READ on PATH refused for identity ...`), or
//!   one whose read failed (a listing too large, the connection lost; a lost connection or
//!   session ends the search there). Then it exits 2, since the locks listed may not be all
//!   there are, and says "readable locks held ..." rather than "no lock is held ...".
//! - `break` shows the holder's node (or `--node NAME`) as "to delete: NODE (...)", asks for
//!   `y` on stdin unless `--yes`, and deletes it only if it is unchanged since shown. Only then
//!   does it say "deleted NODE (...)" and who takes over (the next waiter of a mutex, the next
//!   participant of an election); a refused delete (the ACL, exit 125) or a node that changed
//!   (exit 1) says so and nothing else, and `--yes` prints nothing before the outcome. It works
//!   for every layout; where several nodes hold (readers, leases) it needs `--node`.
//! - `revoke` asks the holder (every holder of a read lock, or `--node NAME`) to release, by
//!   writing Curator's revocation marker into its node (which replaces the owner data `status`
//!   shows). Nothing is forced: `run --on-revoke=release` complies, programs holding a
//!   `revocable()` zklock mutex or read/write lock and Curator holders with a
//!   `RevocationListener` decide, others ignore it. A `run` that ignores a request still notices
//!   a later `break` at once. Semaphores and elections have no revocation protocol.
//!
//! # `status --json`
//!
//! One object on one line, with the same keys whatever LOCKPATH is (a held or a free lock, no
//! node, a semaphore, an election, several recipes' nodes, a parent of locks), so that a script
//! can read `.held` without looking at the exit code first:
//!
//! | key | value |
//! |---|---|
//! | `path` | LOCKPATH |
//! | `exists` | whether there is a node at LOCKPATH |
//! | `lock` | whether LOCKPATH is a lock, held or free (then the exit code is 0): it has lock nodes, or is an empty node, or has no node (unless `--must-exist`) |
//! | `held` | whether something holds it: a mutex's holder, a reader or the writer, a leader, a semaphore's lease (any lease takes a permit, so this holds without `--permits` too) |
//! | `layout` | `"mutex"`, `"rwlock"`, `"semaphore"`, `"election"`, or `null` when there are no lock nodes (a free lock, or no lock); the first of `layouts` |
//! | `layouts` | every recipe whose nodes are at LOCKPATH; more than one is a misuse, each recipe then thinking it holds the path |
//! | `permits` | `--permits` as given, or `null` |
//! | `contenders` | the lock's nodes in queue order, each `{"position", "standing", "node", "sequence", "session_id", "owner", "host", "pid", "thread", "created_ms", "age_ms", "fencing_token", "version", "type", "holds"}`: standing `"holder"`, `"waiter"` or `"unknown"`; host, pid and thread `null` for owners zklock did not write; `holds` `null` where unknown; `fencing_token` the node's creation zxid |
//! | `locks` | for a LOCKPATH that is no lock, the locks held or waited for up to 4 levels below it, each `{"path", "layout", "contenders", "holders", "waiting"}` (counts); otherwise `[]` |
//! | `truncated` | that search stopped early: at its limits (4 levels, 500 nodes listed, 100 locks) or at an error that ends every read (listed in `unreadable`) |
//! | `unreadable` | the nodes below LOCKPATH that search could not read, each `{"path", "error"}` with the error as text (`not authorized (ACL): READ on PATH refused for identity ...`); not empty: exit 2 |
//!
//! ```sh
//! zklock status --json /locks/nightly-report | jq -e .held >/dev/null && echo "running somewhere"
//! zklock status --json /locks | jq -r '.unreadable[] | "\(.path): \(.error)"'
//! ```
//!
//! # Exit codes
//!
//! | exit code | meaning |
//! |---|---|
//! | 0 | success (`run`, `leader`: the command exited 0) |
//! | 1–120 | `run`, `leader`: the command's own status; 128+N if a signal N killed it |
//! | 1 | `break`: nothing deleted (declined, no holder, no lock, node changed or already gone); `revoke`: no holder, or its node already gone; `status`: no lock at PATH (a node that is not a lock; with `--must-exist`, no node) |
//! | 2 | `status`: nodes below PATH could not be read (listed as unreadable): the locks shown may not be all there are |
//! | 121 | `run --on-revoke=release`: revocation was requested; the command was stopped and the lock released |
//! | 122 | `run`: the lock was lost while the command ran; `leader`: leadership was lost; the command was killed |
//! | 123 | `run --nonblock`: the lock is busy (with `-E N`: N, and nothing printed) |
//! | 124 | `run --timeout`: still busy when the timeout ran out (with `-E N`: N, and nothing printed) |
//! | 125 | zklock itself failed: bad usage or input (invalid path, bad duration, unknown node, several holders and no `--node`, `revoke` on a semaphore or election), ZooKeeper unreachable, authentication failed, TLS failed, or the node's ACL does not admit us |
//! | 126 / 127 | `run`, `leader`: the command could not be executed / was not found |
//!
//! A command can itself exit with 121–127; scripts that must tell them apart should keep their
//! commands' codes below 121.
//!
//! # Security: credentials, ACLs, TLS
//!
//! The tool takes the library's security options (see [`security`](super::security)), for every
//! subcommand:
//!
//! - `--auth-digest USER` authenticates with ZooKeeper's `digest` scheme (`addauth digest
//!   USER:PASSWORD`); `--sasl-user USER` with SASL DIGEST-MD5 (feature `sasl`; a wrong password
//!   then fails at once, exit 125 "authentication failed"). The password is read from the first
//!   line of `--password-file FILE` (keep it `chmod 600`; zklock warns otherwise) or from
//!   `$ZKLOCK_PASSWORD`, never from the command line, where `ps` would show it to every user.
//! - `--acl` sets the ACL of the nodes `run` creates: `open` (the default, ZooKeeper's own: anyone
//!   who reaches the ensemble can `break` the lock), `creator` (only sessions authenticated as the
//!   same identity can queue on, release or break it; others cannot even see it), or
//!   `creator-read` (the same, plus read access for everyone so `zklock status` keeps working).
//!   The creator modes need `--auth-digest` or `--sasl-user`. Use the same identity for every
//!   instance of a job (and for the operators who may have to `break` its lock).
//! - `--tls-ca FILE` connects to the servers' `secureClientPort` over TLS, trusting the PEM CA
//!   certificate(s) in FILE; the servers' certificates must name the host of `--connect`.
//!   `--tls-cert FILE --tls-key FILE` add a client certificate for servers with
//!   `ssl.clientAuth=need` (feature `tls`). An untrusted server fails within `--connect-timeout`
//!   with "TLS to ZooKeeper failed".
//!
//! ```sh
//! # a job that only its own identity can break; anyone may look
//! # (/etc/nightly/zk-password: mode 600, owned by the job's user)
//! zklock --auth-digest nightly --password-file /etc/nightly/zk-password --acl creator-read \
//!     run --nonblock /locks/nightly-report -- /opt/app/bin/nightly-report
//! zklock status /locks/nightly-report                            # works for anyone
//! zklock break --yes /locks/nightly-report                       # exit 125: not allowed to delete ...
//!
//! # over TLS with a client certificate
//! zklock --connect zk1:2281,zk2:2281 --tls-ca ca.pem --tls-cert me.pem --tls-key me-key.pem \
//!     status /locks/nightly-report
//! ```
//!
//! To try these locally, `scripts/start-zk.sh --sasl` starts a server that requires SASL (users
//! `alice`/`alice-secret` and `bob`/`bob-secret`), and `scripts/start-zk.sh --tls` one with a TLS
//! port (`ZK_SECURE_PORT`, default `ZK_PORT`+1000) whose CA, client certificate and key it writes
//! to the directory it prints; give each a `ZK_PORT` of its own, e.g.
//! `ZK_PORT=2196 scripts/start-zk.sh --tls` serves TLS on 127.0.0.1:3196 and needs `openssl`.
//!
//! # Recipe: a cron job that runs on one host at a time
//!
//! Install the same crontab on every host; whichever host gets there first runs the job, the
//! others skip it:
//!
//! ```sh
//! # /etc/cron.d/nightly-report
//! ZKLOCK_CONNECT=zk1:2181,zk2:2181,zk3:2181/prod
//! 0 2 * * * app zklock run --nonblock -E 0 /locks/nightly-report -- /opt/app/bin/nightly-report
//! ```
//!
//! Cron mails whatever a job prints, whatever its exit status. With `-E 0` a host that finds
//! the lock taken prints nothing and exits 0, so the hosts that skip the job send no mail, and a
//! wrapper that looks at exit codes sees success (`-E 3`, say, keeps the skip silent but tells
//! it apart). Everything else still prints, so it still mails: the job's own output, zklock's
//! failures (exit 125: ZooKeeper unreachable, not allowed by an ACL) and a lock lost while the
//! job ran (122: the job was killed). The lock guarantees that two runs never
//! overlap, not that the job runs once per night: a host whose clock is late can start it again
//! after the first run finished. If that matters, have the job record the night it completed (in
//! ZooKeeper with `Client::set_data`, or in its own database) and exit early. Pass
//! `$ZKLOCK_FENCING` to stores that can reject writes from an older holder.
//!
//! # Recipe: a deploy lock
//!
//! Deploys of one environment queue behind each other instead of colliding; a pipeline waits its
//! turn for at most 20 minutes:
//!
//! ```sh
//! zklock run --timeout 20m /locks/deploy/prod -- ./deploy.sh prod      # from CI
//! zklock run --timeout 20m --foreground /locks/deploy/prod -- ./deploy.sh prod   # by hand, prompts work
//! ```
//!
//! Exit code 124 means someone else's deploy held the lock for the whole 20 minutes; look at who
//! with `zklock status /locks/deploy/prod`. A deploy that must not be cut short by a brief network
//! problem can raise `--session-timeout` (say `30s`) and `--suspended-grace`; keep
//! `--suspended-grace + --kill-grace` below 3/5 of the session timeout to keep the guarantee
//! that the deploy is stopped before anyone else can take the lock.
//!
//! # Recipe: inspecting a stuck lock during an incident
//!
//! ```console
//! $ zklock status /locks/deploy/prod
//! /locks/deploy/prod: held, 1 waiting
//! POS  ROLE    TYPE       AGE    SESSION            NODE                                                     OWNER
//! 0    holder  exclusive  1h12m  0x100000a1b2c0003  _c_5e0c2a9d-1f7b-4c55-9a3e-2d6f0e8b7c41-lock-0000000041  host=ci-7 pid=31337 thread=main
//! 1    waiter  exclusive  4m05s  0x200000f00d10007  _c_0b6e3f52-8d2a-4e19-b7c4-91a5d3e6f208-lock-0000000042  host=ci-3 pid=2211 thread=main
//! $ zklock status --json /locks/deploy/prod | jq -r '.contenders[0] | "\(.host) \(.pid)"'
//! ci-7 31337
//! ```
//!
//! 1. Look at the holder's process: `ssh ci-7 ps -o pid,stat,etime,args -p 31337`. If it is
//!    working, wait for it. A dead process's node goes away by itself one session timeout after
//!    its host stopped talking to ZooKeeper; a node older than that belongs to a live session.
//! 2. If the command is hung, end it on its host with `kill -TERM 31337` (zklock forwards the
//!    signal and SIGCONT, SIGKILLs the command if it still runs after `--kill-grace`, and releases
//!    the lock). A `kill -KILL` of zklock also ends the command (its guardian does), but the
//!    lock is freed only once zklock's session times out.
//! 3. If the host cannot be reached but its session lives on (the node stays while its age grows
//!    past the session timeout), break the lock:
//!    `zklock break /locks/deploy/prod` shows the node and asks; answer `y`. The waiter acquires.
//!    Should the old holder wake up, a `zklock run` or `zklock leader` finds its node gone at once
//!    and kills its command (exit 122). `break` refuses if the node changed
//!    since it was shown, and `--node NAME` removes a stuck waiter instead. Before breaking a lock whose holder can still
//!    be reached, `zklock revoke /locks/deploy/prod` asks it to let go; holders started with
//!    `--on-revoke=release` stop their command and release (exit 121).
