//! Every user-given input file is read bounded (`numalab::input`): a FIFO,
//! a character device (`/dev/zero`) or a directory is refused by name
//! (exit 2) at once instead of blocking for ever or filling memory, and an
//! unreadable `samples.jsonl` is bad input (exit 2), not a failed run. A
//! final record lacking only its newline survives `run --resume`.

mod common;

use common::{numalab_out, numalab_within};
use std::path::{Path, PathBuf};

fn mkfifo(dir: &Path) -> PathBuf {
    let p = dir.join("fifo");
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p
}

/// A sim run directory with its records.
fn sim_run(tmp: &Path) -> PathBuf {
    let out = tmp.join("run");
    let o = out.to_str().unwrap();
    let args = common::sim_row(["--preset", "xeon-8167m-2n"], "2", "4M", o);
    let (code, _, err) = numalab_out(&args, tmp);
    assert_eq!(code, 0, "{err}");
    out
}

/// The bug: `topo --topology /dev/zero` read 4 GB in 3 s, and a FIFO as
/// any input blocked for ever. Each must exit 2 at once, naming the file.
#[test]
fn a_fifo_dev_zero_or_directory_as_input_is_refused_not_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = mkfifo(tmp.path());
    let dir = tmp.path().join("adir");
    std::fs::create_dir(&dir).unwrap();
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap().to_string();
    for (input, kind) in [
        (fifo.to_str().unwrap(), "a FIFO"),
        ("/dev/zero", "a character device"),
        (dir.to_str().unwrap(), "a directory"),
    ] {
        let cmds: Vec<Vec<&str>> = vec![
            vec!["topo", "--topology", input],
            vec!["run", "--spec", input, "--backend", "sim", "--out", &o],
            vec!["run", "--backend", "sim", "--topology", input, "--out", &o],
            vec!["run", "--backend", "sim", "--profile", input, "--out", &o],
            vec!["trace", "--from", input, "--preset", "xeon-8167m-2n"],
            vec!["jobs", "--from", input],
        ];
        for args in cmds {
            let (code, _, err) = numalab_within(&args, tmp.path(), 20);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(input) && err.contains(kind), "{args:?}: {err}");
            assert!(!out.exists(), "{args:?} left {}", out.display());
        }
    }
}

/// The bug: a run directory whose samples.jsonl is a FIFO hung `report`
/// (and `compare`, `run --resume`), one linked to /dev/zero filled memory,
/// and one that is a directory exited 1 as if a run had failed.
#[test]
fn unreadable_records_are_bad_input_exit_2_not_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let run = sim_run(tmp.path());
    let samples = run.join("samples.jsonl");
    let fifo = mkfifo(tmp.path());
    let r = run.to_str().unwrap();
    for (make, kind) in [(0, "a FIFO"), (1, "a character device"), (2, "a directory")] {
        let _ = std::fs::remove_file(&samples);
        let _ = std::fs::remove_dir(&samples);
        match make {
            0 => std::os::unix::fs::symlink(&fifo, &samples).unwrap(),
            1 => std::os::unix::fs::symlink("/dev/zero", &samples).unwrap(),
            _ => std::fs::create_dir(&samples).unwrap(),
        }
        for args in [
            vec!["report", r],
            vec!["compare", r, r],
            vec!["run", "--resume", r],
        ] {
            let (code, _, err) = numalab_within(&args, tmp.path(), 20);
            assert_eq!(code, 2, "{args:?} {kind}: {err}");
            assert!(err.contains("samples.jsonl") && err.contains(kind), "{err}");
        }
    }
    // run.json too.
    let _ = std::fs::remove_dir(&samples);
    std::fs::remove_file(run.join("run.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", run.join("run.json")).unwrap();
    let (code, _, err) = numalab_within(&["report", r], tmp.path(), 20);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("run.json") && err.contains("a character device"),
        "{err}"
    );
}

/// The bug: `run --resume` cut a final line lacking its newline even when
/// it was a complete record (as an editor saves it), so a recorded sample
/// was lost and run again. It is kept, counted, and given its newline.
#[test]
fn resume_keeps_a_complete_final_record_without_its_newline() {
    let tmp = tempfile::tempdir().unwrap();
    let run = sim_run(tmp.path());
    let p = run.join("samples.jsonl");
    let full = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(lines.len(), 2);
    // The first record only, without its newline: one sample to go.
    std::fs::write(&p, lines[0]).unwrap();
    let (code, out, err) = numalab_out(&["report", run.to_str().unwrap()], tmp.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Samples recorded: 1/2"), "{out}\n{err}");
    let (code, _, err) = numalab_out(&["run", "--resume", run.to_str().unwrap()], tmp.path());
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("added the missing newline"), "{err}");
    let now = std::fs::read_to_string(&p).unwrap();
    let now: Vec<&str> = now.lines().collect();
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], lines[0], "the complete record is kept as it was");
}
