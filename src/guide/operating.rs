//! Running zklock in production: session state, graceful shutdown, metrics, log lines,
//! connect errors and outage errors.
//!
//! # Session state
//!
//! [`Client::state()`](crate::Client::state) says where the session stands, decided when called
//! (like a guard's state, from the lease, so a frozen process or a stalled network thread never
//! reads `Connected`):
//!
//! | [`SessionState`] | meaning | what to do |
//! |---|---|---|
//! | `Connected` | connected, and the server answered less than 2/3 of the session timeout ago | work |
//! | `Suspended` | the connection is down, or the lease ran out; the session may live on | stop touching what the locks protect until `Connected` again (Curator's SUSPENDED) |
//! | `Expired` | the server expired the session: its locks are lost | the next call on the client opens a new session |
//! | `Closed` | `close()` was called, the credentials were rejected, or this is a forked child | final |
//!
//! Wait for a change with
//! [`client.wait_state_change(seen, timeout)`](crate::Client::wait_state_change) (it also wakes
//! when the lease runs out, on your thread's clock, and at once on `close()`; in async code
//! [`wait_state_change_async(seen)`](crate::Client::wait_state_change_async), bounded by the
//! runtime's timeout; [`wait_state_change_with(seen, Wait)`](crate::Client::wait_state_change_with)
//! and its async form for a deadline or a [`CancelToken`](crate::CancelToken)), or register a
//! listener with [`ClientBuilder::on_state_change`], told of every change (a [`StateChange`])
//! on a thread of its own (`zklock-listener`), never on zklock's network thread:
//!
//! ```no_run
//! fn main() -> zklock::Result<()> {
//!     let client = zklock::Client::builder("zk1:2181,zk2:2181,zk3:2181")
//!         .on_state_change(|change| {
//!             eprintln!("zookeeper: {} -> {} after {:?}", change.from, change.to, change.after)
//!         })
//!         .connect()?;
//!     assert_eq!(client.state(), zklock::client::SessionState::Connected);
//!     Ok(())
//! }
//! ```
//!
//! Each client has a `zklock-state` thread that watches the session and publishes the changes
//! (logs, metrics, the listener); nothing of it runs on the network thread. Both threads end with
//! the client (`close()` or the last drop, which give a listener busy at that moment one second
//! to return). A listener that calls its client should capture
//! [`client.downgrade()`](crate::Client::downgrade), a [`WeakClient`], and
//! [`upgrade()`](crate::client::WeakClient::upgrade) it for each call: a listener holding a `Client`
//! keeps the session open until `close()`.
//!
//! # Graceful shutdown
//!
//! A process that is stopped without closing its client leaves its locks to the server, which
//! hands them on one session timeout later. To hand them on at once:
//!
//! - `let _shutdown = client.close_on_signals()?;` (feature `signals`): on SIGTERM or SIGINT
//!   the session is closed, which releases every lock at once (the next holder does not wait
//!   for the session timeout), then the process ends as the signal would have; nothing is
//!   installed unless asked.
//! - Programs with shutdown work of their own register for the signals themselves, cancel their
//!   waiting threads ([`CancelToken::cancel`]; the queued nodes are withdrawn at once) or call
//!   [`Client::close`] (which wakes every blocked call with [`Error::Closed`]), join their
//!   threads, then exit. `std::process::exit` runs no destructors, so close the client before
//!   it. `examples/counter.rs` does this on Ctrl-C. Async programs do the same from their
//!   signal future with [`Client::close_async`] (`examples/async_service.rs`).
//!
//! Measured with `examples/failover.rs` (a leader process on the default 10 s session gets
//! SIGTERM while a second participant waits; local server, 2026-11-24, 3 rounds each): the
//! waiter led 10,099–10,194 ms after the signal without the helper (median 10,181: the
//! session timeout) and 1–3 ms after it with `close_on_signals` (median 2).
//!
//! # Metrics (cargo feature `metrics`)
//!
//! Through the [`metrics`](https://docs.rs/metrics) facade (0.24): install any exporter and they
//! appear: wait and hold histograms, acquisitions by outcome, lost locks by cause, session
//! state, reconnects, expirations, background releases, locks held and waiting, the oldest
//! hold. **The reference, kept with the code, is [`zklock::metrics`](crate::metrics)**: every
//! name and label, the names as constants, [`BUCKETS`](crate::metrics::BUCKETS) for exporters
//! that need histogram buckets (otherwise they render summaries), and when a loss is counted.
//! Two of them are worth an alert of their own: `zklock_locks_lost_total` (by `cause`: the session
//! expired, the node was deleted, the lease ran out, the client was closed) and
//! `zklock_oldest_hold_seconds`, refreshed every second, so a lock stuck for an hour shows
//! before it is released.
//!
//! `examples/metrics.rs` serves them as Prometheus text with `metrics-exporter-prometheus`:
//!
//! ```sh
//! cargo run --example metrics --features metrics
//! curl 127.0.0.1:9464/metrics
//! ```
//!
//! Every series that does not depend on a path exists at zero from the first client on, so
//! `increase(zklock_locks_lost_total[10m]) > 0` works before the first loss.
//! `examples/prometheus-alerts.yml` has sample alert rules and `examples/grafana-dashboard.json`
//! a dashboard; a unit test checks that every metric they use exists. A `path` label with the
//! lock path is added to the per-lock metrics by `ClientBuilder::metrics_path_label(true)`; it
//! is off by default, since every path makes series of its own.
//!
//! # Log lines
//!
//! Through the `log` crate, with the lock path, node and session in each message. Lines made on
//! zklock's I/O and runtime threads go through a non-blocking queue to a `zklock-log` thread,
//! so a slow logger never holds up the network.
//!
//! | level | target | line |
//! |---|---|---|
//! | info | `zklock::state` | `zookeeper session 0x… suspended: connection lost; its locks read Suspended` (or `…: no answer from the server for 2/3 of the session timeout (the lease ran out); …`) |
//! | info | `zklock::state` | `zookeeper session 0x… recovered after 3.2s`; after an expiry: `zookeeper session 0x… replaces expired session 0x…; out for 9.1s` |
//! | warn | `zklock::state` | `zookeeper session 0x… expired (out for …): every lock held through it is lost; the next call opens a new session` |
//! | info | `zklock::state` | `zookeeper session 0x… closed` |
//! | warn | `zklock::observe` | `lock /locks/orders lost (expired): node /locks/orders/_c_…-lock-0000000007, session 0x…, held for 12.5s` |
//! | debug | `zklock::observe` | `acquired <node> (mutex on <path>, session 0x…, fencing token …) after waiting 1.2s`; `released <node> (…) after holding 3.4s` |
//! | info, warn | `zklock::wire::conn` | the transport's own lines: connection lost and reconnected (with the server), a reset after a malformed frame, a session ended |
//!
//! # Connect errors
//!
//! [`connect()`](crate::ClientBuilder::connect) tries for
//! [`connect_timeout`](crate::ClientBuilder::connect_timeout) (default 15 s), whatever the
//! session timeout, and the error says how long it tried and what each host did:
//!
//! ```text
//! could not connect to ZooKeeper at "10.0.0.5:2181" after 15.004s (connect timeout 15s): no server granted a session: 10.0.0.5:2181: connection refused (nothing listens there)
//! ```
//!
//! [`Error::Connect`]'s `hosts` carries the same as a [`HostFailure`] per host, each with a
//! [`ConnectCause`]: `Refused`, `TimedOut`, `Unreachable`, `Dns`, `Tls` (TCP accepted, no TLS
//! handshake) or `NoSession` (TCP accepted, no session). With
//! [`ClientBuilder::fail_fast_if_refused(true)`](crate::ClientBuilder::fail_fast_if_refused) it
//! gives up after one try when every host refuses outright (nothing listens), which suits
//! command-line tools; a host that does not answer, does not resolve or accepts the connection
//! keeps it trying.
//!
//! # Outage errors
//!
//! A call whose deadline passes while the connection is down returns
//! [`Error::ConnectionLoss`], which names what the call was about, the server the session was
//! last connected to and how long the call was allowed to wait:
//!
//! ```text
//! connection to ZooKeeper lost (last server 10.0.0.5:2181) and not restored within 2s (call on /locks/orders)
//! ```
//!
//! Match it as `Error::ConnectionLoss { .. }`: its fields (`path`, `server`, `timeout`) are
//! `Option`s, `None` where a call does not know them, and more may be added.
//!
//! # A lock path that runs out of numbers
//!
//! Every create and delete under a lock path advances its child counter, a signed 32-bit
//! number from which each node's sequence number comes. A lock path that is never empty long
//! enough for the server's container sweep (`znode.container.checkIntervalMs`, 60 s by
//! default) to remove it reaches 2^31 after about a billion acquisitions: 12 days for a lock
//! taken a thousand times a second. ZooKeeper 3.8 then gives every new node the number
//! `2147483647`, so the queue has no order left and two contenders could each find themselves
//! first (Curator's recipe, like any other, breaks there). zklock refuses instead: such a
//! node is withdrawn and the call fails with [`Error::SequenceExhausted`], logged at `error`.
//! To recover, stop the contenders of that path until it is empty and delete it (`deleteall`
//! in ZooKeeper's CLI); the next acquisition makes it again, numbering from 0. To see it
//! coming, read the lock path's `cversion` (`stat <path>` in ZooKeeper's CLI).
//!
//! [`SessionState`]: crate::client::SessionState
//! [`StateChange`]: crate::client::StateChange
//! [`ClientBuilder::on_state_change`]: crate::ClientBuilder::on_state_change
//! [`WeakClient`]: crate::client::WeakClient
//! [`CancelToken::cancel`]: crate::CancelToken::cancel
//! [`Client::close`]: crate::Client::close
//! [`Client::close_async`]: crate::Client::close_async
//! [`Error::Closed`]: crate::Error::Closed
//! [`Error::Connect`]: crate::Error::Connect
//! [`Error::ConnectionLoss`]: crate::Error::ConnectionLoss
//! [`Error::SequenceExhausted`]: crate::Error::SequenceExhausted
//! [`HostFailure`]: crate::error::HostFailure
//! [`ConnectCause`]: crate::error::ConnectCause
