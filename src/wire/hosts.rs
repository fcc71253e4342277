//! The connect string, `host:port[,host:port...][/chroot]`: read once, here, when a client is
//! built, so that malformed input fails at once with a clear reason (rather than after the
//! connect timeout, or, for a TLS host rustls cannot name, at every connection attempt). Its
//! hosts are then resolved again on every attempt (a name's addresses change, as pods' do in
//! Kubernetes) and tried in rotation.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// One `host[:port]` of the connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// As written, for messages.
    pub(crate) entry: String,
    pub(crate) name: String,
    pub(crate) port: u16,
    /// `tcp+tls://` given for this host.
    pub(crate) tls: bool,
    /// `tcp://` given for this host: plain even if the client uses TLS.
    pub(crate) plain: bool,
}

impl Host {
    /// Whether a connection to this host uses TLS, `tls` being the client's default for hosts
    /// written without a scheme.
    pub(crate) fn uses_tls(&self, tls: bool) -> bool {
        self.tls || (tls && !self.plain)
    }
}

/// A connect string, read: its hosts in the order written, and its chroot (`None` for none or
/// `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    pub(crate) hosts: Vec<Host>,
    pub(crate) chroot: Option<String>,
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

/// Reads `connect_string`: hosts, then a chroot after the last host (as in the Java client).
/// `tls` says whether entries without a scheme use TLS (their host must then be a name rustls
/// can check a certificate against). The error is the reason, naming the entry at fault.
pub(crate) fn parse(connect_string: &str, tls: bool) -> Result<ConnectString, String> {
    let s = connect_string.trim();
    if s.is_empty() {
        return Err("empty connect string".into());
    }
    let (head, last) = s
        .rsplit_once(',')
        .map_or(("", s), |(head, last)| (head, last));
    // The chroot begins at the first '/' after the last host's scheme, if it has one.
    let host_start = last.find("://").map_or(0, |at| at + 3);
    let (last_host, chroot) = match last[host_start..].find('/') {
        Some(i) => last.split_at(host_start + i),
        None => (last, ""),
    };
    let entries = head.split(',').filter(|_| !head.is_empty());
    let mut hosts = Vec::new();
    for entry in entries.chain([last_host]) {
        let host = read_host(entry.trim(), tls).map_err(|why| format!("{why} in {entry:?}"))?;
        hosts.push(host);
    }
    let chroot = match chroot {
        "" | "/" => None,
        root => {
            crate::znode::path::validate_lock_path(root).map_err(|e| format!("bad chroot: {e}"))?;
            Some(root.to_owned())
        }
    };
    Ok(ConnectString { hosts, chroot })
}

/// Reads one `[scheme://]host[:port]` entry (see [`parse_address`]) and checks its host: an
/// IPv6 address, or a name or IPv4 address of the characters DNS allows, and, for a TLS host,
/// a name rustls can check a certificate against.
fn read_host(entry: &str, tls: bool) -> Result<Host, &'static str> {
    let address = parse_address(entry)?;
    let host = address.host;
    let ipv6 = if address.bracketed {
        // A zone id (`%eth0`) may follow a link-local address.
        let ip = host.split('%').next().unwrap_or(host);
        ip.parse::<std::net::Ipv6Addr>()
            .map_err(|_| "bad IPv6 address")?;
        true
    } else {
        host.parse::<std::net::Ipv6Addr>().is_ok()
    };
    if !ipv6 {
        if host.contains(':') {
            return Err("too many ':' (write IPv6 addresses in brackets)");
        }
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        {
            return Err("invalid character in host");
        }
    }
    if address.tls.unwrap_or(tls) && !tls_server_name(host) {
        return Err("a TLS host must be an IP address or a DNS name");
    }
    Ok(Host {
        entry: entry.to_owned(),
        name: host.to_owned(),
        port: address.port,
        tls: address.tls == Some(true),
        plain: address.tls == Some(false),
    })
}

/// Whether rustls can name `host` (127.1 or 2130706433, say, it cannot).
#[cfg(feature = "tls")]
fn tls_server_name(host: &str) -> bool {
    rustls_pki_types::ServerName::try_from(host).is_ok()
}

/// Without the `tls` feature no entry can use TLS.
#[cfg(not(feature = "tls"))]
fn tls_server_name(_: &str) -> bool {
    true
}

/// One entry of a connect string, `[scheme://]host[:port]`, before its host is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Address<'a> {
    /// `Some(true)` for `tcp+tls://`, `Some(false)` for `tcp://`, `None` without a scheme.
    tls: Option<bool>,
    /// The host name or address, without brackets (an IPv6 zone id, `%eth0`, is kept).
    host: &'a str,
    port: u16,
    /// Written in brackets, as an IPv6 address must be when a port follows it.
    bracketed: bool,
}

/// Reads one `[scheme://]host[:port]` entry: IPv6 addresses in brackets (an unbracketed
/// entry that is an IPv6 address as a whole is one, without a port), an absent or empty port
/// meaning 2181. What the host may contain is [`read_host`]'s to judge.
fn parse_address(entry: &str) -> Result<Address<'_>, &'static str> {
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

    /// The connect string's hosts as written and its chroot.
    fn split_connect_string(s: &str, tls: bool) -> Result<(String, Option<String>), String> {
        let read = parse(s, tls)?;
        let entries: Vec<&str> = read.hosts.iter().map(|h| h.entry.as_str()).collect();
        Ok((entries.join(","), read.chroot))
    }

    #[test]
    fn url_forms_ports_and_tls_hosts() {
        assert_eq!(
            split_connect_string("tcp://a:1", false).unwrap(),
            ("tcp://a:1".into(), None)
        );
        assert_eq!(
            split_connect_string("a:1,tcp+tls://b:2/root", false).unwrap(),
            ("a:1,tcp+tls://b:2".into(), Some("/root".into()))
        );
        assert_eq!(
            split_connect_string("[::1]:2181", true).unwrap().0,
            "[::1]:2181"
        );
        assert_eq!(
            split_connect_string("zk-1.example.com", true).unwrap().0,
            "zk-1.example.com"
        );
        for bad in [
            "host:1:2",
            "\0",
            "a b:1",
            "a:70000",
            "a:0",
            "http://a:1",
            "[::1",
            "[::1]x",
        ] {
            assert!(split_connect_string(bad, false).is_err(), "{bad}");
        }
        // As the transport reads them: empty port = 2181, an unbracketed IPv6 address (as a
        // whole, with the default port), zones.
        for good in [
            "a:",
            "[::1]:",
            "fe80::1:2181",
            "::1",
            "2001:db8::1",
            "[fe80::1%eth0]:2181",
            "zk.example.com.:1",
        ] {
            assert!(split_connect_string(good, false).is_ok(), "{good}");
        }
        #[cfg(feature = "tls")]
        {
            for tls_bad in [
                "127.1:1",
                "2130706433:1",
                "0x7f.1:1",
                "zk.0xab:1",
                "tcp+tls://127.1:2",
            ] {
                assert!(split_connect_string(tls_bad, true).is_err(), "{tls_bad}");
            }
            assert!(
                split_connect_string("tcp+tls://127.1:2", false).is_err(),
                "tls by scheme"
            );
            assert!(
                split_connect_string("tcp://127.1:2", true).is_ok(),
                "plain by scheme"
            );
            assert!(
                split_connect_string("zk_1.example:2", true).is_ok(),
                "rustls accepts it"
            );
        }
        assert!(
            split_connect_string("127.1:2", false).is_ok(),
            "fine without TLS"
        );
    }

    #[test]
    fn splits_hosts_and_chroot() {
        assert_eq!(
            split_connect_string("127.0.0.1:2181", false).unwrap(),
            ("127.0.0.1:2181".into(), None)
        );
        assert_eq!(
            split_connect_string("a:1,b:2/app/x", false).unwrap(),
            ("a:1,b:2".into(), Some("/app/x".into()))
        );
        assert_eq!(
            split_connect_string("a:1/", false).unwrap(),
            ("a:1".into(), None)
        );
        for bad in ["", "  ", "a:1,,b:2", "a:1/bad//chroot", "a:1/trailing/"] {
            assert!(split_connect_string(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_hosts_ports_ipv6_and_schemes() {
        let hosts = parse("zk1:2182, zk2 ,[::1]:2183,tcp+tls://zk3:2281,::1", false)
            .unwrap()
            .hosts;
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
        for bad in ["", "zk1:notaport", "zk1:0", "http://zk1"] {
            assert!(parse(bad, false).is_err(), "{bad}");
        }
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
        let mut rotation = Rotation::new(parse("zk.example:1", false).unwrap().hosts, resolver);
        let host = rotation.next();
        assert_eq!(rotation.resolve(&host).unwrap(), vec![a]);
        let host = rotation.next();
        assert_eq!(rotation.resolve(&host).unwrap(), vec![b]);
    }

    #[test]
    fn rotation_visits_every_host() {
        let mut rotation = Rotation::new(
            parse("a:1,b:2,c:3", false).unwrap().hosts,
            Arc::new(SystemResolver),
        );
        let mut seen: Vec<String> = (0..3).map(|_| rotation.next().name).collect();
        seen.sort();
        assert_eq!(seen, vec!["a", "b", "c"]);
    }
}
