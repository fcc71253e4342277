//! Lock paths: validation and parents.

use crate::error::{Error, Result};

/// Longest lock path zklock accepts, in bytes. ZooKeeper's own limit is the request size
/// (`jute.maxbuffer`, 1 MiB by default); far shorter paths are a sign of a bug in the caller.
const MAX_PATH_LEN: usize = 4096;

/// Checks that `path` is an absolute, canonical ZooKeeper path other than the root, following
/// the rules of ZooKeeper's `PathUtils.validatePath`.
pub(crate) fn validate_lock_path(path: &str) -> Result<()> {
    let invalid = |reason| {
        Err(Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })
    };
    if path.is_empty() {
        return invalid("path is empty");
    }
    if !path.starts_with('/') {
        return invalid("path must be absolute (start with '/')");
    }
    if path == "/" {
        return invalid("the root node cannot be a lock");
    }
    if path.ends_with('/') {
        return invalid("path must not end with '/'");
    }
    if path.len() > MAX_PATH_LEN {
        return invalid("path is longer than 4096 bytes");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return invalid("path contains an empty segment ('//')"),
            "." | ".." => return invalid("path contains a relative segment ('.' or '..')"),
            _ => {}
        }
    }
    if path.chars().any(is_forbidden_char) {
        return invalid("path contains a control or reserved character");
    }
    Ok(())
}

/// Characters ZooKeeper refuses in paths.
fn is_forbidden_char(c: char) -> bool {
    // ZooKeeper checks UTF-16 units: U+D800..U+F8FF covers the surrogates, so every character
    // above U+FFFF (emoji, for one) is refused as well as the private-use area.
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
        || c > '\u{ffff}'
}

/// The parent of an absolute path, `None` for a child of the root.
pub(crate) fn parent(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_canonical_paths() {
        for p in [
            "/a",
            "/locks/orders",
            "/a-b_c.d/e",
            "/ünïcode/锁",
            "/a/.b/c..",
        ] {
            assert!(validate_lock_path(p).is_ok(), "{p}");
        }
    }

    #[test]
    fn rejects_bad_paths_with_reason() {
        for p in [
            "",
            "a",
            "locks/x",
            "/",
            "/a/",
            "//a",
            "/a//b",
            "/a/./b",
            "/a/..",
            "/a\nb",
            "/a\u{0}b",
            "/a\u{7f}",
            "/\u{e000}",
            "/\u{f8ff}",
            "/lock\u{1f512}",
        ] {
            match validate_lock_path(p) {
                Err(Error::InvalidPath { path, .. }) => assert_eq!(path, p),
                other => panic!("{p:?} gave {other:?}"),
            }
        }
        assert!(validate_lock_path(&format!("/{}", "x".repeat(MAX_PATH_LEN))).is_err());
    }

    #[test]
    fn parent_of_paths() {
        assert_eq!(parent("/a"), None);
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a/b/c"), Some("/a/b"));
    }
}
