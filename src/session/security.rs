//! Authentication, node ACLs and TLS: how a client proves who it is and who may touch the
//! nodes it creates.

use std::fmt;

use crate::wire as zk;
use crate::wire::{perms, Acl, Acls};

use crate::error::{Error, Result};

/// The ACL zklock puts on every node it creates: lock nodes, the lock paths and parents it
/// creates, and the chroot. Set it with [`ClientBuilder::acl`](crate::ClientBuilder::acl).
///
/// The choice matters because ZooKeeper checks the *parent's* ACL when a child is created or
/// deleted. With [`NodeAcl::Open`] any client that reaches the ensemble can delete a holder's
/// node and so take its lock. With the creator-only modes only sessions authenticated as the
/// same identity (for example every instance of one service, sharing its credentials) can
/// queue on, release or break the lock; others get [`Error::NoAuth`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NodeAcl {
    /// Everyone may do everything (ZooKeeper's `OPEN_ACL_UNSAFE`, its default).
    #[default]
    Open,
    /// Only the identities the session authenticated with (`CREATOR_ALL_ACL`). Other
    /// identities cannot even see the queue.
    CreatorOnly,
    /// As [`CreatorOnly`](Self::CreatorOnly), plus READ for everyone, so that others can still
    /// inspect holders and waiters (`zklock status`) but not change anything.
    CreatorOnlyAnyoneRead,
}

/// The ACL of the parents zklock creates on the way to a lock path (and of the chroot). Set it
/// with [`ClientBuilder::parent_acl`](crate::ClientBuilder::parent_acl).
///
/// ZooKeeper checks a parent's ACL when a child is created, so a creator-only parent keeps
/// every other identity from creating anything below it: the first service to lock
/// `/shared/a` would own `/shared`, and another identity's `/shared/b` would fail with
/// [`Error::NoAuth`]. Only with a creator-only [`NodeAcl`] does the choice matter; with
/// [`NodeAcl::Open`] parents are open too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ParentAcl {
    /// Anyone may read a parent and create children in it; only the identity that created it
    /// may change or delete it. Locks of different identities can live side by side below a
    /// common parent, while each lock path and its nodes stay creator-only.
    #[default]
    Shared,
    /// Parents get the same ACL as the lock nodes ([`NodeAcl`]). Stricter: the identity that
    /// creates a parent first is the only one that can create locks below it.
    SameAsLocks,
}

static CREATOR_ALL_ANYONE_CREATE_READ: [Acl; 2] = [
    Acl::new(perms::ALL, "auth", ""),
    Acl::new(perms::READ | perms::CREATE, "world", "anyone"),
];

static CREATOR_ALL_ANYONE_READ: [Acl; 2] = [
    Acl::new(perms::ALL, "auth", ""),
    Acl::new(perms::READ, "world", "anyone"),
];

impl NodeAcl {
    pub(crate) fn acls(self) -> Acls {
        match self {
            NodeAcl::Open => &zk::OPEN_ACL,
            NodeAcl::CreatorOnly => &zk::CREATOR_ALL_ACL,
            NodeAcl::CreatorOnlyAnyoneRead => &CREATOR_ALL_ANYONE_READ,
        }
    }
}

/// Credentials and transport security of a client. Never printed: `Debug` shows only which
/// mechanisms are configured.
#[derive(Clone, Default)]
pub(crate) struct Security {
    pub(crate) acl: NodeAcl,
    pub(crate) parent_acl: ParentAcl,
    /// `addAuth` pairs: scheme and credential (for `digest`, `user:password`).
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    #[cfg(feature = "sasl")]
    pub(crate) sasl_digest: Option<(String, String)>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Tls>,
}

/// PEM material for TLS.
#[cfg(feature = "tls")]
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) ca_pem: String,
    pub(crate) identity: Option<(String, String)>,
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Security");
        d.field("acl", &self.acl);
        d.field(
            "auth_schemes",
            &self
                .auth
                .iter()
                .map(|(scheme, _)| scheme.as_str())
                .collect::<Vec<_>>(),
        );
        #[cfg(feature = "sasl")]
        d.field(
            "sasl_digest_md5",
            &self.sasl_digest.as_ref().map(|(user, _)| user.as_str()),
        );
        #[cfg(feature = "tls")]
        d.field(
            "tls",
            &self.tls.as_ref().map(|t| {
                if t.identity.is_some() {
                    "ca+identity"
                } else {
                    "ca"
                }
            }),
        );
        d.finish()
    }
}

impl Security {
    /// The ACL of parents created on the way to a lock path, and of the chroot.
    pub(crate) fn parents(&self) -> Acls {
        match (self.acl, self.parent_acl) {
            (NodeAcl::Open, _) => &zk::OPEN_ACL,
            (acl, ParentAcl::SameAsLocks) => acl.acls(),
            (_, ParentAcl::Shared) => &CREATOR_ALL_ANYONE_CREATE_READ,
        }
    }

    fn authenticated(&self) -> bool {
        #[cfg(feature = "sasl")]
        if self.sasl_digest.is_some() {
            return true;
        }
        !self.auth.is_empty()
    }

    /// Who a session with these credentials is to the server, for messages: `digest:<user>`
    /// (never the password), `sasl:<user>`, `x509:<certificate subject>`, another scheme's name
    /// alone (its credential may be secret), comma-separated; `anonymous (world)` with none.
    pub(crate) fn identity(&self) -> String {
        // Added to only with the `sasl` or `tls` feature.
        #[cfg_attr(not(any(feature = "sasl", feature = "tls")), allow(unused_mut))]
        let mut ids: Vec<String> = self
            .auth
            .iter()
            .map(|(scheme, credential)| match scheme.as_str() {
                // `user:password`: the user alone.
                "digest" => {
                    let user = credential.split(|&b| b == b':').next().unwrap_or_default();
                    format!("digest:{}", String::from_utf8_lossy(user))
                }
                other => other.to_owned(),
            })
            .collect();
        #[cfg(feature = "sasl")]
        if let Some((user, _)) = &self.sasl_digest {
            ids.push(format!("sasl:{user}"));
        }
        #[cfg(feature = "tls")]
        if let Some((chain_pem, _)) = self.tls.as_ref().and_then(|t| t.identity.as_ref()) {
            // The server's `x509:` id is the certificate's subject, as ACLs must name it.
            ids.push(match zk::subject::subject_of_pem(chain_pem) {
                Some(subject) => format!("x509:{subject}"),
                None => "x509 client certificate".to_owned(),
            });
        }
        if ids.is_empty() {
            return "anonymous (world)".to_owned();
        }
        ids.join(", ")
    }

    pub(crate) fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Applies the credentials and TLS options to a connector.
    pub(crate) fn configure(&self, mut connector: zk::Connector) -> Result<zk::Connector> {
        if self.acl != NodeAcl::Open && !self.authenticated() {
            return Err(Error::InvalidArgument(
                "creator-only ACLs need an authenticated session (auth_digest, auth or sasl_digest_md5)",
            ));
        }
        for (scheme, credential) in &self.auth {
            if scheme.is_empty() || credential.len() > crate::znode::layout::MAX_NODE_DATA {
                return Err(Error::InvalidArgument(
                    "an auth scheme must be named and its credential under 1,000,000 bytes",
                ));
            }
            connector = connector.auth(scheme, credential);
        }
        #[cfg(feature = "sasl")]
        if let Some((user, password)) = &self.sasl_digest {
            if user.is_empty() || user.len() + password.len() > crate::znode::layout::MAX_NODE_DATA
            {
                return Err(Error::InvalidArgument(
                    "a SASL user must be named and its credentials under 1,000,000 bytes",
                ));
            }
            connector = connector.sasl_digest_md5(user, password);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let identity = tls.identity.as_ref().map(|(c, k)| (c.as_str(), k.as_str()));
            let config =
                zk::tls::TlsConfig::from_pem(&tls.ca_pem, identity).map_err(|e| Error::Tls {
                    reason: format!("invalid TLS material: {e}"),
                })?;
            connector = connector.tls(std::sync::Arc::new(config));
        }
        Ok(connector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_credentials() {
        let security = Security {
            auth: vec![("digest".into(), b"alice:s3cret".to_vec())],
            ..Default::default()
        };
        let shown = format!("{security:?}");
        assert!(
            shown.contains("digest") && !shown.contains("s3cret") && !shown.contains("alice"),
            "{shown}"
        );
    }

    #[test]
    fn identity_names_users_never_secrets() {
        assert_eq!(Security::default().identity(), "anonymous (world)");
        let security = Security {
            auth: vec![
                ("digest".into(), b"alice:s3cret".to_vec()),
                ("ldap".into(), b"token-s3cret".to_vec()),
            ],
            ..Default::default()
        };
        assert_eq!(security.identity(), "digest:alice, ldap");
        #[cfg(feature = "sasl")]
        {
            let sasl = Security {
                sasl_digest: Some(("bob".into(), "s3cret".into())),
                ..Default::default()
            };
            assert_eq!(sasl.identity(), "sasl:bob");
        }
    }

    #[test]
    fn creator_only_needs_credentials() {
        let security = Security {
            acl: NodeAcl::CreatorOnly,
            ..Default::default()
        };
        assert!(matches!(
            security.configure(zk::Connector::new()),
            Err(Error::InvalidArgument(_))
        ));
    }
}
