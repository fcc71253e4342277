//! ACLs as ZooKeeper checks them: `checkACL` (super, world:anyone, then each scheme's match),
//! `fixupACL` (the `auth` scheme expanded, every id validated), and the digest scheme's hash.

use std::net::Ipv4Addr;

use zklock_proto::{code, perms, Acl, Id};

/// Whether the identities `auth` may do `perm` on a node of `acl` (`ZooKeeperServer.checkACL`).
pub(crate) fn allowed(acl: &[Acl], perm: i32, auth: &[Id]) -> bool {
    if acl.is_empty() || auth.iter().any(|id| id.scheme == "super") {
        return true;
    }
    acl.iter().any(|a| {
        a.perms & perm != 0
            && ((a.id.scheme == "world" && a.id.id == "anyone")
                || auth
                    .iter()
                    .any(|c| c.scheme == a.id.scheme && matches(c, &a.id.id)))
    })
}

/// `ServerAuthenticationProvider.matches` for the schemes served: digest (equal ids) and ip
/// (an address, or a network as `addr/bits`).
fn matches(client: &Id, expr: &str) -> bool {
    match client.scheme.as_str() {
        "digest" | "super" => client.id == expr,
        "ip" => ip_matches(&client.id, expr),
        _ => false,
    }
}

fn ip_matches(addr: &str, expr: &str) -> bool {
    let (net, bits) = match expr.split_once('/') {
        Some((n, b)) => match b.parse::<u32>() {
            Ok(b) if b <= 32 => (n, b),
            _ => return false,
        },
        None => (expr, 32),
    };
    match (addr.parse::<Ipv4Addr>(), net.parse::<Ipv4Addr>()) {
        (Ok(a), Ok(n)) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        _ => addr == expr,
    }
}

/// `PrepRequestProcessor.fixupACL`: duplicates removed, `auth` expanded to the caller's
/// authenticated ids, every other id checked by its scheme. `Err(InvalidACL)` otherwise.
pub(crate) fn fixup(acl: &[Acl], auth: &[Id]) -> Result<Vec<Acl>, i32> {
    let mut uniq: Vec<&Acl> = Vec::with_capacity(acl.len());
    for a in acl {
        if !uniq.contains(&a) {
            uniq.push(a);
        }
    }
    if uniq.is_empty() {
        return Err(code::INVALID_ACL);
    }
    let mut out = Vec::with_capacity(uniq.len());
    for a in uniq {
        let id = &a.id;
        if id.scheme == "world" && id.id == "anyone" {
            out.push(a.clone());
        } else if id.scheme == "auth" {
            // Only schemes whose identities are authenticated (digest, super), never ip.
            let mut any = false;
            for c in auth {
                if c.scheme == "digest" || c.scheme == "super" {
                    any = true;
                    out.push(Acl {
                        perms: a.perms,
                        id: c.clone(),
                    });
                }
            }
            if !any {
                return Err(code::INVALID_ACL);
            }
        } else if valid_id(id) {
            out.push(a.clone());
        } else {
            return Err(code::INVALID_ACL);
        }
    }
    Ok(out)
}

fn valid_id(id: &Id) -> bool {
    match id.scheme.as_str() {
        // DigestAuthenticationProvider.isValid: exactly one ':'.
        "digest" => id.id.split(':').count() == 2,
        "ip" => {
            let (addr, bits) = match id.id.split_once('/') {
                Some((a, b)) => (a, b.parse::<u32>().ok().filter(|b| *b <= 32)),
                None => (id.id.as_str(), Some(32)),
            };
            bits.is_some() && addr.parse::<Ipv4Addr>().is_ok()
        }
        _ => false,
    }
}

/// The ACL as shown to a reader without ADMIN: digest hashes masked (`user:x`), as
/// `getACL` answers since 3.9.
pub(crate) fn masked(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(|a| {
            if a.id.scheme == "digest" {
                let user = a.id.id.split(':').next().unwrap_or("");
                Acl {
                    perms: a.perms,
                    id: Id {
                        scheme: "digest".into(),
                        id: format!("{user}:x"),
                    },
                }
            } else {
                a.clone()
            }
        })
        .collect()
}

/// The digest scheme's id for `user:password`: `user:base64(sha1(user:password))`.
pub(crate) fn digest(credentials: &str) -> String {
    let user = credentials.split(':').next().unwrap_or("");
    format!("{user}:{}", base64(&sha1(credentials.as_bytes())))
}

/// `world:anyone` with every permission.
pub(crate) fn open() -> Vec<Acl> {
    vec![Acl::new(perms::ALL, "world", "anyone")]
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// SHA-1, for the digest scheme only (ZooKeeper's choice, not a security property here).
fn sha1(msg: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut data = msg.to_vec();
    data.push(0x80);
    while data.len() % 64 != 56 {
        data.push(0);
    }
    data.extend_from_slice(&((msg.len() as u64) * 8).to_be_bytes());
    for block in data.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0; 20];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_zookeeper_s() {
        // DigestAuthenticationProvider.generateDigest("super:test"), as ZooKeeper's docs show.
        assert_eq!(digest("super:test"), "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
    }

    #[test]
    fn ip_networks_match() {
        assert!(ip_matches("127.0.0.1", "127.0.0.0/8"));
        assert!(ip_matches("127.0.0.1", "127.0.0.1"));
        assert!(!ip_matches("127.0.0.1", "10.0.0.0/8"));
    }

    #[test]
    fn fixup_expands_auth_and_refuses_bad_ids() {
        let me = vec![
            Id {
                scheme: "ip".into(),
                id: "127.0.0.1".into(),
            },
            Id {
                scheme: "digest".into(),
                id: "u:h".into(),
            },
        ];
        let out = fixup(&[Acl::new(31, "auth", "")], &me).unwrap();
        assert_eq!(out, vec![Acl::new(31, "digest", "u:h")]);
        assert_eq!(
            fixup(&[Acl::new(31, "auth", "")], &me[..1]),
            Err(code::INVALID_ACL)
        );
        assert_eq!(
            fixup(&[Acl::new(31, "world", "x")], &me),
            Err(code::INVALID_ACL)
        );
        assert_eq!(fixup(&[], &me), Err(code::INVALID_ACL));
        assert!(fixup(&[Acl::new(1, "ip", "10.0.0.0/8")], &me).is_ok());
    }
}
