//! Connect strings: `host:port[,host:port...][/chroot]`, checked the way the transport and
//! rustls will read them, so that malformed input fails at once with a clear error.

use crate::error::{Error, Result};
use crate::wire as zk;

/// Splits `hosts/chroot` and checks every `host:port`, so that malformed input fails at once
/// rather than after the connect timeout (or, for a TLS host rustls cannot name, in a panic of
/// the client crate). As in the Java client, the chroot follows the last host.
pub(crate) fn split_connect_string(
    connect_string: &str,
    tls: bool,
) -> Result<(String, Option<String>)> {
    let invalid = |reason: &str| Error::InvalidConnectString {
        connect_string: connect_string.to_owned(),
        reason: reason.to_owned(),
    };
    let s = connect_string.trim();
    if s.is_empty() {
        return Err(invalid("empty connect string"));
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
    let chroot = (!chroot.is_empty()).then_some(chroot);
    let hosts = if head.is_empty() {
        last_host.to_owned()
    } else {
        format!("{head},{last_host}")
    };
    for entry in hosts.split(',') {
        check_host(entry.trim(), tls)
            .map_err(|reason| invalid(&format!("{reason} in {entry:?}")))?;
    }
    let chroot = match chroot {
        None | Some("/") => None,
        Some(root) => {
            crate::znode::path::validate_lock_path(root)
                .map_err(|e| invalid(&format!("bad chroot: {e}")))?;
            Some(root.to_owned())
        }
    };
    Ok((hosts, chroot))
}

/// Checks one `[scheme://]host[:port]` entry, read as the transport reads it (see
/// [`zk::parse_address`]): the host must be an IPv6 address, or a name or IPv4 address of
/// the characters DNS allows. `tls` says whether entries without a scheme use TLS.
fn check_host(entry: &str, tls: bool) -> std::result::Result<(), &'static str> {
    let address = zk::parse_address(entry)?;
    let tls = address.tls.unwrap_or(tls);
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
    if tls && !tls_server_name(host) {
        return Err("a TLS host must be an IP address or a DNS name");
    }
    Ok(())
}

/// Whether rustls can name `host` (127.1 or 2130706433, say, it cannot): refused when the
/// connect string is read, not at every connection attempt.
#[cfg(feature = "tls")]
fn tls_server_name(host: &str) -> bool {
    rustls_pki_types::ServerName::try_from(host).is_ok()
}

/// Without the `tls` feature no entry can use TLS.
#[cfg(not(feature = "tls"))]
fn tls_server_name(_: &str) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(
                matches!(
                    split_connect_string(bad, false),
                    Err(Error::InvalidConnectString { .. })
                ),
                "{bad}"
            );
        }
    }
}
