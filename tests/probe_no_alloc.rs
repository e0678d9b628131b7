//! Regression test for private threads grouped by the allocator: a
//! threaded probe's workers must not call malloc, free, realloc or calloc
//! from the start of their timed loop to their last reading of their own
//! state. The allocator's globals (`tcache_key`, `global_max_fast`...)
//! sit on one page every thread then touches, and NUMA balancing groups
//! tasks on any page they both touch: in the 4-node lab guest that put
//! `--sharing private` threads in one `numa_group` (docs/numa-groups.md).
//!
//! Checked with uprobes on the allocator's entry points of the numalab
//! under test (a static binary, as CI builds it: its allocator is in the
//! file itself), in a private tracefs mount, against each thread's loop
//! window from its record (CLOCK_MONOTONIC, the trace's `mono` clock).
//! Needs root, uprobes, `nm` and `unshare`; says so and skips otherwise.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Skips, visibly; fails instead where every test must run
/// (`common::skip_or_fail`: CI).
fn skip(why: &str) {
    common::skip_or_fail(why);
}

/// The file offsets of the allocator's entry points in `exe`, from `nm`
/// and the executable segment of `readelf -lW`.
fn allocator_offsets(exe: &Path) -> Option<BTreeMap<&'static str, u64>> {
    let nm = Command::new("nm").arg(exe).output().ok()?;
    let rd = Command::new("readelf")
        .args(["-lW"])
        .arg(exe)
        .output()
        .ok()?;
    let rd = String::from_utf8_lossy(&rd.stdout);
    let (off, vaddr) = rd.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.first() == Some(&"LOAD") && l.contains("R E")).then(|| {
            let h = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            (h(f[1]), h(f[2]))
        })
    })?;
    let mut out = BTreeMap::new();
    for l in String::from_utf8_lossy(&nm.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 3 {
            for name in ["malloc", "free", "realloc", "calloc"] {
                if f[2] == name && "TtWi".contains(f[1]) {
                    let a = u64::from_str_radix(f[0], 16).ok()?;
                    out.insert(name, a - vaddr + off);
                }
            }
        }
    }
    (out.len() == 4).then_some(out)
}

#[test]
fn worker_threads_call_no_allocator_in_their_loops() {
    let exe = Path::new(env!("CARGO_BIN_EXE_numalab"));
    if !rustix::process::geteuid().is_root() {
        return skip("not root: uprobes need it");
    }
    if !common::lab::is_static_elf(exe) {
        return skip("numalab under test is not a static binary (scripts/test.sh builds one)");
    }
    let Some(offs) = allocator_offsets(exe) else {
        return skip("no nm/readelf, or the allocator's symbols are not in the binary");
    };
    let dir = tempfile::tempdir().unwrap();
    let tfs = dir.path().join("tracefs");
    std::fs::create_dir(&tfs).unwrap();
    let record = dir.path().join("probe.json");
    let trace = dir.path().join("trace.txt");
    let mut probes = String::new();
    for (name, off) in &offs {
        probes.push_str(&format!(
            "echo 'p:numalab_{name} {}:{off:#x}' >> $T/uprobe_events\n",
            exe.display()
        ));
    }
    let script = format!(
        r#"set -e
T={tfs}
mount -t tracefs none $T
[ -e $T/uprobe_events ] || {{ echo NO-UPROBES; exit 0; }}
echo mono > $T/trace_clock
{probes}echo 1 > $T/events/uprobes/enable
{exe} probe --threads 2 --sharing private --size 8M --counts 1 --min-time 1 \
    --timeline-ms 100 --json > {record}
echo 0 > $T/events/uprobes/enable
cat $T/trace > {trace}
echo > $T/uprobe_events
"#,
        tfs = tfs.display(),
        exe = exe.display(),
        record = record.display(),
        trace = trace.display(),
    );
    let out = match Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
    {
        Ok(o) => o,
        Err(e) => return skip(&format!("unshare: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("NO-UPROBES") {
        return skip("this kernel has no uprobes");
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    // `probe-0-1234 [001] ..... 12.345678: numalab_malloc: (0x...)`
    let calls: Vec<(u64, u64, String)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (task, rest) = l.trim_start().split_once(' ')?;
            let tid: u64 = task.rsplit('-').next()?.parse().ok()?;
            let (ts, ev) = rest.split_once(": numalab_")?;
            let secs: f64 = ts.split_whitespace().last()?.parse().ok()?;
            let name = ev.split(':').next()?.to_string();
            Some((tid, (secs * 1e9) as u64, name))
        })
        .collect();
    for t in r["threads"].as_array().unwrap() {
        let tid = t["tid"].as_u64().unwrap();
        let o = &t["observation"];
        let start = o["start_mono_ns"].as_u64().unwrap();
        let (from, to) = (
            start + o["loop_start_ns"].as_u64().unwrap(),
            start + o["end_ns"].as_u64().unwrap(),
        );
        let mine: Vec<&(u64, u64, String)> = calls.iter().filter(|c| c.0 == tid).collect();
        // The probes work: the thread made its loop's kit before it.
        assert!(
            mine.iter().any(|c| c.1 < from),
            "thread {tid}: no allocator call traced at all ({} calls in the trace)",
            calls.len()
        );
        let inside: Vec<String> = mine
            .iter()
            .filter(|c| c.1 >= from && c.1 <= to)
            .map(|c| format!("{} at +{} ns", c.2, c.1 - from))
            .collect();
        assert!(
            inside.is_empty(),
            "thread {tid} called the allocator {} times in its loop ({} ns), first {:?}",
            inside.len(),
            to - from,
            &inside[..inside.len().min(4)]
        );
    }
}
