//! A session expiring between the steps of one acquisition (a multi-lock's members, a
//! semaphore's gate and its leases) fails the whole acquisition: every step uses the one
//! session the acquisition began with, so a later step fails with it instead of being taken on
//! a new session beside the nodes lost with the old one. Nothing is left behind, and the next
//! call opens a new session.
//!
//! The step boundary is found through zklock's own debug line `created <node path> ...`,
//! logged on the acquiring thread as each node is created: this binary's logger expires the
//! session there (the client is cut off by a proxy until it has given the session up) and
//! returns only once the client has seen the expiry. The next step then starts on an expired
//! session. Should that line change, the tests fail saying that the boundary was never seen.
//! (These tests were unit tests driving a hook inside the crate; they need a real server, so
//! they live here.)

mod common;

use std::collections::HashMap;
use std::sync::{Mutex, Once};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use zklock::client::SessionState;
use zklock::{Client, DistributedMutex, Error, MultiLock, Semaphore};

/// What to do when the acquiring thread logs the creation of a node: the path prefix that
/// marks the boundary, and the action, run once.
struct Boundary {
    prefix: String,
    action: Box<dyn FnOnce() + Send>,
}

/// Boundaries waited for, by the thread that will log them.
static BOUNDARIES: Mutex<Option<HashMap<ThreadId, Boundary>>> = Mutex::new(None);

struct StepLogger;

impl log::Log for StepLogger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.level() != log::Level::Debug {
            return;
        }
        let line = record.args().to_string();
        let Some(created) = line.strip_prefix("created ") else {
            return;
        };
        let mut boundaries = BOUNDARIES.lock().unwrap();
        let me = thread::current().id();
        let hit = boundaries
            .as_mut()
            .and_then(|b| b.get(&me))
            .is_some_and(|b| created.starts_with(&b.prefix));
        let boundary = hit.then(|| boundaries.as_mut().unwrap().remove(&me).unwrap());
        drop(boundaries);
        if let Some(boundary) = boundary {
            (boundary.action)();
        }
    }

    fn flush(&self) {}
}

/// This binary's logger (installed before any client exists: a process has one logger).
fn install_logger() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        log::set_boxed_logger(Box::new(StepLogger)).expect("the first logger of this binary");
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// A short session, so that cutting it off expires it quickly.
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

fn connect(proxy: &Proxy) -> Client {
    install_logger();
    Client::builder(&proxy.connect_string())
        .session_timeout(SESSION_TIMEOUT)
        .connect()
        .expect("ZooKeeper must be running: scripts/start-zk.sh")
}

/// A proxy to the test server for the whole run: the boundary action, run from the logger,
/// must own what it touches.
fn proxy() -> &'static Proxy {
    Box::leak(Box::new(Proxy::start(&common::connect_string())))
}

/// Expires `client`'s session (through `proxy`) the first time the calling thread logs the
/// creation of a node under `prefix`, and returns only once the client has seen the expiry.
fn expire_at(prefix: &str, client: &Client, proxy: &'static Proxy) -> Fired {
    let client = client.clone();
    let fired = Fired::default();
    let seen = fired.clone();
    let action = move || {
        // Silence, not a reset: the client gives the session up once no server can still
        // hold it (7/5 of its timeout), and the server has expired it by then.
        proxy.blackhole(true);
        let deadline = Instant::now() + Duration::from_secs(30);
        while client.state() != SessionState::Expired && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        proxy.blackhole(false);
        *seen.0.lock().unwrap() = Some(client.state());
    };
    BOUNDARIES
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(
            thread::current().id(),
            Boundary {
                prefix: format!("{prefix}/"),
                action: Box::new(action),
            },
        );
    fired
}

/// What the client's state was once the boundary action ran; `None` if it never ran.
#[derive(Clone, Default)]
struct Fired(std::sync::Arc<Mutex<Option<SessionState>>>);

impl Fired {
    fn check(&self) {
        let seen = *self.0.lock().unwrap();
        assert_eq!(
            seen,
            Some(SessionState::Expired),
            "the step boundary was never seen (zklock's `created <node>` debug line), or the \
             session did not expire there"
        );
    }
}

#[test]
fn a_session_expiring_between_members_fails_the_whole_multi_lock() {
    let proxy = proxy();
    let client = connect(proxy);
    let root = common::lock_path("steps-multi");
    let (a, b) = (format!("{root}/a"), format!("{root}/b"));
    let multi = MultiLock::new(&client)
        .mutex(&a)
        .unwrap()
        .mutex(&b)
        .unwrap();
    let fired = expire_at(&a, &client, proxy);
    let outcome = multi.lock();
    fired.check();
    assert!(
        matches!(outcome, Err(Error::SessionExpired)),
        "a multi-lock whose session expired after its first member must fail as a whole, \
         got {outcome:?}"
    );
    // The next call opens a new session; nothing of the failed acquisition is left.
    for path in [a, b] {
        let queue = DistributedMutex::new(&client, &path)
            .unwrap()
            .contenders()
            .unwrap();
        assert!(queue.is_empty(), "{path}: {queue:?}");
    }
    assert!(multi.try_lock().unwrap().is_some());
}

#[test]
fn a_session_expiring_after_the_gate_fails_the_whole_semaphore_acquisition() {
    let proxy = proxy();
    let client = connect(proxy);
    let root = common::lock_path("steps-semaphore");
    let semaphore = Semaphore::new(&client, &root, 2).unwrap();
    // The gate is the semaphore's internal lock, Curator's `<path>/locks`.
    let fired = expire_at(&format!("{root}/locks"), &client, proxy);
    let outcome = semaphore.acquire_many(2);
    fired.check();
    assert!(
        matches!(outcome, Err(Error::SessionExpired)),
        "leases must not be taken on a new session after the gate was lost with the old \
         one, got {outcome:?}"
    );
    assert!(semaphore.contenders().unwrap().is_empty());
    assert_eq!(semaphore.acquire_many(2).unwrap().count(), 2);
}
