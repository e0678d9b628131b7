//! `numalab topo` inside QEMU guests with real multi-node kernels, checked
//! against the guest's own numactl (run just before and after, since free
//! memory moves) and sysfs. With NUMALAB_UPDATE_FIXTURES=1
//! each run also writes the fixture tree numalab read (plus the kernel's
//! answers) to tests/fixtures/topo/NAME/, for the plain unit tests.

mod common;

use common::{
    check_json_against_facts, compare_numactl, lab, parse_cpu_facts, sections, CPU_FACTS_SH,
};
use std::path::Path;
use std::process::{Command, Stdio};

/// Prints every section one topology view needs, each behind `@@PREFIX-name`.
fn views(prefix: &str) -> String {
    format!(
        r#"
rm -rf /tmp/fx
echo @@{prefix}-numactl-before; numactl --hardware
numalab topo --capture /tmp/fx >/tmp/topo.txt 2>/dev/null
echo @@{prefix}-numactl-after; numactl --hardware
echo @@{prefix}-topo; cat /tmp/topo.txt
echo @@{prefix}-json; numalab topo --json
echo @@{prefix}-facts
{CPU_FACTS_SH}
echo @@{prefix}-capture; tar -C /tmp/fx -cf - . | gzip | base64
"#
    )
}

fn check_view(name: &str, s: &std::collections::BTreeMap<String, String>) {
    let get = |k: &str| {
        s.get(&format!("{name}-{k}"))
            .unwrap_or_else(|| panic!("guest printed no {name}-{k} section"))
            .clone()
    };
    if let Err(e) = compare_numactl(&get("topo"), &get("numactl-before"), &get("numactl-after")) {
        panic!("{name}: numalab topo vs the guest's numactl --hardware: {e}");
    }
    let facts = parse_cpu_facts(&get("facts"));
    if let Err(e) = check_json_against_facts(&get("json"), &facts) {
        panic!("{name}: numalab topo --json vs the guest's sysfs: {e}");
    }
    if std::env::var_os("NUMALAB_UPDATE_FIXTURES").is_some() {
        let dir = lab::repo().join("tests/fixtures/topo").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root")).unwrap();
        for k in ["numactl-before", "numactl-after", "facts", "topo"] {
            std::fs::write(dir.join(format!("{k}.txt")), get(k)).unwrap();
        }
        unpack(&get("capture"), &dir.join("root"));
        eprintln!("wrote fixture {}", dir.display());
    }
}

fn unpack(b64: &str, dest: &Path) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("base64 -d | tar -xzf - -C '{}'", dest.display()))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b64.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "unpacking the capture");
}

fn boot_and_check(
    topology: &str,
    extra: &str,
    names: &[&str],
) -> Option<std::collections::BTreeMap<String, String>> {
    let script = format!("{}\n{extra}\necho @@end\n", views(topology));
    let run = lab::run(topology, &script, 600)?;
    assert_eq!(run.code, 0, "guest script failed:\n{}", run.output);
    let s = sections(&run.output);
    check_view(topology, &s);
    for n in names {
        check_view(n, &s);
    }
    Some(s)
}

#[test]
fn two_nodes_plus_offline_cpu_and_cpuset_views() {
    // Same boot: CPU 3 offline, then a cgroup v2 cpuset that hides node 1.
    let extra = format!(
        r#"
echo 0 > /sys/devices/system/cpu/cpu3/online
{}
echo 1 > /sys/devices/system/cpu/cpu3/online
mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup
echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/nl && echo 0-1 > /sys/fs/cgroup/nl/cpuset.cpus && echo 0 > /sys/fs/cgroup/nl/cpuset.mems
echo $$ > /sys/fs/cgroup/nl/cgroup.procs
{}
echo @@cpuset-note; numalab topo | grep 'cpuset allows only'
"#,
        views("2node-offline"),
        views("2node-cpuset")
    );
    if let Some(s) = boot_and_check("2node", &extra, &["2node-offline", "2node-cpuset"]) {
        let note = &s["cpuset-note"];
        assert!(
            note.contains("CPUs 0-1 of online 0-3") && note.contains("nodes 1 hidden"),
            "cpuset note: {note:?}"
        );
        assert!(s["2node-offline-topo"].contains("offline CPUs: 3"));
    }
}

#[test]
fn four_nodes_with_smt() {
    boot_and_check("4node-smt", "", &[]);
}

#[test]
fn two_nodes_of_two_smt_cores() {
    boot_and_check("2node-smt", "", &[]);
}

#[test]
fn eight_nodes_with_the_dl980_distances() {
    boot_and_check("8node-dl980", "", &[]);
}

#[test]
fn node_with_memory_and_no_cpus() {
    boot_and_check("memonly", "", &[]);
}

#[test]
fn cpus_interleaved_across_nodes() {
    boot_and_check("interleaved", "", &[]);
}
