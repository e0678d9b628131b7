//! Property tests for the procfs text parsers: /proc/PID/sched
//! ([`numastat::parse_proc_sched_numa`]), /proc/vmstat
//! ([`numastat::parse_vmstat_numa`]), /proc/stat ([`procstat::parse`]) and
//! /proc/PID/numa_maps ([`pages::bytes_per_node`]), and the PNID evidence
//! in /proc/kallsyms, /proc/self/sched and osrelease ([`pnid::detect`]),
//! and the tracefs mount in /proc/mounts ([`tracefs::find_in_mounts`]).
//!
//! These parsers are fail-soft by design (a line that does not parse is
//! skipped), so the properties are: no panic on arbitrary or mutated real
//! files (tests/fixtures/proc), sums that cannot overflow, and values
//! printed in the kernel's format read back exactly.

mod prop_common;

use numalab::analysis::numastat::{self, NodeFaults, NumaSched};
use numalab::analysis::pages;
use numalab::load::procstat;
use numalab::probe::pnid;
use numalab::trace::tracefs;
use prop_common::{apply, config, edits, noisy_text};
use proptest::prelude::*;
use std::collections::BTreeMap;

const SCHED: &str = include_str!("fixtures/proc/sched-6.18-1node.txt");
const VMSTAT: &str = include_str!("fixtures/proc/vmstat-6.18-1node.txt");
const STAT: &str = "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 10 0 10 80 0 0 0 0 0 0\n\
cpu1 0 0 0 100 0 0 0 0 0 0\nintr 5 0 0\nctxt 9\nbtime 1700000000\n";
const NUMA_MAPS: &str = "\
55d0c8a00000 default file=/usr/bin/x mapped=3 N0=3 kernelpagesize_kB=4
7f0000000000 bind:1 anon=8192 dirty=8192 N1=8000 N0=192 kernelpagesize_kB=4
7f1000000000 default anon=2 dirty=2 N1=2 kernelpagesize_kB=2048
7ffd00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
";

/// Every parser of this file on one input.
fn all_parsers(text: &str) {
    let s = numastat::parse_proc_sched_numa(text);
    let _ = s.faults_on_current_node();
    for f in s.faults.values() {
        let _ = f.task_total();
    }
    let v = numastat::parse_vmstat_numa(text);
    assert!(v.keys().all(|k| numastat::is_numa_vmstat_key(k)));
    let _ = numastat::vmstat_delta(&v, &numastat::parse_vmstat_numa(VMSTAT));
    let _ = numastat::vmstat_delta(&numastat::parse_vmstat_numa(VMSTAT), &v);
    let st = procstat::parse(text);
    for t in st.values() {
        assert!(t.busy <= t.total, "{t:?} from {text:?}");
    }
    let base = procstat::parse(STAT);
    for p in procstat::busy_percent(&base, &st)
        .values()
        .chain(procstat::busy_percent(&st, &base).values())
    {
        assert!(p.is_finite(), "{p}");
    }
    let b = pages::bytes_per_node(text);
    let _ = pages::majority_node(&b);
}

fn sched_text(s: &NumaSched) -> String {
    let mut t = String::from(
        "probe (4242, #threads: 2)\n-------------------------------------------------------------------\n",
    );
    let mut kv = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            t.push_str(&format!("{k:<45}:{v:>21}\n"));
        }
    };
    kv("mm->numa_scan_seq", s.numa_scan_seq.map(|v| v.to_string()));
    kv(
        "numa_pages_migrated",
        s.numa_pages_migrated.map(|v| v.to_string()),
    );
    kv(
        "numa_preferred_nid",
        s.numa_preferred_nid.map(|v| v.to_string()),
    );
    kv(
        "numa_preferred_nid_force",
        s.numa_preferred_nid_force.map(|v| v.to_string()),
    );
    kv(
        "total_numa_faults",
        s.total_numa_faults.map(|v| v.to_string()),
    );
    if let (Some(c), Some(g)) = (s.current_node, s.numa_group_id) {
        t.push_str(&format!("current_node={c}, numa_group_id={g}\n"));
    }
    for (n, f) in &s.faults {
        let v = |x: Option<u64>| x.unwrap();
        t.push_str(&format!(
            "numa_faults node={n} task_private={} task_shared={} group_private={} group_shared={}\n",
            v(f.task_private), v(f.task_shared), v(f.group_private), v(f.group_shared)
        ));
    }
    t
}

fn numa_sched() -> impl Strategy<Value = NumaSched> {
    let faults = prop::collection::btree_map(
        any::<u32>(),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(a, b, c, d)| {
            NodeFaults {
                task_private: Some(a),
                task_shared: Some(b),
                group_private: Some(c),
                group_shared: Some(d),
            }
        }),
        0..6,
    );
    (
        (
            any::<Option<i64>>(),
            any::<Option<u64>>(),
            any::<Option<i32>>(),
        ),
        (any::<Option<i32>>(), any::<Option<u64>>()),
        any::<Option<(i32, i32)>>(),
        faults,
    )
        .prop_map(|((seq, mig, nid), (force, total), cur, faults)| NumaSched {
            numa_scan_seq: seq,
            numa_pages_migrated: mig,
            numa_preferred_nid: nid,
            numa_preferred_nid_force: force,
            total_numa_faults: total,
            current_node: cur.map(|c| c.0),
            numa_group_id: cur.map(|c| c.1),
            faults,
        })
}

proptest! {
    #![proptest_config(config("prop_procfs"))]

    #[test]
    fn arbitrary_text_never_panics(text in noisy_text()) {
        all_parsers(&text);
    }

    #[test]
    fn mutated_real_files_never_panic(
        seed in prop::sample::select(&[SCHED, VMSTAT, STAT, NUMA_MAPS][..]), e in edits(),
    ) {
        all_parsers(&apply(seed, &e));
    }

    #[test]
    fn sched_round_trip(s in numa_sched()) {
        prop_assert_eq!(numastat::parse_proc_sched_numa(&sched_text(&s)), s);
    }

    #[test]
    fn vmstat_round_trip(
        counters in prop::collection::btree_map("(numa_|pgmigrate_|nr_|thp_)[a-z_]{1,20}", any::<u64>(), 0..30),
    ) {
        let text: String = counters.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        let want: BTreeMap<String, u64> = counters
            .into_iter()
            .filter(|(k, _)| numastat::is_numa_vmstat_key(k))
            .collect();
        prop_assert_eq!(numastat::parse_vmstat_numa(&text), want);
    }

    #[test]
    fn proc_stat_sums_saturate(
        cpus in prop::collection::btree_map(0u32..4096, prop::collection::vec(any::<u64>(), 5..11), 0..16),
    ) {
        let mut text = String::from("cpu  0 0 0 0 0 0 0 0\n");
        for (id, v) in &cpus {
            let f: Vec<String> = v.iter().map(u64::to_string).collect();
            text.push_str(&format!("cpu{id} {}\n", f.join(" ")));
        }
        let got = procstat::parse(&text);
        prop_assert_eq!(got.keys().copied().collect::<Vec<_>>(), cpus.keys().copied().collect::<Vec<_>>());
        for (id, v) in &cpus {
            let get = |i: usize| v.get(i).copied().unwrap_or(0) as u128;
            let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
            let total = busy + get(3) + get(4);
            prop_assert_eq!(got[id].busy as u128, busy.min(u64::MAX as u128));
            prop_assert_eq!(got[id].total as u128, total.min(u64::MAX as u128));
        }
    }

    #[test]
    fn numa_maps_sums_saturate(
        lines in prop::collection::vec(
            (prop::collection::vec((0u32..8, any::<u64>()), 0..4), prop::sample::select(&[4u64, 64, 2048, 1048576, u64::MAX][..])),
            0..10,
        ),
    ) {
        let mut text = String::new();
        let mut want: BTreeMap<u32, u128> = BTreeMap::new();
        for (i, (counts, kb)) in lines.iter().enumerate() {
            text.push_str(&format!("7f{i:010x} default anon=1"));
            for (n, c) in counts {
                text.push_str(&format!(" N{n}={c}"));
                let e = want.entry(*n).or_default();
                *e = e.saturating_add((*c as u128).saturating_mul(*kb as u128 * 1024));
            }
            text.push_str(&format!(" kernelpagesize_kB={kb}\n"));
        }
        let got = pages::bytes_per_node(&text);
        let want: BTreeMap<u32, u64> =
            want.into_iter().map(|(n, b)| (n, b.min(u64::MAX as u128) as u64)).collect();
        prop_assert_eq!(&got, &want);
        if let Some(n) = pages::majority_node(&got) {
            let total: u128 = got.values().map(|&b| b as u128).sum();
            prop_assert!(got[&n] as u128 * 2 > total);
        }
    }
}

const KALLSYMS: &str = "ffffffff81000000 T _stext\nffffffff81234560 T prctl_chg_pref_nid\n\
ffffffff81234570 t futex_hash_prctl\nffffffffc0000000 t foo\t[mod]\n";

proptest! {
    #![proptest_config(config("prop_procfs"))]

    #[test]
    fn pnid_evidence_never_panics(
        ke in edits(), se in edits(), release in prop_oneof![
            noisy_text(), "[0-9]{1,25}\\.[0-9]{1,25}(\\.[0-9]+)?(-[a-z0-9_+]+)?\n",
        ],
        force in any::<bool>(),
    ) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("self")).unwrap();
        std::fs::create_dir_all(d.path().join("sys/kernel")).unwrap();
        std::fs::write(d.path().join("kallsyms"), apply(KALLSYMS, &ke)).unwrap();
        let mut sched = apply(SCHED, &se);
        if force {
            sched.push_str("numa_preferred_nid_force                     :                   -1\n");
        }
        std::fs::write(d.path().join("self/sched"), sched).unwrap();
        std::fs::write(d.path().join("sys/kernel/osrelease"), &release).unwrap();
        match pnid::detect(d.path()) {
            Ok(i) => prop_assert!([78, 101].contains(&i.option), "{:?}", i),
            Err(e) => prop_assert_eq!(numalab::error::exit_code(&e), 2, "{}", e),
        }
    }
}

const MOUNTS: &str = "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
debugfs /sys/kernel/debug debugfs rw,nosuid,nodev,noexec,relatime 0 0
tracefs /sys/kernel/tracing tracefs rw,nosuid,nodev,noexec,relatime 0 0
/dev/sda1 /mnt/my\\040disk ext4 rw,relatime 0 0
";

/// How the kernel writes a path in /proc/mounts (`mangle()`: space, tab,
/// newline and backslash as `\ooo`).
fn mangle(p: &str) -> String {
    p.chars()
        .map(|c| match c {
            ' ' | '\t' | '\n' | '\\' => format!("\\{:03o}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

proptest! {
    #![proptest_config(config("prop_procfs"))]

    #[test]
    fn mounts_never_panic(
        text in prop_oneof![
            noisy_text(),
            "([a-z]{1,5} /([a-z0-9]|\\\\[0-9]{0,4}){0,8} (tracefs|debugfs|ext4) rw 0 0\n){0,4}",
        ],
        e in edits(),
    ) {
        let _ = tracefs::find_in_mounts(&text);
        let _ = tracefs::find_in_mounts(&apply(MOUNTS, &e));
    }

    #[test]
    fn mounts_path_round_trip(path in "/[a-zA-Z0-9 \t\n\\\\_.é-]{0,24}", other in "/[a-z]{1,8}") {
        let text = format!(
            "proc /proc proc rw 0 0\nnone {} ext4 rw 0 0\ntracefs {} tracefs rw 0 0\n",
            mangle(&other),
            mangle(&path)
        );
        prop_assert_eq!(tracefs::find_in_mounts(&text), Some(std::path::PathBuf::from(&path)));
    }
}
