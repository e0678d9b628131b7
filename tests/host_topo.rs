//! `numalab topo` on this machine against the real `numactl --hardware`.
//!
//! Memory figures move between two reads (free memory always, total memory
//! too on machines with memory hotplug or ballooning), so size and free lines
//! must fall between the values numactl printed just before and just after;
//! every other line must be identical.

mod common;

use std::process::Command;

fn numactl_hardware() -> Option<String> {
    let out = Command::new("numactl").arg("--hardware").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

use common::required;

#[test]
fn topo_matches_numactl_hardware_line_for_line() {
    if numactl_hardware().is_none() {
        assert!(
            !required(),
            "numactl is required (NUMALAB_REQUIRE_TOOLS) but did not run"
        );
        eprintln!("SKIPPED: numactl --hardware is not available on this machine");
        return;
    }
    // Memory can move outside the bracket while other tests run; a few
    // tries tell drift from a real mismatch, which fails every time.
    let mut last = String::new();
    for _ in 0..5 {
        let before = numactl_hardware().unwrap();
        let ours = Command::new(env!("CARGO_BIN_EXE_numalab"))
            .arg("topo")
            .output()
            .unwrap();
        let after = numactl_hardware().unwrap();
        assert!(ours.status.success());
        let ours = String::from_utf8(ours.stdout).unwrap();
        match common::compare_numactl(&ours, &before, &after) {
            Ok(()) => return,
            Err(e) => last = e,
        }
    }
    panic!("numalab topo differs from numactl --hardware: {last}");
}
