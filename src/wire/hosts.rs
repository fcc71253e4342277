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

/// Parses `host[:port],...` (no chroot): IPv6 addresses in brackets, a missing port 2181,
/// an optional `tcp://` or `tcp+tls://` per host.
pub(crate) fn parse(hosts: &str) -> Result<Vec<Host>, Error> {
    let mut out = Vec::new();
    for entry in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let (tls, address) = match entry.split_once("://") {
            Some(("tcp", rest)) => (false, rest),
            Some(("tcp+tls", rest)) => (true, rest),
            Some((scheme, _)) => {
                return Err(Error::BadArguments(format!(
                    "unknown scheme {scheme}:// in {entry}"
                )))
            }
            None => (false, entry),
        };
        let (name, port) = split_port(address)
            .ok_or_else(|| Error::BadArguments(format!("invalid port in {entry}")))?;
        if name.is_empty() {
            return Err(Error::BadArguments(format!("no host name in {entry}")));
        }
        out.push(Host {
            entry: entry.to_owned(),
            name: name.to_owned(),
            port,
            tls,
        });
    }
    if out.is_empty() {
        return Err(Error::BadArguments("no host in the connect string".into()));
    }
    Ok(out)
}

fn split_port(address: &str) -> Option<(&str, u16)> {
    let port = |p: &str| -> Option<u16> {
        if p.is_empty() {
            Some(DEFAULT_PORT)
        } else {
            p.parse().ok().filter(|&p| p != 0)
        }
    };
    if let Some(bracketed) = address.strip_prefix('[') {
        let (ip, after) = bracketed.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(p) => Some((ip, port(p)?)),
            None if after.is_empty() => Some((ip, DEFAULT_PORT)),
            None => None,
        };
    }
    if address.parse::<std::net::Ipv6Addr>().is_ok() {
        return Some((address, DEFAULT_PORT));
    }
    match address.rsplit_once(':') {
        Some((host, p)) => Some((host, port(p)?)),
        None => Some((address, DEFAULT_PORT)),
    }
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
        let start = uuid::Uuid::new_v4().as_bytes()[0] as usize % hosts.len().max(1);
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
