//! The RFC's experiment on the patched lab kernel (2-node guest): the whole
//! 36-row matrix runs, none skipped, every PNID row really forced; then the
//! seed's findings measured with the kernel's trace at 60% load:
//! (a) Mem A, CPU F, NB 1: PNID A against PNID -1;
//! (b) Mem F, CPU F: NB 1 against NB 0;
//! (c) PNID A with NB on but no hinting faults (scan knobs at their
//!     maximum), and with NB 0.
//!
//! What the patch guarantees is asserted: the forced node is what the
//! kernel reports as preferred in every PNID sample, the no-fault cell
//! runs under its knobs and scans nothing, while a probe long enough for
//! the default scan delay is scanned. How many cross-node moves each
//! cell makes under emulation is measured and printed with its 95% CI and
//! Welch's p, and documented (docs/preferred-node.md), not asserted: TCG
//! guests have four vCPUs and uniform memory, and the seed's magnitudes
//! (about 1400 cross-node moves falling to about 10) come from a 128-CPU
//! machine running 5-minute samples. CI runs 2 samples a cell of 4
//! passes, enough for every assertion; `NUMALAB_LAB_MEASURE=1` runs the 4
//! samples of 8 passes that the docs quote.

mod common;

use common::{jsonl, lab, record};
use numalab::stats::{welch, Sample};
use serde_json::Value;
use std::collections::BTreeMap;

const NOFAULT: &str = r#"knobs = { "sched/numa_balancing/scan_delay_ms" = "4294967295", "sched/numa_balancing/scan_period_min_ms" = "4294967295", "sched/numa_balancing/scan_period_max_ms" = "4294967295" }"#;

fn script(samples: u32, counts: u32) -> String {
    format!(
        r#"
numalab run --samples 1 --size 8M --counts 1 --load 60 --out /tmp/full >/tmp/full.txt 2>&1
echo "full rc=$?"
echo @@fullmeta; cat /tmp/full/run.json
echo @@fullsamples; cat /tmp/full/samples.jsonl
head() {{ printf 'samples = {samples}\nload = 60\nmem = ["%s"]\ncpu = ["F"]\n[probe]\nsize = "16M"\ncounts = {counts}\n' "$1"; }}
{{ head A; printf '[[blocks]]\npnid = -1\nnb = 1\n[[blocks]]\npnid = "A"\nnb = 1\n[[blocks]]\npnid = "A"\nnb = 1\n%s\n[[blocks]]\npnid = "A"\nnb = 0\n' '{NOFAULT}'; }} > /tmp/a.toml
{{ head F; printf '[[blocks]]\npnid = -1\nnb = 1\n[[blocks]]\npnid = -1\nnb = 0\n'; }} > /tmp/f.toml
numalab run --spec /tmp/a.toml --trace --out /tmp/a >/tmp/a.txt 2>&1; echo "a rc=$?"
numalab run --spec /tmp/f.toml --trace --out /tmp/f >/tmp/f.txt 2>&1; echo "f rc=$?"
# NB's scanner with the default knobs and with the no-fault ones, on probes
# that run 4 s whatever the guest's speed: the first scan waits the default
# scan delay (1 s after the address space is made), and a 48-pass probe once
# ran in 1.07 s on an idle host and ended before its pages were scanned.
D=/sys/kernel/debug/sched/numa_balancing
echo 1 > /proc/sys/kernel/numa_balancing
numalab probe --size 16M --counts 4 --min-time 4 --json > /tmp/scan-default.json
for k in scan_delay_ms scan_period_min_ms scan_period_max_ms; do
    cat $D/$k > /tmp/$k.orig; echo 4294967295 > $D/$k
done
numalab probe --size 16M --counts 4 --min-time 4 --json > /tmp/scan-nofault.json
for k in scan_delay_ms scan_period_min_ms scan_period_max_ms; do cat /tmp/$k.orig > $D/$k; done
echo @@scandefault; cat /tmp/scan-default.json
echo @@scannofault; cat /tmp/scan-nofault.json
echo @@areport; cat /tmp/a.txt
echo @@freport; cat /tmp/f.txt
echo @@ameta; cat /tmp/a/run.json
echo @@asamples; cat /tmp/a/samples.jsonl
echo @@fmeta; cat /tmp/f/run.json
echo @@fsamples; cat /tmp/f/samples.jsonl
echo @@end
"#
    )
}

/// One cell's samples: cross-node moves and % time away from node A.
#[derive(Default)]
struct Cell {
    xnode: Vec<f64>,
    away: Vec<f64>,
}

fn describe(v: &[f64]) -> String {
    match Sample::new(v.to_vec()) {
        Ok(s) => {
            let m = s.summary();
            format!("{:7.1} ±{:5.1}", m.mean, m.ci95.unwrap_or(f64::NAN))
        }
        Err(_) => "-".into(),
    }
}

fn p(a: &[f64], b: &[f64]) -> String {
    match (Sample::new(a.to_vec()), Sample::new(b.to_vec())) {
        (Ok(a), Ok(b)) => welch(&a, &b).map_or("-".into(), |w| format!("{:.3}", w.p_two_sided)),
        _ => "-".into(),
    }
}

#[test]
fn the_whole_matrix_and_the_seeds_findings_on_the_patched_kernel() {
    let Some(kernel) = lab::pnid_kernel() else {
        return;
    };
    // CI checks the guarantees with short cells; the figures quoted in
    // docs/preferred-node.md are from NUMALAB_LAB_MEASURE=1 runs.
    let (samples, counts) = lab::sized((2, 4), (4, 8));
    let Some(run) = lab::run_on(Some(&kernel), "2node", &script(samples, counts), 1800) else {
        return;
    };
    let s = run.finished();

    // The whole matrix: 36 rows, none skipped, every PNID row forced.
    assert!(run.output.contains("full rc=0"), "{}", run.output);
    let meta: Value = serde_json::from_str(&s["fullmeta"]).unwrap();
    let rows = meta["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 36);
    let skipped: Vec<&Value> = rows.iter().filter(|r| !r["skip"].is_null()).collect();
    assert!(skipped.is_empty(), "skipped on the lab kernel: {skipped:?}");
    let full = jsonl(&s["fullsamples"]);
    assert_eq!(full.len(), 36);
    for smp in &full {
        let row = &rows[smp["row"].as_u64().unwrap() as usize];
        let want = row["pnid"].as_i64().unwrap();
        let sched = &smp["probe"]["numa"]["sched"];
        assert_eq!(
            sched["numa_preferred_nid_force"].as_i64(),
            Some(want),
            "row {}: {sched}",
            row["id"]
        );
        if want >= 0 {
            let pn = &smp["probe"]["pnid"];
            assert_eq!(pn["requested"].as_i64(), Some(want), "{pn}");
            assert_eq!(pn["read_back"].as_i64(), Some(want), "{pn}");
            assert_eq!(sched["numa_preferred_nid"].as_i64(), Some(want), "{sched}");
        }
    }

    // The findings' cells, traced.
    assert!(run.output.contains("a rc=0") && run.output.contains("f rc=0"));
    let mut cells: BTreeMap<String, Cell> = BTreeMap::new();
    let mut scans: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (m, smp) in [("ameta", "asamples"), ("fmeta", "fsamples")] {
        let meta: Value = serde_json::from_str(&s[m]).unwrap();
        let rows = meta["rows"].as_array().unwrap().clone();
        for x in jsonl(&s[smp]) {
            let row = &rows[x["row"].as_u64().unwrap() as usize];
            let label = format!(
                "PNID {:>2} NB {} Mem {}{}",
                row["pnid"].as_i64().unwrap(),
                row["nb"],
                if row["mem"]["node"].is_null() {
                    "F"
                } else {
                    "A"
                },
                if row["knobs"].is_null() {
                    ""
                } else {
                    " no-fault"
                }
            );
            let t = &x["trace"]["task"];
            assert_eq!(x["trace"]["lost_events"], 0, "{label}: events lost");
            let node_pct = &t["residency"]["node_pct"];
            let total: f64 = node_pct
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_f64().unwrap())
                .sum();
            assert!((total - 100.0).abs() <= 0.5, "{label}: residency {total}");
            let on_a = node_pct["0"].as_f64().unwrap_or(0.0);
            let c = cells.entry(label.clone()).or_default();
            c.xnode
                .push(t["migrations"]["cross_node"].as_f64().unwrap());
            c.away.push(100.0 - on_a);
            let sched = &x["probe"]["numa"]["sched"];
            if row["pnid"].as_i64() == Some(0) {
                assert_eq!(sched["numa_preferred_nid"], 0, "{label}: {sched}");
            }
            scans
                .entry(label)
                .or_default()
                .push(sched["numa_scan_seq"].as_i64().unwrap_or(-1));
        }
    }
    // The no-fault cell scans nothing; NB cells with the default knobs do.
    let scan = |l: &str| {
        scans
            .get(l)
            .unwrap_or_else(|| panic!("no cell {l:?} in {:?}", scans.keys()))
    };
    let nofault = scan("PNID  0 NB 1 Mem A no-fault");
    assert!(
        nofault.iter().all(|&q| q == 0),
        "no-fault cell scanned: {nofault:?}"
    );
    // The contrast that makes the check above mean something: with the
    // default knobs a long probe's address space is scanned, with the
    // no-fault knobs it is not. (A short cell's sample may end before the
    // default 1 s scan delay has passed, so the cells cannot show this.)
    let seq = |name: &str| record(&s, name)["numa"]["sched"]["numa_scan_seq"].as_i64();
    assert!(seq("scandefault").unwrap_or(0) > 0, "{}", s["scandefault"]);
    assert_eq!(seq("scannofault"), Some(0), "{}", s["scannofault"]);
    for x in jsonl(&s["asamples"]) {
        let knobs = &x["knobs"];
        if knobs
            .get("/sys/kernel/debug/sched/numa_balancing/scan_delay_ms")
            .is_some()
        {
            assert_eq!(
                knobs["/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms"], "4294967295",
                "the no-fault sample ran under its knobs: {knobs}"
            );
        }
    }

    let mut table = String::from(
        "cell                              n   x-node moves/sample   % time away from A\n",
    );
    for (label, c) in &cells {
        table.push_str(&format!(
            "{label:<32} {:>2}   {}        {}\n",
            c.xnode.len(),
            describe(&c.xnode),
            describe(&c.away)
        ));
    }
    let x = |l: &str| &cells[l].xnode;
    let away = |l: &str| &cells[l].away;
    let (free, forced) = ("PNID -1 NB 1 Mem A", "PNID  0 NB 1 Mem A");
    table.push_str(&format!(
        "(a) PNID A vs -1, Mem A NB 1: x-node p {}, away p {}\n\
         (b) NB 1 vs NB 0, Mem F: x-node p {}\n\
         (c) PNID A no-fault vs PNID A: x-node p {}; PNID A NB 0 vs NB 1: x-node p {}\n",
        p(x(forced), x(free)),
        p(away(forced), away(free)),
        p(x("PNID -1 NB 1 Mem F"), x("PNID -1 NB 0 Mem F")),
        p(x("PNID  0 NB 1 Mem A no-fault"), x(forced)),
        p(x("PNID  0 NB 0 Mem A"), x(forced)),
    ));
    eprintln!(
        "--- findings (4 vCPUs, TCG, 60% load, 16 MiB x {counts} passes, {samples} samples a cell) ---\n{table}"
    );
    eprintln!("{}\n{}", s["areport"], s["freport"]);
}
