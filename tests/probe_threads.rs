//! The threaded probe on this machine (`probe --threads N --sharing ...`):
//! the record's shape (one report per thread, a timeline of every array,
//! the workload's passes adding up to the last thread's end), the memory
//! split each sharing asks for, bad input refused with exit 2 before any
//! work, the simulator refusing a threaded spec, and the timeline plotted.
//! NUMA balancing's grouping itself needs several nodes: tests/lab_groups.rs.

mod common;

use serde_json::Value;
use std::process::Command;

fn probe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("probe")
        .args(args)
        .output()
        .unwrap()
}

fn record(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn pages(v: &Value) -> u64 {
    v.as_object()
        .map(|m| m.values().map(|p| p.as_u64().unwrap()).sum())
        .unwrap_or(0)
}

#[test]
fn each_sharing_splits_the_memory_and_every_thread_reports() {
    each_sharing(&[]);
}

/// The same workloads as processes on one shared memory segment: the same
/// record, each worker a process (its tid its pid) whose own array is read
/// in its own address space.
#[test]
fn each_sharing_as_processes_splits_the_memory_and_every_process_reports() {
    each_sharing(&["--processes"]);
}

fn each_sharing(extra: &[&str]) {
    // 12 MiB over 3 threads: shared, 3072 pages in one array; private,
    // 1024 in each thread's; mix:50, 1536 shared and 512 in each.
    for (sharing, arrays, per_array) in [
        ("shared", vec!["shared"], vec![3072]),
        (
            "private",
            vec!["thread 0", "thread 1", "thread 2"],
            vec![1024, 1024, 1024],
        ),
        (
            "mix:50",
            vec!["shared", "thread 0", "thread 1", "thread 2"],
            vec![1536, 512, 512, 512],
        ),
    ] {
        let r = record(&probe(
            &[
                "--threads",
                "3",
                "--sharing",
                sharing,
                "--size",
                "12M",
                "--counts",
                "2",
                "--timeline-ms",
                "20",
                "--json",
            ]
            .iter()
            .chain(extra)
            .copied()
            .collect::<Vec<_>>(),
        ));
        let what = format!("--sharing {sharing} {extra:?}");
        assert_eq!(r["spec"]["threads"]["sharing"], sharing, "{what}");
        let threads = r["threads"].as_array().unwrap();
        assert_eq!(threads.len(), 3, "{what}");
        let mut tids: Vec<i64> = threads.iter().map(|t| t["tid"].as_i64().unwrap()).collect();
        tids.dedup();
        assert_eq!(tids.len(), 3, "{what}: one tid each");
        assert!(
            !tids.contains(&r["pid"].as_i64().unwrap()),
            "{what}: workers are not main"
        );
        let mut last_end = 0;
        for (i, t) in threads.iter().enumerate() {
            assert_eq!(t["index"], i as u64, "{what}");
            assert_eq!(t["iterations_ns"].as_array().unwrap().len(), 2, "{what}");
            let (start, end) = (
                t["start_ns"].as_u64().unwrap(),
                t["end_ns"].as_u64().unwrap(),
            );
            assert!(
                end >= start + t["total_ns"].as_u64().unwrap() - 1,
                "{what}: {t}"
            );
            assert_eq!(t["residency"]["total_ns"], t["total_ns"], "{what}");
            last_end = last_end.max(end);
            let own = pages(&t["own_pages_per_node"]);
            assert_eq!(
                own,
                if sharing == "shared" {
                    0
                } else {
                    per_array[per_array.len() - 1]
                }
            );
        }
        // The workload: from the release to the last thread's end, passes
        // adding up to it.
        let timing = &r["timing"];
        assert_eq!(timing["total_ns"], last_end, "{what}");
        let sum: u64 = timing["iterations_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(sum, last_end, "{what}");
        // Every array touched before the go, and in the timeline.
        let total: u64 = per_array.iter().sum();
        assert_eq!(pages(&r["placement"]["pages_per_node"]), total, "{what}");
        let tl = &r["timeline"];
        assert_eq!(tl["arrays"], serde_json::json!(arrays), "{what}");
        let points = tl["points"].as_array().unwrap();
        assert!(!points.is_empty(), "{what}");
        let last = points.last().unwrap();
        // On one node nothing migrates: every page reads as on a node,
        // a worker process's own array read in its own address space.
        let one_node = std::fs::read_to_string("/sys/devices/system/node/online")
            .map_or(true, |s| s.trim() == "0");
        for (i, want) in per_array.iter().enumerate() {
            let p = &last["pages"][i];
            let unplaced = last["unplaced"][i].as_u64().unwrap();
            assert_eq!(pages(p) + unplaced, *want, "{what}: {p}");
            if one_node {
                assert_eq!(unplaced, 0, "{what}: array {i}: {p}");
            }
        }
        // Threads that ended their loops before a sample left it empty.
        for p in points {
            assert_eq!(p["threads"].as_array().unwrap().len(), 3, "{what}");
        }
        // The aggregate migrations and residency are the threads' sums.
        let moves: u64 = threads
            .iter()
            .map(|t| t["migrations"]["total"].as_u64().unwrap())
            .sum();
        assert_eq!(r["migrations"]["total"], moves, "{what}");
        let res: u64 = threads
            .iter()
            .map(|t| t["residency"]["total_ns"].as_u64().unwrap())
            .sum();
        assert_eq!(r["residency"]["total_ns"], res, "{what}");
    }
}

#[test]
fn the_summary_shows_every_thread_and_array() {
    let o = probe(&[
        "--threads",
        "2",
        "--sharing",
        "private",
        "--size",
        "8M",
        "--counts",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("threads: 2, sharing private (0 B shared, 4 MiB each own)"),
        "{out}"
    );
    for want in [
        "faults priv",
        "numa groups at the end",
        "thread 0",
        "thread 1",
        "settled",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
    }
}

#[test]
fn bad_thread_options_exit_2_before_any_work() {
    for (args, says) in [
        (&["--sharing", "private"][..], "--sharing"),
        (
            &["--threads", "1", "--sharing", "shared"][..],
            "--sharing needs --threads 2",
        ),
        (&["--threads", "2", "--sharing", "mix:0"][..], "mix:P"),
        (&["--threads", "2", "--sharing", "mix:100"][..], "mix:P"),
        (
            &["--threads", "2", "--sharing", "half"][..],
            "expected shared, private or mix:P",
        ),
        (&["--threads", "0"][..], "--threads"),
        (&["--threads", "5000"][..], "--threads"),
        (
            &["--threads", "4", "--sharing", "private", "--size", "8K"][..],
            "at least one page",
        ),
        (&["--timeline-ms", "100"][..], "--threads"),
        (&["--processes"][..], "--threads"),
        (
            &["--threads", "2", "--shm-numa-balancing"][..],
            "--processes",
        ),
        (
            &[
                "--threads",
                "2",
                "--processes",
                "--sharing",
                "private",
                "--shm-numa-balancing",
            ][..],
            "no shared memory",
        ),
        (
            &[
                "--threads",
                "2",
                "--processes",
                "--shm-numa-balancing",
                "--interleave",
                "0",
            ][..],
            "cannot go with a preferred or interleaved memory placement",
        ),
    ] {
        let mut a = args.to_vec();
        a.extend(["--json"]);
        let o = probe(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// The simulator models no grouping, swap or pseudo-interleaving: a
/// threaded `run` or `jobs` is refused, exit 2, naming what is missing,
/// with nothing written.
#[test]
fn the_simulator_refuses_threads_naming_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let refused = |args: &[&str], says: &str| {
        let (rc, _, err) = common::numalab_out(args, dir.path());
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: nothing written");
    };
    let lacks = "does not model NUMA balancing's task grouping";
    let sim = ["--backend", "sim", "--preset", "ia64-4n"];
    refused(
        &[
            &["run"][..],
            &sim,
            &["--threads", "2", "--samples", "1", "--out", o],
        ]
        .concat(),
        lacks,
    );
    refused(
        &[&["jobs", "2"][..], &sim, &["--", "--threads", "2"]].concat(),
        lacks,
    );
    // A sample's trace follows one task: refused with threads, on any
    // backend, before anything is written.
    refused(
        &[
            "run",
            "--threads",
            "2",
            "--trace",
            "--samples",
            "1",
            "--out",
            o,
        ],
        "--trace with --threads",
    );
}

#[test]
fn a_threaded_record_plots_its_timeline_and_a_classic_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let threaded = dir.path().join("threads.json");
    let o = probe(&[
        "--threads",
        "2",
        "--sharing",
        "mix:25",
        "--size",
        "8M",
        "--counts",
        "2",
        "--timeline-ms",
        "10",
        "--json",
    ]);
    std::fs::write(&threaded, record(&o).to_string()).unwrap();
    let plots = dir.path().join("plots");
    let o = common::numalab_out(
        &[
            "plot",
            threaded.to_str().unwrap(),
            "-o",
            plots.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(o.0, 0, "{}", o.2);
    let svg = std::fs::read_to_string(plots.join("threads-timeline.svg")).unwrap();
    for want in [
        "Where the memory went",
        "shared",
        "thread 1",
        "preferred node",
    ] {
        assert!(svg.contains(want), "{want:?} missing from the plot");
    }
    // A record of processes (the 4-node guest's) says so: its command
    // and "processes" for its workers, not threads.
    let procs = dir.path().join("procs.json");
    std::fs::copy(
        "tests/fixtures/threads/probe-procs-balanced-6.1.json",
        &procs,
    )
    .unwrap();
    let o = common::numalab_out(
        &[
            "plot",
            procs.to_str().unwrap(),
            "-o",
            plots.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(o.0, 0, "{}", o.2);
    let svg = std::fs::read_to_string(plots.join("procs-timeline.svg")).unwrap();
    for want in [
        "--processes --shm-numa-balancing",
        "4 processes, tN: process N",
    ] {
        assert!(svg.contains(want), "{want:?} missing from the plot");
    }
    let classic = dir.path().join("classic.json");
    let o = probe(&["--size", "1M", "--counts", "1", "--json"]);
    std::fs::write(&classic, record(&o).to_string()).unwrap();
    let o = common::numalab_out(
        &[
            "plot",
            classic.to_str().unwrap(),
            "-o",
            dir.path().join("p2").to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(o.0, 2, "{}", o.2);
    assert!(o.2.contains("has no timeline to plot"), "{}", o.2);
    assert!(!dir.path().join("p2").exists());
}

/// examples/numa-groups.toml: the document's comparison (no tuning, NB,
/// pinning; NB 0 and 1) for four threads on a shared array; the simulator
/// refuses it.
#[test]
fn the_numa_groups_example_is_a_threaded_matrix() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/numa-groups.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let spec = numalab::run::spec::ExperimentSpec::from_toml(&text, "numa-groups.toml").unwrap();
    let t = spec.probe.threads.expect("[probe.threads]");
    assert_eq!((t.count, t.sharing.to_string()), (4, "shared".to_string()));
    spec.check().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let o = common::numalab_out(
        &[
            "run",
            "--spec",
            path,
            "--backend",
            "sim",
            "--preset",
            "ia64-4n",
        ],
        dir.path(),
    );
    assert_eq!(o.0, 2, "{}", o.2);
    assert!(o.2.contains("--threads 4 (sharing shared)"), "{}", o.2);
}

/// Threaded jobs take per-job pinning (`--home N|auto --home-cpu pin`:
/// each job's CPUs and memory on its node from its launch, inherited by
/// all its threads, numactl's manual pinning per instance), and refuse the
/// mechanisms that follow one task (`agent`, `sched`) with exit 2.
#[test]
fn threaded_jobs_pin_per_job_and_refuse_the_one_task_mechanisms() {
    let jobs = |home_cpu: &str| {
        Command::new(env!("CARGO_BIN_EXE_numalab"))
            .args([
                "jobs",
                "2",
                "--size",
                "8M",
                "--counts",
                "1",
                "--no-trace",
                "--format",
                "json",
                "--home",
                "auto",
                "--home-cpu",
                home_cpu,
                "--",
                "--threads",
                "2",
                "--sharing",
                "private",
            ])
            .output()
            .unwrap()
    };
    for refused in ["agent", "sched"] {
        let o = jobs(refused);
        assert_eq!(o.status.code(), Some(2), "{refused}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--home-cpu {refused} with a threaded probe")),
            "{err}"
        );
    }
    let o = jobs("pin");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["home"], "auto pin", "{r}");
    for j in r["jobs"].as_array().unwrap() {
        assert!(j["home_node"].is_u64(), "every job has its node: {j}");
    }
}

/// `--shm-numa-balancing` binds the shared memory, so a run row whose
/// memory is interleaved (Mem I) or jobs whose memory `--home` prefers on
/// a node are refused with exit 2 before any work, not one failed child
/// probe per sample after the knobs are set. Regression test for the
/// check that only the probe made.
#[test]
fn shm_numa_balancing_with_interleaved_or_preferred_memory_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let cases: [(&[&str], &str); 2] = [
        (
            &[
                "run",
                "--threads",
                "2",
                "--processes",
                "--shm-numa-balancing",
                "--mem",
                "A,I",
                "--cpu",
                "F",
                "--samples",
                "1",
                "--size",
                "8M",
                "--counts",
                "1",
                "--load",
                "0",
                "--out",
            ],
            "a run's Mem I",
        ),
        (
            &[
                "jobs",
                "2",
                "--home",
                "auto",
                "--home-cpu",
                "pin",
                "--",
                "--threads",
                "2",
                "--processes",
                "--shm-numa-balancing",
            ],
            "--home: every job's memory is preferred",
        ),
    ];
    for (args, says) in cases {
        let mut c = Command::new(env!("CARGO_BIN_EXE_numalab"));
        c.args(args);
        if args[0] == "run" {
            c.arg(&out);
        }
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--shm-numa-balancing binds") && err.contains(says),
            "{err}"
        );
        assert!(!out.exists(), "nothing written");
    }
}
