//! The data directory's recovery rule at every step a kill can interrupt, and figures of how
//! long a snapshot holds the server's lock.

use zklock_proto::{CreateRequest, Request};

use super::*;
use crate::model::ModelConfig;

fn model() -> Model {
    let cfg = ModelConfig {
        tick_ms: 100,
        min_session_timeout_ms: 200,
        max_session_timeout_ms: 2000,
        extended_types: false,
        super_digest: None,
        container_max_never_used_ms: 0,
    };
    Model::new(cfg, NOW)
}

const NOW: Now = Now {
    mono_ms: 0,
    wall_ms: 1_000,
};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("zklock-journal-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// A session on `m`, logged in `j`.
fn connect(j: &mut Journal, m: &mut Model) {
    let hello = crate::model::test_hello(1000);
    let mut w = Writer::new();
    w.record(&hello);
    j.connect(m, 1, "127.0.0.1", &w.into_inner(), NOW).unwrap();
    let _ = m.connect(1, "127.0.0.1", &hello, NOW, &mut Vec::new());
}

/// Creates `/n{i}` for `i` in `range`, each logged in `j` before `m` takes it; with
/// `settle`, once any snapshot it started is written.
fn create(j: &mut Journal, m: &mut Model, range: std::ops::Range<i32>, settle: bool) {
    for i in range {
        let req = Request::Create(CreateRequest {
            path: format!("/n{i}"),
            data: vec![b'x'; 40],
            acl: zklock_proto::Acl::open(),
            flags: 0,
        });
        let body = req.to_frame(i);
        j.request(m, 1, &body[4..], NOW).unwrap();
        assert_eq!(m.request(1, i, req, NOW, &mut Vec::new()).err, 0);
        if settle {
            j.wait_snapshot().unwrap();
        }
    }
}

/// The state a start on the data of `m` comes to (the start is a restart).
fn restarted(m: &Model) -> Vec<u8> {
    let mut e = model();
    e.load_snapshot(&m.snapshot()).unwrap();
    e.restart(true, NOW);
    e.snapshot()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What a start on a copy of `dir` (as a kill left it) comes to, and the names it left.
fn start_on_copy(dir: &Path, name: &str) -> (Vec<u8>, Vec<String>) {
    let copy = temp_dir(name);
    fs::create_dir_all(&copy).unwrap();
    for n in names(dir) {
        fs::copy(dir.join(&n), copy.join(&n)).unwrap();
    }
    let mut back = model();
    let j = Journal::open(&copy, false, 1 << 20, &mut back, NOW).unwrap();
    drop(j);
    let left = names(&copy);
    let _ = fs::remove_dir_all(&copy);
    (back.snapshot(), left)
}

#[test]
fn a_start_reads_the_last_snapshot_and_its_log_whatever_a_kill_left_beside_them() {
    let dir = temp_dir("leftovers");
    let mut m = model();
    let mut j = Journal::open(&dir, false, 1024, &mut m, NOW).unwrap();
    connect(&mut j, &mut m);
    create(&mut j, &mut m, 0..60, true);
    let generation = j.generation;
    assert!(generation >= 2, "snapshots taken: generation {generation}");
    drop(j);
    // What a kill can leave beside them: an older log, a temporary.
    fs::write(dir.join(log_name(generation - 1)), b"junk").unwrap();
    fs::write(dir.join(SNAPSHOT_TMP), b"junk").unwrap();

    let mut back = model();
    drop(Journal::open(&dir, false, 1024, &mut back, NOW).unwrap());
    assert_eq!(back.snapshot(), restarted(&m), "the same state");
    // The leftovers removed: a snapshot, one log (this start's restart entry may have
    // been the one to pass the size, and started the next generation), the marker.
    let names = names(&dir);
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!((names[0].as_str(), names[2].as_str()), (SNAPSHOT, MARKER));
    assert!(log_generation(&names[1]).is_some(), "{names:?}");
    let log = fs::read(dir.join(&names[1])).unwrap();
    assert!(!log.starts_with(b"junk"), "the kill's log is not read");

    // A damaged snapshot is an error, not an empty server.
    let mut bytes = fs::read(dir.join(SNAPSHOT)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(dir.join(SNAPSHOT), bytes).unwrap();
    let e = Journal::open(&dir, false, 1024, &mut model(), NOW)
        .err()
        .expect("refused");
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_kill_at_any_step_of_a_snapshot_written_off_the_lock_loses_no_logged_entry() {
    let dir = temp_dir("window");
    let mut m = model();
    let mut j = Journal::open(&dir, false, 1024, &mut m, NOW).unwrap();
    // Snapshots taken (the new log started) but their files never written, as a kill
    // before their thread ran leaves them.
    j.held = Some(Vec::new());
    connect(&mut j, &mut m);
    create(&mut j, &mut m, 0..60, false);
    let jobs = j.held.take().unwrap();
    assert!(jobs.len() >= 2, "snapshots taken: {}", jobs.len());
    let want = restarted(&m);

    // No snapshot in place: every log, oldest first, with a temporary cut short.
    fs::write(dir.join(SNAPSHOT_TMP), &jobs[0].bytes()[..100]).unwrap();
    let (state, left) = start_on_copy(&dir, "window-none");
    assert_eq!(state, want, "no snapshot written");
    assert!(!left.contains(&SNAPSHOT_TMP.to_owned()), "{left:?}");

    for (k, job) in jobs.iter().enumerate() {
        // The temporary complete, not yet renamed: the previous snapshot still counts.
        fs::write(dir.join(SNAPSHOT_TMP), job.bytes()).unwrap();
        let (state, _) = start_on_copy(&dir, "window-tmp");
        assert_eq!(state, want, "snapshot {k}'s temporary written, not renamed");
        // Renamed, the older logs not yet removed.
        let _ = job.install().unwrap();
        let (state, left) = start_on_copy(&dir, "window-renamed");
        assert_eq!(state, want, "snapshot {k} renamed, older logs still there");
        let older = |n: &String| log_generation(n).is_some_and(|g| g < job.generation);
        assert!(!left.iter().any(older), "older logs removed: {left:?}");
        // And removed.
        job.remove_older_logs();
        let (state, _) = start_on_copy(&dir, "window-removed");
        assert_eq!(state, want, "snapshot {k} complete");
    }
    drop(j);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn snapshots_written_off_the_lock_keep_the_state_across_starts() {
    let dir = temp_dir("threads");
    let mut m = model();
    let mut j = Journal::open(&dir, false, 1024, &mut m, NOW).unwrap();
    connect(&mut j, &mut m);
    // Not waited for: entries are logged while a snapshot is being written.
    create(&mut j, &mut m, 0..300, false);
    assert!(j.generation >= 1, "generation {}", j.generation);
    drop(j);
    let mut back = model();
    drop(Journal::open(&dir, false, 1024, &mut back, NOW).unwrap());
    assert_eq!(back.snapshot(), restarted(&m));
    let _ = fs::remove_dir_all(&dir);
}

/// Figures, not a check: how long the request that calls for a snapshot of a large tree
/// holds the server's lock, written under it (as before) and off it. Run with
/// `cargo test -p zklock-server --release --lib snapshot_latency -- --ignored --nocapture`.
#[test]
#[ignore = "prints figures; slow in a debug build"]
fn snapshot_latency() {
    use std::time::Instant;
    const NODES: i32 = 200_000;
    let dir = temp_dir("latency");
    let mut m = model();
    let mut j = Journal::open(&dir, true, u64::MAX, &mut m, NOW).unwrap();
    connect(&mut j, &mut m);
    // The tree built in the model alone: the log stays short.
    let mut unlogged = Journal::open(
        &temp_dir("latency-none"),
        false,
        u64::MAX,
        &mut model(),
        NOW,
    )
    .unwrap();
    create(&mut unlogged, &mut m, 0..NODES, false);
    drop(unlogged);
    let _ = fs::remove_dir_all(temp_dir("latency-none"));
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    for _ in 0..3 {
        let t = Instant::now();
        let bytes = m.snapshot();
        let encode = ms(t);
        let t = Instant::now();
        std::hint::black_box(checksum(&bytes));
        println!(
            "encoding the model {encode:.1} ms, its checksum {:.1} ms",
            ms(t)
        );
    }
    for round in 0..3 {
        let base = NODES + 10 * round;
        let t = Instant::now();
        create(&mut j, &mut m, base..base + 1, false);
        let plain = ms(t);
        // Before: encoded, written and synced under the lock.
        let t = Instant::now();
        j.snapshot_now(&m).unwrap();
        let under = ms(t);
        // After: the request that passes the size only encodes and starts the next log.
        j.compact_at = 0;
        let t = Instant::now();
        create(&mut j, &mut m, base + 1..base + 2, false);
        let off = ms(t);
        j.compact_at = u64::MAX;
        let t = Instant::now();
        create(&mut j, &mut m, base + 2..base + 3, false);
        let during = ms(t);
        let t = Instant::now();
        j.wait_snapshot().unwrap();
        let rest = ms(t);
        let size = fs::metadata(dir.join(SNAPSHOT)).unwrap().len();
        println!(
            "{NODES} nodes, snapshot {size} bytes, fsync: a logged write {plain:.2} ms; \
             snapshot under the lock {under:.1} ms; the write that starts one off the lock \
             {off:.1} ms, the next write {during:.2} ms, the snapshot's thread then needed \
             {rest:.1} ms more (round {round})"
        );
    }
    drop(j);
    let _ = fs::remove_dir_all(&dir);
}
