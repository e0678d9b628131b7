//! Bad input fails with exit 2, a message naming what is wrong, and nothing
//! changed: no run directory, no journal, knobs as they were.

use std::process::Command;

mod common;

use common::numalab;

#[test]
fn bad_run_specs_exit_2_before_any_change() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let out_s = out.to_str().unwrap();
    let bad_toml = tmp.path().join("bad.toml");
    std::fs::write(&bad_toml, "samples = [oops\n").unwrap();
    let nb_before = std::fs::read_to_string("/proc/sys/kernel/numa_balancing").ok();
    for (args, needle) in [
        (
            vec!["run", "--samples", "0", "--out", out_s],
            "invalid value '0' for '--samples",
        ),
        (
            vec!["run", "--nodes", "0,7", "--out", out_s],
            "node 7 does not exist",
        ),
        (
            vec!["run", "--nb", "5", "--out", out_s],
            "invalid value '5' for '--nb",
        ),
        // Regression: bad --nb/--pnid values emptied the matrix and the
        // error ("blocks: empty dimension") did not say which value.
        (
            vec!["run", "--pnid", "X", "--out", out_s],
            "\"X\" is not -1, A, B or a node number",
        ),
        (
            vec!["run", "--pnid", "3", "--out", out_s],
            "--pnid 3: no block of the spec",
        ),
        (
            vec!["run", "--nb", "0", "--pnid", "A", "--out", out_s],
            "--pnid A: no block of the spec (after --nb)",
        ),
        // In a list, the bad token itself is named, not the whole list.
        (
            vec!["run", "--nb", "0,x", "--out", out_s],
            "invalid value 'x' for '--nb",
        ),
        (
            vec!["run", "--pnid", "-1,Q", "--out", out_s],
            "invalid value 'Q' for '--pnid",
        ),
        (vec!["run", "--mem", "Q", "--out", out_s], "mem value \"Q\""),
        (
            vec!["run", "--load", "150", "--out", out_s],
            "\"150\" is not a percentage",
        ),
        (
            vec!["run", "--spec", bad_toml.to_str().unwrap(), "--out", out_s],
            "bad.toml",
        ),
        (
            vec!["run", "--resume", "/nonexistent-numalab-run"],
            "run.json",
        ),
        (vec!["report", "/nonexistent-numalab-run"], "run.json"),
        // Adaptive sampling (issue 11): P > 0, 2 <= min <= max.
        (
            vec!["run", "--precision", "0", "--out", out_s],
            "\"0\" is not a positive percentage",
        ),
        (
            vec!["run", "--precision", "-1", "--out", out_s],
            "is not a positive percentage",
        ),
        (
            vec![
                "run",
                "--precision",
                "2",
                "--min-samples",
                "1",
                "--out",
                out_s,
            ],
            "invalid value '1' for '--min-samples",
        ),
        (
            vec![
                "run",
                "--precision",
                "2",
                "--min-samples",
                "10",
                "--max-samples",
                "5",
                "--out",
                out_s,
            ],
            "min-samples 10 is more than max-samples 5",
        ),
        (
            vec!["run", "--min-samples", "5", "--out", out_s],
            "--precision",
        ),
        (
            vec!["run", "--precision", "2", "--samples", "8", "--out", out_s],
            "cannot be used with",
        ),
        (vec!["probe", "--interleave", "0,9"], "token \"9\""),
        (vec!["topo", "--nodes", "x"], "token \"x\""),
    ] {
        let (code, err) = numalab(&args, tmp.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
        assert!(!out.exists(), "{args:?} created the run directory");
        assert!(
            !tmp.path().join("restore.json").exists(),
            "{args:?} wrote a journal"
        );
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/numa_balancing").ok(),
        nb_before
    );
}

#[test]
fn restore_without_journal_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("restore")
        .env("NUMALAB_STATE_DIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

#[test]
fn example_spec_parses_to_the_rfc_default() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rfc.toml")).unwrap();
    let spec = numalab::run::spec::ExperimentSpec::from_toml(&text, "rfc.toml").unwrap();
    assert_eq!(spec, numalab::run::spec::ExperimentSpec::default());
}

/// `trace` and `jobs`: bad input exits 2 naming the problem, starts nothing
/// and leaves no tracing instance or journal behind.
#[test]
fn bad_trace_and_jobs_input_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad_trace = tmp.path().join("bad.txt");
    std::fs::write(
        &bad_trace,
        "  a-1 [000] 1.000001: sched_migrate_task: comm=a pid=1 prio=120 orig_cpu=0\n",
    )
    .unwrap();
    let bad = bad_trace.to_str().unwrap();
    let missing = tmp.path().join("missing.txt");
    let instances = || {
        std::fs::read_dir("/sys/kernel/tracing/instances")
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let before = instances();
    for (args, needle) in [
        (vec!["trace"], "say what to trace"),
        (vec!["trace", "--pid", "1", "--", "true"], "not several"),
        (vec!["trace", "--pid", "x"], "\"x\" is not a pid"),
        (vec!["trace", "--pid", "999999999"], "no task 999999999"),
        (
            vec!["trace", "--mem-node", "7", "--", "true"],
            "node 7 does not exist",
        ),
        (
            vec!["trace", "--duration", "0", "--", "true"],
            "\"0\" is not a positive number of seconds",
        ),
        (vec!["trace", "--from", bad], "missing field `dest_cpu`"),
        (
            vec!["trace", "--from", missing.to_str().unwrap()],
            "missing.txt",
        ),
        (vec!["trace", "--", "/nonexistent/cmd"], "/nonexistent/cmd"),
        (vec!["jobs", "0"], "0 is not in 1..=1024"),
        (
            vec!["jobs", "2", "--", "--membind", "9"],
            "node 9 does not exist",
        ),
        (vec!["jobs", "2", "--size", "1Q"], "unknown unit \"Q\""),
        (
            vec!["jobs", "2", "--load", "120"],
            "\"120\" is not a percentage",
        ),
        (vec!["jobs", "--from", bad], "not a numalab jobs record"),
    ] {
        let (code, err) = numalab(&args, tmp.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(instances(), before);
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert!(left.is_empty(), "journals left: {left:?}");
}

/// Regression: `--duration 1e20` panicked in `load`, in `trace` after
/// mounting tracefs, and in `home` after starting the command (left running
/// unsupervised). Every duration is bounded where it is parsed: exit 2,
/// before anything starts.
#[test]
fn duration_1e20_is_refused_at_parse_time_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let flag = tmp.path().join("ran");
    let touch = format!("touch {}", flag.display());
    for args in [
        vec!["load", "--duration", "1e20"],
        vec!["trace", "--duration", "1e20", "--", "sh", "-c", &touch],
        vec![
            "home",
            "--node",
            "0",
            "--duration",
            "1e20",
            "--",
            "sh",
            "-c",
            &touch,
        ],
        vec!["sched", "--duration", "1e20"],
        vec!["probe", "--min-time", "1e20"],
    ] {
        let (code, err) = numalab(&args, tmp.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("more than a year"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(!flag.exists(), "a command was started");
}

/// Regression: an empty or relative NUMALAB_STATE_DIR put the lock and the
/// journal in the current directory (two runs from two directories were
/// not kept apart; `restore` elsewhere found nothing), and with it empty a
/// run failed late claiming a journal stayed. Now exit 2 naming the
/// variable, with nothing written in the current directory. (A user other
/// than root with neither HOME nor XDG_STATE_HOME is refused too, instead
/// of sharing /tmp/numalab; tests run as root, whose directory is
/// /var/lib/numalab.)
#[test]
fn a_relative_or_empty_state_dir_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |env: &[(&str, &str)], clear: &[&str], args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_numalab"));
        c.args(args).current_dir(tmp.path());
        for k in clear {
            c.env_remove(k);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for dir in ["", "state", "./state"] {
        for args in [vec!["restore"], vec!["home", "--node", "0", "--", "true"]] {
            let (code, err) = run(&[("NUMALAB_STATE_DIR", dir)], &[], &args);
            assert_eq!(code, 2, "{dir:?} {args:?}: {err}");
            assert!(err.contains("NUMALAB_STATE_DIR"), "{dir:?}: {err}");
            assert!(err.contains("absolute path"), "{dir:?}: {err}");
        }
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "written in the current directory: {left:?}"
    );
}
