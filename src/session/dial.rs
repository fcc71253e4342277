//! Establishing a session within the connect timeout, and saying why not when it fails.
//!
//! The transport makes one pass over the connect string's hosts per call (`wire::Connector`);
//! zklock repeats passes with a short back-off until the connect timeout, and after each failed
//! pass probes every host with a plain TCP connect of its own, to name each one's cause
//! honestly (refused, unreachable, timed out, DNS, or a TCP connection that granted no session
//! or no TLS handshake).

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::rt::cancel::{self, CancelToken};
use crate::wire as zk;
use log::debug;

use super::config::SessionConfig;
use crate::error::{ConnectCause, Error, HostFailure, Result};

/// The first pause between two passes over the hosts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// How long probing one host's TCP port may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Connects to `hosts` until a server grants a session or `deadline` passes; returns the
/// client and when the successful attempt began (the session exists no earlier: its lease
/// starts there). Stops early, as a failure, when `stops` is cancelled, and, if the config
/// asks for it, when every host refuses the connection.
pub(crate) fn dial(
    config: &SessionConfig,
    hosts: &[zk::Host],
    deadline: Instant,
    stops: Option<&CancelToken>,
) -> Result<(zk::Transport, Instant)> {
    // A cancel wakes the pauses between passes.
    let _on_cancel = cancel::unpark_on_cancel(stops);
    let stopped = || stops.is_some_and(CancelToken::is_cancelled);
    let started = Instant::now();
    let secure = config.security.is_tls();
    let mut found: Vec<HostFailure> = Vec::new();
    let mut pause = FIRST_PAUSE;
    let mut fast = false;
    loop {
        // One pass over every host: a pass's failure comes back at once, and the passes,
        // their pauses and the deadline are ours.
        let connector = config.security.configure(
            zk::Connector::new()
                .session_timeout(config.session_timeout)
                .max_reply_size(config.max_reply_size)
                .coalesce_requests(config.coalesce_requests),
        )?;
        let sent = Instant::now();
        let failure = match connector.connect(hosts, deadline) {
            Ok(zk) => return Ok((zk, sent)),
            Err(zk::Error::AuthFailed) => return Err(Error::AuthFailed),
            Err(err) => err.to_string(),
        };
        if Instant::now() >= deadline || stopped() {
            break;
        }
        found = probe_all(hosts, secure, deadline);
        debug!(
            "no session from {} yet ({failure}): {}",
            config.connect_string,
            summary(&found)
        );
        if config.fail_fast_if_refused
            && !found.is_empty()
            && found.iter().all(|h| h.cause == ConnectCause::Refused)
        {
            fast = true;
            break;
        }
        if !pause_until(Instant::now() + pause, deadline, stopped) {
            break;
        }
        pause = (pause * 2).min(MAX_PAUSE);
    }
    if found.is_empty() {
        // The one pass ran into the deadline: look at the hosts now, briefly.
        found = probe_all(hosts, secure, Instant::now() + PROBE_TIMEOUT / 2);
    }
    Err(failed(config, started, &found, fast))
}

/// The error of a connect that gave up, `started` at that instant, with what each host showed
/// (`fast`: because every host refused).
fn failed(config: &SessionConfig, started: Instant, found: &[HostFailure], fast: bool) -> Error {
    if found.iter().any(|h| h.cause == ConnectCause::Tls) {
        return Error::Tls {
            reason: format!(
                "no TLS session within {:?}: {}; is their certificate signed by the configured CA and valid for the host name, and is this their secureClientPort?",
                waited_since(started),
                summary(found)
            ),
        };
    }
    let reason = if fast {
        format!(
            "every server refused the connection (failing fast): {}",
            summary(found)
        )
    } else if found.is_empty() {
        "no server granted a session".to_owned()
    } else {
        format!("no server granted a session: {}", summary(found))
    };
    gave_up(config, started, reason, found.to_vec())
}

/// [`Error::Connect`] for a connect `started` at that instant.
pub(crate) fn gave_up(
    config: &SessionConfig,
    started: Instant,
    reason: String,
    hosts: Vec<HostFailure>,
) -> Error {
    Error::Connect {
        connect_string: config.connect_string.clone(),
        timeout: config.connect_timeout,
        waited: waited_since(started),
        reason,
        hosts,
    }
}

/// Whole milliseconds, so that a message reads "after 4.003s", not "after 4.003218154s"; under
/// a millisecond (a connect failing fast), whole microseconds, never "after 0ns".
fn waited_since(started: Instant) -> Duration {
    rounded(started.elapsed())
}

fn rounded(waited: Duration) -> Duration {
    if waited >= Duration::from_millis(1) {
        Duration::from_millis(waited.as_millis() as u64)
    } else {
        Duration::from_micros((waited.as_micros() as u64).max(1))
    }
}

fn summary(found: &[HostFailure]) -> String {
    let each: Vec<String> = found.iter().map(HostFailure::to_string).collect();
    each.join("; ")
}

/// Parks until `until`, but not past `deadline`; `false` if `deadline` came first or the dial
/// was `stopped`.
fn pause_until(until: Instant, deadline: Instant, stopped: impl Fn() -> bool) -> bool {
    let end = until.min(deadline);
    loop {
        if stopped() {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return now < deadline;
        }
        std::thread::park_timeout(end - now);
    }
}

/// Probes every host of `hosts` at once (a thread each), each for at most [`PROBE_TIMEOUT`]
/// and not past `deadline` by much.
fn probe_all(hosts: &[zk::Host], secure: bool, deadline: Instant) -> Vec<HostFailure> {
    let timeout = deadline
        .saturating_duration_since(Instant::now())
        .clamp(Duration::from_millis(100), PROBE_TIMEOUT);
    std::thread::scope(|scope| {
        let probes: Vec<_> = hosts
            .iter()
            .map(|host| scope.spawn(move || probe(host, secure, timeout)))
            .collect();
        hosts
            .iter()
            .zip(probes)
            .map(|(host, probe)| HostFailure {
                host: host.entry.clone(),
                cause: probe
                    .join()
                    .unwrap_or_else(|_| ConnectCause::Unreachable("probe failed".into())),
            })
            .collect()
    })
}

/// What a TCP connect of our own to `host` finds (`secure`: hosts without a scheme use TLS).
fn probe(host: &zk::Host, secure: bool, timeout: Duration) -> ConnectCause {
    let tls = host.uses_tls(secure);
    let addrs: Vec<_> = match (host.name.as_str(), host.port).to_socket_addrs() {
        Ok(addrs) => addrs.collect(),
        Err(err) => return ConnectCause::Dns(err.to_string()),
    };
    let mut cause = ConnectCause::Dns("no address".into());
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(_) if tls => return ConnectCause::Tls,
            Ok(_) => return ConnectCause::NoSession,
            Err(err) => {
                cause = match err.kind() {
                    std::io::ErrorKind::ConnectionRefused => ConnectCause::Refused,
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                        ConnectCause::TimedOut
                    }
                    _ => ConnectCause::Unreachable(err.to_string()),
                }
            }
        }
    }
    cause
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_in_milliseconds_or_microseconds_never_zero() {
        assert_eq!(
            rounded(Duration::from_nanos(4_003_218_154)),
            Duration::from_millis(4003)
        );
        assert_eq!(
            rounded(Duration::from_nanos(412_345)),
            Duration::from_micros(412)
        );
        assert_eq!(rounded(Duration::ZERO), Duration::from_micros(1));
    }

    #[test]
    fn a_port_where_nothing_listens_is_refused_and_a_bad_name_is_dns() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let timeout = Duration::from_secs(1);
        let host = |entry: &str| zk::parse_connect_string(entry, false).unwrap().hosts[0].clone();
        assert_eq!(
            probe(&host(&addr.to_string()), false, timeout),
            ConnectCause::Refused
        );
        assert!(matches!(
            probe(&host("no-such-host.invalid:2181"), false, timeout),
            ConnectCause::Dns(_)
        ));
        let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = host(&listening.local_addr().unwrap().to_string());
        assert_eq!(probe(&addr, false, timeout), ConnectCause::NoSession);
        assert_eq!(probe(&addr, true, timeout), ConnectCause::Tls);
    }
}
