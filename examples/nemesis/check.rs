//! `nemesis check`: the independent checker. It reads the clients' raw facts
//! (`<dir>/c<i>/client.log`), the fault schedule (`<dir>/nemesis.log`) and, afterwards, the
//! servers' state, and judges; nothing the clients concluded is taken on trust.
//!
//! 1. Overlaps. A hold's belief interval runs from its acquisition stamp (taken after
//!    `lock()` returned) to the stamp of its last `is_held() == true` answer (stamps are taken
//!    before each call, so a frozen process's belief after resuming counts from its resume;
//!    clients ask right before every release, so a belief that lasted to the release shows).
//!    A hold that never got a `true` has no belief interval. Per lock: mutex holds pairwise
//!    disjoint; a write hold disjoint from every other hold of the read/write lock; at most
//!    `PERMITS` semaphore holds at any instant.
//! 2. The registers. Every fenced write stores `"<token>:<value>"` with value = read + 1. Acked
//!    writes must produce distinct values, none above the final value (else an update was
//!    lost), and every value up to the final one must come from an acked or unknown-outcome
//!    write (else an increment nobody accounts for was applied). Stale writes: an acked write
//!    sent after a holder with a higher token of the same lock had acquired (that holder
//!    could only acquire once our node was gone, so the fence had to refuse), and, along the
//!    chain of values, a writer token lower than the one before it.
//! 3. Fencing tokens: strictly increasing per lock along non-overlapping belief intervals;
//!    never shared by two holds.
//! 4. Progress: after each heal, the time until each client's next acquisition; over
//!    `--bound` seconds (default 30) is a violation. The worst is reported.
//! 5. Leftovers: no lock node and no watch (`wchc`) while every client is idle with its session
//!    still open (recorded by the orchestrator), and once the clients have exited no lock node
//!    under any lock path, no watch on any server (`wchs`), every client exited 0.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::thread::sleep;
use std::time::Duration;

use anyhow::Context;
use zklock::{Client, DistributedMutex, DistributedRwLock, Semaphore};

use crate::orchestrate::four;
use crate::{
    connect_string, mono_ns, Args, MUTEX, PERMITS, REG_MUTEX, REG_RW, RWLOCK, SEMAPHORE, SERVERS,
};

#[derive(Debug, Clone)]
struct Write {
    register: String,
    t_send: u64,
    token: i64,
    old: u64,
    outcome: String,
}

#[derive(Debug, Clone)]
struct Hold {
    client: usize,
    h: u64,
    lock: String,
    mode: String,
    t_call: u64,
    t_acq: u64,
    token: i64,
    session: String,
    checks: Vec<(u64, bool)>,
    writes: Vec<Write>,
}

impl Hold {
    fn belief(&self) -> Option<(u64, u64)> {
        let last_true = self.checks.iter().filter(|c| c.1).map(|c| c.0).max()?;
        Some((self.t_acq, last_true.max(self.t_acq)))
    }

    fn exclusive(&self) -> bool {
        self.mode == "x" || self.mode == "w"
    }

    fn name(&self, start: u64) -> String {
        let rel = |t: u64| (t as f64 - start as f64) / 1e9;
        let (b0, b1) = self
            .belief()
            .map_or((f64::NAN, f64::NAN), |(a, b)| (rel(a), rel(b)));
        format!(
            "client {} hold {} ({} {}, token {:#x}, session {}, acquired {:.3} s, believed {:.3}..{:.3} s)",
            self.client, self.h, self.lock, self.mode, self.token, self.session, rel(self.t_acq), b0, b1
        )
    }
}

struct Fault {
    n: usize,
    kind: String,
    what: String,
    start: u64,
    heal: Option<u64>,
    /// What the nemesis saw it do: packets dropped or delayed.
    effect: String,
}

#[derive(Default)]
struct Verdict {
    overlaps: usize,
    lost: usize,
    stale: usize,
    tokens: usize,
    progress: usize,
    leftovers: usize,
    crashes: usize,
    max_unavail: u64,
}

/// What the servers hold once every client has exited: gathered from the ensemble (and saved
/// to `<dir>/server-state`), or read back from such a file with `--state FILE`, which re-runs
/// the analysis offline (e.g. on the logs of a failed run).
#[derive(Default)]
struct ServerState {
    registers: BTreeMap<String, String>,
    nodes: Vec<String>,
    /// Per server: `Total watches` from `wchs`, or `None` if it did not answer.
    watches: Vec<(usize, Option<u64>, String)>,
}

impl ServerState {
    fn gather(connect: &str, session_ms: u64) -> anyhow::Result<ServerState> {
        let observer = connect_observer(connect)?;
        let mut state = ServerState::default();
        for register in [REG_MUTEX, REG_RW] {
            let data = observer.get_data(register)?.unwrap_or_default();
            state.registers.insert(
                register.to_owned(),
                String::from_utf8_lossy(&data).into_owned(),
            );
        }
        state.nodes = leftover_nodes(&observer, session_ms)?;
        // Our own session must be gone before the watches are counted.
        drop(observer);
        sleep(Duration::from_millis(500));
        for i in 1..=SERVERS {
            let wchs = four(i, "wchs");
            let watches = wchs
                .lines()
                .find_map(|l| l.strip_prefix("Total watches:"))
                .and_then(|n| n.trim().parse::<u64>().ok());
            let detail = match watches {
                Some(0) => String::new(),
                _ => four(i, "wchc").replace('\n', " | "),
            };
            state.watches.push((i, watches, detail));
        }
        Ok(state)
    }

    fn save(&self, path: &Path) -> anyhow::Result<()> {
        let mut out = String::new();
        for (register, value) in &self.registers {
            out += &format!("register {register} {value}\n");
        }
        for node in &self.nodes {
            out += &format!("node {node}\n");
        }
        for (i, watches, detail) in &self.watches {
            let n = watches.map_or("none".to_owned(), |n| n.to_string());
            out += &format!("watches {i} {n} {detail}\n");
        }
        Ok(std::fs::write(path, out)?)
    }

    fn load(path: &Path) -> anyhow::Result<ServerState> {
        let mut state = ServerState::default();
        for line in std::fs::read_to_string(path)?.lines() {
            let f: Vec<&str> = line.splitn(4, ' ').collect();
            match f[0] {
                "register" if f.len() >= 3 => {
                    state.registers.insert(f[1].to_owned(), f[2].to_owned());
                }
                "node" => state.nodes.push(line[5..].to_owned()),
                "watches" if f.len() >= 3 => state.watches.push((
                    f[1].parse().unwrap_or(0),
                    f[2].parse().ok(),
                    f.get(3).unwrap_or(&"").to_string(),
                )),
                _ => {}
            }
        }
        Ok(state)
    }
}

fn parse_log(path: &Path, client: usize, holds: &mut Vec<Hold>) -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    let mut by_h: HashMap<u64, usize> = HashMap::new();
    let (mut first, mut exit) = (0, 0);
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match f[0] {
            "B" => first = num(1),
            "X" => exit = num(1),
            "A" if f.len() >= 8 => {
                by_h.insert(num(1), holds.len());
                holds.push(Hold {
                    client,
                    h: num(1),
                    lock: f[2].to_owned(),
                    mode: f[3].to_owned(),
                    t_call: num(4),
                    t_acq: num(5),
                    token: f[6].parse().unwrap_or(0),
                    session: f[7].to_owned(),
                    checks: Vec::new(),
                    writes: Vec::new(),
                });
            }
            "C" if f.len() >= 4 => {
                if let Some(&i) = by_h.get(&num(1)) {
                    holds[i].checks.push((num(2), f[3] == "1"));
                }
            }
            "W" if f.len() >= 8 => {
                if let Some(&i) = by_h.get(&num(1)) {
                    holds[i].writes.push(Write {
                        register: f[2].to_owned(),
                        t_send: num(3),
                        token: f[5].parse().unwrap_or(0),
                        old: num(6),
                        outcome: f[7].to_owned(),
                    });
                }
            }
            _ => {}
        }
    }
    Ok((first, exit))
}

pub fn run(args: &Args) -> anyhow::Result<bool> {
    let dir = Path::new(args.get("dir")?);
    let connect = args.get_or("connect", "").to_owned();
    let connect = if connect.is_empty() {
        connect_string()
    } else {
        connect
    };
    let nemesis = std::fs::read_to_string(dir.join("nemesis.log"))?;
    let mut start = 0;
    let mut stop = 0;
    let mut clients = 0;
    let mut session_ms = 3000;
    let mut bound_ns: u64 = args.num::<u64>("bound", Some(30))? * 1_000_000_000;
    let mut faults: Vec<Fault> = Vec::new();
    let mut exits: BTreeMap<usize, String> = BTreeMap::new();
    for line in nemesis.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match f[0] {
            "S" => {
                start = num(1);
                clients = num(3) as usize;
                session_ms = num(5);
                if args.get("bound").is_err() && num(7) > 0 {
                    bound_ns = num(7);
                }
            }
            "F" => faults.push(Fault {
                n: num(2) as usize,
                kind: f[3].to_owned(),
                what: f[4..].join(" "),
                start: num(1),
                heal: None,
                effect: String::new(),
            }),
            "H" => {
                if let Some(fault) = faults.iter_mut().find(|x| x.n == num(2) as usize) {
                    fault.heal = Some(num(1));
                    fault.effect = f.get(4).unwrap_or(&"").to_string();
                }
            }
            "Z" => stop = num(1),
            "Q" => {
                exits.insert(num(1) as usize, f.get(2).unwrap_or(&"?").to_string());
            }
            _ => {}
        }
    }
    let rel = |t: u64| (t as f64 - start as f64) / 1e9;
    let mut holds = Vec::new();
    // When each client stopped trying (its exit stamp, else the stop of the run).
    let mut exit_stamp: BTreeMap<usize, u64> = BTreeMap::new();
    for c in 1..=clients {
        let (_, exit) = parse_log(&dir.join(format!("c{c}/client.log")), c, &mut holds)?;
        exit_stamp.insert(c, if exit > 0 { exit } else { stop });
    }
    let state = match args.get("state") {
        Ok(file) => ServerState::load(Path::new(file))?,
        Err(_) => {
            let state = ServerState::gather(&connect, session_ms)?;
            state.save(&dir.join("server-state"))?;
            state
        }
    };
    let mut v = Verdict::default();
    println!(
        "check: {} clients, {} acquisitions, {} faults, session timeout {} ms",
        clients,
        holds.len(),
        faults.len(),
        session_ms
    );

    // ------------------------------------------------------------ 1. overlaps
    let mut by_lock: BTreeMap<String, Vec<&Hold>> = BTreeMap::new();
    for h in &holds {
        by_lock.entry(h.lock.clone()).or_default().push(h);
    }
    let mut never_believed = 0;
    for (lock, list) in &by_lock {
        let mut believed: Vec<(&Hold, (u64, u64))> = list
            .iter()
            .filter_map(|h| h.belief().map(|b| (*h, b)))
            .collect();
        never_believed += list.len() - believed.len();
        believed.sort_by_key(|(_, b)| b.0);
        if lock == "sem" {
            let mut events: Vec<(u64, i32, &Hold)> = Vec::new();
            for (h, (a, b)) in &believed {
                events.push((*a, 1, h));
                events.push((*b, -1, h));
            }
            events.sort_by_key(|e| (e.0, e.1));
            let mut inside: Vec<&Hold> = Vec::new();
            for (_, delta, h) in events {
                if delta > 0 {
                    inside.push(h);
                    if inside.len() > PERMITS {
                        v.overlaps += 1;
                        println!(
                            "VIOLATION overlap: {} semaphore holders believed at once:",
                            inside.len()
                        );
                        for x in &inside {
                            println!("    {}", x.name(start));
                        }
                    }
                } else {
                    inside.retain(|x| !(x.client == h.client && x.h == h.h));
                }
            }
            continue;
        }
        for i in 0..believed.len() {
            let (a, (_, a_end)) = believed[i];
            for &(b, (b_start, _)) in &believed[i + 1..] {
                if b_start >= a_end {
                    break;
                }
                if a.exclusive() || b.exclusive() {
                    v.overlaps += 1;
                    println!(
                        "VIOLATION overlap on {lock}:\n    {}\n    {}",
                        a.name(start),
                        b.name(start)
                    );
                }
            }
        }
    }

    // ------------------------------------------------------------ 3. fencing tokens
    for (lock, list) in &by_lock {
        if lock == "sem" {
            continue;
        }
        let mut seen: HashMap<i64, &Hold> = HashMap::new();
        for h in list {
            if let Some(other) = seen.insert(h.token, h) {
                v.tokens += 1;
                println!(
                    "VIOLATION token shared by two holds:\n    {}\n    {}",
                    other.name(start),
                    h.name(start)
                );
            }
        }
        let mut believed: Vec<(&Hold, (u64, u64))> = list
            .iter()
            .filter_map(|h| h.belief().map(|b| (*h, b)))
            .collect();
        believed.sort_by_key(|(_, b)| b.0);
        for i in 0..believed.len() {
            let (a, (_, a_end)) = believed[i];
            for &(b, (b_start, _)) in &believed[i + 1..] {
                if b_start > a_end && (a.exclusive() || b.exclusive()) && b.token <= a.token {
                    v.tokens += 1;
                    println!(
                        "VIOLATION token order on {lock}: a later hold has a lower token:\n    {}\n    {}",
                        a.name(start),
                        b.name(start)
                    );
                }
            }
        }
    }

    // ------------------------------------------------------------ 2. registers
    let mut write_counts: BTreeMap<String, usize> = BTreeMap::new();
    for (register, lock) in [(REG_MUTEX, "mutex"), (REG_RW, "rw")] {
        let text = state.registers.get(register).cloned().unwrap_or_default();
        let (final_token, final_value) = text
            .split_once(':')
            .and_then(|(t, v)| Some((t.parse::<i64>().ok()?, v.parse::<u64>().ok()?)))
            .with_context(|| format!("register {register} holds {text:?}"))?;
        let writes: Vec<(&Hold, &Write)> = holds
            .iter()
            .flat_map(|h| h.writes.iter().map(move |w| (h, w)))
            .filter(|(_, w)| w.register == register)
            .collect();
        let count = |o: &str| writes.iter().filter(|(_, w)| w.outcome == o).count();
        let (acked, unknown, refused, notsent) = (
            count("acked"),
            count("unknown"),
            count("refused"),
            count("notsent"),
        );
        let errors = writes.len() - acked - unknown - refused - notsent;
        println!(
            "register {register}: final {final_value} (token {final_token:#x}); writes: {acked} acked, {unknown} unknown ({} of them applied), {refused} refused by the fence, {notsent} not sent, {errors} other errors",
            final_value as i64 - acked as i64
        );
        *write_counts.entry("acked".into()).or_default() += acked;
        *write_counts.entry("refused".into()).or_default() += refused;
        *write_counts.entry("unknown".into()).or_default() += unknown;
        let mut by_value: BTreeMap<u64, Vec<(&Hold, &Write)>> = BTreeMap::new();
        for &(h, w) in &writes {
            by_value.entry(w.old + 1).or_default().push((h, w));
        }
        for (value, ws) in &by_value {
            let acked: Vec<_> = ws.iter().filter(|(_, w)| w.outcome == "acked").collect();
            if acked.len() > 1 {
                v.lost += acked.len() - 1;
                println!(
                    "VIOLATION lost update: {} acked writes of value {value} to {register}:",
                    acked.len()
                );
                for (h, _) in &acked {
                    println!("    {}", h.name(start));
                }
            }
            if *value > final_value && !acked.is_empty() {
                v.lost += acked.len();
                println!(
                    "VIOLATION lost update: acked write of value {value} to {register}, final value {final_value}: {}",
                    acked[0].0.name(start)
                );
            }
        }
        // The chain of values 1..=final: each from an acked or unknown-outcome write.
        let mut previous: Option<(u64, i64)> = None;
        for value in 1..=final_value {
            let ws = by_value.get(&value).cloned().unwrap_or_default();
            let acked: Vec<_> = ws.iter().filter(|(_, w)| w.outcome == "acked").collect();
            let unknown: Vec<_> = ws.iter().filter(|(_, w)| w.outcome == "unknown").collect();
            let writer = match (acked.len(), unknown.len()) {
                (1, _) => Some(acked[0].1.token),
                (0, 1) => Some(unknown[0].1.token),
                (0, 0) => {
                    let refused = ws.iter().find(|(_, w)| w.outcome == "refused");
                    if let Some((h, _)) = refused {
                        v.stale += 1;
                        println!("VIOLATION stale write accepted: value {value} of {register} can only come from a write the fence refused: {}", h.name(start));
                    } else {
                        v.lost += 1;
                        println!(
                            "VIOLATION unexplained increment: value {value} of {register} was written by no acked or unknown-outcome write (candidates: {:?})",
                            ws.iter().map(|(h, w)| format!("{} -> {}", h.name(start), w.outcome)).collect::<Vec<_>>()
                        );
                    }
                    None
                }
                _ => None,
            };
            if let (Some(token), Some((pv, pt))) = (writer, previous) {
                if pv + 1 == value && token < pt {
                    v.stale += 1;
                    println!("VIOLATION stale write accepted: value {value} of {register} written with token {token:#x} after value {pv} with token {pt:#x}");
                }
            }
            previous = writer.map(|t| (value, t)).or(previous);
        }
        if let Some((pv, pt)) = previous {
            if pv == final_value && pt != final_token {
                v.stale += 1;
                println!("VIOLATION register {register} holds token {final_token:#x} but its last write came from token {pt:#x}");
            }
        }
        // An acked write sent after a newer holder of the same lock had acquired.
        let lock_holds: Vec<&Hold> = holds.iter().filter(|h| h.lock == lock).collect();
        for &(h, w) in writes.iter().filter(|(_, w)| w.outcome == "acked") {
            if let Some(newer) = lock_holds
                .iter()
                .find(|n| n.token > w.token && n.t_acq < w.t_send)
            {
                v.stale += 1;
                println!(
                    "VIOLATION stale write accepted: {register} write sent at {:.3} s by\n    {}\n  after a newer holder acquired:\n    {}",
                    rel(w.t_send),
                    h.name(start),
                    newer.name(start)
                );
            }
        }
    }

    // ------------------------------------------------------------ 4. progress
    // Per kind: (recovery, acquisitions during, longest gap, acquisition latencies during).
    type Row = (u64, usize, u64, Vec<u64>);
    let mut per_kind: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    println!("faults (time from the start of the clients; recovery = heal to every client's next acquisition):");
    for fault in &faults {
        let Some(heal) = fault.heal else { continue };
        let mut worst = 0;
        let mut censored = false;
        for c in 1..=clients {
            let next = holds
                .iter()
                .filter(|h| h.client == c && h.t_acq > heal)
                .map(|h| h.t_acq)
                .min();
            match next {
                Some(t) => worst = worst.max(t - heal),
                None => {
                    let waited = exit_stamp[&c].saturating_sub(heal);
                    if waited >= bound_ns {
                        v.progress += 1;
                        worst = worst.max(waited);
                        println!(
                            "VIOLATION no progress: client {c} did not acquire in the {:.1} s between heal {} ({}) and its exit",
                            waited as f64 / 1e9,
                            fault.n,
                            fault.kind
                        );
                    } else {
                        censored = true;
                    }
                }
            }
        }
        if worst > bound_ns {
            v.progress += 1;
            println!(
                "VIOLATION slow progress: a client took {:.1} s after heal {} to acquire (bound {} s)",
                worst as f64 / 1e9,
                fault.n,
                bound_ns / 1_000_000_000
            );
        }
        v.max_unavail = v.max_unavail.max(worst);
        let during = holds
            .iter()
            .filter(|h| h.t_acq >= fault.start && h.t_acq <= heal)
            .count();
        // Longest time without any acquisition, from the fault to every client's recovery.
        let mut stamps: Vec<u64> = holds
            .iter()
            .map(|h| h.t_acq)
            .filter(|&t| t >= fault.start && t <= heal + worst)
            .collect();
        stamps.push(fault.start);
        stamps.push(heal + worst);
        stamps.sort_unstable();
        let gap = stamps.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let latencies: Vec<u64> = holds
            .iter()
            .filter(|h| h.t_acq >= fault.start && h.t_acq <= heal)
            .map(|h| h.t_acq - h.t_call)
            .collect();
        per_kind
            .entry(fault.kind.clone())
            .or_default()
            .push((worst, during, gap, latencies));
        println!(
            "  {:6.1} s  fault {:2} {:14} {:5.1} s  {:4} acquisitions during, longest gap {:5.1} s, recovery {:5.1} s{}  [{}; {}]",
            rel(fault.start),
            fault.n,
            fault.kind,
            (heal - fault.start) as f64 / 1e9,
            during,
            gap as f64 / 1e9,
            worst as f64 / 1e9,
            if censored { " (run ended first)" } else { "" },
            fault.what,
            fault.effect
        );
    }
    println!("per fault kind: count | recovery after heal mean / max | longest gap without any acquisition, mean / max | acquisitions/s during | acquisition latency during, median / max:");
    let secs_in = |kind: &str| -> f64 {
        faults
            .iter()
            .filter(|f| f.kind == kind)
            .filter_map(|f| Some((f.heal? - f.start) as f64 / 1e9))
            .sum()
    };
    for (kind, rows) in &per_kind {
        let n = rows.len() as f64;
        let mean = |f: &dyn Fn(&Row) -> u64| rows.iter().map(f).sum::<u64>() as f64 / n / 1e9;
        let max = |f: &dyn Fn(&Row) -> u64| rows.iter().map(f).max().unwrap_or(0) as f64 / 1e9;
        let mut lat: Vec<u64> = rows.iter().flat_map(|r| r.3.iter().copied()).collect();
        lat.sort_unstable();
        let median = lat.get(lat.len() / 2).map_or(f64::NAN, |&l| l as f64 / 1e6);
        let worst = lat.last().map_or(f64::NAN, |&l| l as f64 / 1e6);
        let acquired: usize = rows.iter().map(|r| r.1).sum();
        println!(
            "  {kind:14} {:3} | {:5.1} / {:5.1} s | {:5.1} / {:5.1} s | {:5.1} | {median:6.0} / {worst:6.0} ms",
            rows.len(),
            mean(&|r| r.0),
            max(&|r| r.0),
            mean(&|r| r.2),
            max(&|r| r.2),
            acquired as f64 / secs_in(kind).max(0.001),
        );
    }
    // The same outside faults, for comparison.
    let calm: Vec<u64> = holds
        .iter()
        .filter(|h| {
            !faults
                .iter()
                .any(|f| h.t_acq >= f.start && h.t_acq <= f.heal.unwrap_or(u64::MAX))
        })
        .map(|h| h.t_acq - h.t_call)
        .collect();
    if !calm.is_empty() {
        let mut calm = calm;
        calm.sort_unstable();
        let calm_secs = (stop.max(start) - start) as f64 / 1e9
            - faults
                .iter()
                .filter_map(|f| Some((f.heal? - f.start) as f64 / 1e9))
                .sum::<f64>();
        println!(
            "  {:14} {:>3} | {:>15} | {:>15} | {:5.1} | {:6.0} / {:6.0} ms",
            "between faults",
            "",
            "",
            "",
            calm.len() as f64 / calm_secs.max(0.001),
            calm[calm.len() / 2] as f64 / 1e6,
            *calm.last().unwrap() as f64 / 1e6
        );
    }
    let mut latencies: Vec<u64> = holds.iter().map(|h| h.t_acq - h.t_call).collect();
    latencies.sort_unstable();
    if !latencies.is_empty() {
        let q = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1e6;
        println!(
            "acquisition latency (call to return, all recipes, contention included): median {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            q(0.5),
            q(0.99),
            q(1.0)
        );
    }
    println!(
        "holds: {} acquired, {} never believed (first is_held() already false); fenced writes: {} acked, {} refused, {} unknown",
        holds.len(),
        never_believed,
        write_counts.get("acked").unwrap_or(&0),
        write_counts.get("refused").unwrap_or(&0),
        write_counts.get("unknown").unwrap_or(&0)
    );

    // ------------------------------------------------------------ 5. leftovers
    for (c, status) in &exits {
        if status != "0" {
            v.crashes += 1;
            println!(
                "VIOLATION client {c} exited with {status} (see {}/c{c}/stderr)",
                dir.display()
            );
        }
    }
    if exits.len() < clients {
        v.crashes += clients - exits.len();
        println!(
            "VIOLATION only {} of {clients} clients reported an exit",
            exits.len()
        );
    }
    // Watches held by the clients while idle (sessions open, nothing held or wanted).
    if let Ok(idle) = std::fs::read_to_string(dir.join("idle-watches")) {
        let paths: Vec<&str> = idle
            .lines()
            .filter(|l| l.trim_start().starts_with('/'))
            .map(str::trim)
            .collect();
        if !paths.is_empty() {
            v.leftovers += paths.len();
            println!(
                "VIOLATION {} watches held by idle clients (no lock held or wanted):\n{}",
                paths.len(),
                idle
            );
        }
    }
    if let Ok(idle) = std::fs::read_to_string(dir.join("idle-nodes")) {
        let nodes: Vec<&str> = idle.lines().filter(|l| !l.is_empty()).collect();
        if !nodes.is_empty() {
            v.leftovers += nodes.len();
            println!(
                "VIOLATION {} lock nodes exist while every client is idle (orphans):",
                nodes.len()
            );
            for node in nodes {
                println!("    {node}");
            }
        }
    }
    if !state.nodes.is_empty() {
        v.leftovers += state.nodes.len();
        println!("VIOLATION lock nodes left after every client exited:");
        for node in &state.nodes {
            println!("    {node}");
        }
    }
    for (i, watches, detail) in &state.watches {
        match watches {
            Some(0) => {}
            Some(n) => {
                v.leftovers += *n as usize;
                println!(
                    "VIOLATION server {i}: {n} watches left after every client exited: {detail}"
                );
            }
            None => {
                v.leftovers += 1;
                println!("VIOLATION server {i} did not answer wchs");
            }
        }
    }

    let ok = v.overlaps == 0
        && v.lost == 0
        && v.stale == 0
        && v.tokens == 0
        && v.progress == 0
        && v.leftovers == 0
        && v.crashes == 0
        && !holds.is_empty();
    println!(
        "check: {} token violations, {} progress violations, {} leftovers, {} client failures: {}",
        v.tokens,
        v.progress,
        v.leftovers,
        v.crashes,
        if ok { "PASS" } else { "FAIL" }
    );
    let summary = format!(
        "nemesis: {} holds, {} faults, {} overlaps, {} lost updates, {} stale writes accepted, {:.1} s max unavailability",
        holds.len(),
        faults.len(),
        v.overlaps,
        v.lost,
        v.stale,
        v.max_unavail as f64 / 1e9
    );
    std::fs::write(dir.join("summary"), format!("{summary}\n"))?;
    println!("{summary}");
    Ok(ok)
}

fn connect_observer(connect: &str) -> anyhow::Result<Client> {
    let deadline = mono_ns() + 60_000_000_000;
    loop {
        match Client::builder(connect)
            .session_timeout(Duration::from_secs(10))
            .connect()
        {
            Ok(c) => return Ok(c),
            Err(err) if mono_ns() < deadline => {
                eprintln!("check: connect: {err}; retrying");
                sleep(Duration::from_secs(1));
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// Lock nodes still present, waiting (bounded) for sessions that are still closing or expiring.
fn leftover_nodes(observer: &Client, session_ms: u64) -> anyhow::Result<Vec<String>> {
    let deadline = mono_ns() + (3 * session_ms + 10_000) * 1_000_000;
    let mutex = DistributedMutex::new(observer, MUTEX)?;
    let gate = DistributedMutex::new(observer, &format!("{SEMAPHORE}/locks"))?;
    let rwlock = DistributedRwLock::new(observer, RWLOCK)?;
    let semaphore = Semaphore::new(observer, SEMAPHORE, PERMITS)?;
    loop {
        let mut left = Vec::new();
        for (path, nodes) in [
            (MUTEX.to_owned(), mutex.contenders()?),
            (format!("{SEMAPHORE}/locks"), gate.contenders()?),
            (RWLOCK.to_owned(), rwlock.contenders()?),
            (format!("{SEMAPHORE}/leases"), semaphore.leases()?),
        ] {
            for c in nodes {
                left.push(format!(
                    "{path}/{} (session {:#x}, owner {})",
                    c.node_name, c.session_id, c.owner
                ));
            }
        }
        if left.is_empty() || mono_ns() > deadline {
            return Ok(left);
        }
        sleep(Duration::from_millis(500));
    }
}
