//! The forced node against the load it shares CPUs with, on the patched lab
//! kernel (2-node guest): migrate_degrades_locality() holds a task on its
//! preferred node only while the other task on its CPU does not prefer that
//! node, so a forced node should hold the probe far better when the load's
//! workers prefer none (`--load-policy local`, MPOL_LOCAL) than under
//! numalab's default load, whose workers come to prefer their own nodes
//! (tests/lab_load_policy.rs). This is the mechanism the simulator uses to
//! read the RFC's PNID rows (docs/sim-validation.md, "Calibration").
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
//! by the load preferring a node. The load balancer's own counters, which
//! `run --trace` records per sample (`balance`, from /proc/schedstat with
//! kernel.sched_schedstats turned on for the run and restored), are checked
//! against the trace sample by sample at the NUMA domain, and printed per
//! row beside the simulator's for the same spec: how the probe was moved
//! (by which kind of balancing, how often although hot, how often pushed).
//! CI runs 3 samples a cell of 4 passes; `NUMALAB_LAB_MEASURE=1` runs the 5
//! of 8 that the docs quote.

mod common;

use common::{jsonl, lab};
use numalab::analysis::balance::{SampleBalance, Source};
use numalab::stats::{welch, Sample};
use numalab::trace::analyze::BalanceKinds;
use serde_json::Value;

/// The spec: Mem A, CPU F, NB 1, PNID -1 and A, 60% load.
fn spec(samples: u32, counts: u32) -> String {
    format!(
        "samples = {samples}\nload = 60\nmem = [\"A\"]\ncpu = [\"F\"]\n[probe]\nsize = \"16M\"\n\
         counts = {counts}\n[[blocks]]\npnid = -1\nnb = 1\n[[blocks]]\npnid = \"A\"\nnb = 1\n"
    )
}

fn script(samples: u32, counts: u32) -> String {
    format!(
        r#"
cat > /tmp/s.toml <<'EOF'
{}EOF
echo @@features; cat /sys/kernel/debug/sched/features
# `run --trace` turns sched_schedstats on for the run (the lab kernel has
# CONFIG_SCHEDSTATS) and records the load balancer's counters per sample;
# the sysctl must be back as it was after each run.
echo @@schedstats0; cat /proc/sys/kernel/sched_schedstats
for pol in default local; do
    numalab run --spec /tmp/s.toml --trace --load-policy $pol --out /tmp/$pol >/tmp/$pol.txt 2>&1
    echo "$pol rc=$?"
    echo @@${{pol}}schedstats; cat /proc/sys/kernel/sched_schedstats
done
echo @@default; cat /tmp/default/samples.jsonl
echo @@local; cat /tmp/local/samples.jsonl
echo @@defaultmeta; cat /tmp/default/run.json
echo @@localmeta; cat /tmp/local/run.json
echo @@end
"#,
        spec(samples, counts)
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
    // CI checks with short cells; the figures in docs/preferred-node.md
    // are from NUMALAB_LAB_MEASURE=1 runs.
    let (samples, counts) = lab::sized((3, 4), (5, 8));
    let Some(run) = lab::run_on(Some(&kernel), "2node", &script(samples, counts), 900) else {
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
            assert_eq!(c[row].0.len(), samples as usize, "{name} {label}");
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
    // The run put kernel.sched_schedstats back each time (the lab kernel
    // boots with it off, so the check sees a change undone).
    let first = |k: &str| s[k].lines().next().unwrap_or_default().trim().to_string();
    assert_eq!(first("schedstats0"), "0", "sched_schedstats on at boot");
    for pol in ["default", "local"] {
        assert_eq!(
            first(&format!("{pol}schedstats")),
            first("schedstats0"),
            "{pol}: sched_schedstats not restored"
        );
    }
    let ni_random = s["features"].split_whitespace().any(|f| f == "NI_RANDOM");
    for pol in ["default", "local"] {
        balancing_at_the_numa_domain(pol, &jsonl(&s[pol]), &spec(16, counts), ni_random);
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

/// A row's load-balancing counters at the NUMA domain (the last level),
/// summed over its samples: tasks gained by kind, gained although hot,
/// pushed, and the samples' traced cross-node moves by load balancing,
/// with the kinds of balancing the trace tells for the probe alone.
#[derive(Default)]
struct NumaBalance {
    gained: [f64; 3],
    hot: f64,
    pushed: f64,
    traced: f64,
    /// The probe's own: busy, idle, newly idle, pushed, unknown.
    probe: [f64; 5],
    n: usize,
}

impl NumaBalance {
    fn of(samples: &[Value], row: u64, source: Source) -> NumaBalance {
        let mut b = NumaBalance::default();
        for x in samples.iter().filter(|x| x["row"] == row) {
            let bal: SampleBalance = serde_json::from_value(x["balance"].clone()).unwrap();
            assert_eq!(bal.source, source, "row {row}: {bal:?}");
            // The 2-node guest: the node level within a node, the NUMA
            // domain across both, recorded as such on either side.
            let spans: Vec<&[usize]> = bal.levels.iter().map(|l| &l.span_nodes[..]).collect();
            assert_eq!(spans, [&[1][..], &[2]], "row {row}: {bal:?}");
            let numa = bal.cross_node().unwrap();
            let (g, h) = (&numa.gained, &numa.hot_gained);
            for (k, (g, h)) in [
                (g.busy, h.busy),
                (g.idle, h.idle),
                (g.newly_idle, h.newly_idle),
            ]
            .into_iter()
            .enumerate()
            {
                b.gained[k] += g as f64;
                b.hot += h as f64;
            }
            b.pushed += numa.active_pushed as f64;
            let moved = numa.moved() as f64;
            let traced = x["trace"]["task"]["cross_node_causes"]["load_balance"]
                .as_f64()
                .unwrap();
            b.traced += traced;
            b.n += 1;
            let k: BalanceKinds =
                serde_json::from_value(x["trace"]["task"]["cross_node_balancing"].clone()).unwrap();
            // Every cross-node balancing move of the probe has a kind or
            // is counted unknown.
            assert_eq!(k.total() as f64, traced, "row {row}: {k:?}");
            for (p, v) in
                b.probe
                    .iter_mut()
                    .zip([k.busy, k.idle, k.newly_idle, k.pushed, k.unknown])
            {
                *p += v as f64;
            }
            // Every cross-node move the trace puts down to load balancing
            // is a task pulled or pushed at the NUMA domain, which also
            // counts every other task's and the time around the probe's
            // run, so it can only hold more.
            assert!(
                moved >= traced,
                "row {row} sample {}: the NUMA domain moved {moved} tasks, the trace saw \
                 the probe cross {traced} times by load balancing: {numa:?}",
                x["sample"]
            );
        }
        // Regression (the lab's busy pulls, #28): the trace read a pull by
        // an idle CPU as a busy one when a task woken there ran before the
        // probe, which under TCG is most of them, and gave the probe more
        // busy pulls than the NUMA domain's busy gains for every task. It
        // now reads the CPU's state at the pull, and the probe's busy pulls
        // are among those gains.
        assert!(
            b.probe[0] <= b.gained[0],
            "row {row}: the trace gives the probe {} busy pulls across nodes, the NUMA domain \
             counted {} busy gains for every task",
            b.probe[0],
            b.gained[0]
        );
        b
    }

    fn line(&self) -> String {
        let moved = self.gained.iter().sum::<f64>() + self.pushed;
        let n = self.n.max(1) as f64;
        let share = |v: f64| v / moved.max(1.0);
        format!(
            "{:6.1} moved per sample: busy {:.2}, idle {:.2}, newly idle {:.2}, pushed {:.2}; \
             hot {:.2} (shares of moved); traced cross-node by balancing {:.1} per sample, \
             the probe's by kind: busy {:.1}, idle {:.1}, newly idle {:.1}, pushed {:.1}, \
             unknown {:.1}",
            moved / n,
            share(self.gained[0]),
            share(self.gained[1]),
            share(self.gained[2]),
            share(self.pushed),
            share(self.hot),
            self.traced / n,
            self.probe[0] / n,
            self.probe[1] / n,
            self.probe[2] / n,
            self.probe[3] / n,
            self.probe[4] / n,
        )
    }
}

/// The guest's counters at the NUMA domain per row, checked against its
/// trace, beside the simulator's account of the same spec on the same
/// topology (lab-tcg profile, the same load policy): how each moved the
/// probe. Printed, not asserted: TCG runs the guest's CPUs one at a time
/// and the sim's rates differ 5-7x (bench/sim_vs_lab.rs), so only where the
/// moves come from is compared (docs/sim-validation.md, "How each side
/// moves the probe").
fn balancing_at_the_numa_domain(pol: &str, samples: &[Value], spec: &str, ni_random: bool) {
    let tmp = tempfile::tempdir().unwrap();
    // The lab kernel is 6.12: group_smt_balance.
    let profile = lab::lab_tcg_profile(tmp.path(), ni_random, true);
    let policy = format!("--load-policy={pol}");
    let (_, sim) = lab::sim_run("2node", spec, &profile, &[&policy], &tmp.path().join("sim"));
    for (row, label) in [(0, "PNID -1"), (1, "PNID A")] {
        let lab = NumaBalance::of(samples, row, Source::Schedstat);
        let sim = NumaBalance::of(&sim, row, Source::Sim);
        eprintln!("{pol:8} {label:8} NUMA domain, lab: {}", lab.line());
        eprintln!("{pol:8} {label:8} NUMA domain, sim: {}", sim.line());
    }
}
