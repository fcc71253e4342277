//! Testing your own code's handling of a lost lock, with the embedded server
//! ([`zklock-server`](https://docs.rs/zklock-server)): no JVM, a free port per test, stopped
//! when dropped, many in parallel in one test binary, from `#[test]` and `#[tokio::test]` alike.
//!
//! Add it as a dev-dependency (`cargo add --dev zklock-server`), start one per test, and make
//! from the test the faults your code must survive. Each is something a real ZooKeeper server,
//! its host or its network does, made on the server itself:
//!
//! | fault | call on `zklock_server::Server` | what the client sees |
//! |---|---|---|
//! | a session expires | `expire_session(id)`, `expire_all_sessions()` | its ephemerals (its lock nodes) deleted, watches fired, the connection closed; on reconnecting it is told the session expired: guards read [`Lost`](crate::LockState::Lost) |
//! | a connection closed or reset | `close_connection(id)`, `reset_connection(id)` (an RST), `close_all_connections()`, `reset_all_connections()`; ids from `connections()` | the client reconnects and resumes its session: guards stay held |
//! | the server stops answering (a GC pause, `SIGSTOP`) | `set_silent(true)`, then `set_silent(false)` | nothing answered, pings included: calls run to their deadlines, guards read [`Suspended`](crate::LockState::Suspended), sessions expire on the server's clock |
//! | one client cut off (a partition) | `set_session_silent(id, true)` | the same for that session alone: the server expires it and hands its locks on |
//! | a slow server or link | `set_reply_delay(d)` | every reply and notification late by `d`, in order |
//! | an operator deletes a node | `delete_node(path)` | as an admin's `delete`: the holder whose node it was reads `Lost`, [`unlock`](crate::LockGuard::unlock) says [`Error::LockLost`](crate::Error::LockLost) |
//! | a restart | `restart(true)` keeps the data and the sessions (as ZooKeeper from its snapshot), `restart(false)` wipes them | kept: clients reconnect and guards stay held; wiped: sessions expired |
//! | the container sweep | `sweep_containers()` | empty lock paths deleted now, not in a minute |
//!
//! A test of your code that expires its own session, then checks that its guard reads lost and
//! that its fenced write is refused (this example runs as a doctest; more in
//! `tests/embedded_faults.rs`):
//!
//! ```
//! use std::time::{Duration, Instant};
//! use zklock::{Client, DistributedMutex, Error, LockState};
//! use zklock_server::{Config, Server};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let zk = Server::start(Config::default())?; // a free port; stopped when dropped
//! let client = Client::builder(&zk.connect_string())
//!     .session_timeout(Duration::from_secs(4))
//!     .connect()?;
//! let guard = DistributedMutex::new(&client, "/app/orders")?.lock()?;
//! guard.fenced_set_data("/app/orders-state", b"step 1")?;
//!
//! // The session expires on the server, as if the client had been silent for its timeout.
//! assert!(zk.expire_session(client.session_id()));
//!
//! // The guard learns it: first suspended (the connection closed), then lost once the client
//! // reconnects and is told its session expired.
//! guard.wait_lost_timeout(Duration::from_secs(10));
//! let until = Instant::now() + Duration::from_secs(10);
//! while guard.state() != LockState::Lost && Instant::now() < until {
//!     std::thread::sleep(Duration::from_millis(20));
//! }
//! assert_eq!(guard.state(), LockState::Lost);
//! assert!(!guard.is_held());
//!
//! // And the write it protects is refused by the server.
//! assert!(matches!(
//!     guard.fenced_set_data("/app/orders-state", b"step 2"),
//!     Err(Error::LockLost { .. })
//! ));
//! assert_eq!(
//!     client.get_data("/app/orders-state")?.as_deref(),
//!     Some(&b"step 1"[..])
//! );
//! # Ok(())
//! # }
//! ```
//!
//! The embedded server is for development, tests and demos; run a ZooKeeper ensemble in
//! production. Its protocol is held to Apache ZooKeeper 3.9.5's by a differential test
//! ([`testing`](super::testing)), and zklock's own suite runs against Apache ZooKeeper.
