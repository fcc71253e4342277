//! Listings that wait while the connection is busy go out together as one `multiRead`
//! (one request where ZooKeeper allows it), on a real server: each caller reads what
//! its own listing would have shown, an error in one of them is its caller's alone, and a
//! batch whose answer is over the client's reply limit is listed again one by one instead of
//! failing every caller in it.

mod common;

use std::thread;
use std::time::Duration;

use common::proxy::{opcode, Proxy, Request};
use common::RawClient;
use zklock::{Client, DistributedMutex, Error};

/// How long the proxy holds each reply while the calls of a test queue up behind one.
const HELD: Duration = Duration::from_millis(150);

/// A client through a new proxy, with the reply limit `limit` and coalescing on or off.
fn client_via_proxy(limit: usize, coalesce: bool) -> (Proxy, Client) {
    let proxy = Proxy::start(&common::connect_string());
    let client = common::builder(&proxy.connect_string(), common::SESSION_TIMEOUT)
        .max_reply_size(limit)
        .coalesce_requests(coalesce)
        .connect()
        .unwrap();
    (proxy, client)
}

/// What one path's calls in [`queued_together`] gave: its `try_lock` (`Ok(true)` if it held)
/// and its `contenders()` (how many).
struct Outcome {
    try_lock: Result<bool, String>,
    contenders: Result<usize, String>,
}

/// On each of `paths`, a `try_lock`, then a `contenders()`, all while a request on `busy` is
/// unanswered (the proxy holds replies for [`HELD`]): each `try_lock`'s create waits in the
/// outbox for it, and every listing of the path, which sees that create, waits behind it. So
/// the listings go out together when the answer comes. Each call's outcome, by path.
fn queued_together(client: &Client, proxy: &Proxy, busy: &str, paths: &[&str]) -> Vec<Outcome> {
    let debug = |e: Error| format!("{e:?}");
    proxy.delay_replies(HELD);
    let outcomes = thread::scope(|s| {
        s.spawn(|| {
            let held = DistributedMutex::new(client, busy).unwrap().try_lock();
            held.unwrap()
                .expect("the busy path is free")
                .unlock()
                .unwrap();
        });
        thread::sleep(HELD / 3);
        let tries: Vec<_> = paths
            .iter()
            .map(|path| {
                s.spawn(move || {
                    let guard = DistributedMutex::new(client, path).unwrap().try_lock()?;
                    Ok(match guard {
                        Some(guard) => guard.unlock().map(|()| true)?,
                        None => false,
                    })
                })
            })
            .collect();
        thread::sleep(HELD / 6);
        let lists: Vec<_> = paths
            .iter()
            .map(|path| s.spawn(move || DistributedMutex::new(client, path).unwrap().contenders()))
            .collect();
        tries
            .into_iter()
            .zip(lists)
            .map(|(t, l)| Outcome {
                try_lock: t.join().unwrap().map_err(debug),
                contenders: l.join().unwrap().map(|c| c.len()).map_err(debug),
            })
            .collect()
    });
    proxy.delay_replies(Duration::ZERO);
    outcomes
}

/// The paths a `multiRead` lists (its getChildren operations), sorted.
fn listed_in(request: &Request) -> Vec<&str> {
    let mut listed: Vec<&str> = request
        .members
        .iter()
        .filter(|(op, _)| *op == opcode::GET_CHILDREN)
        .map(|(_, path)| path.as_str())
        .collect();
    listed.sort_unstable();
    listed
}

/// Locks each path once, so the session knows them (its creates under them may then join a
/// `multi`, and wait while the connection is busy).
fn warm(client: &Client, paths: &[&str]) {
    for path in paths {
        drop(DistributedMutex::new(client, path).unwrap().try_lock());
    }
}

/// Two lock paths, each with a queue whose listing alone is under the client's reply limit and
/// two together over it: the `multiRead` of the listings is answered with more than the
/// client reads, so they are listed again one by one, and each `contenders()` sees its whole
/// queue instead of failing with `ReplyTooLarge` (each `try_lock` sees it held by another
/// session). Nothing is left behind.
#[test]
fn a_batch_of_listings_over_the_reply_limit_is_listed_again_one_by_one() {
    const LIMIT: usize = 64 * 1024;
    // 700 Curator-named nodes: a listing of about 41 KB.
    const QUEUED: usize = 700;
    let (proxy, client) = client_via_proxy(LIMIT, true);
    let root = common::lock_path("bundled-over-limit");
    let raw = RawClient::connect(&common::connect_string());
    let (a, b, busy) = (
        format!("{root}/a"),
        format!("{root}/b"),
        format!("{root}/busy"),
    );
    for path in [&a, &b] {
        raw.mkdir_open(path);
        let prefix = format!("{path}/_c_{}-lock-", uuid::Uuid::new_v4());
        assert_eq!(raw.create_sequential_burst(&prefix, QUEUED), QUEUED);
    }
    warm(&client, &[&a, &b, &busy]);
    proxy.record_requests(true);
    let outcomes = queued_together(&client, &proxy, &busy, &[&a, &b]);
    proxy.record_requests(false);
    for (path, outcome) in [&a, &b].iter().zip(&outcomes) {
        assert_eq!(outcome.try_lock, Ok(false), "{path}: try_lock");
        // The queue, and the try_lock's node unless it was withdrawn before the listing went
        // out again, or before contenders() read the nodes' data.
        let seen = outcome.contenders.clone();
        assert!(
            seen.as_ref()
                .is_ok_and(|n| (QUEUED..=QUEUED + 1).contains(n)),
            "{path}: contenders(): {seen:?}"
        );
    }
    let sent = proxy.requests();
    let batch = sent
        .iter()
        .position(|r| {
            let listed = listed_in(r);
            r.opcode == opcode::MULTI_READ
                && listed.contains(&a.as_str())
                && listed.contains(&b.as_str())
        })
        .unwrap_or_else(|| panic!("no multiRead of both paths' listings: {sent:?}"));
    for path in [&a, &b] {
        assert!(
            sent[batch..]
                .iter()
                .any(|r| r.opcode == opcode::GET_CHILDREN2 && r.path.as_deref() == Some(path)),
            "{path} was not listed again alone"
        );
    }
    for path in [&a, &b] {
        assert_eq!(
            raw.children(path).len(),
            QUEUED,
            "{path}: a node of ours left"
        );
    }
    client.close().unwrap();
}

/// A listing refused by its lock path's ACL (children may be made and deleted there, not
/// listed), in one `multiRead` with another lock path's listings: `contenders()` of the
/// refused path fails as it does with coalescing off, naming it, and its `try_lock` withdraws
/// its node; the other path's calls see its queue.
#[test]
fn a_listing_refused_in_a_batch_fails_its_caller_only() {
    const QUEUED: usize = 3;
    let outcome = |coalesce: bool| {
        let (proxy, client) = client_via_proxy(16 << 20, coalesce);
        let root = common::lock_path("bundled-refused");
        let raw = RawClient::connect(&common::connect_string());
        let (free, refused, busy) = (
            format!("{root}/free"),
            format!("{root}/refused"),
            format!("{root}/busy"),
        );
        raw.mkdir_open(&free);
        let prefix = format!("{free}/_c_{}-lock-", uuid::Uuid::new_v4());
        assert_eq!(raw.create_sequential_burst(&prefix, QUEUED), QUEUED);
        // CREATE | DELETE (and ADMIN, to let the test read it after), no READ.
        raw.create_persistent_for_anyone(&refused, 4 | 8 | 16);
        warm(&client, &[&free, &refused, &busy]);
        proxy.record_requests(true);
        let outcomes = queued_together(&client, &proxy, &busy, &[&free, &refused]);
        proxy.record_requests(false);
        let batched = proxy.requests().iter().any(|r| {
            let listed = listed_in(r);
            r.opcode == opcode::MULTI_READ
                && listed.contains(&free.as_str())
                && listed.contains(&refused.as_str())
        });
        raw.set_acl_for_anyone(&refused, 31);
        let left = raw.children(&refused);
        client.close().unwrap();
        (outcomes, batched, left)
    };
    let refusal = |o: &Outcome| match &o.contenders {
        Err(e) if e.starts_with("NoAuth") && e.contains("/refused") => "NoAuth",
        other => panic!("contenders() of the refused path: {other:?}"),
    };
    let (alone, batched, left) = outcome(false);
    assert!(!batched, "a multiRead with coalescing off");
    assert_eq!(left, Vec::<String>::new(), "a node left (coalescing off)");
    let (outcomes, batched, left) = outcome(true);
    assert!(
        batched,
        "the listings of both paths did not go out in one multiRead"
    );
    assert_eq!(left, Vec::<String>::new(), "a node left");
    assert_eq!(outcomes[0].try_lock, Ok(false), "try_lock of the free path");
    // Its queue, and the try_lock's node unless it was withdrawn before contenders() read
    // the nodes' data.
    let seen = outcomes[0].contenders.clone();
    assert!(
        seen.as_ref()
            .is_ok_and(|n| (QUEUED..=QUEUED + 1).contains(n)),
        "contenders() of the free path: {seen:?}"
    );
    assert_eq!(refusal(&outcomes[1]), refusal(&alone[1]));
    assert!(outcomes[1].try_lock.is_err(), "{:?}", outcomes[1].try_lock);
    assert_eq!(
        outcomes[1]
            .try_lock
            .as_ref()
            .map_err(|e| e.split([' ', '(', '{']).next().unwrap_or_default()),
        alone[1]
            .try_lock
            .as_ref()
            .map_err(|e| e.split([' ', '(', '{']).next().unwrap_or_default()),
        "try_lock of the refused path"
    );
}

/// Reads whose `multiRead` fails as a whole are sent again alone, ahead of whatever was called
/// after them: a write of what they read, queued behind them, waits for the `multiRead`'s
/// answer instead of going out in the same batch (it once did, and the read sent again
/// returned that write's data). The wire is filled with unanswered requests (the proxy keeps
/// the replies), so the two reads and the write wait in the outbox together and go out when
/// the replies arrive in one burst; the reads' answers together (two 40 KB values) are over
/// the client's 64 KiB reply limit.
#[test]
fn a_read_sent_again_alone_never_sees_a_write_called_after_it() {
    const LIMIT: usize = 64 * 1024;
    // `wire::conn::outbox::MAX_IN_FLIGHT`: requests unanswered before the rest wait.
    const MAX_IN_FLIGHT: usize = 256;
    let proxy = Proxy::start(&common::connect_string());
    // A long session: the replies are kept for about a second.
    let client = common::builder(&proxy.connect_string(), Duration::from_secs(10))
        .max_reply_size(LIMIT)
        .connect()
        .unwrap();
    let root = common::lock_path("bundled-read-again");
    let (x, y, busy) = (
        format!("{root}/x"),
        format!("{root}/y"),
        format!("{root}/busy"),
    );
    let old = vec![b'o'; 40_000];
    client.set_data(&x, &old).unwrap();
    client.set_data(&y, &old).unwrap();
    client.set_data(&busy, b"").unwrap();
    // The write: a fenced transaction, one `multi` (a plain `set_data` makes the parents
    // first, a round trip before its write).
    let guard = DistributedMutex::new(&client, &format!("{root}/lock"))
        .unwrap()
        .lock()
        .unwrap();
    proxy.record_requests(true);
    proxy.hold_replies(true);
    let (read_x, read_y, wrote) = thread::scope(|s| {
        let mut fillers = Vec::new();
        // Pings are not counted: they are no request the outbox waits for.
        let unanswered = || {
            let sent = proxy.requests();
            sent.iter().filter(|r| r.opcode != opcode::PING).count()
        };
        // One at a time, each out alone before the next: the wire then holds MAX_IN_FLIGHT.
        while unanswered() < MAX_IN_FLIGHT {
            let before = unanswered();
            fillers.push(s.spawn(|| client.get_data(&busy)));
            assert!(
                common::eventually(Duration::from_secs(2), || unanswered() > before),
                "a read did not go out"
            );
        }
        let read_x = s.spawn(|| client.get_data(&x));
        thread::sleep(Duration::from_millis(150));
        let read_y = s.spawn(|| client.get_data(&y));
        thread::sleep(Duration::from_millis(150));
        let wrote = s.spawn(|| guard.transaction().set_data(&x, b"written after").commit());
        thread::sleep(Duration::from_millis(150));
        proxy.hold_replies(false);
        for filler in fillers {
            filler.join().unwrap().unwrap();
        }
        (
            read_x.join().unwrap(),
            read_y.join().unwrap(),
            wrote.join().unwrap(),
        )
    });
    proxy.record_requests(false);
    wrote.unwrap();
    guard.unlock().unwrap();
    assert_eq!(read_y.unwrap().as_deref(), Some(&old[..]));
    let read_x = read_x.unwrap().unwrap_or_default();
    assert!(
        read_x == old,
        "get_data(x), called before the transaction writing x, returned {:?}",
        String::from_utf8_lossy(&read_x[..read_x.len().min(40)])
    );
    let sent = proxy.requests();
    let batch = sent
        .iter()
        .position(|r| {
            r.opcode == opcode::MULTI_READ
                && r.members.contains(&(opcode::GET_DATA, x.clone()))
                && r.members.contains(&(opcode::GET_DATA, y.clone()))
        })
        .unwrap_or_else(|| {
            panic!(
                "the reads of x and y did not go out in one multiRead: {:?}",
                &sent[MAX_IN_FLIGHT - 2..]
            )
        });
    let alone = sent[batch..]
        .iter()
        .position(|r| r.opcode == opcode::GET_DATA && r.path.as_deref() == Some(x.as_str()))
        .expect("x was not read again alone");
    let write = sent[batch..]
        .iter()
        .position(|r| {
            r.opcode == opcode::MULTI && r.members.contains(&(opcode::SET_DATA, x.clone()))
        })
        .expect("the write of x did not go out");
    assert!(
        alone < write,
        "the write of x went out before x was read again"
    );
    client.close().unwrap();
}
