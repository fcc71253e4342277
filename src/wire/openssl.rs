//! Test certificates made by the `openssl` command in a scratch directory, removed on drop.

use std::path::PathBuf;
use std::process::Command;

pub(super) struct Openssl {
    pub(super) dir: PathBuf,
}

impl Openssl {
    /// A scratch directory named after `purpose`; `None` without openssl.
    pub(super) fn new(purpose: &str) -> Option<Openssl> {
        Command::new("openssl").arg("version").output().ok()?;
        let dir = std::env::temp_dir().join(format!(
            "zklock-{purpose}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Some(Openssl { dir })
    }

    /// Runs openssl with `args` in the directory, and returns what it printed.
    pub(super) fn run(&self, args: &[&str]) -> String {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The file `name` of the directory.
    pub(super) fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap()
    }
}

impl Drop for Openssl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
