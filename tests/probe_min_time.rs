//! `probe --min-time`: passes go on after --counts until the time has
//! passed (for watching the kernel act on a running probe: tests/lab_pnid.rs
//! forces one to another node), the record says so, and without it the
//! probe does exactly --counts passes. Regression test for CI's failing
//! lab_pnid, whose 64-pass probe ended before it could be forced.

use std::process::Command;

fn probe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("probe")
        .args(["--size", "1M", "--json"])
        .args(args)
        .output()
        .unwrap()
}

fn record(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_probe_with_min_time_runs_past_its_counts_until_the_time_is_up() {
    let r = record(&probe(&["--counts", "2", "--min-time", "0.3"]));
    let t = &r["timing"];
    let passes = t["iterations_ns"].as_array().unwrap();
    assert!(passes.len() > 2, "stopped at --counts: {t}");
    assert!(t["total_ns"].as_u64().unwrap() >= 300_000_000, "{t}");
    assert_eq!(r["spec"]["counts"], 2);
    assert_eq!(r["spec"]["min_time_ns"], 300_000_000u64);
    // The residency covers the whole loop, not --counts passes of it.
    assert_eq!(
        r["residency"]["total_ns"], t["total_ns"],
        "{}",
        r["residency"]
    );
}

#[test]
fn a_probe_without_min_time_does_exactly_its_counts() {
    let r = record(&probe(&["--counts", "3"]));
    assert_eq!(r["timing"]["iterations_ns"].as_array().unwrap().len(), 3);
    assert!(r["spec"].get("min_time_ns").is_none(), "{}", r["spec"]);
}

#[test]
fn a_min_time_that_is_not_a_positive_number_exits_2() {
    for bad in ["0", "-1", "x", "inf"] {
        let o = probe(&["--min-time", bad]);
        assert_eq!(o.status.code(), Some(2), "--min-time {bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--min-time"), "--min-time {bad}: {err}");
        assert!(o.stdout.is_empty());
    }
}
