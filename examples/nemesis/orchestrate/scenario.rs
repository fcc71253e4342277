//! Targeted scenarios: one fault, set up exactly, repeated, judged on the spot. Run by
//! `scripts/nemesis.sh --scenario NAME`.
//!
//! `follower-lease`: a holder connected to a follower only, partitioned together with that
//! follower from the leader and the other follower, while a contender waits on the majority
//! side. The follower goes on answering its clients (pings, reads) until it notices the leader
//! is gone (syncLimit x tickTime, 2 s here), but the leader, which expires sessions, hears
//! nothing of the holder from the start of the partition. The question: does the holder's
//! lease (is_held()) run out before the contender acquires?

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context};
use zklock::{Client, DistributedMutex};

use super::{heal_network, leader, partition, Run};
use crate::{mono_ns, server_addr, CLIENT_PORT, SERVERS};

impl Run {
    pub(super) fn follower_lease(&mut self, trials: usize) -> anyhow::Result<i32> {
        for i in 1..=SERVERS {
            self.start_server(i)?;
        }
        self.wait_ensemble(Duration::from_secs(90))?;
        let mut overlaps = 0;
        let mut worst_ms: f64 = f64::NEG_INFINITY;
        for trial in 1..=trials {
            self.wait_ensemble(Duration::from_secs(60))?;
            let l = leader().context("no leader")?;
            let f = (1..=SERVERS).find(|&s| s != l).unwrap();
            let f2 = (1..=SERVERS).find(|&s| s != l && s != f).unwrap();
            let addr = |s: usize| format!("{}:{CLIENT_PORT}", server_addr(s));
            let path = format!("/scenario/follower-lease-{trial}");
            // Inside the namespace the harness's own connections leave with the server's
            // address as source (nothing rewrites them), so the holder's connection to the
            // follower counts as the follower's side of the partition, the contender's
            // connections as the majority's.
            let holder = Client::builder(&addr(f))
                .session_timeout(Duration::from_millis(self.session_ms))
                .connect()?;
            let contender = Client::builder(&format!("{},{}", addr(l), addr(f2)))
                .session_timeout(Duration::from_millis(self.session_ms))
                .connect()?;
            let held_mutex = DistributedMutex::new(&holder, &path)?;
            let wait_mutex = DistributedMutex::new(&contender, &path)?;
            let guard = held_mutex.lock()?;
            let samples: Mutex<Vec<(u64, bool)>> = Mutex::new(Vec::new());
            let stop = AtomicBool::new(false);
            let acquired = AtomicBool::new(false);
            // Vary where in the keepalive cycle the partition falls.
            let settle = self.rng.millis(1000, 2500);
            let mut probe = String::new();
            let (cut, t_acq) = thread::scope(|s| -> anyhow::Result<(u64, u64)> {
                s.spawn(|| {
                    while !stop.load(Ordering::SeqCst) {
                        let t = mono_ns();
                        let held = guard.is_held();
                        samples.lock().unwrap().push((t, held));
                        thread::sleep(Duration::from_millis(5));
                    }
                });
                let waiter = s.spawn(|| {
                    let got = wait_mutex.lock_timeout(Duration::from_secs(30));
                    let t = mono_ns();
                    acquired.store(true, Ordering::SeqCst);
                    (got.map(|g| g.is_some()), t)
                });
                thread::sleep(settle);
                let cut = mono_ns();
                partition(&[server_addr(f)], &[server_addr(l), server_addr(f2)])?;
                // Evidence that the follower still serves the holder: a read, 300 ms in.
                thread::sleep(Duration::from_millis(300));
                let t0 = mono_ns();
                let read = holder.get_data(&path).map(|_| ());
                probe = format!(
                    "a read sent at {:.0} ms was answered {:?} after {:.0} ms",
                    (t0 - cut) as f64 / 1e6,
                    read,
                    (mono_ns() - t0) as f64 / 1e6
                );
                let (got, t_acq) = waiter.join().unwrap();
                // Watch the holder until it stops answering Held (bounded).
                let until = mono_ns() + 10_000_000_000;
                while guard.is_held() && mono_ns() < until {
                    thread::sleep(Duration::from_millis(20));
                }
                thread::sleep(Duration::from_millis(50));
                stop.store(true, Ordering::SeqCst);
                if !matches!(got, Ok(true)) {
                    bail!("trial {trial}: the contender did not acquire: {got:?}");
                }
                Ok((cut, t_acq))
            })?;
            heal_network();
            let samples = samples.into_inner().unwrap();
            let last_true = samples
                .iter()
                .filter(|s| s.1)
                .map(|s| s.0)
                .max()
                .unwrap_or(0);
            let late: Vec<&(u64, bool)> = samples.iter().filter(|s| s.1 && s.0 >= t_acq).collect();
            let rel = |t: u64| (t as f64 - cut as f64) / 1e6;
            let margin = rel(t_acq) - rel(last_true);
            worst_ms = worst_ms.max(-margin);
            let verdict = if late.is_empty() {
                "ok".to_owned()
            } else {
                overlaps += 1;
                format!(
                    "VIOLATION: Held for {:.0} ms after the contender acquired ({} answers)",
                    margin.abs(),
                    late.len()
                )
            };
            let line = format!(
                "trial {trial}: leader {l}, holder on follower {f}; partition at 0 ms (after {} ms of holding): {probe}; contender acquired at {:.0} ms, holder's last Held at {:.0} ms: {verdict}",
                settle.as_millis(),
                rel(t_acq),
                rel(last_true)
            );
            self.note(format!("scenario {line}"));
            println!("{line}");
            drop(guard);
            drop((held_mutex, wait_mutex));
            drop(contender);
            drop(holder);
            let _ = acquired;
        }
        let summary = format!(
            "follower-lease: {trials} trials, {overlaps} with the holder still Held after the contender acquired (worst by {worst_ms:.0} ms)"
        );
        println!("{summary}");
        std::fs::write(self.dir.join("summary"), format!("{summary}\n"))?;
        Ok(if overlaps == 0 { 0 } else { 1 })
    }
}
