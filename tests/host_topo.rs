//! `numalab topo` on this machine against the real `numactl --hardware`.
//!
//! Memory figures move between two reads (free memory always, total memory
//! too on machines with memory hotplug or ballooning), so size and free lines
//! must fall between the values numactl printed just before and just after;
//! every other line must be identical.

use std::process::Command;

fn numactl_hardware() -> Option<String> {
    let out = Command::new("numactl").arg("--hardware").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn required() -> bool {
    std::env::var_os("NUMALAB_REQUIRE_TOOLS").is_some()
}

/// "node 0 free: 3155 MB" -> ("node 0 free:", 3155)
fn mem_line(line: &str) -> Option<(&str, u64)> {
    let (head, rest) = line.split_once(": ")?;
    if !(head.ends_with(" size") || head.ends_with(" free")) {
        return None;
    }
    let mb = rest.strip_suffix(" MB")?.parse().ok()?;
    Some((head, mb))
}

/// Compares one `numalab topo` block with numactl readings taken just before
/// and after; `Err` says which line differs.
fn compare(ours: &str, before: &str, after: &str) -> Result<(), String> {
    let block: Vec<&str> = ours.split("\n\n").next().unwrap_or("").lines().collect();
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    if block.len() != b.len() {
        return Err(format!("{} lines vs numactl's {}", block.len(), b.len()));
    }
    for ((o, x), y) in block.iter().zip(&b).zip(&a) {
        match (mem_line(o), mem_line(x), mem_line(y)) {
            (Some((ho, vo)), Some((hx, vx)), Some((hy, vy))) if ho == hx && ho == hy => {
                if !(vx.min(vy)..=vx.max(vy)).contains(&vo) {
                    return Err(format!("{o:?} not within numactl's {x:?} .. {y:?}"));
                }
            }
            _ if o == x => {}
            _ => return Err(format!("{o:?} != numactl's {x:?}")),
        }
    }
    Ok(())
}

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
        match compare(&ours, &before, &after) {
            Ok(()) => return,
            Err(e) => last = format!("{e}\nours:\n{ours}\nnumactl:\n{before}"),
        }
    }
    panic!("numalab topo differs from numactl --hardware: {last}");
}
