//! The Preferred Node Affinity patch (patches/linux-6.12) on a real kernel:
//! the lab kernel from lab/kernel/build (cached, or built here, which takes
//! minutes) booted as a 2-node guest. numalab finds the patch on its own,
//! forces the node with the prctl and records it; the kernel shows the node
//! in /proc/PID/sched while the probe runs; and the prctl itself (through
//! lab/kernel/pnidctl.c) refuses bad nodes, reads back what was set, clears,
//! works on other pids, and resets on fork but not for threads or exec.
//! And the scheduler side: a running probe forced (by pid) to the node away
//! from its memory ends up on the forced node, NUMA balancing's faults
//! notwithstanding.
//! Plus a host-side check of lab/kernel/build's config verification.
//!
//! The stock Debian kernel's refusal of --pnid is checked in lab_probe.

mod common;

use common::{lab, record, required};
use std::path::Path;
use std::process::Command;

/// Builds lab/kernel/pnidctl.c static and returns it base64-encoded, so the
/// guest script can carry it (the guest has no other way in for files).
fn pnidctl_base64(dir: &Path) -> Option<String> {
    let bin = dir.join("pnidctl");
    let out = Command::new("gcc")
        .args(["-static", "-O2", "-s", "-Wall", "-Werror", "-o"])
        .arg(&bin)
        .arg(lab::repo().join("lab/kernel/pnidctl.c"))
        .arg("-lpthread")
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr).into_owned();
            // A compile error is ours; a missing static libc is the machine's.
            assert!(
                !required() && why.contains("cannot find -l"),
                "gcc -static lab/kernel/pnidctl.c failed:\n{why}"
            );
            eprintln!("SKIPPED prctl checks: no static libc (package libc6-dev): {why}");
            return None;
        }
        Err(e) => {
            assert!(!required(), "gcc needed (NUMALAB_REQUIRE_TOOLS): {e}");
            eprintln!("SKIPPED prctl checks: gcc: {e}");
            return None;
        }
    }
    let out = Command::new("base64").arg(&bin).output().expect("base64");
    assert!(out.status.success());
    Some(String::from_utf8(out.stdout).unwrap())
}

const SCRIPT: &str = r#"
echo @@kernel; uname -r; grep -c ' prctl_chg_pref_nid$' /proc/kallsyms
echo @@mounts; awk '$2 == "/sys/kernel/tracing" || $2 == "/sys/kernel/debug" { print $2, $3 }' /proc/mounts
ls /sys/kernel/tracing/events/sched/sched_migrate_task/format
echo @@probe; numalab probe --pnid 1 --membind 1 --size 16M --counts 2 --json; echo "rc=$?"
echo @@clear; numalab probe --pnid -1 --size 4M --counts 1 --json; echo "rc=$?"
echo @@badnode; numalab probe --pnid 7 --size 16M; echo "rc=$?"
echo @@live
# A longer probe in the background: its /proc/PID/sched must show the
# forced node while it runs (it sets it before mapping its buffer).
numalab probe --pnid 1 --membind 1 --size 16M --counts 100000 >/dev/null 2>&1 &
P=$!
i=0
while [ $i -lt 100 ]; do
    grep -q 'numa_preferred_nid_force.*: *1$' /proc/$P/sched 2>/dev/null && break
    sleep 0.1; i=$((i + 1))
done
grep -E '^numa_preferred_nid(_force)? ' /proc/$P/sched
kill $P; wait $P
echo @@ctl
if [ -n "$PNIDCTL" ]; then
    echo "$PNIDCTL" | base64 -d > /tmp/pnidctl; chmod 755 /tmp/pnidctl
    C=/tmp/pnidctl
    echo "get-fresh $($C get)"
    r=$($C set 7); echo "set-7 $r rc=$?"
    r=$($C set -2); echo "set-2neg $r rc=$?"
    $C inherit 1
    echo "exec $($C exec 1 sh -c 'grep -E "^numa_preferred_nid(_force)? " /proc/self/sched' | tr -s ' ' | tr '\n' ';')"
    sleep 60 & S=$!
    echo "other-set $($C set 1 $S)"
    echo "other-get $($C get $S)"
    echo "other-sched $(grep -E '^numa_preferred_nid(_force)? ' /proc/$S/sched | tr -s ' ' | tr '\n' ';')"
    echo "other-clear $($C set -1 $S)"
    echo "other-get-cleared $($C get $S)"
    echo "other-sched-cleared $(grep -E '^numa_preferred_nid(_force)? ' /proc/$S/sched | tr -s ' ' | tr '\n' ';')"
    # A 32-bit -1 (what C passes for an int) clears too.
    echo "other-set-again $($C set 1 $S)"
    r=$($C set32 -1 $S); echo "set32-clear $r rc=$?"
    echo "other-get-set32 $($C get $S)"
    kill $S
    r=$($C get 99999); echo "nopid $r rc=$?"
    echo @@move
    # The scheduler side: a probe with its memory first-touched where it
    # started is forced, by pid, to the other node. With NUMA balancing on,
    # the forced node must win over the faults (which point at the memory)
    # and the task must end up there.
    # NUMA balancing's first scan comes only after scan_delay_ms (1 s) of
    # the task's CPU time plus one scan period (scan_period_min_ms, 1 s), and
    # the move needs hinting faults after that. The test is about where the
    # forced node sends the task, not about the scan's start-up delay, so
    # the delays are cut to 100 ms. And the probe must still be running
    # when it is forced at 1 s and for seconds after: a pass count does not
    # give that, since TCG's speed differs tenfold between machines and
    # runs (a pass of this probe took 11-300 ms; CI's 64 passes ended
    # before the force), so it runs for 12 s (--min-time).
    D=/sys/kernel/debug/sched/numa_balancing
    echo 100 > $D/scan_delay_ms; echo 100 > $D/scan_period_min_ms
    echo "knobs $(cat $D/scan_delay_ms) $(cat $D/scan_period_min_ms)"
    echo 1 > /proc/sys/kernel/numa_balancing
    numalab probe --size 16M --counts 1 --min-time 12 --json > /tmp/move.json 2>&1 &
    P=$!
    sleep 1
    if [ -e /proc/$P/stat ]; then
        cpu=$(awk '{ print $39 }' /proc/$P/stat)
        node=$(ls -d /sys/devices/system/cpu/cpu$cpu/node[0-9]* | sed 's/.*node//')
        other=$((1 - node))
        echo "started $node forced $other $($C set $other $P)"
    else
        echo "started gone: the probe ended within 1 s"
    fi
    wait $P; echo "rc=$?"
    cat /tmp/move.json
else
    echo "no pnidctl"
fi
echo @@end
"#;

/// The value of `key` on a `key value` line of a section.
fn field<'a>(section: &'a str, key: &str) -> &'a str {
    section
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {key} line in:\n{section}"))
        .trim()
}

/// "numa_preferred_nid : 1" style lines, squeezed or not, -> value.
fn sched_value(text: &str, name: &str) -> Option<i64> {
    text.split([';', '\n']).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().parse().ok())?
    })
}

#[test]
fn pnid_patch_on_the_lab_kernel() {
    let Some(kernel) = lab::pnid_kernel() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pnidctl = pnidctl_base64(dir.path()).unwrap_or_default();
    let script = format!("PNIDCTL='{}'\n{SCRIPT}", pnidctl.trim());
    let Some(run) = lab::run_on(Some(&kernel), "2node", &script, 600) else {
        return;
    };
    eprintln!("--- guest output ---\n{}--- end ---", run.output);
    let s = run.finished();

    let k: Vec<&str> = s["kernel"].lines().collect();
    assert!(k[0].ends_with("-pnid"), "not the lab kernel: {k:?}");
    assert_eq!(k[1], "1", "prctl_chg_pref_nid not in /proc/kallsyms");
    assert!(
        s["mounts"].contains("/sys/kernel/tracing tracefs")
            && s["mounts"].contains("/sys/kernel/debug debugfs")
            && s["mounts"].contains("sched_migrate_task/format"),
        "tracefs/debugfs not usable on the lab kernel:\n{}",
        s["mounts"]
    );

    // numalab on its own: detection, SET, GET, and the kernel's view at the end.
    assert!(s["probe"].contains("rc=0"), "{}", s["probe"]);
    let p = record(&s, "probe");
    let pn = &p["pnid"];
    assert_eq!(pn["requested"], 1, "{pn}");
    assert_eq!(pn["read_back"], 1, "{pn}");
    assert_eq!(pn["interface"]["option"], 101, "{pn}");
    assert_eq!(pn["interface"]["layout"], "poc", "{pn}");
    assert!(
        pn["interface"]["evidence"]
            .as_str()
            .unwrap()
            .contains("prctl_chg_pref_nid"),
        "{pn}"
    );
    let sched = &p["numa"]["sched"];
    assert_eq!(sched["numa_preferred_nid"], 1, "{sched}");
    assert_eq!(sched["numa_preferred_nid_force"], 1, "{sched}");
    assert_eq!(
        p["placement"]["matches_request"], true,
        "{}",
        p["placement"]
    );

    assert!(s["clear"].contains("rc=0"), "{}", s["clear"]);
    let c = record(&s, "clear");
    assert_eq!(c["pnid"]["requested"], -1);
    assert_eq!(c["pnid"]["read_back"], -1, "{}", c["pnid"]);
    assert_eq!(c["numa"]["sched"]["numa_preferred_nid_force"], -1);

    assert!(
        s["badnode"].contains("node 7 does not exist") && s["badnode"].contains("rc=2"),
        "{}",
        s["badnode"]
    );

    // While it runs.
    assert_eq!(
        sched_value(&s["live"], "numa_preferred_nid_force"),
        Some(1),
        "{}",
        s["live"]
    );
    assert_eq!(
        sched_value(&s["live"], "numa_preferred_nid"),
        Some(1),
        "{}",
        s["live"]
    );

    // The prctl itself.
    let ctl = &s["ctl"];
    if ctl.contains("no pnidctl") {
        return; // skipped above, with the reason
    }
    assert_eq!(field(ctl, "get-fresh"), "-1", "{ctl}");
    assert!(field(ctl, "set-7").contains("EINVAL"), "{ctl}");
    assert!(field(ctl, "set-7").contains("rc=1"), "{ctl}");
    assert!(field(ctl, "set-2neg").contains("EINVAL"), "{ctl}");
    // Regression: a C caller's 32-bit -1 was EINVAL instead of clearing.
    assert_eq!(field(ctl, "other-set-again"), "ok", "{ctl}");
    assert_eq!(field(ctl, "set32-clear"), "ok rc=0", "{ctl}");
    assert_eq!(field(ctl, "other-get-set32"), "-1", "{ctl}");
    // fork() (new address space) resets; a thread inherits.
    assert!(ctl.contains("self=1\n"), "{ctl}");
    assert!(ctl.contains("fork=-1\n"), "{ctl}");
    assert!(ctl.contains("thread=1\n"), "{ctl}");
    // exec keeps it, and the preferred node follows it.
    let exec = field(ctl, "exec");
    assert_eq!(
        sched_value(exec, "numa_preferred_nid_force"),
        Some(1),
        "{ctl}"
    );
    assert_eq!(sched_value(exec, "numa_preferred_nid"), Some(1), "{ctl}");
    // Another task, by pid: set, read back, clear.
    assert_eq!(field(ctl, "other-set"), "ok", "{ctl}");
    assert_eq!(field(ctl, "other-get"), "1", "{ctl}");
    let o = field(ctl, "other-sched");
    assert_eq!(sched_value(o, "numa_preferred_nid_force"), Some(1), "{ctl}");
    assert_eq!(sched_value(o, "numa_preferred_nid"), Some(1), "{ctl}");
    assert_eq!(field(ctl, "other-clear"), "ok", "{ctl}");
    assert_eq!(field(ctl, "other-get-cleared"), "-1", "{ctl}");
    let o = field(ctl, "other-sched-cleared");
    assert_eq!(
        sched_value(o, "numa_preferred_nid_force"),
        Some(-1),
        "{ctl}"
    );
    assert_eq!(sched_value(o, "numa_preferred_nid"), Some(-1), "{ctl}");
    assert!(field(ctl, "nopid").contains("ESRCH"), "{ctl}");

    // Forced to the node away from its memory, the probe ends up there.
    let mv = &s["move"];
    assert_eq!(field(mv, "knobs"), "100 100", "scan delays not set: {mv}");
    let w: Vec<&str> = field(mv, "started").split_whitespace().collect();
    assert_eq!((w.len(), w[1], w[3]), (4, "forced", "ok"), "{mv}");
    let other: u64 = w[2].parse().unwrap();
    assert!(mv.contains("rc=0"), "{mv}");
    let m = record(&s, "move");
    let ms = &m["numa"]["sched"];
    eprintln!(
        "forced from node {} to {other}: residency {}, cross-node moves {}, \
         NUMA pages migrated {}",
        w[0],
        m["residency"]["node_pct"],
        m["migrations_whole"]["cross_node"],
        ms["numa_pages_migrated"]
    );
    assert_eq!(ms["numa_preferred_nid_force"], other, "{ms}");
    assert_eq!(ms["numa_preferred_nid"], other, "{ms}");
    assert_eq!(
        ms["current_node"], other,
        "did not move to the forced node: {ms}"
    );
    assert!(
        m["migrations_whole"]["cross_node"].as_u64().unwrap() >= 1,
        "{}",
        m["migrations_whole"]
    );
}

/// lab/kernel/build's check that the config fragment stuck, on fake
/// .config files (no kernel source needed).
#[test]
fn kernel_build_config_check_names_what_did_not_stick() {
    let dir = tempfile::tempdir().unwrap();
    let frag = dir.path().join("frag");
    let dot = dir.path().join(".config");
    std::fs::write(
        &frag,
        "# comment\n\nCONFIG_A=y\nCONFIG_B=\"x y\"\n# CONFIG_C is not set\nCONFIG_D=64\n",
    )
    .unwrap();
    let check = || {
        Command::new("bash")
            .arg(lab::repo().join("lab/kernel/build"))
            .arg("--check-config")
            .args([&frag, &dot])
            .output()
            .unwrap()
    };
    std::fs::write(
        &dot,
        "CONFIG_A=y\nCONFIG_B=\"x y\"\n# CONFIG_C is not set\nCONFIG_D=64\n",
    )
    .unwrap();
    let out = check();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // C absent counts as not set.
    std::fs::write(&dot, "CONFIG_A=y\nCONFIG_B=\"x y\"\nCONFIG_D=64\n").unwrap();
    assert!(check().status.success());

    std::fs::write(
        &dot,
        "# CONFIG_A is not set\nCONFIG_B=\"x\"\nCONFIG_C=y\nCONFIG_D=64\n",
    )
    .unwrap();
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CONFIG_A (wanted y, got n)"), "{err}");
    assert!(
        err.contains("CONFIG_B (wanted \"x y\", got \"x\")"),
        "{err}"
    );
    assert!(err.contains("CONFIG_C (wanted n, got y)"), "{err}");
    assert!(!err.contains("CONFIG_D"), "{err}");

    // The real fragment parses (every line an option, a comment or blank).
    let out = Command::new("bash")
        .arg(lab::repo().join("lab/kernel/build"))
        .arg("--check-config")
        .arg(lab::repo().join("lab/kernel/config"))
        .arg(lab::repo().join("lab/kernel/config"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("cannot read line"), "{err}");
}

/// Regression: forcing a node without CPUs was accepted, which makes the
/// task more mobile (it can never run there, so every placement moves it
/// away). The memonly guest's node 2 has memory only.
#[test]
fn pnid_refuses_a_node_without_cpus() {
    let Some(kernel) = lab::pnid_kernel() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(pnidctl) = pnidctl_base64(dir.path()) else {
        return;
    };
    let script = format!(
        "echo '{}' | base64 -d > /tmp/pnidctl; chmod 755 /tmp/pnidctl\n\
         echo @@ctl\n\
         r=$(/tmp/pnidctl set 2); echo \"cpuless $r rc=$?\"\n\
         r=$(/tmp/pnidctl set 1); echo \"withcpus $r rc=$?\"\n\
         echo @@end\n",
        pnidctl.trim()
    );
    let Some(run) = lab::run_on(Some(&kernel), "memonly", &script, 300) else {
        return;
    };
    let s = run.finished();
    let ctl = &s["ctl"];
    assert!(field(ctl, "cpuless").contains("EINVAL"), "{ctl}");
    assert!(field(ctl, "cpuless").contains("rc=1"), "{ctl}");
    assert_eq!(field(ctl, "withcpus"), "ok rc=0", "{ctl}");
}
