//! kazoo, the Python ZooKeeper client nobody here wrote, against the server at `ZK_CONNECT`:
//! its `Lock`, `Semaphore` and `Election` recipes with several sessions contending (exclusion
//! checked), and its `DataWatch`, `ChildrenWatch`, one-shot and exists watches
//! (`tests/kazoo/recipes.py`, one case per test, each in a root path of its own).
//!
//! Which Python: `PYTHON`, else the first of `python3` and `/usr/bin/python3` that imports
//! kazoo (Debian's `python3-kazoo` installs into the system Python, which a `python3` earlier
//! on `PATH` may not see). Without one the tests print why and pass without checking anything;
//! under `CI=true` they fail (`scripts/test.sh` installs `python3-kazoo`).

mod common;

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kazoo/recipes.py");
/// The bound on one case, whose own waits are bounded at 20 s each.
const CASE_LIMIT: Duration = Duration::from_secs(120);

/// A Python that imports kazoo, or why there is none.
fn python() -> Result<&'static str, &'static str> {
    static PYTHON: OnceLock<Result<String, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let candidates: Vec<String> = std::env::var("PYTHON")
                .into_iter()
                .chain(["python3".to_owned(), "/usr/bin/python3".to_owned()])
                .collect();
            candidates
                .iter()
                .find(|python| {
                    Command::new(python)
                        .args(["-c", "import kazoo.client"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                })
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "no Python with kazoo among {candidates:?} (Debian: apt-get install \
                         python3-kazoo)"
                    )
                })
        })
        .as_ref()
        .map(String::as_str)
        .map_err(String::as_str)
}

/// Runs `recipes.py <case>` against the test server in a root of its own; panics with its
/// output unless it passes.
fn run_case(case: &str) {
    let python = match python() {
        Ok(python) => python,
        Err(why) => {
            common::skip_unless_ci(&common::test_name(), why);
            return;
        }
    };
    let root = common::lock_path(&format!("kazoo-{case}"));
    let started = Instant::now();
    let mut child = Command::new(python)
        .args([SCRIPT, &common::connect_string(), &root, case])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {python} {SCRIPT}: {e}"));
    // The script bounds each of its waits; this bounds the whole in case it hangs anyway.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > CASE_LIMIT {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "kazoo {case}: still running after {CASE_LIMIT:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.starts_with(&format!("PASS {case}")),
        "kazoo {case} against {} ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        common::connect_string(),
        out.status
    );
    eprintln!("kazoo: {}", stdout.trim());
}

#[test]
fn kazoo_lock_excludes_across_sessions() {
    run_case("lock");
}

#[test]
fn kazoo_semaphore_bounds_its_leases() {
    run_case("semaphore");
}

#[test]
fn kazoo_election_has_one_leader_at_a_time() {
    run_case("election");
}

#[test]
fn kazoo_watches_fire_on_changes() {
    run_case("watches");
}
