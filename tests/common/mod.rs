//! Shared test support: comparing `numalab topo` with what a kernel reports
//! (numactl output and raw sysfs facts), and running commands in QEMU lab
//! guests. Used by the host test, the fixture tests and the lab tests.
#![allow(dead_code)]

pub mod lab;
pub mod mock;

use serde_json::Value;
use std::collections::BTreeMap;

/// Whether missing tools fail the tests instead of skipping them (CI sets
/// NUMALAB_REQUIRE_TOOLS).
pub fn required() -> bool {
    std::env::var_os("NUMALAB_REQUIRE_TOOLS").is_some()
}

/// The smallest simulated run, one pinned row (no NUMA balancing, no
/// preferred node, memory and CPUs on node A): `machine` names what it
/// simulates (`["--preset", NAME]` or `["--topology", FILE]`), then
/// `samples` samples of a `size` probe, written to `out`. The tests of
/// inputs and topologies need a run, not a particular experiment.
pub fn sim_row<'a>(
    machine: [&'a str; 2],
    samples: &'a str,
    size: &'a str,
    out: &'a str,
) -> Vec<&'a str> {
    let mut args = vec!["run", "--backend", "sim", machine[0], machine[1]];
    args.extend([
        "--samples",
        samples,
        "--size",
        size,
        "--counts",
        "1",
        "--nb",
        "0",
    ]);
    args.extend(["--pnid=-1", "--mem", "A", "--cpu", "A", "--out", out]);
    args
}

/// Runs numalab with `args` and the state directory `state`; returns its
/// exit code and stderr.
pub fn numalab(args: &[&str], state: &std::path::Path) -> (i32, String) {
    let (rc, _, err) = numalab_out(args, state);
    (rc, err)
}

/// Runs numalab with `args` and the state directory `state`; returns its
/// exit code, stdout and stderr.
pub fn numalab_out(args: &[&str], state: &std::path::Path) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .env("NUMALAB_STATE_DIR", state)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`numalab_out`] that fails the test instead of hanging: the child is
/// killed after `secs` seconds (a read of a FIFO or `/dev/zero`, a
/// simulation that never ends).
pub fn numalab_within(args: &[&str], state: &std::path::Path, secs: u64) -> (i32, String, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .env("NUMALAB_STATE_DIR", state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            // Bounded: a runaway child must not fill the test's memory.
            let _ = (&mut r).take(1 << 20).read_to_end(&mut v);
            let _ = std::io::copy(&mut r, &mut std::io::sink());
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("numalab {args:?} still ran after {secs} s: killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (
        status.code().unwrap_or(-1),
        out.join().unwrap(),
        err.join().unwrap(),
    )
}

/// The JSON objects among a text's lines (a guest's printed records).
pub fn jsonl(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `numalab run` on the simulated Xeon (the RFC's machine).
pub const SIM_XEON_RUN: [&str; 5] = ["run", "--backend", "sim", "--preset", "xeon-8167m-2n"];

/// The Xeon preset's profile with one line replaced, written into `dir`.
pub fn xeon_profile(dir: &std::path::Path, name: &str, from: &str, to: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/profiles/xeon-8167m.toml"
    ))
    .unwrap()
    .replace(from, to);
    assert!(text.contains(to), "{name}: {from:?} not found");
    std::fs::write(&path, text).unwrap();
    path
}

/// `numalab ARGS --out OUT` (a run that must succeed) and its samples.
pub fn run_samples(args: &[&str], out: &std::path::Path) -> Vec<Value> {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    jsonl(&std::fs::read_to_string(out.join("samples.jsonl")).unwrap())
}

/// A test that cannot run here: prints SKIPPED with the reason, or fails
/// when tools are required (CI).
pub fn skip_or_fail(why: &str) {
    if required() {
        panic!("cannot run (NUMALAB_REQUIRE_TOOLS is set): {why}");
    }
    eprintln!("SKIPPED: {why}");
}

/// How far a `free` line may sit outside numactl's before/after bracket.
pub const FREE_SLACK_MB: u64 = 8;

/// "node 0 free: 3155 MB" -> ("node 0 free", 3155)
fn mem_line(line: &str) -> Option<(&str, u64)> {
    let (head, rest) = line.split_once(": ")?;
    if !(head.ends_with(" size") || head.ends_with(" free")) {
        return None;
    }
    Some((head, rest.strip_suffix(" MB")?.parse().ok()?))
}

/// Compares the first block of `numalab topo` with `numactl --hardware`
/// taken just before and after: identical lines, except that memory figures
/// must lie between the two numactl readings (memory moves between reads;
/// free memory within [`FREE_SLACK_MB`]).
pub fn compare_numactl(ours: &str, before: &str, after: &str) -> Result<(), String> {
    let block: Vec<&str> = ours.split("\n\n").next().unwrap_or("").lines().collect();
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    if block.len() != b.len() || b.len() != a.len() {
        return Err(format!(
            "{} lines vs numactl's {} and {}\nours:\n{ours}\nnumactl:\n{before}",
            block.len(),
            b.len(),
            a.len()
        ));
    }
    for ((o, x), y) in block.iter().zip(&b).zip(&a) {
        match (mem_line(o), mem_line(x), mem_line(y)) {
            (Some((ho, vo)), Some((hx, vx)), Some((hy, vy))) if ho == hx && ho == hy => {
                // Free memory is not monotonic between reads: each reading
                // process (numactl with its libraries, numalab) holds a few
                // MB of its own while it reads. Sizes must be bracketed
                // exactly; free lines get FREE_SLACK_MB either side.
                let slack = if ho.ends_with(" free") {
                    FREE_SLACK_MB
                } else {
                    0
                };
                let (lo, hi) = (vx.min(vy).saturating_sub(slack), vx.max(vy) + slack);
                if !(lo..=hi).contains(&vo) {
                    return Err(format!(
                        "{o:?} not within numactl's {x:?} .. {y:?} (±{slack} MB)"
                    ));
                }
            }
            _ if o == x => {}
            _ => {
                return Err(format!(
                    "{o:?} != numactl's {x:?}\nours:\n{ours}\nnumactl:\n{before}"
                ))
            }
        }
    }
    Ok(())
}

/// Raw per-CPU facts as a guest's shell printed them, one line per online
/// CPU: `CPU NODE SIBLINGS LLC_LEVEL LLC_SHARED`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuFact {
    pub node: u32,
    pub siblings: String,
    pub llc_level: u32,
    pub llc_shared: String,
}

pub fn parse_cpu_facts(text: &str) -> BTreeMap<u32, CpuFact> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 5).then(|| {
                (
                    w[0].parse().unwrap(),
                    CpuFact {
                        node: w[1].parse().unwrap(),
                        siblings: w[2].to_string(),
                        llc_level: w[3].parse().unwrap(),
                        llc_shared: w[4].to_string(),
                    },
                )
            })
        })
        .collect()
}

/// The shell (busybox sh) that prints [`CpuFact`] lines from sysfs.
pub const CPU_FACTS_SH: &str = r#"
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  n=${c##*/cpu}
  [ -f $c/topology/thread_siblings_list ] || continue
  node=-1
  for d in /sys/devices/system/node/node[0-9]*; do [ -e $d/cpu$n ] && node=${d##*/node}; done
  best=0; shared=-
  for i in $c/cache/index*; do
    [ "$(cat $i/type)" = Instruction ] && continue
    l=$(cat $i/level)
    if [ "$l" -gt "$best" ]; then best=$l; shared=$(cat $i/shared_cpu_list); fi
  done
  echo "$n $node $(cat $c/topology/thread_siblings_list) $best $shared"
done
"#;

/// Checks `numalab topo --json` against raw sysfs facts: every online CPU's
/// node, SMT siblings and LLC (shared CPUs and level).
pub fn check_json_against_facts(json: &str, facts: &BTreeMap<u32, CpuFact>) -> Result<(), String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("bad JSON: {e}"))?;
    let mut llc_shared: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    for n in v["nodes"].as_array().unwrap() {
        for l in n["llcs"].as_array().unwrap() {
            llc_shared.insert(
                l["index"].as_u64().unwrap(),
                (
                    l["shared_cpus"].as_str().unwrap().to_string(),
                    l["level"].as_u64().unwrap_or(0),
                ),
            );
        }
    }
    if facts.is_empty() {
        return Err("no CPU facts".into());
    }
    for (cpu, f) in facts {
        let c = v["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"].as_u64() == Some(*cpu as u64))
            .ok_or(format!("CPU {cpu} missing from JSON"))?;
        let node = c["node"].as_u64().map(|n| n as u32);
        if node != Some(f.node) {
            return Err(format!("CPU {cpu}: node {node:?}, sysfs says {}", f.node));
        }
        if c["smt_siblings"].as_str() != Some(f.siblings.as_str()) {
            return Err(format!(
                "CPU {cpu}: siblings {}, sysfs says {}",
                c["smt_siblings"], f.siblings
            ));
        }
        let llc = c["llc"].as_u64().ok_or(format!("CPU {cpu} has no LLC"))?;
        let (shared, level) = &llc_shared[&llc];
        if f.llc_level > 0 && (shared != &f.llc_shared || *level != f.llc_level as u64) {
            return Err(format!(
                "CPU {cpu}: LLC L{level} shared by {shared}, sysfs says L{} shared by {}",
                f.llc_level, f.llc_shared
            ));
        }
    }
    Ok(())
}

/// The first JSON record (a line starting with `{`) of section `name`.
pub fn record(s: &BTreeMap<String, String>, name: &str) -> Value {
    let text = s.get(name).unwrap_or_else(|| panic!("no section {name}"));
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("{name}: no record in {text}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"))
}

/// Splits text with `@@name` marker lines into sections.
pub fn sections(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("@@") {
            cur = Some(name.trim().to_string());
            out.entry(name.trim().to_string())
                .or_insert_with(String::new);
        } else if let Some(c) = &cur {
            let s = out.get_mut(c).unwrap();
            s.push_str(line);
            s.push('\n');
        }
    }
    out
}

/// (timestamp ns, pid, orig_cpu, dest_cpu) of each sched_migrate_task line
/// of a tracefs `trace` text (timestamps in microseconds there).
pub fn migrate_lines(text: &str) -> Vec<(u64, u64, u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let (head, rest) = l.split_once(": sched_migrate_task:")?;
            let ts = head.split_whitespace().last()?;
            let (s, us) = ts.split_once('.')?;
            let t = s.parse::<u64>().ok()? * 1_000_000_000 + us.parse::<u64>().ok()? * 1000;
            let f = |k: &str| -> Option<u64> {
                rest.split_whitespace()
                    .find_map(|w| w.strip_prefix(k))
                    .and_then(|v| v.parse().ok())
            };
            Some((t, f("pid=")?, f("orig_cpu=")?, f("dest_cpu=")?))
        })
        .collect()
}
