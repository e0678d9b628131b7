//! `--bind-scope` and `--load-policy` on this machine: the probe sets its
//! policy for the whole process and says so in its record; the load starts
//! its workers under MPOL_LOCAL; bad values are usage errors. (What they do
//! to NUMA balancing needs several nodes: tests/lab_load_policy.rs and the
//! simulator's tests/sim.rs.)

use std::process::Command;

fn numalab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_process_wide_binding_places_the_buffer_and_is_recorded() {
    if !std::path::Path::new("/sys/devices/system/node/node0").exists() {
        eprintln!("SKIPPED: this kernel shows no NUMA nodes");
        return;
    }
    let o = numalab(&[
        "probe",
        "--membind",
        "0",
        "--bind-scope",
        "process",
        "--size",
        "4M",
        "--counts",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["spec"]["bind_scope"], "process");
    assert_eq!(
        r["placement"]["pages_per_node"]["0"], 1024,
        "{}",
        r["placement"]
    );
    assert_eq!(r["placement"]["matches_request"], true);
    // The default is left out of the record, as in records from before it.
    let o = numalab(&[
        "probe",
        "--membind",
        "0",
        "--size",
        "4M",
        "--counts",
        "1",
        "--json",
    ]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["spec"].get("bind_scope").is_none(), "{}", r["spec"]);
}

#[test]
fn a_load_under_mpol_local_runs_and_bad_policies_exit_2() {
    // 0.2 s of a 10% load with `extra`: it must run; its stderr.
    let load = |extra: &[&str]| -> String {
        let mut args = vec!["load", "--percent", "10", "--duration", "0.2"];
        args.extend(extra);
        let o = numalab(&args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{args:?}: {err}");
        err
    };
    load(&["--policy", "local"]);
    // The load's other shape option, on the same path.
    let err = load(&["--phases", "random", "--seed", "7"]);
    assert!(err.contains("random (seed 7)"), "{err}");
    let err = load(&["--phases", "spread"]);
    assert!(err.contains("spread phases"), "{err}");
    for args in [
        &["load", "--phases", "sorted"][..],
        &["run", "--quick", "--load-phases", "none"][..],
        &["load", "--policy", "bogus"][..],
        &["run", "--quick", "--load-policy", "none"][..],
        &["probe", "--bind-scope", "vma"][..],
    ] {
        let o = numalab(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("invalid value"),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
