//! Chaos run: worker processes contend for one lock through fault proxies in front of a
//! three-server ensemble, while the driver SIGKILLs holders, restarts servers and severs
//! connections. Every hold is logged; the checker proves that no holder that still believed in
//! its lock overlapped another holder, that every surviving contender made progress, and that
//! no lock node is left.
//!
//! Runs for `ZKLOCK_CHAOS_SECS` seconds (default 30). A binary, and so an ensemble, of its own:
//! the failover tests of `faults_ensemble.rs` never run on an ensemble it has just churned.

mod common;

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{ensemble, proxy::Proxy};
use zklock::{Client, DistributedMutex};

const WORKERS: usize = 4;
const THREADS: usize = 2;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// One contender process: `THREADS` threads on one session loop over lock / work / check /
/// unlock until the stop file appears, appending `H <who> <enter_ns> <check_ns> <held>` per hold.
#[test]
#[ignore = "run as a child process by the chaos test below"]
fn worker_chaos() {
    let var = |k: &str| std::env::var(k).unwrap();
    let (path, log, stop) = (var("LOCK"), var("LOG"), var("STOP"));
    // ZK_CONNECT: the proxies in front of the ensemble, set by the driver (the test below).
    let client = common::client_with(Duration::from_secs(3));
    thread::scope(|s| {
        for t in 0..THREADS {
            let (client, path, log, stop) = (&client, &path, &log, &stop);
            s.spawn(move || {
                let who = format!("{}-{t}", std::process::id());
                let mutex = DistributedMutex::new(client, path).unwrap();
                let mut file = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(log)
                    .unwrap();
                while !Path::new(stop).exists() {
                    match mutex.lock_timeout(Duration::from_secs(2)) {
                        Ok(Some(guard)) => {
                            let enter = now_ns();
                            thread::sleep(Duration::from_millis((enter % 5) as u64));
                            // The check time is taken before asking: if is_held() says yes, no
                            // one else may have acquired by then.
                            let check = now_ns();
                            let held = guard.is_held();
                            file.write_all(
                                format!("H {who} {enter} {check} {}\n", held as u8).as_bytes(),
                            )
                            .unwrap();
                            let _ = guard.unlock();
                        }
                        Ok(None) => {}
                        Err(err) => {
                            eprintln!("{who}: {err}");
                            thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
            });
        }
    });
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[derive(Debug)]
struct Hold {
    who: String,
    enter: u128,
    check: u128,
    held: bool,
}

#[test]
fn holders_never_overlap_while_processes_are_killed_servers_restarted_and_connections_cut() {
    let (_, _exclusive) = ensemble::ensemble();
    let seconds: u64 = std::env::var("ZKLOCK_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let proxies: Vec<Proxy> = ensemble::client_ports()
        .iter()
        .map(|p| Proxy::start(&format!("127.0.0.1:{p}")))
        .collect();
    let connect = proxies
        .iter()
        .map(Proxy::connect_string)
        .collect::<Vec<_>>()
        .join(",");
    let path = common::lock_path("chaos");
    let dir = std::env::temp_dir().join(format!("zklock-chaos-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let (log, stop) = (dir.join("holds.log"), dir.join("stop"));
    let vars = [
        ("LOCK", path.clone()),
        ("LOG", log.to_str().unwrap().to_owned()),
        ("STOP", stop.to_str().unwrap().to_owned()),
        ("ZK_CONNECT", connect.clone()),
    ];
    let spawn = || {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "worker_chaos",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(std::process::Stdio::null());
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    };
    let mut workers: Vec<Child> = (0..WORKERS).map(|_| spawn()).collect();
    let mut killed = HashSet::new();
    let mut rng = Rng(now_ns() as u64 | 1);
    let started = Instant::now();
    let mut faults = HashMap::new();
    let mut round = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        thread::sleep(Duration::from_millis(1500 + rng.below(1500) as u64));
        let fault = ["kill", "restart", "sever"][round % 3];
        round += 1;
        match fault {
            "kill" => {
                let victim = rng.below(workers.len());
                let mut child = workers.swap_remove(victim);
                killed.insert(child.id());
                child.kill().unwrap(); // SIGKILL, mid-hold or mid-wait
                child.wait().unwrap();
                workers.push(spawn());
            }
            "restart" => {
                let member = 1 + rng.below(3);
                ensemble::stop_member(member);
                thread::sleep(Duration::from_millis(500));
                ensemble::start_member(member);
            }
            _ => proxies.iter().for_each(Proxy::sever),
        }
        *faults.entry(fault).or_insert(0) += 1;
    }
    // A quiet period: with the faults over, every contender still alive must get its turn.
    thread::sleep(Duration::from_secs(5));
    std::fs::write(&stop, b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    for child in &mut workers {
        while child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "a worker hung after the chaos stopped"
            );
            thread::sleep(Duration::from_millis(50));
        }
        assert!(
            child.try_wait().unwrap().unwrap().success(),
            "worker failed"
        );
    }

    let mut holds: Vec<Hold> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            Hold {
                who: f[1].to_owned(),
                enter: f[2].parse().unwrap(),
                check: f[3].parse().unwrap(),
                held: f[4] == "1",
            }
        })
        .collect();
    holds.sort_by_key(|h| h.enter);
    for (i, a) in holds.iter().enumerate().filter(|(_, h)| h.held) {
        if let Some(b) = holds[i + 1..]
            .iter()
            .take_while(|b| b.enter < a.check)
            .next()
        {
            panic!("{a:?} still believed it held the lock after {b:?} acquired");
        }
    }
    // Every surviving contender thread made progress.
    let holders: HashSet<&str> = holds.iter().map(|h| h.who.as_str()).collect();
    for child in &workers {
        for t in 0..THREADS {
            let who = format!("{}-{t}", child.id());
            assert!(
                holders.contains(who.as_str()) || killed.contains(&child.id()),
                "{who} never acquired"
            );
        }
    }
    let lost = holds.iter().filter(|h| !h.held).count();
    eprintln!(
        "chaos: {} holds ({lost} flagged lost by their holder), faults {faults:?}",
        holds.len()
    );
    assert!(
        holds.len() > 20,
        "too little progress: {} holds",
        holds.len()
    );
    let observer = Client::connect(&ensemble::connect_string()).unwrap();
    let mutex = DistributedMutex::new(&observer, &path).unwrap();
    assert!(
        common::eventually(Duration::from_secs(30), || mutex
            .contenders()
            .map(|c| c.is_empty())
            .unwrap_or(false)),
        "lock nodes left behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
