//! Long queues (issue 33, item 6): a lock path with tens of thousands of queued nodes has a
//! listing larger than ZooKeeper's default `jute.maxbuffer` (20,000 Curator-named nodes: a
//! 1,180,088-byte reply). The server sends it all the same; zklock must read it, or, over the
//! client's own limit, fail that one call with `Error::ReplyTooLarge`, and never drop the
//! connection that every other lock of the client shares.
//!
//! The queues are made by a raw session (pipelined ephemeral sequential creates, with
//! Curator's node names), so they go at once when it is dropped.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::RawClient;
use zklock::{DistributedMutex, LockGuard, LockState};

/// A call that once ran into its deadline (or never returned) on a long queue: far more than
/// it needs here (milliseconds), far less than the failures seen (5-10 s, or never).
const PROMPT: Duration = Duration::from_secs(3);

/// Queues `count` Curator-named nodes (`_c_<uuid>-lock-<sequence>`) under `path` in a raw
/// session of their own; they go when the returned client is dropped.
fn long_queue(path: &str, count: usize) -> RawClient {
    let raw = RawClient::connect(&common::connect_string());
    raw.mkdir_open(path);
    let started = Instant::now();
    let prefix = format!("{path}/_c_{}-lock-", uuid::Uuid::new_v4());
    assert_eq!(raw.create_sequential_burst(&prefix, count), count);
    eprintln!("{count} nodes queued in {:?}", started.elapsed());
    raw
}

/// Runs `calls` while a thread samples `guard` every 2 ms; returns how many samples were
/// taken and how many of them did not read `Held`.
fn sampling_while<T>(guard: &LockGuard, calls: impl FnOnce() -> T) -> (T, usize, usize) {
    let stop = AtomicBool::new(false);
    let (samples, not_held) = (AtomicUsize::new(0), AtomicUsize::new(0));
    /// Stops the sampler however `calls` ends: a failed assertion in it must fail the test,
    /// not leave the scope waiting for the sampler for ever.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let out = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                samples.fetch_add(1, Ordering::SeqCst);
                if guard.state() != LockState::Held {
                    not_held.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let _stop = StopOnDrop(&stop);
        // The calls can be over in milliseconds: let the sampler take its first sample before
        // they start, however late a loaded machine schedules it.
        while samples.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        calls()
    });
    (out, samples.into_inner(), not_held.into_inner())
}

/// Times `call`, printing the figure, and checks it came back within `bound`.
fn timed<T>(what: &str, bound: Duration, call: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = call();
    let took = started.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took < bound, "{what} took {took:?}");
    out
}

/// `contenders()` reads every node's data besides the listing, in batches of a thousand reads
/// per request (a fraction of a second here; seconds when it took a request per node): its
/// figure is printed; the bound only catches a hang.
const READS_EVERY_NODE: Duration = Duration::from_secs(60);

/// Waits until the lock path has exactly `count` children, as a raw session lists them.
fn wait_children(raw: &RawClient, path: &str, count: usize) {
    let mut seen = 0;
    let reached = common::eventually(Duration::from_secs(10), || {
        seen = raw.children(path).len();
        seen == count
    });
    assert!(
        reached,
        "{seen} nodes under {path}, not {count}: a node was left"
    );
}

/// The session timeout of the clients that read long queues: `contenders()` is one call,
/// allowed one session timeout, and reads every node's data (50,000 reads took 4 s on a loaded
/// machine, past the 4 s of the tests' usual sessions).
const LONG_SESSION: Duration = Duration::from_secs(15);

fn accepts_a_long_queue(count: usize) {
    let client = common::client_with(LONG_SESSION);
    let other = DistributedMutex::new(&client, &common::lock_path("long-queue-other")).unwrap();
    let guard = other.lock().unwrap();
    let path = common::lock_path("long-queue");
    let raw = long_queue(&path, count);
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let (_, samples, not_held) = sampling_while(&guard, || {
        let busy = timed(&format!("try_lock on {count}"), PROMPT, || mutex.try_lock());
        assert!(matches!(busy, Ok(None)), "try_lock: {busy:?}");
        let busy = timed(&format!("lock_timeout(300 ms) on {count}"), PROMPT, || {
            mutex.lock_timeout(Duration::from_millis(300))
        });
        assert!(matches!(busy, Ok(None)), "lock_timeout: {busy:?}");
        // Our own nodes are withdrawn: the queue is the raw session's again.
        wait_children(&raw, &path, count);
        let contenders = timed(
            &format!("contenders() on {count}"),
            READS_EVERY_NODE,
            || mutex.contenders(),
        );
        assert_eq!(contenders.map(|c| c.len()), Ok(count));
        // What `zklock status` shows: the same reads, by the catalogue's layouts.
        let seen = timed(&format!("inspect() on {count}"), READS_EVERY_NODE, || {
            client.inspect(&path, None)
        })
        .expect("inspect");
        assert_eq!(seen.nodes.len(), count);
        assert_eq!(
            seen.nodes.iter().filter(|n| n.holds == Some(true)).count(),
            1
        );
    });
    eprintln!("other lock: {samples} samples, {not_held} not held");
    assert!(samples > 0);
    assert_eq!(not_held, 0, "the other lock read not-held");
    guard.unlock().expect("the other lock's release");
    drop(raw);
    wait_children(&RawClient::connect(&common::connect_string()), &path, 0);
    client.close().unwrap();
}

#[test]
fn a_queue_of_20_000_is_read_and_leaves_other_locks_held() {
    accepts_a_long_queue(20_000);
}

#[test]
fn a_queue_of_50_000_is_read_and_leaves_other_locks_held() {
    accepts_a_long_queue(50_000);
}

/// The listing of `count` nodes named as [`long_queue`] names them: reply header, child count,
/// each name with its length, the parent's stat.
fn listing_size(count: usize) -> usize {
    16 + 4 + count * (4 + "_c_".len() + 36 + "-lock-".len() + 10) + 68
}

/// Checks that `err` is `ReplyTooLarge` for `path` over `limit`, of at least `size` bytes,
/// saying so in its message; returns the size it reports.
fn too_large(what: &str, err: zklock::Error, path: &str, size: usize, limit: usize) -> usize {
    let message = err.to_string();
    eprintln!("{what}: {message}");
    let zklock::Error::ReplyTooLarge {
        path: refused,
        size: got,
        limit: over,
    } = err
    else {
        panic!("{what}: not ReplyTooLarge: {err:?}");
    };
    assert_eq!((refused.as_str(), over), (path, limit), "{what}");
    assert!(got >= size, "{what}: {got} bytes, expected {size} at least");
    assert!(
        message.contains(path) && message.contains(&got.to_string()),
        "{message}"
    );
    got
}

#[test]
fn over_the_limit_each_call_fails_alone_at_once_and_leaves_nothing() {
    let count = 20_000;
    let limit = 512 * 1024;
    let client = common::builder(&common::connect_string(), common::SESSION_TIMEOUT)
        .max_reply_size(limit)
        .connect()
        .unwrap();
    let other = DistributedMutex::new(&client, &common::lock_path("long-queue-other")).unwrap();
    let guard = other.lock().unwrap();
    let path = common::lock_path("long-queue-limit");
    let raw = long_queue(&path, count);
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let expected = listing_size(count);
    assert_eq!(expected, 1_180_088, "the listing measured in issue 33");
    let (_, samples, not_held) = sampling_while(&guard, || {
        // Each acquisition's listing shows its own node too.
        let err = timed("try_lock over the limit", PROMPT, || mutex.try_lock()).unwrap_err();
        too_large("try_lock", err, &path, expected, limit);
        let err = timed("lock_timeout(30 s) over the limit", PROMPT, || {
            mutex.lock_timeout(Duration::from_secs(30))
        })
        .unwrap_err();
        too_large("lock_timeout", err, &path, expected, limit);
        let err = timed("lock() over the limit", PROMPT, || mutex.lock()).unwrap_err();
        too_large("lock", err, &path, expected, limit);
        // Every acquisition withdrew its node.
        wait_children(&raw, &path, count);
        let err = timed("contenders() over the limit", PROMPT, || mutex.contenders()).unwrap_err();
        assert_eq!(
            too_large("contenders", err, &path, expected, limit),
            expected
        );
        // Meanwhile the session serves every other call.
        let short = DistributedMutex::new(&client, &common::lock_path("long-queue-short")).unwrap();
        let held = short.try_lock().unwrap().expect("a free lock");
        held.unlock().unwrap();
    });
    eprintln!("other lock: {samples} samples, {not_held} not held");
    assert!(samples > 0);
    assert_eq!(not_held, 0, "the other lock read not-held");
    guard.unlock().expect("the other lock's release");
    drop(raw);
    wait_children(&RawClient::connect(&common::connect_string()), &path, 0);
    client.close().unwrap();
}

/// Nodes whose data is large (another client's, 100 KB each): read together, their batch's
/// reply is over the client's limit; `contenders()` reads them one by one instead and sees
/// every node whole, and the other lock of the client stays held.
#[test]
fn nodes_with_large_data_are_read_one_by_one_under_the_limit() {
    let limit = 300 * 1024;
    let client = common::builder(&common::connect_string(), common::SESSION_TIMEOUT)
        .max_reply_size(limit)
        .connect()
        .unwrap();
    let other = DistributedMutex::new(&client, &common::lock_path("large-data-other")).unwrap();
    let guard = other.lock().unwrap();
    let path = common::lock_path("large-data");
    let raw = long_queue(&path, 6);
    let writer = common::client();
    let large = vec![b'x'; 100 * 1024];
    for name in raw.children(&path) {
        writer.set_data(&format!("{path}/{name}"), &large).unwrap();
    }
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let contenders = mutex.contenders().expect("contenders");
    assert_eq!(contenders.len(), 6);
    assert!(contenders.iter().all(|c| c.owner.len() == large.len()));
    assert!(contenders[0].holds && contenders[1..].iter().all(|c| !c.holds));
    assert_eq!(guard.state(), LockState::Held);
    guard.unlock().unwrap();
    writer.close().unwrap();
    client.close().unwrap();
}
