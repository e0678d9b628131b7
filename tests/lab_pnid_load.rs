//! The forced node against the load it shares CPUs with, on the patched lab
//! kernel (2-node guest): migrate_degrades_locality() holds a task on its
//! preferred node only while the other task on its CPU does not prefer that
//! node, so a forced node should hold the probe far better when the load's
//! workers prefer none (`--load-policy local`, MPOL_LOCAL) than under
//! numalab's default load, whose workers come to prefer their own nodes
//! (tests/lab_load_policy.rs). This is the mechanism the simulator uses to
//! read the RFC's PNID rows (docs/sim.md, "Calibration").
//!
//! Asserted: what must hold whatever the emulator's timing (every sample
//! traced, the forced node in force in every PNID sample under both
//! loads, each run under the load policy it names). Measured and printed,
//! not asserted: where the time went. Under the MPOL_LOCAL load the forced
//! node halved the probe's time off its memory in three runs and cut it by
//! a fifth in a fourth (CI), so five samples per cell cannot hold a bound
//! on four emulated vCPUs (docs/preferred-node.md has every run). Those
//! runs predate the fix that keeps MPOL_LOCAL workers from faulting when
//! another thread scans; after it, an 8-sample run gave 0.70 of PNID -1's
//! time off A under the MPOL_LOCAL load and 0.73 under the default one:
//! the forced node is bypassed by balancing failures on this guest, not
//! by the load preferring a node. The load balancer's own counters per
//! domain level (/proc/schedstat around each run: attempts, failures,
//! tasks pulled, pulled although hot, active pushes) are printed, and
//! checked against the trace.

mod common;

use common::{jsonl, lab};
use numalab::analysis::schedstat::{self, BalanceKind};
use numalab::stats::{welch, Sample};
use serde_json::Value;

const SAMPLES: u32 = 5;

fn script() -> String {
    format!(
        r#"
printf 'samples = {SAMPLES}\nload = 60\nmem = ["A"]\ncpu = ["F"]\n[probe]\nsize = "16M"\ncounts = 8\n[[blocks]]\npnid = -1\nnb = 1\n[[blocks]]\npnid = "A"\nnb = 1\n' > /tmp/s.toml
# The load balancer's own counters around each run (lab kernel:
# CONFIG_SCHEDSTATS), to say how the probe left its forced node.
echo 1 > /proc/sys/kernel/sched_schedstats
for pol in default local; do
    cat /proc/schedstat > /tmp/$pol.ss0
    numalab run --spec /tmp/s.toml --trace --load-policy $pol --out /tmp/$pol >/tmp/$pol.txt 2>&1
    echo "$pol rc=$?"
    cat /proc/schedstat > /tmp/$pol.ss1
done
for pol in default local; do
    echo @@${{pol}}ss0; cat /tmp/$pol.ss0
    echo @@${{pol}}ss1; cat /tmp/$pol.ss1
done
echo @@default; cat /tmp/default/samples.jsonl
echo @@local; cat /tmp/local/samples.jsonl
echo @@defaultmeta; cat /tmp/default/run.json
echo @@localmeta; cat /tmp/local/run.json
echo @@end
"#
    )
}

/// Cross-node moves per sample of the timed loop, and the share of time
/// off the memory's node, for PNID -1 (row 0) and PNID A (row 1).
fn cells(samples: &[Value]) -> [(Vec<f64>, Vec<f64>); 2] {
    let mut out: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for s in samples {
        let r = s["row"].as_u64().unwrap() as usize;
        let t = &s["trace"]["task"];
        out[r]
            .0
            .push(t["migrations"]["cross_node"].as_f64().unwrap());
        out[r]
            .1
            .push(100.0 - s["probe"]["residency"]["on_mem_node_pct"].as_f64().unwrap());
    }
    out
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn a_forced_node_under_the_default_and_the_mpol_local_load() {
    let Some(kernel) = lab::pnid_kernel() else {
        return;
    };
    let Some(run) = lab::run_on(Some(&kernel), "2node", &script(), 900) else {
        return;
    };
    let s = run.finished();
    for pol in ["default", "local"] {
        assert!(
            run.output.contains(&format!("{pol} rc=0")),
            "{}",
            run.output
        );
    }
    for pol in ["default", "local"] {
        let meta: Value = serde_json::from_str(&s[&format!("{pol}meta")]).unwrap();
        let named = meta["spec"]["load_policy"].as_str().unwrap_or("default");
        assert_eq!(named, pol, "the run's recorded load policy");
        for smp in jsonl(&s[pol]) {
            assert!(smp["trace"]["task"].is_object(), "{pol}: untraced sample");
            let sched = &smp["probe"]["numa"]["sched"];
            if smp["row"] == 1 {
                // PNID A: node A is forced, and is the preferred node.
                let a = meta["node_a"].as_i64();
                assert_eq!(
                    sched["numa_preferred_nid_force"].as_i64(),
                    a,
                    "{pol}: {sched}"
                );
                assert_eq!(sched["numa_preferred_nid"].as_i64(), a, "{pol}: {sched}");
            } else {
                assert_eq!(sched["numa_preferred_nid_force"].as_i64(), Some(-1));
            }
        }
    }
    let d = cells(&jsonl(&s["default"]));
    let l = cells(&jsonl(&s["local"]));
    for (name, c) in [("default load", &d), ("MPOL_LOCAL load", &l)] {
        for (row, label) in [(0, "PNID -1"), (1, "PNID A")] {
            assert_eq!(c[row].0.len(), SAMPLES as usize, "{name} {label}");
            eprintln!(
                "{name:16} {label:8} cross-node moves {:6.1} per sample ({:?}), {:5.1}% off A ({:?})",
                mean(&c[row].0),
                c[row].0,
                mean(&c[row].1),
                c[row].1.iter().map(|v| v.round()).collect::<Vec<_>>()
            );
        }
        let (a, b) = (
            Sample::new(c[0].0.clone()).unwrap(),
            Sample::new(c[1].0.clone()).unwrap(),
        );
        let (ao, bo) = (
            Sample::new(c[0].1.clone()).unwrap(),
            Sample::new(c[1].1.clone()).unwrap(),
        );
        if let (Some(w), Some(wo)) = (welch(&a, &b), welch(&ao, &bo)) {
            eprintln!(
                "{name:16} PNID A vs -1: Welch p {:.3} (moves), {:.3} (time off A)",
                w.p_two_sided, wo.p_two_sided
            );
        }
    }
    for pol in ["default", "local"] {
        balancing_at_the_numa_domain(pol, &s, &jsonl(&s[pol]));
    }
    let off = |c: &[(Vec<f64>, Vec<f64>); 2], row: usize| mean(&c[row].1);
    eprintln!(
        "PNID A off A: {:.1}% under the MPOL_LOCAL load ({:.1}% without PNID), \
         {:.1}% under the default load ({:.1}% without)",
        off(&l, 1),
        off(&l, 0),
        off(&d, 1),
        off(&d, 0)
    );
}

/// Prints the load balancer's counters per domain level over `pol`'s run
/// (/proc/schedstat before and after) and checks them against the trace:
/// every cross-node move the trace puts down to load balancing is a task
/// pulled or pushed at the NUMA domain, which also counts every other
/// task's and the time outside the probe's timed loops, so it can only
/// hold more.
fn balancing_at_the_numa_domain(
    pol: &str,
    s: &std::collections::BTreeMap<String, String>,
    samples: &[Value],
) {
    let read = |k: &str| schedstat::parse(&s[&format!("{pol}{k}")]).unwrap();
    let d = schedstat::delta(&read("ss0"), &read("ss1")).unwrap();
    let levels = schedstat::by_level(&d);
    for l in &levels {
        let c = &l.counters;
        let kinds: Vec<String> = BalanceKind::ALL
            .iter()
            .map(|&k| {
                let x = c.lb(k);
                format!(
                    "{} {}/{}/{}/{}",
                    k.name(),
                    x.count,
                    x.failed,
                    x.gained,
                    x.hot_gained
                )
            })
            .collect();
        eprintln!(
            "{pol:8} domain{} ({:?} CPUs): attempts/failed/gained/hot {}; active pushed {}",
            l.level,
            l.span_sizes,
            kinds.join(", "),
            c.alb_pushed
        );
    }
    let numa = &levels.last().expect("no sched domain").counters;
    let traced: f64 = samples
        .iter()
        .map(|x| {
            x["trace"]["task"]["cross_node_causes"]["load_balance"]
                .as_f64()
                .unwrap()
        })
        .sum();
    assert!(
        numa.moved() as f64 >= traced,
        "{pol}: the NUMA domain moved {} tasks, the trace saw the probe cross {traced} times by load balancing",
        numa.moved()
    );
}
