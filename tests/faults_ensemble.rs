//! Holders and waiters across server restarts and leader failover in a three-server ensemble
//! (`tests/common/ensemble.rs`, one per test binary, its tests serialised). The chaos run on an
//! ensemble is `faults_chaos.rs`.

mod common;

use std::thread;
use std::time::Duration;

use common::ensemble;
use zklock::{Client, DistributedMutex, LockState};

fn client(connect: &str) -> Client {
    common::client_at(connect, Duration::from_secs(8))
}

#[test]
fn holder_and_waiter_ride_out_a_leader_failover() {
    let (connect, _exclusive) = ensemble::ensemble();
    let path = common::lock_path("failover");
    let (a, b) = (client(&connect), client(&connect));
    let holder_mutex = DistributedMutex::new(&a, &path).unwrap();
    let holder = holder_mutex.lock().unwrap();
    let session = holder.session_id();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            DistributedMutex::new(&b, &path)
                .unwrap()
                .lock()
                .map(|g| g.fencing().zxid())
        });
        assert!(common::wait_contenders(
            &holder_mutex,
            2,
            Duration::from_secs(10)
        ));

        let leader = ensemble::leader();
        ensemble::stop_member(leader);
        // A quorum of two elects a new leader; sessions move over within their timeout.
        assert!(common::eventually(Duration::from_secs(20), || holder
            .state()
            == LockState::Held
            && holder_mutex
                .contenders()
                .map(|c| c.len() == 2)
                .unwrap_or(false)));
        ensemble::start_member(leader);

        assert_eq!(holder.session_id(), session);
        let token = holder.fencing().zxid();
        holder
            .unlock()
            .expect("holder kept its lock through the failover");
        let next = waiter
            .join()
            .unwrap()
            .expect("waiter acquired after the failover");
        assert!(next > token);
    });
    assert!(common::wait_contenders(
        &holder_mutex,
        0,
        Duration::from_secs(10)
    ));
}

#[test]
fn restart_of_the_only_reachable_server_keeps_session_and_lock() {
    let (_, _exclusive) = ensemble::ensemble();
    let path = common::lock_path("restart");
    // Pin the client to one member, and restart exactly that member.
    let member = 1 + (ensemble::leader() % ensemble::SIZE); // a follower
    let pinned = client(&format!("127.0.0.1:{}", ensemble::client_port(member)));
    let observer = client(&ensemble::connect_string());
    let mutex = DistributedMutex::new(&pinned, &path).unwrap();
    let guard = mutex.lock().unwrap();
    let waiter_mutex = DistributedMutex::new(&observer, &path).unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| waiter_mutex.lock().map(|g| g.fencing().zxid()));
        assert!(common::wait_contenders(
            &waiter_mutex,
            2,
            Duration::from_secs(10)
        ));
        ensemble::stop_member(member);
        assert_eq!(
            guard.wait_lost_timeout(Duration::from_secs(5)),
            Some(LockState::Suspended)
        );
        ensemble::start_member(member);
        assert!(common::eventually(Duration::from_secs(20), || guard
            .state()
            == LockState::Held));
        assert_eq!(
            waiter_mutex.contenders().unwrap().len(),
            2,
            "no node lost or duplicated"
        );
        let token = guard.fencing().zxid();
        guard.unlock().unwrap();
        assert!(waiter.join().unwrap().unwrap() > token);
    });
}
