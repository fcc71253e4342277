//! The transport's errors in zklock's terms: which leave a request's outcome unknown, and the
//! [`Error`] each one is for the caller.

use crate::error::{Error, Permission};
use crate::wire as zk;

/// Whether a request failed without a definite answer from the server, so that it may or may
/// not have executed (a write) and is worth retrying (a read): the connection failed under it,
/// or the server throttled it ("not executed, try again").
pub(crate) fn outcome_unknown(err: &zk::Error) -> bool {
    use zk::Error as E;
    matches!(
        err,
        E::ConnectionLoss | E::Timeout | E::Throttled | E::NoSession(_)
    )
}

impl Error {
    /// Converts a transport error from an operation on `path` by a session that is `identity`
    /// to the server (see [`Security::identity`](super::security::Security::identity)).
    pub(crate) fn from_zk(err: zk::Error, path: &str, identity: &str) -> Error {
        match err {
            zk::Error::SessionExpired | zk::Error::SessionMoved => Error::SessionExpired,
            zk::Error::AuthFailed => Error::AuthFailed,
            zk::Error::ClientClosed => Error::Closed,
            // The transport names the request refused, which may be one step of `path`'s
            // (a parent created on the way, one node of several read).
            zk::Error::NoAuth(refused) => Error::NoAuth {
                permission: refused.as_ref().and_then(|r| permission(r.perm)),
                path: refused.map_or_else(|| path.to_owned(), |r| r.path),
                identity: identity.to_owned(),
            },
            zk::Error::NoChildrenForEphemerals => Error::EphemeralParent {
                path: path.to_owned(),
            },
            zk::Error::NoNode => Error::NoNode {
                path: path.to_owned(),
            },
            zk::Error::BadVersion => Error::NodeChanged {
                path: path.to_owned(),
            },
            zk::Error::NodeExists => Error::NodeExists {
                path: path.to_owned(),
            },
            zk::Error::NotEmpty => Error::NotEmpty {
                path: path.to_owned(),
            },
            zk::Error::ReplyTooLarge { size, limit } => Error::ReplyTooLarge {
                path: path.to_owned(),
                size,
                limit,
            },
            zk::Error::ConnectionLoss | zk::Error::Timeout | zk::Error::NoSession(_) => {
                Error::connection_loss()
            }
            other => Error::ZooKeeper {
                code: other.code(),
                path: path.to_owned(),
                message: other.to_string(),
            },
        }
    }
}

/// The permission a [`zk::perms`] bit stands for.
fn permission(perm: i32) -> Option<Permission> {
    Some(match perm {
        zk::perms::READ => Permission::Read,
        zk::perms::WRITE => Permission::Write,
        zk::perms::CREATE => Permission::Create,
        zk::perms::DELETE => Permission::Delete,
        zk::perms::ADMIN => Permission::Admin,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_definite_answers_are_final() {
        assert!(outcome_unknown(&zk::Error::ConnectionLoss));
        assert!(outcome_unknown(&zk::Error::Throttled));
        assert!(!outcome_unknown(&zk::Error::Marshalling));
        assert!(!outcome_unknown(&zk::Error::NoNode));
        assert!(!outcome_unknown(&zk::Error::SessionExpired));
    }

    #[test]
    fn maps_client_errors_to_typed_variants() {
        let from_zk = |err| Error::from_zk(err, "/a", "anonymous (world)");
        assert_eq!(from_zk(zk::Error::SessionExpired), Error::SessionExpired);
        assert_eq!(from_zk(zk::Error::ConnectionLoss), Error::connection_loss());
        assert_eq!(
            from_zk(zk::Error::NodeExists),
            Error::NodeExists { path: "/a".into() }
        );
        assert_eq!(
            from_zk(zk::Error::BadVersion),
            Error::NodeChanged { path: "/a".into() }
        );
        match from_zk(zk::Error::QuotaExceeded) {
            Error::ZooKeeper { code, path, .. } => assert_eq!((code, path.as_str()), (-125, "/a")),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn no_auth_names_the_refused_request_its_permission_and_the_identity() {
        // The transport names the request: here a parent created on the way to `/a/b`.
        let refused = zk::Error::NoAuth(Some(zk::Refused {
            perm: zk::perms::CREATE,
            path: "/a".into(),
        }));
        assert_eq!(
            Error::from_zk(refused, "/a/b", "digest:alice"),
            Error::NoAuth {
                path: "/a".into(),
                permission: Some(Permission::Create),
                identity: "digest:alice".into(),
            }
        );
        // A transaction refused whole: the caller's path, the permission unknown.
        assert_eq!(
            Error::from_zk(zk::Error::NoAuth(None), "/a/b", "anonymous (world)"),
            Error::NoAuth {
                path: "/a/b".into(),
                permission: None,
                identity: "anonymous (world)".into(),
            }
        );
        for (perm, permission) in [
            (zk::perms::READ, Permission::Read),
            (zk::perms::WRITE, Permission::Write),
            (zk::perms::DELETE, Permission::Delete),
            (zk::perms::ADMIN, Permission::Admin),
        ] {
            assert_eq!(super::permission(perm), Some(permission));
        }
        assert_eq!(super::permission(zk::perms::ALL), None);
    }
}
