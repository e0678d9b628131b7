//! The simulator against traced lab runs on the same topology (issue #10),
//! on three guests: `4node-smt` (4 nodes x 1 core x 2 SMT threads), `2node`
//! (2 nodes x 2 cores) and `8node-dl980` (8 nodes x 1 CPU, SLIT distances
//! 10/12/17/19), all on the host's Debian kernel. Each guest runs `numalab
//! run --trace` with a small spec (60% load, Mem A, CPU A and F, PNID -1,
//! NB 0 and NB 1 with `NUMALAB_LAB_MEASURE=1`, as bench/sim_vs_lab.sh runs
//! it, otherwise only the block whose cross-node share is asserted; the 8-node guest NB 0 only and a shorter
//! probe loop), and `--backend sim` runs the
//! same spec on the guest's topology (tests/fixtures/topo/NAME) with the
//! `lab-tcg` profile, its `kernel.ni_random` set to what the guest's
//! `sched/features` says (Debian's 6.1.192, the lab's default kernel, lists
//! NI_RANDOM: it was backported); the other setting is run and printed too.
//!
//! Both sides are printed per row (moves per sample by level, cross-node
//! moves per sample and per second and, where the SLIT has several remote
//! distances, by distance; the cross-node share of all moves, time away
//! from the memory's node); the log is the evidence and
//! docs/sim-validation.md holds the tables. Asserted is only what holds
//! through TCG's distortion of rates (the sim moved the probe 5-7x as
//! often as the 2-node guest did):
//! pinned rows' timed loops stay on their node in both (the lab's probe
//! floats before it binds itself; the trace sees that, see
//! docs/sim-validation.md, "Traced lab runs on three guests"),
//! pinned rows cross nodes far less than floating ones, floating rows cross
//! nodes in both, and where the floating probe's moves go agrees within the
//! tolerance justified at [`share_agrees`]: the cross-node share of its
//! moves (where a node has several CPUs) and, on the DL980, the share of
//! its cross-node moves that go to the far half (distance 19). Three
//! disagreements are printed, not asserted (docs/sim.md, "Known
//! disagreements"; docs/sim-validation.md has the tables): how the DL980's
//! nearer moves split between distances 12 and 17, the 2-node guest's
//! cross-node share with NUMA balancing on, and the 4-node guest's with it
//! off.
//!
//! A measurement, not a CI test: `bash bench/sim_vs_lab.sh` runs it and
//! `sim_vs_lab_jobs` before a change to the simulator's model lands, and
//! the note quotes what they printed (docs/sim-validation.md holds the
//! tables). The
//! tolerances are the lab's own run-to-run spread, so a run here judges a
//! model change against the kernel; CI keeps what is a mechanism: the
//! simulator's invariants (tests/sim*.rs) and the tracer's classification
//! on these guests (tests/lab_topo.rs).

#[path = "../tests/common/mod.rs"]
mod common;

use common::{jsonl, lab};
use numalab::stats::Sample;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One topology's comparison: its guest, its blocks (each gives a pinned,
/// CPU A, and a floating, CPU F, row) and the samples per row on each side.
struct Case {
    topology: &'static str,
    nbs: &'static [u8],
    lab_samples: u32,
    sim_samples: u32,
    /// Nodes A and B (`nodes` in the spec).
    nodes: [u32; 2],
    /// The probe's `counts` (16 MiB passes per sample): its timed loop.
    counts: u32,
    /// Blocks (NB values) whose floating row's cross-node share disagrees
    /// with the lab's in repeated runs (docs/sim-validation.md): printed, not
    /// asserted.
    share_gaps: &'static [u8],
    /// Guest wall-clock limit (lab/guest --timeout).
    timeout_s: u32,
}

fn spec(case: &Case, samples: u32) -> String {
    let blocks: String = case
        .nbs
        .iter()
        .map(|nb| format!("[[blocks]]\npnid = -1\nnb = {nb}\n"))
        .collect();
    let [a, b] = case.nodes;
    format!(
        "samples = {samples}\nnodes = [{a}, {b}]\nload = 60\nmem = [\"A\"]\ncpu = [\"A\", \"F\"]\n{blocks}\
         [probe]\nsize = \"16M\"\ncounts = {}\n",
        case.counts
    )
}

fn script(case: &Case) -> String {
    format!(
        r#"
echo @@kernel; uname -r
echo @@features; cat /sys/kernel/debug/sched/features
cat > /tmp/s.toml <<'EOF'
{}EOF
T0=$(date +%s)
numalab run --spec /tmp/s.toml --trace --out /tmp/r >/tmp/r.txt 2>&1
echo "run rc=$? in $(( $(date +%s) - T0 )) s"
echo @@report; cat /tmp/r.txt
echo @@meta; cat /tmp/r/run.json
echo @@samples; cat /tmp/r/samples.jsonl
echo @@end
"#,
        spec(case, case.lab_samples)
    )
}

/// One row's samples, one value per sample.
#[derive(Default)]
struct Row {
    label: String,
    pinned: bool,
    moves: Vec<f64>,
    core: Vec<f64>,
    llc: Vec<f64>,
    node: Vec<f64>,
    xnode: Vec<f64>,
    xnode_per_s: Vec<f64>,
    /// Cross-node moves by SLIT distance, one map per sample.
    by_dist: Vec<BTreeMap<u32, f64>>,
    away: Vec<f64>,
    /// The probe's own view of its timed loop (after it bound itself).
    loop_xnode: Vec<f64>,
    loop_away: Vec<f64>,
    wall_s: Vec<f64>,
    lost: u64,
    mismatches: usize,
}

/// Pooled share num/den and the standard error of the per-sample shares
/// (samples with den > 0).
fn share(num: &[f64], den: &[f64]) -> (f64, f64) {
    let pooled = num.iter().sum::<f64>() / den.iter().sum::<f64>().max(1.0);
    let v: Vec<f64> = num
        .iter()
        .zip(den)
        .filter(|(_, d)| **d > 0.0)
        .map(|(n, d)| n / d)
        .collect();
    let se = Sample::new(v.clone()).map_or(f64::NAN, |s| s.stddev() / (v.len() as f64).sqrt());
    (pooled, se)
}

impl Row {
    fn n(&self) -> usize {
        self.moves.len()
    }
    /// Cross-node moves over all moves, pooled over the samples.
    fn xshare(&self) -> f64 {
        share(&self.xnode, &self.moves).0
    }
    /// Standard error of the per-sample cross-node share (samples with moves).
    fn xshare_se(&self) -> f64 {
        share(&self.xnode, &self.moves).1
    }
    /// Cross-node moves at distance `d`, per sample.
    fn at(&self, d: u32) -> Vec<f64> {
        self.by_dist
            .iter()
            .map(|m| m.get(&d).copied().unwrap_or(0.0))
            .collect()
    }
}

fn mean(v: &[f64]) -> f64 {
    Sample::new(v.to_vec()).map_or(f64::NAN, |s| s.mean())
}

/// Rows of a run (meta = run.json, samples = samples.jsonl), by row id.
fn rows(meta: &Value, samples: &[Value]) -> BTreeMap<u64, Row> {
    let spec_rows = meta["rows"].as_array().unwrap();
    let mut out: BTreeMap<u64, Row> = BTreeMap::new();
    for x in samples {
        let id = x["row"].as_u64().unwrap();
        let r = &spec_rows[id as usize];
        let row = out.entry(id).or_insert_with(|| Row {
            label: format!(
                "NB {} Mem A CPU {}",
                r["nb"],
                if r["cpu"] == "float" { "F" } else { "A" }
            ),
            pinned: r["cpu"] != "float",
            ..Row::default()
        });
        let t = &x["trace"]["task"];
        let m = &t["migrations"];
        let f = |v: &Value| v.as_f64().unwrap();
        let wall = x["wall_ns"].as_f64().unwrap() / 1e9;
        row.moves.push(f(&m["total"]));
        row.core.push(f(&m["same_core"]));
        row.llc.push(f(&m["same_llc"]));
        row.node.push(f(&m["same_node"]));
        row.xnode.push(f(&m["cross_node"]));
        row.xnode_per_s.push(f(&m["cross_node"]) / wall);
        let by_dist = m["cross_by_distance"].as_object().unwrap();
        row.by_dist.push(
            by_dist
                .iter()
                .map(|(d, n)| (d.parse().unwrap(), f(n)))
                .collect(),
        );
        assert_eq!(
            by_dist.values().map(f).sum::<f64>(),
            f(&m["cross_node"]),
            "cross_by_distance adds up to cross_node"
        );
        row.wall_s.push(wall);
        row.away
            .push(100.0 - t["residency"]["on_mem_node_pct"].as_f64().unwrap());
        let p = &x["probe"];
        row.loop_xnode.push(f(&p["migrations"]["cross_node"]));
        row.loop_away
            .push(100.0 - p["residency"]["on_mem_node_pct"].as_f64().unwrap_or(0.0));
        row.lost += x["trace"]["lost_events"].as_u64().unwrap();
        if x["probe"]["placement"]["matches_request"] != true {
            row.mismatches += 1;
        }
    }
    out
}

fn table(lab: &BTreeMap<u64, Row>, sim: &BTreeMap<u64, Row>, dists: &[u32]) -> String {
    let mut t = String::from(
        "row  cell                  side   n  wall s  moves   core    LLC   node  xnode  xnode/s  xshare  away%  loop xnode  loop away%",
    );
    if dists.len() > 1 {
        for d in dists {
            t.push_str(&format!("  xnode@{d}"));
        }
    }
    t.push('\n');
    for (id, l) in lab {
        for (side, r) in [("lab", l), ("sim", &sim[id])] {
            t.push_str(&format!(
                "[{id:02}] {:<21} {side}  {:>3}  {:6.2} {:6.1} {:6.1} {:6.1} {:6.1} {:6.1}  {:7.2}  {:6.3}  {:5.1}  {:10.1}  {:10.1}",
                r.label,
                r.n(),
                mean(&r.wall_s),
                mean(&r.moves),
                mean(&r.core),
                mean(&r.llc),
                mean(&r.node),
                mean(&r.xnode),
                mean(&r.xnode_per_s),
                r.xshare(),
                mean(&r.away),
                mean(&r.loop_xnode),
                mean(&r.loop_away),
            ));
            if dists.len() > 1 {
                for d in dists {
                    t.push_str(&format!("  {:8.1}", mean(&r.at(*d))));
                }
            }
            t.push('\n');
        }
    }
    t
}

fn sim_run(case: &Case, dir: &Path, profile: &Path, name: &str) -> (Value, Vec<Value>) {
    let spec = spec(case, case.sim_samples);
    lab::sim_run(case.topology, &spec, profile, &[], &dir.join(name))
}

/// The remote SLIT distances of the fixture's topology, ascending.
fn remote_distances(case: &Case) -> Vec<u32> {
    let nodes = lab::repo().join(format!(
        "tests/fixtures/topo/{}/root/sys/devices/system/node",
        case.topology
    ));
    let mut out = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(&nodes).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("distance")) else {
            continue;
        };
        let d: Vec<u32> = text
            .split_whitespace()
            .map(|d| d.parse().unwrap())
            .collect();
        let min = *d.iter().min().unwrap();
        out.extend(d.into_iter().filter(|x| *x > min));
    }
    out.into_iter().collect()
}

/// Boots the case's guest, runs the traced spec there and the sim on the
/// same topology, prints both and asserts what holds through TCG.
fn compare(case: &Case) {
    let started = std::time::Instant::now();
    let topo = case.topology;
    // NUMALAB_SIM_VS_LAB_KERNEL=pnid: the 6.12 lab kernel, the kernel the
    // sim models (EEVDF's turns; 6.1's default guest kernel is CFS).
    let kernel = match std::env::var("NUMALAB_SIM_VS_LAB_KERNEL").as_deref() {
        Ok("pnid") => match lab::pnid_kernel() {
            Some(k) => Some(k),
            None => return,
        },
        _ => None,
    };
    let Some(run) = lab::run_on(kernel.as_deref(), topo, &script(case), case.timeout_s) else {
        return;
    };
    let lab_s = started.elapsed().as_secs_f64();
    let s = run.finished();
    assert!(run.output.contains("run rc=0"), "{topo}: {}", run.output);
    let kernel = s["kernel"].trim().to_string();
    // NI_RANDOM or NO_NI_RANDOM is listed where the kernel has the feature.
    let features: Vec<&str> = s["features"].split_whitespace().collect();
    let ni_random = features.contains(&"NI_RANDOM");
    let smt_balance = lab::has_smt_balance(&kernel);
    eprintln!("{topo}: guest sched/features: {}", s["features"].trim());
    eprintln!(
        "{topo}: guest kernel {kernel}, NI_RANDOM {}, group_smt_balance {}; guest done in {lab_s:.0} s",
        if ni_random { "on" } else { "off/absent" },
        if smt_balance { "yes" } else { "no" },
    );
    eprintln!("--- {topo} lab report ---\n{}", s["report"]);

    let meta: Value = serde_json::from_str(&s["meta"]).unwrap();
    let lab_samples = jsonl(&s["samples"]);
    let nrows = 2 * case.nbs.len() as u32;
    assert_eq!(
        lab_samples.len() as u32,
        nrows * case.lab_samples,
        "{}",
        s["report"]
    );
    let lab = rows(&meta, &lab_samples);
    eprintln!(
        "{topo} lab samples: row sample wall_s | trace moves core llc node xnode {{distance: xnode}} away% lost | loop xnode away%"
    );
    for x in &lab_samples {
        let (t, p) = (&x["trace"]["task"], &x["probe"]);
        eprintln!(
            "  [{:02}] {} {:6.2} | {} {} {} {} {} {} {:.1} {} | {} {:.1}",
            x["row"],
            x["sample"],
            x["wall_ns"].as_f64().unwrap() / 1e9,
            t["migrations"]["total"],
            t["migrations"]["same_core"],
            t["migrations"]["same_llc"],
            t["migrations"]["same_node"],
            t["migrations"]["cross_node"],
            t["migrations"]["cross_by_distance"],
            100.0 - t["residency"]["on_mem_node_pct"].as_f64().unwrap_or(0.0),
            x["trace"]["lost_events"],
            p["migrations"]["cross_node"],
            100.0 - p["residency"]["on_mem_node_pct"].as_f64().unwrap_or(0.0),
        );
    }

    // The sim with the guest's NI_RANDOM, which the assertions use, and
    // with the other setting, printed to show how much it matters.
    let dists = remote_distances(case);
    let tmp = tempfile::tempdir().unwrap();
    let mut sims = BTreeMap::new();
    for ni in [ni_random, !ni_random] {
        let (m, smp) = sim_run(
            case,
            tmp.path(),
            &lab::lab_tcg_profile(tmp.path(), ni, smt_balance),
            &format!("sim-ni-{ni}"),
        );
        let r = rows(&m, &smp);
        assert_eq!(
            lab.values().map(|r| &r.label).collect::<Vec<_>>(),
            r.values().map(|r| &r.label).collect::<Vec<_>>(),
            "same rows on both sides"
        );
        eprintln!(
            "--- {topo}: lab ({kernel}, TCG, {} samples/row) vs sim (lab-tcg, ni_random = {ni}{}, \
             {} samples/row): 60% load, 16 MiB x {}, means per sample; \
             loop = the probe's own view of its timed loop ---\n{}",
            case.lab_samples,
            if ni == ni_random {
                ", as the guest"
            } else {
                ", NOT as the guest"
            },
            case.sim_samples,
            case.counts,
            table(&lab, &r, &dists)
        );
        sims.insert(ni, r);
    }
    let sim = &sims[&ni_random];
    for (id, l) in &lab {
        let r = &sim[id];
        if !l.pinned {
            eprintln!(
                "{topo} [{id:02}] cross-node share: lab {:.3} (SE {:.3}), sim {:.3} (SE {:.3}); \
                 sim/lab cross-node moves per sample {:.2}, per second {:.2}",
                l.xshare(),
                l.xshare_se(),
                r.xshare(),
                r.xshare_se(),
                mean(&r.xnode) / mean(&l.xnode),
                mean(&r.xnode_per_s) / mean(&l.xnode_per_s)
            );
            for d in dists.iter().filter(|_| dists.len() > 1) {
                let (ls, lse) = share(&l.at(*d), &l.xnode);
                let (ss, sse) = share(&r.at(*d), &r.xnode);
                eprintln!(
                    "{topo} [{id:02}] share of cross-node moves at distance {d}: \
                     lab {ls:.3} (SE {lse:.3}), sim {ss:.3} (SE {sse:.3})"
                );
            }
        }
    }
    check(case, &lab, sim, &dists);
    eprintln!(
        "{topo}: done in {:.0} s ({lab_s:.0} s for the guest)",
        started.elapsed().as_secs_f64()
    );
}

/// Whether some node of the fixture's topology has more than one CPU (else
/// every move crosses nodes and the cross-node share is 1 by construction).
fn nodes_share_cpus(case: &Case) -> bool {
    let nodes = lab::repo().join(format!(
        "tests/fixtures/topo/{}/root/sys/devices/system/node",
        case.topology
    ));
    std::fs::read_dir(&nodes).unwrap().flatten().any(|e| {
        std::fs::read_to_string(e.path().join("cpulist"))
            .is_ok_and(|l| l.trim().contains([',', '-']))
    })
}

/// A share's lab-vs-sim check: |lab - sim| within three standard errors of
/// the difference (per-sample shares, lab and sim; three, not two, because
/// every run tests several rows: a right model then fails about 0.3% of
/// the time per row, normal approximation, instead of about 5%) plus the
/// bias the lab's pre-binding phase can put in its share: the share with
/// the moves of that phase taken out, as the same block's pinned row
/// counts them (its traced cross-node moves all come from that phase):
/// `pre` = (those moves in the share's numerator, in its denominator).
/// `part` and `whole` pick the share's numerator and denominator per sample.
fn share_agrees(
    what: &str,
    name: &str,
    (l, r): (&Row, &Row),
    pre: (f64, f64),
    part: impl Fn(&Row) -> Vec<f64>,
    whole: impl Fn(&Row) -> Vec<f64>,
) {
    let (ls, lse) = share(&part(l), &whole(l));
    let (ss, sse) = share(&part(r), &whole(r));
    let (fp, fw) = (mean(&part(l)), mean(&whole(l)));
    let bias = (ls - (fp - pre.0) / (fw - pre.1).max(1.0)).abs();
    let se = lse.hypot(sse);
    let tol = 3.0 * se + bias;
    let diff = (ls - ss).abs();
    eprintln!(
        "{what}: {name} lab {ls:.3} sim {ss:.3}: |diff| {diff:.3} <= \
         3 x SE {se:.3} + pre-binding bias {bias:.3} = {tol:.3}?"
    );
    assert!(
        diff <= tol,
        "{what}: {name} differs by {diff:.3} > {tol:.3}"
    );
}

/// What holds through TCG's distortion of rates, per row.
fn check(case: &Case, lab: &BTreeMap<u64, Row>, sim: &BTreeMap<u64, Row>, dists: &[u32]) {
    let topo = case.topology;
    for (id, l) in lab {
        let r = &sim[id];
        let what = format!("{topo} [{id:02}] {}", l.label);
        assert_eq!(l.lost, 0, "{what}: the lab lost trace events");
        assert_eq!(l.mismatches + r.mismatches, 0, "{what}: placement");
        if l.pinned {
            // Pinned to node A: the timed loop never leaves the node, as the
            // probe sees it (lab: getcpu every 4096 accesses; sim: exact).
            for (side, x) in [("lab", l), ("sim", r)] {
                assert!(
                    mean(&x.loop_xnode) == 0.0 && mean(&x.loop_away) < 1.0,
                    "{what}: {side} pinned loop left its node: {:.2} cross-node moves, {:.1}% away",
                    mean(&x.loop_xnode),
                    mean(&x.loop_away)
                );
            }
            // The kernel's trace covers the whole process. The sim binds at
            // exec: at most the one move onto the node. The lab's probe
            // floats until it binds itself, after reading the topology
            // (slow under TCG): some cross-node moves there, but far fewer
            // than the same block's floating row.
            assert!(mean(&r.xnode) <= 1.0, "{what}: sim {:.2}", mean(&r.xnode));
            let float = lab
                .values()
                .find(|f| !f.pinned && f.label[..4] == l.label[..4])
                .unwrap();
            assert!(
                mean(&l.xnode) < 0.5 * mean(&float.xnode),
                "{what}: lab pinned {:.1} vs floating {:.1} cross-node moves",
                mean(&l.xnode),
                mean(&float.xnode)
            );
            continue;
        }
        for (side, x) in [("lab", l), ("sim", r)] {
            assert!(
                mean(&x.xnode) >= 2.0 && mean(&x.away) > 10.0,
                "{what}: {side} floating row stayed home: {:.2} cross-node moves, {:.1}% away",
                mean(&x.xnode),
                mean(&x.away)
            );
        }
        let pinned = lab
            .values()
            .find(|p| p.pinned && p.label[..4] == l.label[..4])
            .unwrap();
        // Where the moves go: across nodes or within the node.
        let xp = mean(&pinned.xnode);
        let nb: u8 = l.label[3..4].parse().unwrap();
        if case.share_gaps.contains(&nb) {
            eprintln!(
                "{what}: cross-node share lab {:.3} sim {:.3}: NOT asserted, a known \
                 disagreement (docs/sim.md)",
                l.xshare(),
                r.xshare()
            );
        } else if nodes_share_cpus(case) {
            share_agrees(
                &what,
                "cross-node share of moves",
                (l, r),
                (xp, xp),
                |x| x.xnode.clone(),
                |x| x.moves.clone(),
            );
        } else {
            eprintln!("{what}: one CPU per node, every move crosses nodes: no share to compare");
        }
        // Where the cross-node moves go: to the far side of the machine
        // (the largest distance) or nearer. Printed, not asserted: on the
        // DL980 guest the sim's far share (0.115) was below the lab's in
        // all four runs (0.124, 0.125, 0.159, 0.176), and the last failed
        // the 3-SE tolerance, so the gap is the model's, like the split
        // between the nearer distances (docs/sim-validation.md). Model 9
        // (NI_RANDOM's calls counted as the kernel counts them, with no
        // cost gate) gives 0.27 against the lab's 0.12: the guest's
        // newly-idle balancing is held back by TCG's cost of a balance
        // (docs/sim-validation.md, "Model 9").
        if let [.., far] = dists {
            if dists.len() > 1 {
                let (ls, lse) = share(&l.at(*far), &l.xnode);
                let (ss, sse) = share(&r.at(*far), &r.xnode);
                eprintln!(
                    "{what}: share of cross-node moves at the largest distance ({far}): \
                     lab {ls:.3} (SE {lse:.3}) sim {ss:.3} (SE {sse:.3}): printed, not \
                     asserted (docs/sim.md)"
                );
            }
        }
    }
}

/// NB 0's cross-node share: the sim's 0.689 was above the lab's in all six
/// runs (0.56-0.60), by 0.09-0.13, and one passed the tolerance by 0.004:
/// a systematic gap, not noise, so it is printed as a known disagreement
/// (docs/sim-validation.md) instead of a check that fails at random. NB 1 agrees
/// (0.644 vs 0.62-0.66) and stays asserted.
#[test]
fn sim_matches_traced_lab_runs_on_4node_smt() {
    compare(&Case {
        topology: "4node-smt",
        nodes: [0, 1],
        // The short form runs the block whose share is asserted; the other one's is a
        // known disagreement, printed (NUMALAB_LAB_MEASURE=1 runs both).
        nbs: lab::sized(&[1], &[0, 1]),
        lab_samples: 4,
        sim_samples: 16,
        counts: 4,
        share_gaps: &[0],
        timeout_s: 1200,
    });
}

/// NB 1's cross-node share: the lab's was 0.59, 0.59, 0.67, 0.66 and 0.63
/// in five runs (within-run SEs 0.01-0.05; the third failed the tolerance),
/// the sim's 0.52: NUMA balancing lowers the share in the sim and not in
/// the lab (docs/sim-validation.md).
#[test]
fn sim_matches_traced_lab_runs_on_2node() {
    compare(&Case {
        topology: "2node",
        nodes: [0, 1],
        // As on 4node-smt: the short form runs the block whose share is asserted.
        nbs: lab::sized(&[0], &[0, 1]),
        lab_samples: 4,
        sim_samples: 16,
        counts: 4,
        share_gaps: &[1],
        timeout_s: 900,
    });
}

/// One block (NB 0: the load balancer's moves alone) and half the probe's
/// loop (a floating sample takes about 20 s of this guest at 16 MiB x 4),
/// to keep the added lab time near 3 minutes.
#[test]
fn sim_matches_traced_lab_runs_on_8node_dl980() {
    compare(&Case {
        topology: "8node-dl980",
        // Node 0 holds the kernel and the unpacked initramfs: 45 MiB free
        // in one boot, too little for 16 MiB and the probe's 32 MiB margin.
        // Node 4 is placed like node 0 (12 to 5, 17 to 6-7, 19 to 0-3).
        nodes: [4, 5],
        nbs: &[0],
        lab_samples: 5,
        sim_samples: 16,
        counts: 2,
        share_gaps: &[],
        timeout_s: 900,
    });
}
