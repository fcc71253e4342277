//! The transport's errors in zklock's terms: which leave a request's outcome unknown, and the
//! [`Error`] each one is for the caller.

use crate::error::Error;
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
    /// Converts a transport error from an operation on `path`.
    pub(crate) fn from_zk(err: zk::Error, path: &str) -> Error {
        match err {
            zk::Error::SessionExpired | zk::Error::SessionMoved => Error::SessionExpired,
            zk::Error::AuthFailed => Error::AuthFailed,
            zk::Error::ClientClosed => Error::Closed,
            zk::Error::NoAuth => Error::NoAuth {
                path: path.to_owned(),
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
            zk::Error::ConnectionLoss | zk::Error::Timeout | zk::Error::NoSession(_) => {
                Error::ConnectionLoss
            }
            other => Error::ZooKeeper {
                code: other.code(),
                path: path.to_owned(),
                message: other.to_string(),
            },
        }
    }
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
        assert_eq!(
            Error::from_zk(zk::Error::SessionExpired, "/a"),
            Error::SessionExpired
        );
        assert_eq!(
            Error::from_zk(zk::Error::ConnectionLoss, "/a"),
            Error::ConnectionLoss
        );
        assert_eq!(
            Error::from_zk(zk::Error::NoAuth, "/a"),
            Error::NoAuth { path: "/a".into() }
        );
        assert_eq!(
            Error::from_zk(zk::Error::NodeExists, "/a"),
            Error::NodeExists { path: "/a".into() }
        );
        assert_eq!(
            Error::from_zk(zk::Error::BadVersion, "/a"),
            Error::NodeChanged { path: "/a".into() }
        );
        match Error::from_zk(zk::Error::QuotaExceeded, "/a") {
            Error::ZooKeeper { code, path, .. } => assert_eq!((code, path.as_str()), (-125, "/a")),
            other => panic!("unexpected {other:?}"),
        }
    }
}
