//! `nemesis run`: inside the private network namespace made by `scripts/nemesis.sh`, start the
//! ensemble and the clients, inject one fault at a time from a seeded schedule, heal, wait for
//! every client to make progress, and finally stop the clients and run the checker.
//!
//! Identities inside the namespace. Server `i` listens on `127.0.0.1<i>:2181` (quorum port
//! 2888, election port 3888) and runs as uid `61010+i`; client `i` runs as uid `61020+i`. The
//! namespace's nftables rewrite the source address of every connection a server or client
//! opens to its own address (`snat` by `meta skuid`), so each TCP connection's conntrack entry
//! names both ends: the originator is `ct reply ip daddr`, the responder `ct original ip daddr`.
//! Fault rules match those two fields, so they cut exactly the links between two groups,
//! whichever side opened the connection, in one direction or both. The harness itself (uid 0)
//! is never rewritten and never matched: it can always ask the servers `srvr`, `cons`, `wchs`.
//!
//! Faults (each healed before the next, and the next one injected only once all three servers
//! are leader or follower again, unless `--stack PERCENT` makes a fault stack on purpose on
//! the one before, which the schedule then says; the schedule is printed with the seed):
//! - `isolate-leader`: the leader cut from the other servers and from every client (drop).
//! - `split`: one server and some clients cut from the other two servers and clients.
//! - `cut-client`: one client cut from the server it is connected to, and from nothing else.
//! - `loss`: random loss in one direction only (nftables `numgen random`), 30/60/90 %.
//! - `latency`: every packet of one client or one server held for 1.2-2x the session timeout
//!   (7 times in 10; otherwise 0.3-0.6x, where the session survives and replies come late), by
//!   iptables-legacy `NFQUEUE` + `nemesis delay` (see delay.rs for why not netem).
//! - `pause-client`: SIGSTOP of a client past its session timeout, then SIGCONT.
//! - `pause-server`: SIGSTOP of a server (the leader half of the time), then SIGCONT.
//! - `kill-server`: SIGKILL of one server (sometimes two: no quorum), restart after 1-5 s.
//!
//! The servers' own health is recorded around every fault (`V` lines of `nemesis.log`): each
//! server's mode and last zxid (`srvr`) and its `currentEpoch`/`acceptedEpoch` files, before
//! the fault, right after the heal, and once the ensemble is whole again. The checker needs
//! them to tell a register that went back because ZooKeeper lost committed transactions
//! (a new epoch, a "Truncating log" in a server log) from a client's lost update.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use anyhow::{bail, Context};
use zklock::{Client, DistributedMutex, DistributedRwLock, Semaphore};

use crate::{
    client_addr, client_uid, connect_string, mono_ns, server_addr, Args, Rng, CLIENT_PORT, LOCKS,
    REGISTERS, SERVERS,
};

mod scenario;

const KINDS: [&str; 8] = [
    "isolate-leader",
    "split",
    "cut-client",
    "loss",
    "latency",
    "pause-client",
    "pause-server",
    "kill-server",
];

/// The NFQUEUE number of the latency fault.
const QUEUE: u16 = 17;

struct Run {
    dir: PathBuf,
    bin: PathBuf,
    rng: Rng,
    seed: u64,
    clients: usize,
    kinds: Vec<&'static str>,
    sabotage: String,
    /// Percent of faults injected right after the previous heal, without waiting for the
    /// ensemble to be whole again (stacked on purpose; 0 by default).
    stack: u64,
    session_ms: u64,
    bound_ns: u64,
    log: File,
    start: u64,
    servers: Vec<Option<Child>>,
    client_procs: Vec<Child>,
    /// What the fault just healed did (packets dropped or delayed), for the log.
    effect: String,
    /// Set when the next fault stacks on purpose: what the schedule says about it.
    stacked_on: Option<String>,
    /// Per client: bytes of its log already read, acquisition stamps seen.
    progress: Vec<(u64, Vec<u64>)>,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let dir = PathBuf::from(args.get("dir")?);
    let seed: u64 = args.num("seed", None)?;
    let duration: u64 = args.num("duration", Some(60))?;
    let clients: usize = args.num("clients", Some(5))?;
    let session_ms: u64 = args.num("session-timeout-ms", Some(3000))?;
    let bound: u64 = args.num("bound", Some(30))?;
    let kinds: Vec<&'static str> = match args.get_or("faults", "all") {
        "all" => KINDS.to_vec(),
        list => list
            .split(',')
            .map(|k| {
                KINDS
                    .iter()
                    .copied()
                    .find(|known| *known == k)
                    .with_context(|| format!("unknown fault {k:?}; known: {}", KINDS.join(",")))
            })
            .collect::<anyhow::Result<_>>()?,
    };
    let sabotage = args.get_or("sabotage", "none").to_owned();
    let stack: u64 = args.num("stack", Some(0))?;
    if !(1..=9).contains(&clients) {
        bail!("--clients must be 1..9 (addresses 127.0.0.21-29)");
    }
    let bin = std::env::current_exe()?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("nemesis.log"))?;
    let mut run = Run {
        dir,
        bin,
        rng: Rng::new(seed),
        seed,
        clients,
        kinds,
        sabotage,
        stack,
        session_ms,
        bound_ns: bound * 1_000_000_000,
        log,
        start: mono_ns(),
        servers: (0..SERVERS).map(|_| None).collect(),
        client_procs: Vec::new(),
        progress: vec![(0, Vec::new()); clients],
        effect: String::new(),
        stacked_on: None,
    };
    let result = match args.get_or("scenario", "none") {
        "none" => run.go(duration),
        "follower-lease" => run.follower_lease(args.num("trials", Some(5))?),
        other => Err(anyhow::anyhow!(
            "unknown scenario {other:?}; known: follower-lease"
        )),
    };
    // Whatever happened: no process of ours outlives the run (nemesis.sh also kills whatever
    // is left in the namespace).
    run.cleanup();
    let code = result?;
    std::process::exit(code);
}

impl Run {
    fn note(&mut self, line: String) {
        let _ = writeln!(self.log, "{line}");
    }

    fn say(&self, what: &str) {
        let secs = (mono_ns() - self.start) as f64 / 1e9;
        println!("{secs:7.1} s  {what}");
        let _ = std::io::stdout().flush();
    }

    fn t_ms(&self, lo: u64, hi: u64) -> (u64, u64) {
        (self.session_ms * lo / 10, self.session_ms * hi / 10)
    }

    fn go(&mut self, duration: u64) -> anyhow::Result<i32> {
        self.note(format!("seed {}", self.seed));
        for i in 1..=SERVERS {
            self.start_server(i)?;
        }
        self.wait_ensemble(Duration::from_secs(90))?;
        self.say(&format!(
            "ensemble serving; faults: {}; sabotage: {}",
            self.kinds.join(","),
            self.sabotage
        ));
        let setup = Client::builder(&connect_string())
            .session_timeout(Duration::from_secs(10))
            .connect()
            .context("connecting to the fresh ensemble")?;
        for register in REGISTERS {
            setup.set_data(register.path, b"0:0:")?;
        }
        drop(setup);

        self.start = mono_ns();
        self.note(format!(
            "S {} clients {} session_ms {} bound_ns {} duration_s {duration}",
            self.start, self.clients, self.session_ms, self.bound_ns
        ));
        for i in 1..=self.clients {
            self.start_client(i)?;
        }
        let warm = self.start;
        // A warm-up that never completes is a failure of the run (the checker says so), not a
        // warning: a rig whose clients never start proves nothing.
        if let Some(waited) = self.wait_progress(warm, Duration::from_secs(60)) {
            self.note(format!("U {} ok {waited}", mono_ns()));
            self.say(&format!(
                "{} clients running; every one acquired within {:.1} s",
                self.clients,
                waited as f64 / 1e9
            ));
        } else {
            self.note(format!("U {} fail 0", mono_ns()));
            self.say("not every client acquired a lock within 60 s of starting: warm-up failed");
        }

        let end = mono_ns() + duration * 1_000_000_000;
        let mut bag: Vec<&str> = Vec::new();
        let mut n = 0;
        let mut stacked = false;
        while mono_ns() < end {
            if !stacked {
                let quiet = self.rng.millis(1000, 3000);
                sleep(quiet.min(Duration::from_nanos(end.saturating_sub(mono_ns()))));
            }
            if mono_ns() >= end {
                break;
            }
            if bag.is_empty() {
                bag = self.kinds.clone();
                self.rng.shuffle(&mut bag);
            }
            let kind = bag.pop().unwrap();
            n += 1;
            self.health("before", n);
            if stacked {
                let modes: Vec<String> = (1..=SERVERS).map(mode).collect();
                self.stacked_on = Some(format!(
                    "[stacked on purpose on fault {}: modes {}] ",
                    n - 1,
                    modes.join(",")
                ));
            }
            self.fault(n, kind)?;
            let healed = mono_ns();
            let effect = std::mem::take(&mut self.effect);
            self.note(format!("H {healed} {n} {kind} {effect}"));
            self.health("heal", n);
            stacked = self.stack > 0 && self.rng.chance(self.stack);
            if stacked {
                continue;
            }
            // The next fault only once all three servers are leader or follower again: a
            // fault on an ensemble still syncing is a different (and, on ZooKeeper 3.8.0, a
            // data-losing) experiment, run only on purpose (--stack).
            if let Err(err) = self.wait_ensemble(Duration::from_secs(60)) {
                self.note(format!("Y {} {n} {err}", mono_ns()));
                self.say(&format!("WARNING: {err}"));
            }
            self.health("whole", n);
            let bound = Duration::from_nanos(self.bound_ns);
            match self.wait_progress(healed, bound) {
                Some(ns) => {
                    self.say(&format!(
                        "healed; every client acquired again within {:.1} s",
                        ns as f64 / 1e9
                    ));
                }
                None => self.say(&format!(
                    "healed; NOT every client acquired again within {} s",
                    bound.as_secs()
                )),
            }
        }

        let stop = mono_ns();
        self.note(format!("Z {stop}"));
        File::create(self.dir.join("stop"))?;
        self.say("stopping clients");
        // Every client idle (session open, no lock held or wanted): what watches are left?
        let deadline = mono_ns() + 60_000_000_000;
        loop {
            let idle = (1..=self.clients).all(|c| {
                std::fs::read_to_string(self.dir.join(format!("c{c}/client.log")))
                    .is_ok_and(|log| log.contains("\nI "))
            });
            if idle || mono_ns() > deadline {
                break;
            }
            sleep(Duration::from_millis(100));
        }
        sleep(Duration::from_secs(1));
        let mut watches = String::new();
        for i in 1..=SERVERS {
            watches += &format!("server {i}\n{}", four(i, "wchc"));
        }
        std::fs::write(self.dir.join("idle-watches"), watches)?;
        // And the lock nodes: with every client idle, any node left is an orphan, whatever
        // its session's fate later.
        std::fs::write(self.dir.join("idle-nodes"), idle_nodes()?)?;
        File::create(self.dir.join("exit"))?;
        for i in 0..self.client_procs.len() {
            let status = loop {
                if let Some(status) = self.client_procs[i].try_wait()? {
                    break status.code().map_or("signal".to_owned(), |c| c.to_string());
                }
                if mono_ns() > deadline {
                    let _ = self.client_procs[i].kill();
                    let _ = self.client_procs[i].wait();
                    break "hung".to_owned();
                }
                sleep(Duration::from_millis(50));
            };
            self.note(format!("Q {} {status}", i + 1));
        }
        self.say("clients stopped; checking");
        let status = Command::new(&self.bin)
            .args(["check", "--dir"])
            .arg(&self.dir)
            .status()
            .context("running the checker")?;
        Ok(status.code().unwrap_or(1))
    }

    fn cleanup(&mut self) {
        for child in &mut self.client_procs {
            // A client left stopped must run again to die of SIGKILL cleanly.
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };
            let _ = child.kill();
            let _ = child.wait();
        }
        for i in 1..=SERVERS {
            self.kill_server(i);
        }
        heal_network();
    }

    // ---------------------------------------------------------------- processes

    fn start_server(&mut self, i: usize) -> anyhow::Result<()> {
        let dir = self.dir.join(format!("s{i}"));
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("server.log"))?;
        let child = Command::new("bash")
            .arg(dir.join("run.sh"))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting server {i}"))?;
        self.note(format!("server {i} pid {} {}", child.id(), mono_ns()));
        self.servers[i - 1] = Some(child);
        Ok(())
    }

    fn kill_server(&mut self, i: usize) {
        if let Some(mut child) = self.servers[i - 1].take() {
            // SAFETY: kill(2) on our own child (a stopped JVM must run to die).
            unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn server_pid(&self, i: usize) -> Option<i32> {
        self.servers[i - 1].as_ref().map(|c| c.id() as i32)
    }

    fn wait_ensemble(&self, limit: Duration) -> anyhow::Result<()> {
        let deadline = mono_ns() + limit.as_nanos() as u64;
        loop {
            let modes: Vec<String> = (1..=SERVERS).map(mode).collect();
            if modes.iter().all(|m| m == "leader" || m == "follower")
                && modes.iter().any(|m| m == "leader")
            {
                return Ok(());
            }
            if mono_ns() > deadline {
                bail!("the ensemble did not serve within {limit:?} (modes {modes:?}); see the servers' server.log");
            }
            sleep(Duration::from_millis(250));
        }
    }

    fn start_client(&mut self, i: usize) -> anyhow::Result<()> {
        let uid = client_uid(i).to_string();
        let seed = Rng::new(self.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).next_u64();
        let err = File::create(self.dir.join(format!("c{i}/stderr")))?;
        let child = Command::new("setpriv")
            .args(["--reuid", &uid, "--regid", &uid, "--clear-groups", "--"])
            .arg(&self.bin)
            .args(["client", "--dir"])
            .arg(&self.dir)
            .args(["--id", &i.to_string(), "--seed", &seed.to_string()])
            .args(["--session-timeout-ms", &self.session_ms.to_string()])
            .args(["--deadline-secs", "7200"])
            .args(["--sabotage", &self.sabotage])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting client {i}"))?;
        self.note(format!("P {i} {} {}", child.id(), mono_ns()));
        self.client_procs.push(child);
        Ok(())
    }

    /// Waits until every client logged an acquisition stamped after `since`; returns how long
    /// the slowest took to its first one, or `None` if `limit` passed first. (For the console;
    /// the checker computes its own figures from the logs.)
    fn wait_progress(&mut self, since: u64, limit: Duration) -> Option<u64> {
        let deadline = mono_ns() + limit.as_nanos() as u64;
        loop {
            for i in 0..self.clients {
                self.read_progress(i);
            }
            let firsts: Vec<Option<u64>> = self
                .progress
                .iter()
                .map(|(_, stamps)| stamps.iter().copied().find(|&t| t > since))
                .collect();
            if firsts.iter().all(Option::is_some) {
                return firsts.into_iter().flatten().max().map(|t| t - since);
            }
            if mono_ns() > deadline {
                return None;
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// Reads the acquisition stamps client `i` logged since the last call.
    fn read_progress(&mut self, i: usize) {
        let path = self.dir.join(format!("c{}/client.log", i + 1));
        let Ok(mut file) = File::open(&path) else {
            return;
        };
        let (offset, stamps) = &mut self.progress[i];
        if file.seek(SeekFrom::Start(*offset)).is_err() {
            return;
        }
        let mut text = String::new();
        if file.read_to_string(&mut text).is_err() {
            return;
        }
        // Only whole lines; a partial last line is read again next time.
        let whole = text.rfind('\n').map_or(0, |p| p + 1);
        for line in text[..whole].lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f.first() == Some(&"A") && f.len() > 5 {
                if let Ok(t) = f[5].parse::<u64>() {
                    stamps.push(t);
                }
            }
        }
        *offset += whole as u64;
    }

    // ---------------------------------------------------------------- faults

    fn fault(&mut self, n: usize, kind: &str) -> anyhow::Result<()> {
        let all_clients: Vec<usize> = (1..=self.clients).collect();
        let t = mono_ns();
        match kind {
            "isolate-leader" => {
                let leader =
                    leader().unwrap_or_else(|| 1 + self.rng.below(SERVERS as u64) as usize);
                let others: Vec<String> = (1..=SERVERS)
                    .filter(|&s| s != leader)
                    .map(server_addr)
                    .chain(all_clients.iter().map(|&c| client_addr(c)))
                    .collect();
                let (lo, hi) = self.t_ms(15, 30);
                let d = self.rng.millis(lo, hi);
                self.begin(
                    n,
                    kind,
                    t,
                    &format!("server {leader} (leader) cut from everyone"),
                    d,
                );
                partition(&[server_addr(leader)], &others)?;
                sleep(d);
                self.heal();
            }
            "split" => {
                // Half the time the minority is a follower together with a client that holds
                // a lock through it: the holder can still reach its server, which answers
                // it until it notices the leader is gone, while the majority expires the
                // holder's session and hands its lock on.
                let mut clients = all_clients.clone();
                self.rng.shuffle(&mut clients);
                let mut holders = self.holds_older_than(500_000_000);
                if holders.is_empty() {
                    holders = self.holders();
                }
                let leader_now = leader();
                let targeted = if self.rng.chance(50) && !holders.is_empty() {
                    let c = holders[self.rng.below(holders.len() as u64) as usize];
                    server_of(c)
                        .filter(|&s| Some(s) != leader_now)
                        .map(|s| (c, s))
                } else {
                    None
                };
                let minority = match targeted {
                    Some((c, s)) => {
                        // The holder goes first, so it lands on the minority side.
                        clients.retain(|&x| x != c);
                        clients.insert(0, c);
                        s
                    }
                    None => 1 + self.rng.below(SERVERS as u64) as usize,
                };
                let k = 1 + self.rng.below(self.clients.max(2) as u64 - 1) as usize;
                let (small, big) = clients.split_at(k.min(clients.len()));
                let a: Vec<String> = std::iter::once(server_addr(minority))
                    .chain(small.iter().map(|&c| client_addr(c)))
                    .collect();
                let b: Vec<String> = (1..=SERVERS)
                    .filter(|&s| s != minority)
                    .map(server_addr)
                    .chain(big.iter().map(|&c| client_addr(c)))
                    .collect();
                let (lo, hi) = self.t_ms(15, 30);
                let d = self.rng.millis(lo, hi);
                self.begin(
                    n,
                    kind,
                    t,
                    &format!(
                        "minority {{server {minority}, clients {small:?}}} | majority {{servers {:?}, clients {big:?}}}{}",
                        (1..=SERVERS).filter(|&s| s != minority).collect::<Vec<_>>(),
                        targeted.map_or(String::new(), |(c, s)| format!(" (holder client {c} with its server {s})"))
                    ),
                    d,
                );
                partition(&a, &b)?;
                sleep(d);
                self.heal();
            }
            "cut-client" => {
                let c = 1 + self.rng.below(self.clients as u64) as usize;
                let s = server_of(c).unwrap_or_else(|| 1 + self.rng.below(SERVERS as u64) as usize);
                let (lo, hi) = self.t_ms(10, 25);
                let d = self.rng.millis(lo, hi);
                self.begin(
                    n,
                    kind,
                    t,
                    &format!("client {c} cut from server {s} only"),
                    d,
                );
                partition(&[client_addr(c)], &[server_addr(s)])?;
                sleep(d);
                self.heal();
            }
            "loss" => {
                let p = [30, 60, 90][self.rng.below(3) as usize];
                let c = 1 + self.rng.below(self.clients as u64) as usize;
                let leader = leader().unwrap_or(1);
                let followers: Vec<String> = (1..=SERVERS)
                    .filter(|&s| s != leader)
                    .map(server_addr)
                    .collect();
                let servers: Vec<String> = (1..=SERVERS).map(server_addr).collect();
                let (what, from, to) = match self.rng.below(4) {
                    0 => (
                        format!("client {c} -> servers"),
                        vec![client_addr(c)],
                        servers,
                    ),
                    1 => (
                        format!("servers -> client {c}"),
                        servers,
                        vec![client_addr(c)],
                    ),
                    2 => (
                        format!("leader {leader} -> followers"),
                        vec![server_addr(leader)],
                        followers,
                    ),
                    _ => (
                        format!("followers -> leader {leader}"),
                        followers,
                        vec![server_addr(leader)],
                    ),
                };
                let d = self.rng.millis(3000, 8000);
                self.begin(n, kind, t, &format!("{p} % loss {what} (one way)"), d);
                one_way_loss(&from, &to, p)?;
                sleep(d);
                self.heal();
            }
            "latency" => {
                // Mostly a spike over the session timeout; sometimes one below it, where
                // replies come late but the session lives (late creates, late acks).
                let (lo, hi) = if self.rng.chance(70) {
                    self.t_ms(12, 20)
                } else {
                    self.t_ms(3, 6)
                };
                let delay = self.rng.millis(lo, hi);
                let d = delay + self.rng.millis(1000, 3000);
                let (what, rules) = if self.rng.chance(60) {
                    let c = 1 + self.rng.below(self.clients as u64) as usize;
                    (format!("client {c}"), latency_rules_client(c))
                } else {
                    let s = 1 + self.rng.below(SERVERS as u64) as usize;
                    (format!("server {s}"), latency_rules_server(s))
                };
                self.begin(
                    n,
                    kind,
                    t,
                    &format!("every packet of {what} held {} ms", delay.as_millis()),
                    d,
                );
                let until_ms = (mono_ns() + d.as_nanos() as u64) / 1_000_000;
                let mut delayer = Command::new(&self.bin)
                    .args(["delay", "--queue", &QUEUE.to_string()])
                    .args(["--delay-ms", &delay.as_millis().to_string()])
                    .args(["--until-ms", &until_ms.to_string()])
                    .stdout(Stdio::piped())
                    .spawn()
                    .context("starting the delayer")?;
                let mut out = delayer.stdout.take().context("the delayer's stdout")?;
                let mut ready = [0u8; 6];
                if out.read_exact(&mut ready).is_err() || &ready != b"bound\n" {
                    let _ = delayer.kill();
                    let _ = delayer.wait();
                    bail!(
                        "the NFQUEUE delayer could not bind its queue (nfnetlink_queue missing?)"
                    );
                }
                for rule in rules {
                    iptables(&rule)?;
                }
                let (now, until) = (mono_ns(), until_ms * 1_000_000);
                if until > now {
                    sleep(Duration::from_nanos(until - now));
                }
                self.heal();
                // Held packets still go out at their time; the delayer exits by itself.
                let limit = mono_ns() + delay.as_nanos() as u64 + 5_000_000_000;
                while delayer.try_wait()?.is_none() && mono_ns() < limit {
                    sleep(Duration::from_millis(50));
                }
                let _ = delayer.kill();
                let _ = delayer.wait();
                let mut report = String::new();
                let _ = out.read_to_string(&mut report);
                self.effect = format!("delayed={}", report.trim());
            }
            "pause-client" => {
                // Mostly a client in the middle of a hold: the pause that matters. Never one
                // that stopped itself (a careless holder): our SIGCONT would end its pause
                // early, and its own would end ours.
                let running: Vec<usize> = (1..=self.clients)
                    .filter(|&c| !stopped(self.client_procs[c - 1].id()))
                    .collect();
                let holders: Vec<usize> = self
                    .holders()
                    .into_iter()
                    .filter(|c| running.contains(c))
                    .collect();
                let c = if !holders.is_empty() && self.rng.chance(70) {
                    holders[self.rng.below(holders.len() as u64) as usize]
                } else if !running.is_empty() {
                    running[self.rng.below(running.len() as u64) as usize]
                } else {
                    1 + self.rng.below(self.clients as u64) as usize
                };
                let pid = self.client_procs[c - 1].id() as i32;
                let (lo, hi) = self.t_ms(13, 25);
                let d = self.rng.millis(lo, hi);
                self.begin(n, kind, t, &format!("SIGSTOP client {c} (pid {pid})"), d);
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                sleep(d);
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            }
            "pause-server" => {
                let s = match leader() {
                    Some(l) if self.rng.chance(50) => l,
                    _ => 1 + self.rng.below(SERVERS as u64) as usize,
                };
                let is_leader = leader() == Some(s);
                let (lo, hi) = self.t_ms(5, 25);
                let d = self.rng.millis(lo, hi);
                let pid = self.server_pid(s).unwrap_or(0);
                self.begin(
                    n,
                    kind,
                    t,
                    &format!(
                        "SIGSTOP server {s}{} (pid {pid})",
                        if is_leader { " (leader)" } else { "" }
                    ),
                    d,
                );
                if pid > 0 {
                    // SAFETY: kill(2) on our own child.
                    unsafe { libc::kill(pid, libc::SIGSTOP) };
                    sleep(d);
                    // SAFETY: as above.
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                }
            }
            _ => {
                // kill-server
                let two = self.rng.chance(25);
                let first = match leader() {
                    Some(l) if self.rng.chance(50) => l,
                    _ => 1 + self.rng.below(SERVERS as u64) as usize,
                };
                let mut victims = vec![first];
                if two {
                    victims.push(1 + (first + self.rng.below(2) as usize) % SERVERS);
                }
                let d = self.rng.millis(1000, 5000);
                self.begin(
                    n,
                    kind,
                    t,
                    &format!("SIGKILL servers {victims:?}, restart after"),
                    d,
                );
                for &s in &victims {
                    self.kill_server(s);
                }
                sleep(d);
                for &s in &victims {
                    self.start_server(s)?;
                }
            }
        }
        Ok(())
    }

    /// The clients whose log ends inside a hold (acquired, not yet released).
    fn holders(&self) -> Vec<usize> {
        self.holds_older_than(0)
    }

    /// The clients inside a hold that began at least `ns` ago (a long hold, likely).
    fn holds_older_than(&self, ns: u64) -> Vec<usize> {
        let now = mono_ns();
        (1..=self.clients)
            .filter(|c| {
                let log = std::fs::read_to_string(self.dir.join(format!("c{c}/client.log")))
                    .unwrap_or_default();
                let Some(at) = log.rfind("\nA ") else {
                    return false;
                };
                let acquired: u64 = log[at + 1..]
                    .split(' ')
                    .nth(5)
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(now);
                log.rfind("\nR ").is_none_or(|r| r < at) && now - acquired.min(now) >= ns
            })
            .collect()
    }

    /// Removes the fault's rules, noting how many packets they dropped.
    fn heal(&mut self) {
        let listing = Command::new("nft")
            .args(["list", "chain", "ip", "nemesis", "faults"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let dropped: u64 = listing
            .split("counter packets ")
            .skip(1)
            .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
            .sum();
        self.effect = format!("dropped={dropped}");
        heal_network();
    }

    /// Records each server's mode, last zxid and epochs (`V` lines): around every fault.
    fn health(&mut self, phase: &str, n: usize) {
        for i in 1..=SERVERS {
            let srvr = four(i, "srvr");
            let field = |name: &str| {
                srvr.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map_or("-".to_owned(), |v| v.trim().to_owned())
            };
            let epoch = |file: &str| {
                std::fs::read_to_string(self.dir.join(format!("s{i}/data/version-2/{file}")))
                    .map_or("-".to_owned(), |v| v.trim().to_owned())
            };
            let line = format!(
                "V {} {phase} {n} {i} {} {} {} {}",
                mono_ns(),
                field("Mode:"),
                field("Zxid:"),
                epoch("currentEpoch"),
                epoch("acceptedEpoch")
            );
            self.note(line);
        }
    }

    fn begin(&mut self, n: usize, kind: &str, t: u64, what: &str, d: Duration) {
        let what = format!("{}{what}", self.stacked_on.take().unwrap_or_default());
        // Who was connected where, and the wall clock, to read the servers' logs against.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let links: Vec<String> = (1..=SERVERS)
            .flat_map(|s| {
                let cons = four(s, "cons");
                (1..=self.clients)
                    .filter(move |&c| cons.contains(&format!("/{}:", client_addr(c))))
                    .map(move |c| format!("c{c}=s{s}"))
            })
            .collect();
        self.note(format!(
            "N {} wall_ms {wall} links {}",
            mono_ns(),
            links.join(" ")
        ));
        self.note(format!("F {t} {n} {kind} {what}"));
        self.effect.clear();
        self.say(&format!(
            "fault {n} {kind}: {what} for {:.1} s",
            d.as_secs_f64()
        ));
    }
}

/// Is process `pid` stopped (state `T` in /proc/<pid>/stat)?
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the command name, which is in parentheses.
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().next().map(|s| s == "T")
        })
        .unwrap_or(false)
}

// ---------------------------------------------------------------- network

fn set(addrs: &[String]) -> String {
    format!("{{ {} }}", addrs.join(", "))
}

fn nft(rules: &str) -> anyhow::Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .context("running nft")?;
    child.stdin.take().unwrap().write_all(rules.as_bytes())?;
    let status = child.wait()?;
    if !status.success() {
        bail!("nft refused:\n{rules}");
    }
    Ok(())
}

/// Drops every packet between the groups `a` and `b`, in both directions, whoever opened the
/// connection.
fn partition(a: &[String], b: &[String]) -> anyhow::Result<()> {
    let (a, b) = (set(a), set(b));
    nft(&format!(
        "add rule ip nemesis faults ct reply ip daddr {a} ct original ip daddr {b} counter drop\n\
         add rule ip nemesis faults ct reply ip daddr {b} ct original ip daddr {a} counter drop\n"
    ))
}

/// Drops `percent` % of the packets sent from group `from` to group `to`, not the other way.
fn one_way_loss(from: &[String], to: &[String], percent: u32) -> anyhow::Result<()> {
    let (from, to) = (set(from), set(to));
    nft(&format!(
        "add rule ip nemesis faults ct direction original ct reply ip daddr {from} ct original ip daddr {to} numgen random mod 100 < {percent} counter drop\n\
         add rule ip nemesis faults ct direction reply ct original ip daddr {from} ct reply ip daddr {to} numgen random mod 100 < {percent} counter drop\n"
    ))
}

fn latency_rules_client(c: usize) -> Vec<String> {
    vec![
        format!("-m owner --uid-owner {}", client_uid(c)),
        format!("-m conntrack --ctdir REPLY --ctrepldst {}", client_addr(c)),
    ]
}

fn latency_rules_server(s: usize) -> Vec<String> {
    vec![
        format!("-m owner --uid-owner {}", crate::server_uid(s)),
        format!(
            "-m conntrack --ctdir ORIGINAL --ctorigdst {}",
            server_addr(s)
        ),
        format!("-m conntrack --ctdir REPLY --ctrepldst {}", server_addr(s)),
    ]
}

fn iptables(matching: &str) -> anyhow::Result<()> {
    let mut args: Vec<&str> = vec!["-t", "mangle", "-A", "POSTROUTING"];
    args.extend(matching.split(' '));
    let queue = QUEUE.to_string();
    args.extend(["-j", "NFQUEUE", "--queue-num", &queue, "--queue-bypass"]);
    let status = Command::new("iptables-legacy").args(&args).status()?;
    if !status.success() {
        bail!("iptables-legacy {args:?} failed");
    }
    Ok(())
}

/// Removes every fault rule (nftables and iptables); the base rules (snat) stay.
fn heal_network() {
    let _ = Command::new("nft")
        .args(["flush", "chain", "ip", "nemesis", "faults"])
        .status();
    let _ = Command::new("iptables-legacy")
        .args(["-t", "mangle", "-F", "POSTROUTING"])
        .stderr(Stdio::null())
        .status();
}

/// Every lock node under the workload's lock paths, one per line.
fn idle_nodes() -> anyhow::Result<String> {
    let observer = Client::builder(&connect_string())
        .session_timeout(Duration::from_secs(10))
        .connect()?;
    let mut out = String::new();
    for (path, c) in lock_nodes(&observer)? {
        out += &format!(
            "{path}/{} session {:#x} owner {}\n",
            c.node_name, c.session_id, c.owner
        );
    }
    Ok(out)
}

/// Every node under the locks of the workload: (the directory it is in, the node).
pub fn lock_nodes(observer: &Client) -> anyhow::Result<Vec<(String, zklock::inspect::Contender)>> {
    let mut out = Vec::new();
    for lock in LOCKS {
        let lists = match lock.name {
            "mutex" => vec![(
                lock.path.to_owned(),
                DistributedMutex::new(observer, lock.path)?.contenders()?,
            )],
            "rw" => vec![(
                lock.path.to_owned(),
                DistributedRwLock::new(observer, lock.path)?.contenders()?,
            )],
            _ => {
                let gate = format!("{}/locks", lock.path);
                vec![
                    (
                        gate.clone(),
                        DistributedMutex::new(observer, &gate)?.contenders()?,
                    ),
                    (
                        format!("{}/leases", lock.path),
                        Semaphore::new(observer, lock.path, lock.permits)?.contenders()?,
                    ),
                ]
            }
        };
        for (path, nodes) in lists {
            out.extend(nodes.into_iter().map(|c| (path.clone(), c)));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- four-letter words

/// Sends a four-letter word to server `i` and returns the answer (empty if none in time).
pub fn four(i: usize, word: &str) -> String {
    let addr: SocketAddr = format!("{}:{CLIENT_PORT}", server_addr(i)).parse().unwrap();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(1000)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(2000)));
    let _ = s.set_write_timeout(Some(Duration::from_millis(1000)));
    if s.write_all(word.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn mode(i: usize) -> String {
    four(i, "srvr")
        .lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .unwrap_or("")
        .trim()
        .to_owned()
}

fn leader() -> Option<usize> {
    (1..=SERVERS).find(|&i| mode(i) == "leader")
}

/// The server client `c` is connected to, from the servers' `cons` (client addresses are
/// rewritten to `127.0.0.2<c>`).
fn server_of(c: usize) -> Option<usize> {
    let needle = format!("/{}:", client_addr(c));
    (1..=SERVERS).find(|&i| four(i, "cons").contains(&needle))
}
