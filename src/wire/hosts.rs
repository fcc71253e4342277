//! The connect string's hosts: parsed once, resolved again on every attempt (a name's
//! addresses change, as pods' do in Kubernetes), tried in rotation.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use super::Error;

/// One `host[:port]` of the connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// As written, for messages.
    pub(crate) entry: String,
    pub(crate) name: String,
    pub(crate) port: u16,
    /// `tcp+tls://` given for this host.
    pub(crate) tls: bool,
}

/// Turns a host name and port into addresses; a seam so that tests can move a name.
pub(crate) trait Resolve: Send + Sync {
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The system resolver, asked afresh every time.
pub(crate) struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok((name, port).to_socket_addrs()?.collect())
    }
}

pub(crate) const DEFAULT_PORT: u16 = 2181;

/// One entry of a connect string, `[scheme://]host[:port]`, as zklock reads it everywhere: to
/// connect, to check a connect string before connecting, and to probe a host that gave no
/// session. One reading, so that what is checked is what is dialled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Address<'a> {
    /// `Some(true)` for `tcp+tls://`, `Some(false)` for `tcp://`, `None` without a scheme.
    pub(crate) tls: Option<bool>,
    /// The host name or address, without brackets (an IPv6 zone id, `%eth0`, is kept).
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    /// Written in brackets, as an IPv6 address must be when a port follows it.
    pub(crate) bracketed: bool,
}

/// Reads one `[scheme://]host[:port]` entry: IPv6 addresses in brackets (an unbracketed
/// entry that is an IPv6 address as a whole is one, without a port), an absent or empty port
/// meaning 2181. What the host may contain is for the caller to judge.
pub(crate) fn parse_address(entry: &str) -> Result<Address<'_>, &'static str> {
    const UNKNOWN_SCHEME: &str = "unknown scheme (use tcp:// or tcp+tls://)";
    let (tls, address) = match entry.split_once("://") {
        Some(("tcp", rest)) => (Some(false), rest),
        Some(("tcp+tls", rest)) => (Some(true), rest),
        Some(_) => return Err(UNKNOWN_SCHEME),
        None => (None, entry),
    };
    if address.contains("://") {
        return Err(UNKNOWN_SCHEME);
    }
    let port = |p: &str| -> Result<u16, &'static str> {
        if p.is_empty() {
            return Ok(DEFAULT_PORT);
        }
        p.parse().ok().filter(|&p| p != 0).ok_or("bad port")
    };
    let (host, port, bracketed) = if let Some(bracketed) = address.strip_prefix('[') {
        let (ip, after) = bracketed.split_once(']').ok_or("unclosed '['")?;
        let port = match after.strip_prefix(':') {
            Some(p) => port(p)?,
            None if after.is_empty() => DEFAULT_PORT,
            None => return Err("junk after ']'"),
        };
        (ip, port, true)
    } else if address.parse::<std::net::Ipv6Addr>().is_ok() {
        (address, DEFAULT_PORT, false)
    } else {
        match address.rsplit_once(':') {
            Some((host, p)) => (host, port(p)?, false),
            None => (address, DEFAULT_PORT, false),
        }
    };
    if host.is_empty() {
        return Err("empty host");
    }
    Ok(Address {
        tls,
        host,
        port,
        bracketed,
    })
}

/// Parses `host[:port],...` (no chroot), each entry as [`parse_address`] reads it; empty
/// entries are skipped.
pub(crate) fn parse(hosts: &str) -> Result<Vec<Host>, Error> {
    let mut out = Vec::new();
    for entry in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let address =
            parse_address(entry).map_err(|why| Error::BadArguments(format!("{why} in {entry}")))?;
        out.push(Host {
            entry: entry.to_owned(),
            name: address.host.to_owned(),
            port: address.port,
            tls: address.tls == Some(true),
        });
    }
    if out.is_empty() {
        return Err(Error::BadArguments("no host in the connect string".into()));
    }
    Ok(out)
}

/// The hosts in rotation, starting at a random one so that many clients spread over an
/// ensemble.
pub(crate) struct Rotation {
    hosts: Vec<Host>,
    next: usize,
    pub(crate) resolver: Arc<dyn Resolve>,
}

impl Rotation {
    pub(crate) fn new(hosts: Vec<Host>, resolver: Arc<dyn Resolve>) -> Rotation {
        let start = crate::random::Uuid::new_v4().as_bytes()[0] as usize % hosts.len().max(1);
        Rotation {
            hosts,
            next: start,
            resolver,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// The next host to try.
    pub(crate) fn next(&mut self) -> Host {
        let host = self.hosts[self.next % self.hosts.len()].clone();
        self.next = (self.next + 1) % self.hosts.len();
        host
    }

    /// The host's addresses now (asked again at every attempt).
    pub(crate) fn resolve(&self, host: &Host) -> io::Result<Vec<SocketAddr>> {
        let addrs = self.resolver.resolve(&host.name, host.port)?;
        if addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no address"));
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[test]
    fn parses_hosts_ports_ipv6_and_schemes() {
        let hosts = parse("zk1:2182, zk2 ,[::1]:2183,tcp+tls://zk3:2281,::1").unwrap();
        let got: Vec<_> = hosts
            .iter()
            .map(|h| (h.name.as_str(), h.port, h.tls))
            .collect();
        assert_eq!(
            got,
            vec![
                ("zk1", 2182, false),
                ("zk2", 2181, false),
                ("::1", 2183, false),
                ("zk3", 2281, true),
                ("::1", 2181, false)
            ]
        );
        assert!(parse("").is_err());
        assert!(parse("zk1:notaport").is_err());
        assert!(parse("zk1:0").is_err());
        assert!(parse("http://zk1").is_err());
    }

    #[test]
    fn one_reading_of_an_entry() {
        let read = |entry| parse_address(entry).map(|a| (a.tls, a.host, a.port, a.bracketed));
        assert_eq!(read("zk1:2182"), Ok((None, "zk1", 2182, false)));
        assert_eq!(read("zk1"), Ok((None, "zk1", 2181, false)));
        assert_eq!(read("zk1:"), Ok((None, "zk1", 2181, false)));
        assert_eq!(read("[::1]:2183"), Ok((None, "::1", 2183, true)));
        assert_eq!(read("[::1]"), Ok((None, "::1", 2181, true)));
        assert_eq!(read("[::1]:"), Ok((None, "::1", 2181, true)));
        assert_eq!(
            read("[fe80::1%eth0]:1"),
            Ok((None, "fe80::1%eth0", 1, true))
        );
        // An unbracketed IPv6 address is an address as a whole, with the default port.
        assert_eq!(read("::1"), Ok((None, "::1", 2181, false)));
        assert_eq!(
            read("fe80::1:2181"),
            Ok((None, "fe80::1:2181", 2181, false))
        );
        assert_eq!(read("tcp://a:1"), Ok((Some(false), "a", 1, false)));
        assert_eq!(read("tcp+tls://a"), Ok((Some(true), "a", 2181, false)));
        for bad in [
            "http://a:1",
            "tcp://a://b",
            "[::1",
            "[::1]x",
            "a:0",
            "a:70000",
            "a:x",
            ":1",
            "",
        ] {
            assert!(parse_address(bad).is_err(), "{bad}");
        }
    }

    /// A resolver whose answer changes between calls, as a Kubernetes pod's does.
    struct Moving(Mutex<Vec<SocketAddr>>);

    impl Resolve for Moving {
        fn resolve(&self, _: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            let mut answers = self.0.lock();
            Ok(vec![answers.remove(0)])
        }
    }

    #[test]
    fn every_attempt_resolves_the_name_again() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:1".parse().unwrap();
        let resolver = Arc::new(Moving(Mutex::new(vec![a, b])));
        let mut rotation = Rotation::new(parse("zk.example:1").unwrap(), resolver);
        let host = rotation.next();
        assert_eq!(rotation.resolve(&host).unwrap(), vec![a]);
        let host = rotation.next();
        assert_eq!(rotation.resolve(&host).unwrap(), vec![b]);
    }

    #[test]
    fn rotation_visits_every_host() {
        let mut rotation = Rotation::new(parse("a:1,b:2,c:3").unwrap(), Arc::new(SystemResolver));
        let mut seen: Vec<String> = (0..3).map(|_| rotation.next().name).collect();
        seen.sort();
        assert_eq!(seen, vec!["a", "b", "c"]);
    }
}
