//! The long form of zklock's documentation: what it guarantees, how to run it in production,
//! its command-line tool, its performance and how it is tested.
//!
//! These modules hold documentation only, no items; they are rendered here so that the
//! README can stay short and every example in them is compiled as a doctest. Read the
//! [crate documentation](crate) first for the API itself.
//!
//! | module | what it holds |
//! |---|---|
//! | [`guarantees`] | what a guard promises; the failure table (what holders and waiters see when processes crash, connections drop, servers fail, sessions expire); the three layers against a stale holder: the lease, fenced writes and fencing tokens |
//! | [`protocol`] | ZooKeeper's lock recipe as zklock runs it, compatibility with Apache Curator, and why zklock speaks the wire protocol itself; its threads |
//! | [`security`] | authentication, ACLs and TLS from the library |
//! | [`operating`] | session state, graceful shutdown, metrics, log lines, connect and outage errors |
//! | [`cli`] | the `zklock` command-line tool: `run`, `leader`, `status`, `break`, `revoke`, exit codes, its security flags, and recipes (a cron job, a deploy lock, an incident) |
//! | [`performance`] | measured latency, throughput, requests and notifications against Apache Curator, kazoo and a bare-socket floor, and how they were measured |
//! | [`testing`] | how the test suite runs against real servers, what each test file proves, the minimum Rust version |
//! | [`testing_your_code`] | your own tests of lost locks with the embedded server: expire a session, silence or reset a connection, delete a node, restart, from a test |
//! | [`nemesis`] | the Jepsen-style test: partitions, one-way loss, latency and pauses against a three-server ensemble, and the independent checker |

pub mod cli;
pub mod guarantees;
pub mod nemesis;
pub mod operating;
pub mod performance;
pub mod protocol;
pub mod security;
pub mod testing;
pub mod testing_your_code;
