//! The simulator against traced lab runs on the same topology (issue #10):
//! the `4node-smt` guest (4 nodes x 1 core x 2 SMT threads, the host's
//! Debian kernel) runs `numalab run --trace` with a small spec (60% load,
//! Mem A, CPU A and F, NB 0 and NB 1), and `--backend sim` runs the same
//! spec on the guest's topology (tests/fixtures/topo/4node-smt) with the
//! `lab-tcg` profile, its `kernel.ni_random` set to what the guest's
//! `sched/features` says (Debian's 6.1.192, the lab's default kernel, lists
//! NI_RANDOM: it was backported); the other setting is run and printed too.
//!
//! Both sides are printed per row (moves per sample by level, cross-node
//! moves per sample and per second, the cross-node share of all moves, time
//! away from the memory's node); the log is the evidence and docs/sim.md
//! holds the table. Asserted is only what holds through TCG's distortion of
//! rates (the sim moved the probe 5-7x as often as the 2-node guest did):
//! pinned rows' timed loops stay on their node in both (the lab's probe
//! floats before it binds itself; the trace sees that, see docs/sim.md),
//! pinned rows cross nodes far less than floating ones, floating rows cross nodes in
//! both, and where the floating probe's moves go (the cross-node share)
//! agrees within the tolerance justified at the assertion.

mod common;

use common::{lab, sections};
use numalab::stats::Sample;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const TOPOLOGY: &str = "4node-smt";
const LAB_SAMPLES: u32 = 4;
const SIM_SAMPLES: u32 = 16;

fn spec(samples: u32) -> String {
    format!(
        "samples = {samples}\nload = 60\nmem = [\"A\"]\ncpu = [\"A\", \"F\"]\n\
         [[blocks]]\npnid = -1\nnb = 0\n[[blocks]]\npnid = -1\nnb = 1\n\
         [probe]\nsize = \"16M\"\ncounts = 4\n"
    )
}

fn script() -> String {
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
        spec(LAB_SAMPLES)
    )
}

fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
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
    away: Vec<f64>,
    /// The probe's own view of its timed loop (after it bound itself).
    loop_xnode: Vec<f64>,
    loop_away: Vec<f64>,
    wall_s: Vec<f64>,
    lost: u64,
    mismatches: usize,
}

impl Row {
    fn n(&self) -> usize {
        self.moves.len()
    }
    /// Cross-node moves over all moves, pooled over the samples.
    fn xshare(&self) -> f64 {
        self.xnode.iter().sum::<f64>() / self.moves.iter().sum::<f64>().max(1.0)
    }
    /// Standard error of the per-sample cross-node share (samples with moves).
    fn xshare_se(&self) -> f64 {
        let v: Vec<f64> = self
            .xnode
            .iter()
            .zip(&self.moves)
            .filter(|(_, m)| **m > 0.0)
            .map(|(x, m)| x / m)
            .collect();
        Sample::new(v.clone()).map_or(f64::NAN, |s| s.stddev() / (v.len() as f64).sqrt())
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

fn table(lab: &BTreeMap<u64, Row>, sim: &BTreeMap<u64, Row>) -> String {
    let mut t = String::from(
        "row  cell                  side   n  wall s  moves   core    LLC   node  xnode  xnode/s  xshare  away%  loop xnode  loop away%\n",
    );
    for (id, l) in lab {
        for (side, r) in [("lab", l), ("sim", &sim[id])] {
            t.push_str(&format!(
                "[{id:02}] {:<21} {side}  {:>3}  {:6.2} {:6.1} {:6.1} {:6.1} {:6.1} {:6.1}  {:7.2}  {:6.3}  {:5.1}  {:10.1}  {:10.1}\n",
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
        }
    }
    t
}

/// The `lab-tcg` profile with `kernel.ni_random` as the guest's kernel has it.
fn profile(dir: &Path, ni_random: bool) -> std::path::PathBuf {
    let path = dir.join(format!("lab-tcg-ni-random-{ni_random}.toml"));
    let base = std::fs::read_to_string(lab::repo().join("profiles/lab-tcg.toml")).unwrap();
    assert!(
        base.contains("\nni_random = true\n"),
        "profiles/lab-tcg.toml changed"
    );
    let text = base
        .replace("name = \"lab-tcg\"", "name = \"lab-tcg-guest\"")
        .replace(
            "\nni_random = true\n",
            &format!("\nni_random = {ni_random}\n"),
        );
    std::fs::write(&path, text).unwrap();
    path
}

fn sim_run(dir: &Path, profile: &Path, name: &str) -> (Value, Vec<Value>) {
    let spec_path = dir.join("sim.toml");
    std::fs::write(&spec_path, spec(SIM_SAMPLES)).unwrap();
    let out = dir.join(name);
    let root = lab::repo().join(format!("tests/fixtures/topo/{TOPOLOGY}/root"));
    let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("--sysfs-root")
        .arg(&root)
        .args(["run", "--backend", "sim", "--profile"])
        .arg(profile)
        .arg("--spec")
        .arg(&spec_path)
        .arg("--trace")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eprintln!(
        "--- sim report ({name}) ---\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let meta =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let samples = jsonl(&std::fs::read_to_string(out.join("samples.jsonl")).unwrap());
    (meta, samples)
}

#[test]
fn sim_matches_traced_lab_runs_on_4node_smt() {
    let started = std::time::Instant::now();
    let Some(run) = lab::run(TOPOLOGY, &script(), 1200) else {
        return;
    };
    let s = sections(&run.output);
    assert!(
        s.contains_key("end"),
        "script did not finish:\n{}",
        run.output
    );
    assert!(run.output.contains("run rc=0"), "{}", run.output);
    let kernel = s["kernel"].trim().to_string();
    // NI_RANDOM (Debian 6.12) or NO_NI_RANDOM would be listed; 6.1 has neither.
    let features: Vec<&str> = s["features"].split_whitespace().collect();
    let ni_random = features.contains(&"NI_RANDOM");
    eprintln!("guest sched/features: {}", s["features"].trim());
    eprintln!(
        "guest kernel {kernel}, NI_RANDOM {}; guest done in {:.0} s",
        if ni_random { "on" } else { "off/absent" },
        started.elapsed().as_secs_f64()
    );
    eprintln!("--- lab report ---\n{}", s["report"]);

    let meta: Value = serde_json::from_str(&s["meta"]).unwrap();
    let lab_samples = jsonl(&s["samples"]);
    assert_eq!(lab_samples.len() as u32, 4 * LAB_SAMPLES, "{}", s["report"]);
    let lab = rows(&meta, &lab_samples);
    eprintln!("lab samples: row sample wall_s | trace moves core llc node xnode away% lost | loop xnode away%");
    for x in &lab_samples {
        let (t, p) = (&x["trace"]["task"], &x["probe"]);
        eprintln!(
            "  [{:02}] {} {:6.2} | {} {} {} {} {} {:.1} {} | {} {:.1}",
            x["row"],
            x["sample"],
            x["wall_ns"].as_f64().unwrap() / 1e9,
            t["migrations"]["total"],
            t["migrations"]["same_core"],
            t["migrations"]["same_llc"],
            t["migrations"]["same_node"],
            t["migrations"]["cross_node"],
            100.0 - t["residency"]["on_mem_node_pct"].as_f64().unwrap_or(0.0),
            x["trace"]["lost_events"],
            p["migrations"]["cross_node"],
            100.0 - p["residency"]["on_mem_node_pct"].as_f64().unwrap_or(0.0),
        );
    }

    // The sim with the guest's NI_RANDOM, which the assertions use, and
    // with the other setting, printed to show how much it matters.
    let tmp = tempfile::tempdir().unwrap();
    let mut sims = BTreeMap::new();
    for ni in [ni_random, !ni_random] {
        let (m, smp) = sim_run(
            tmp.path(),
            &profile(tmp.path(), ni),
            &format!("sim-ni-{ni}"),
        );
        let r = rows(&m, &smp);
        assert_eq!(
            lab.values().map(|r| &r.label).collect::<Vec<_>>(),
            r.values().map(|r| &r.label).collect::<Vec<_>>(),
            "same rows on both sides"
        );
        eprintln!(
            "--- lab ({kernel}, TCG, {LAB_SAMPLES} samples/row) vs sim (lab-tcg, ni_random = {ni}{}, \
             {SIM_SAMPLES} samples/row): 60% load, 16 MiB x 4, means per sample; \
             loop = the probe's own view of its timed loop ---\n{}",
            if ni == ni_random { ", as the guest" } else { ", NOT as the guest" },
            table(&lab, &r)
        );
        sims.insert(ni, r);
    }
    let sim = &sims[&ni_random];
    for (id, l) in &lab {
        let r = &sim[id];
        if !l.pinned {
            eprintln!(
                "[{id:02}] cross-node share: lab {:.3} (SE {:.3}), sim {:.3} (SE {:.3}); \
                 sim/lab cross-node moves per sample {:.2}, per second {:.2}",
                l.xshare(),
                l.xshare_se(),
                r.xshare(),
                r.xshare_se(),
                mean(&r.xnode) / mean(&l.xnode),
                mean(&r.xnode_per_s) / mean(&l.xnode_per_s)
            );
        }
    }

    for (id, l) in &lab {
        let r = &sim[id];
        let what = format!("[{id:02}] {}", l.label);
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
        } else {
            for (side, x) in [("lab", l), ("sim", r)] {
                assert!(
                    mean(&x.xnode) >= 2.0 && mean(&x.away) > 10.0,
                    "{what}: {side} floating row stayed home: {:.2} cross-node moves, {:.1}% away",
                    mean(&x.xnode),
                    mean(&x.away)
                );
            }
            // Where the moves go. Tolerance: three standard errors of the
            // difference (per-sample shares, lab and sim; three, not two,
            // because every CI run tests two rows: a right model then fails
            // less than 1% of runs instead of about 10%) plus the bias the
            // lab's pre-binding phase can put in its share, measured on the
            // same block's pinned row (whose traced cross-node moves all
            // come from that phase): the share without them.
            let pinned = lab
                .values()
                .find(|p| p.pinned && p.label[..4] == l.label[..4])
                .unwrap();
            let (xp, xf, mf) = (mean(&pinned.xnode), mean(&l.xnode), mean(&l.moves));
            let bias = (l.xshare() - (xf - xp) / (mf - xp).max(1.0)).abs();
            let se = l.xshare_se().hypot(r.xshare_se());
            let tol = 3.0 * se + bias;
            let diff = (l.xshare() - r.xshare()).abs();
            eprintln!(
                "{what}: cross-node share lab {:.3} sim {:.3}: |diff| {diff:.3} <= \
                 3 x SE {se:.3} + pre-binding bias {bias:.3} = {tol:.3}?",
                l.xshare(),
                r.xshare()
            );
            assert!(
                diff <= tol,
                "{what}: cross-node share differs by {diff:.3} > {tol:.3}"
            );
        }
    }
}
