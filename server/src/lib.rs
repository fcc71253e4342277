//! An in-memory, single-node server of ZooKeeper's client protocol, for tests, development
//! and demos: no JVM, starts in milliseconds, binds a free port on loopback.
//!
//! It serves what ZooKeeper 3.9's clients send (the handshake with session resumption, reads,
//! writes, `multi`/`multiRead`, every kind of watch, ACLs with digest auth, containers and TTL
//! nodes, the four-letter words tools use), with ZooKeeper's semantics: sequence numbers from
//! the parent's stored cversion, the order of its checks, one-shot watches fired before any
//! later reply that shows the change, sessions that expire on the server with their
//! ephemerals. Every semantic lives in [`model`], driven here by the real clock.
//!
//! It is not a replacement for a ZooKeeper ensemble in production: one node, and at most a
//! snapshot and a log on disk ([`Config::data_dir`]).
//!
//! A test can make on it the faults a client must survive, each something a real server, host
//! or network does: [`Server::expire_session`], [`Server::close_connection`] and
//! [`Server::reset_connection`] (ids from [`Server::connections`]), [`Server::set_silent`] and
//! [`Server::set_session_silent`], [`Server::set_reply_delay`], [`Server::delete_node`] (an
//! operator's delete), [`Server::restart`] (keeping the data and sessions, or wiping them) and
//! [`Server::sweep_containers`].
//!
//! ```no_run
//! use zklock_server::{Config, Server};
//!
//! let server = Server::start(Config::default())?;
//! println!("ZooKeeper protocol on {}", server.connect_string());
//! // ... point a client at it; the server stops when dropped.
//! # Ok::<(), std::io::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod faults;
mod fourlw;
mod journal;
pub mod model;
mod net;

use std::io;
use std::time::Duration;

pub use faults::{Connection, DeleteError};
pub use net::Server;

/// What a server is started with. [`Config::default`] is ZooKeeper's defaults on a free port.
#[derive(Debug, Clone)]
pub struct Config {
    /// The port on 127.0.0.1; 0 picks a free one (see [`Server::port`]). Defaults to 0.
    pub port: u16,
    /// ZooKeeper's `tickTime`: sessions expire on tick boundaries, and the session timeout
    /// bounds are in ticks. Defaults to 2 s.
    pub tick_time: Duration,
    /// The smallest session timeout granted. Defaults to 2 ticks.
    pub min_session_timeout: Option<Duration>,
    /// The largest session timeout granted. Defaults to 20 ticks.
    pub max_session_timeout: Option<Duration>,
    /// The largest request accepted (`jute.maxbuffer`); a larger frame closes its connection.
    /// Defaults to 0xfffff bytes.
    pub max_buffer: usize,
    /// How often the container sweep runs (`znode.container.checkIntervalMs`), the first time
    /// one interval after start. Defaults to 60 s.
    pub container_check_interval: Duration,
    /// How long a container that never had a child is kept
    /// (`znode.container.maxNeverUsedIntervalMs`); `None` keeps it forever. Defaults to `None`.
    pub container_max_never_used: Option<Duration>,
    /// Allow TTL nodes (`zookeeper.extendedTypesEnabled`); without, `createTTL` answers
    /// Unimplemented as ZooKeeper does by default. Defaults to false.
    pub extended_types: bool,
    /// A super user, as `user:password`: a session that adds this digest passes every ACL
    /// (ZooKeeper's `superDigest`). Defaults to `None`.
    pub super_user: Option<String>,
    /// A directory to keep the data in: a snapshot and an append-only log of every write
    /// since, replayed at start, so a server killed and started again on it keeps what it
    /// acknowledged, and its sessions. A write the directory cannot take is not acknowledged
    /// (its connection closes). Made if missing; a directory with other files and no marker of
    /// ours is refused. Defaults to `None`: in memory only.
    pub data_dir: Option<std::path::PathBuf>,
    /// With a data dir, how large the log may grow before the state is written as a snapshot
    /// and the log starts empty (ZooKeeper's `snapCount`, in bytes). The log grows to the
    /// larger of this and the last snapshot's size, so the directory holds at most about twice
    /// the state or twice this. Defaults to 16 MiB.
    pub snapshot_log_bytes: u64,
    /// With a data dir, write each entry to the disk (`fsync`) before acknowledging it, not
    /// only to the OS (which survives the process being killed, not the machine failing).
    /// Defaults to false, as for a test server.
    pub fsync: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            port: 0,
            tick_time: Duration::from_millis(2000),
            min_session_timeout: None,
            max_session_timeout: None,
            max_buffer: 0xfffff,
            container_check_interval: Duration::from_secs(60),
            container_max_never_used: None,
            extended_types: false,
            super_user: None,
            data_dir: None,
            fsync: false,
            snapshot_log_bytes: 16 << 20,
        }
    }
}

impl Config {
    pub(crate) fn model_config(&self) -> io::Result<model::ModelConfig> {
        let tick = self.tick_time.as_millis().max(1) as u64;
        let min = self
            .min_session_timeout
            .map_or(2 * tick, |d| d.as_millis() as u64);
        let max = self
            .max_session_timeout
            .map_or(20 * tick, |d| d.as_millis() as u64);
        if min > max || max > i32::MAX as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("session timeout bounds {min} ms > {max} ms"),
            ));
        }
        Ok(model::ModelConfig {
            tick_ms: tick,
            min_session_timeout_ms: min as i32,
            max_session_timeout_ms: max as i32,
            extended_types: self.extended_types,
            super_digest: self.super_user.as_deref().map(model::digest),
            container_max_never_used_ms: self
                .container_max_never_used
                .map_or(0, |d| d.as_millis() as u64),
        })
    }
}
