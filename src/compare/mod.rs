//! `numalab compare BASE OTHER...`: the rows of several runs side by side,
//! from their records alone (read-only, like `report`).
//!
//! Rows are matched by their parameters, never by row number: PNID, NB,
//! Mem, CPU, migration_cost_ns and the block's knobs, with nodes named
//! relative to each run (A and B are the run's `node_a` / `node_b`, F float,
//! I interleave A,B, -1 no PNID; any other node keeps its number), because
//! two machines can call their nodes differently and a narrowed run numbers
//! its rows differently. A row is compared when BASE and every OTHER hold
//! it with at least two samples; the rest are listed with why.
//!
//! Per row and OTHER: n, mean and 95% CI half-width of the probe's timed
//! loop (`timing.total_ns`, seconds) on both sides, the change
//! (other−base)/base·100, Welch's two-sided p, Hedges' g of OTHER against
//! BASE (positive: OTHER slower), and a mark when the row is significant
//! after Holm–Bonferroni over the compared rows of that OTHER at α = 0.05
//! (formulas in [`crate::stats`]). Rows whose p is undefined (both sides
//! constant) are left out of the Holm family and never marked.

pub mod render;

use crate::run::record::{self, RunMeta, SampleRecord};
use crate::run::spec::{Row, RowCpu, RowMem};
use crate::stats::{self, Sample};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "numalab.compare/1";
/// Family-wise error rate of the Holm–Bonferroni correction.
pub const ALPHA: f64 = 0.05;

/// One run as read from its directory.
pub struct LoadedRun {
    pub dir: PathBuf,
    pub meta: RunMeta,
    pub records: Vec<SampleRecord>,
    /// Torn final line and uncounted records, as `report` warns of them.
    pub notes: Vec<String>,
}

/// Reads a run directory without writing anything; not a run is exit 2.
pub fn load(dir: &Path) -> anyhow::Result<LoadedRun> {
    let meta = record::read_meta(dir)?;
    let found = record::read_samples(dir, &meta)?;
    found.require_clean()?;
    let mut notes: Vec<String> = found.torn_warning().into_iter().collect();
    notes.extend(found.notes());
    Ok(LoadedRun {
        dir: dir.to_path_buf(),
        meta,
        records: found.records,
        notes,
    })
}

/// A row's parameters with nodes named relative to its run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RowKey {
    pub pnid: String,
    pub nb: u8,
    pub mem: String,
    pub cpu: String,
    pub migration_cost_ns: Option<u64>,
    pub knobs: BTreeMap<String, String>,
}

impl RowKey {
    pub fn of(row: &Row, a: u32, b: u32) -> RowKey {
        let node = |n: u32| match n {
            n if n == a => "A".to_string(),
            n if n == b => "B".to_string(),
            n => n.to_string(),
        };
        RowKey {
            pnid: if row.pnid < 0 {
                row.pnid.to_string()
            } else {
                node(row.pnid as u32)
            },
            nb: row.nb,
            mem: match &row.mem {
                RowMem::Node(n) => node(*n),
                RowMem::Float => "F".into(),
                RowMem::Interleave(s) if s.iter().eq([a, b]) || s.iter().eq([b, a]) => "I".into(),
                RowMem::Interleave(s) => format!("I{s}"),
            },
            cpu: match &row.cpu {
                RowCpu::Node(n) => node(*n),
                RowCpu::Float => "F".into(),
            },
            migration_cost_ns: row.migration_cost_ns,
            knobs: row.knobs.clone(),
        }
    }

    /// `PNID: A NB: 1 Mem: B CPU: F`, then the cost and knobs when set.
    pub fn label(&self) -> String {
        let mut s = format!(
            "PNID: {} NB: {} Mem: {} CPU: {}",
            self.pnid, self.nb, self.mem, self.cpu
        );
        if let Some(c) = self.migration_cost_ns {
            s.push_str(&format!(" cost: {c}"));
        }
        if !self.knobs.is_empty() {
            s.push(' ');
            s.push_str(&crate::run::knobs::label(&self.knobs));
        }
        s
    }
}

/// What the comparison says about one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub dir: String,
    pub kernel: Option<String>,
    pub topology_digest: String,
    pub cpu_model: Option<String>,
    pub num_cpus: usize,
    pub backend: crate::run::record::BackendKind,
    pub node_a: u32,
    pub node_b: u32,
    pub load: f64,
    pub samples_recorded: usize,
    /// Every record carries a kernel trace (`run --trace`).
    pub traced: bool,
}

/// One side of a compared row.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// Row number in its run.
    pub row: usize,
    pub n: usize,
    /// Seconds.
    pub mean_s: f64,
    pub ci95_s: Option<f64>,
    /// Mean cross-node moves per sample (see [`Comparison::moves_source`]).
    pub cross_node: Option<f64>,
    /// Mean % of time on the memory's node.
    pub on_mem_node_pct: Option<f64>,
    /// Mean % of the timed loop spent waiting for a CPU (`cpu_time`).
    pub wait_pct: Option<f64>,
    /// A threaded probe's: % of samples whose workers all ended in one
    /// numa_group, and the shared array's busiest node's share of its
    /// pages at the end (mean); absent for the classic probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_group_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_busiest_pct: Option<f64>,
}

/// One OTHER run against BASE on one row.
#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    /// Index into [`Comparison::runs`] (1 = the first OTHER).
    pub run: usize,
    pub other: Side,
    /// `None` when BASE's mean time is 0 (no change in percent exists).
    pub change_pct: Option<f64>,
    pub t: Option<f64>,
    pub df: Option<f64>,
    pub p: Option<f64>,
    pub hedges_g: Option<f64>,
    /// α/(m−i+1) for this row's rank i among the OTHER's m p-values.
    pub holm_threshold: Option<f64>,
    pub significant: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RowCmp {
    pub key: RowKey,
    pub params: String,
    pub base: Side,
    pub versus: Vec<Versus>,
}

/// A row that is not compared, and why.
#[derive(Debug, Clone, Serialize)]
pub struct NotCompared {
    pub params: String,
    pub why: String,
}

/// Per OTHER run: the rows' geometric mean ratio and significant counts.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub run: usize,
    pub rows: usize,
    /// Geometric mean over compared rows of other mean / base mean.
    pub geomean_ratio: Option<f64>,
    pub faster: usize,
    pub slower: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema: String,
    pub alpha: f64,
    /// runs[0] is BASE.
    pub runs: Vec<RunInfo>,
    pub warnings: Vec<String>,
    /// "trace": kernel-traced (sched_migrate_task); "probe": the probe's
    /// own sampling of its CPU (every run must be traced for "trace").
    pub moves_source: String,
    pub rows: Vec<RowCmp>,
    pub not_compared: Vec<NotCompared>,
    pub summaries: Vec<RunSummary>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn side(row: usize, recs: &[&SampleRecord], traced: bool) -> Option<(Side, Sample)> {
    let times: Vec<f64> = recs
        .iter()
        .map(|s| s.probe.timing.total_ns as f64 / 1e9)
        .collect();
    let sample = Sample::new(times).ok()?;
    let (cross, on): (Vec<f64>, Vec<f64>) = if traced {
        let t: Vec<_> = recs.iter().filter_map(|s| s.trace.as_ref()).collect();
        (
            t.iter()
                .map(|t| t.task.migrations.cross_node as f64)
                .collect(),
            t.iter()
                .filter_map(|t| t.task.residency.on_mem_node_pct)
                .collect(),
        )
    } else {
        (
            recs.iter()
                .map(|s| s.probe.migrations.cross_node as f64)
                .collect(),
            recs.iter()
                .filter_map(|s| s.probe.residency.on_mem_node_pct)
                .collect(),
        )
    };
    let wait: Vec<f64> = recs
        .iter()
        .filter_map(|s| s.probe.cpu_time.as_ref().and_then(|c| c.wait_pct()))
        .collect();
    let groups = crate::report::groups::groups_row(recs);
    let s = Side {
        one_group_pct: groups
            .as_ref()
            .filter(|g| g.group_known > 0)
            .map(|g| g.one_group as f64 * 100.0 / g.group_known as f64),
        shared_busiest_pct: groups.and_then(|g| g.shared_busiest_pct),
        row,
        n: sample.len(),
        mean_s: sample.mean(),
        ci95_s: sample.ci95_half_width(),
        cross_node: mean(&cross),
        on_mem_node_pct: mean(&on),
        wait_pct: mean(&wait),
    };
    Some((s, sample))
}

fn info(r: &LoadedRun) -> RunInfo {
    RunInfo {
        dir: r.dir.display().to_string(),
        kernel: r.meta.kernel.clone(),
        topology_digest: r.meta.topology_digest.clone(),
        cpu_model: r.meta.cpu_model.clone(),
        num_cpus: r.meta.num_cpus,
        backend: r.meta.backend,
        node_a: r.meta.node_a,
        node_b: r.meta.node_b,
        load: r.meta.spec.load,
        samples_recorded: r.records.len(),
        traced: !r.records.is_empty() && r.records.iter().all(|s| s.trace.is_some()),
    }
}

/// What differs between BASE and `o` that can explain a difference.
fn differences(base: &LoadedRun, o: &LoadedRun) -> Vec<String> {
    let (b, m) = (&base.meta, &o.meta);
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    let mut d: Vec<(&str, String, String)> = vec![
        ("kernel", opt(&b.kernel), opt(&m.kernel)),
        (
            "topology_digest",
            b.topology_digest.clone(),
            m.topology_digest.clone(),
        ),
        ("cpu_model", opt(&b.cpu_model), opt(&m.cpu_model)),
        ("num_cpus", b.num_cpus.to_string(), m.num_cpus.to_string()),
        ("backend", b.backend.to_string(), m.backend.to_string()),
        ("load", b.spec.load.to_string(), m.spec.load.to_string()),
    ];
    let (pb, pm) = (&b.spec.probe, &m.spec.probe);
    let probe = |p: &crate::run::spec::ProbeParams| {
        format!("{:?} {} x{} thp {:?}", p.pattern, p.size, p.counts, p.thp)
    };
    d.push(("probe parameters", probe(pb), probe(pm)));
    d.into_iter()
        .filter(|(_, x, y)| x != y)
        .map(|(what, x, y)| {
            format!(
                "{what} {}: BASE {} has {x}, {} has {y}",
                if what.ends_with('s') {
                    "differ"
                } else {
                    "differs"
                },
                base.dir.display(),
                o.dir.display()
            )
        })
        .collect()
}

/// Two simulated runs with the same seed and a machine noise drew the same
/// noise factor for each sample index (docs/sim-validation.md, "Sample-to-sample
/// spread"): their samples are not independent, as Welch's test takes
/// them, so its verdicts are conservative.
fn shared_noise(base: &LoadedRun, o: &LoadedRun) -> Option<String> {
    let (b, m) = (&base.meta, &o.meta);
    let noisy = |s: &Option<record::SimMeta>| s.as_ref().map(|s| s.profile.noise.sample_cv > 0.0);
    (noisy(&b.sim)? && noisy(&m.sim)? && b.spec.seed == m.spec.seed).then(|| {
        format!(
            "BASE {} and {} are simulated with the same seed ({}): sample k of each ran on the \
             same machine noise, so the two sides are not independent and the tests are \
             conservative (run one with another --seed for independent samples)",
            base.dir.display(),
            o.dir.display(),
            b.spec.seed
        )
    })
}

/// Rows of a run by key, with their records. Where two rows share a key
/// (A = B on a one-node run: the B rows are the A rows' placement), the
/// first row that is not skipped wins; the rows left out are counted per
/// skip reason, so the comparison can say so.
#[allow(clippy::type_complexity)]
fn by_key(
    r: &LoadedRun,
) -> (
    BTreeMap<RowKey, (usize, Vec<&SampleRecord>)>,
    BTreeMap<String, usize>,
) {
    let mut out: BTreeMap<RowKey, (usize, Vec<&SampleRecord>)> = BTreeMap::new();
    let mut shadowed: BTreeMap<String, usize> = BTreeMap::new();
    for row in &r.meta.rows {
        let key = RowKey::of(row, r.meta.node_a, r.meta.node_b);
        let recs = || r.records.iter().filter(|s| s.row == row.id).collect();
        let left_out = match out.get(&key) {
            None => {
                out.insert(key, (row.id, recs()));
                continue;
            }
            Some((id, _)) if r.meta.rows[*id].skip.is_some() && row.skip.is_none() => {
                let old = out.insert(key, (row.id, recs()));
                &r.meta.rows[old.expect("present").0]
            }
            Some(_) => row,
        };
        let why = left_out.skip.clone().unwrap_or_else(|| "duplicate".into());
        *shadowed.entry(why).or_default() += 1;
    }
    (out, shadowed)
}

/// Compares `runs[1..]` against `runs[0]`. Exit 2 when fewer than two runs
/// are given or no row can be compared.
pub fn compare(runs: &[LoadedRun]) -> anyhow::Result<Comparison> {
    let [base, others @ ..] = runs else {
        return Err(crate::error::usage(
            "compare needs BASE and at least one OTHER run directory",
        ));
    };
    if others.is_empty() {
        return Err(crate::error::usage(format!(
            "compare needs BASE and at least one OTHER run directory (got only {})",
            base.dir.display()
        )));
    }
    let infos: Vec<RunInfo> = runs.iter().map(info).collect();
    let traced = infos.iter().all(|i| i.traced);
    let mut warnings = Vec::new();
    for r in runs {
        warnings.extend(r.notes.iter().cloned());
    }
    for o in others {
        warnings.extend(differences(base, o));
        warnings.extend(shared_noise(base, o));
    }
    let (keyed, shadowed): (Vec<_>, Vec<_>) = runs.iter().map(by_key).unzip();
    // BASE's rows in its order, then rows only the others have.
    let mut order: Vec<RowKey> = Vec::new();
    for r in runs {
        for row in &r.meta.rows {
            let k = RowKey::of(row, r.meta.node_a, r.meta.node_b);
            if !order.contains(&k) {
                order.push(k);
            }
        }
    }
    let mut rows = Vec::new();
    let mut not_compared = Vec::new();
    let mut samples: Vec<Vec<Sample>> = Vec::new(); // per row: base, others...
    let mut any_matched = false;
    for key in order {
        let params = key.label();
        let missing: Vec<String> = runs
            .iter()
            .zip(&keyed)
            .filter(|(_, k)| !k.contains_key(&key))
            .map(|(r, _)| r.dir.display().to_string())
            .collect();
        if !missing.is_empty() {
            let why = format!("not in all runs (missing in {})", missing.join(", "));
            not_compared.push(NotCompared { params, why });
            continue;
        }
        any_matched = true;
        let found: Vec<_> = keyed.iter().map(|k| &k[&key]).collect();
        let skipped: Vec<(String, &str)> = runs
            .iter()
            .zip(&found)
            .filter_map(|(r, (id, _))| {
                Some((
                    r.dir.display().to_string(),
                    r.meta.rows[*id].skip.as_deref()?,
                ))
            })
            .collect();
        if let Some((_, first)) = skipped.first() {
            // One reason said once when every run skipped the row for it.
            let why = if skipped.len() == runs.len() && skipped.iter().all(|(_, w)| w == first) {
                format!("skipped in every run: {first}")
            } else {
                let each: Vec<String> = skipped.iter().map(|(d, w)| format!("{d}: {w}")).collect();
                format!("skipped ({})", each.join("; "))
            };
            not_compared.push(NotCompared { params, why });
            continue;
        }
        let few: Vec<String> = runs
            .iter()
            .zip(&found)
            .filter(|(_, (_, recs))| recs.len() < 2)
            .map(|(r, (_, recs))| format!("{} n={}", r.dir.display(), recs.len()))
            .collect();
        if !few.is_empty() {
            let why = format!("too few samples ({})", few.join(", "));
            not_compared.push(NotCompared { params, why });
            continue;
        }
        let sides: Vec<(Side, Sample)> = found
            .iter()
            .map(|(id, recs)| side(*id, recs, traced).expect("at least two samples"))
            .collect();
        let (base_side, base_sample) = &sides[0];
        let versus = sides[1..]
            .iter()
            .enumerate()
            .map(|(i, (o, os))| {
                let w = stats::welch(os, base_sample);
                Versus {
                    run: i + 1,
                    other: o.clone(),
                    change_pct: (base_side.mean_s > 0.0)
                        .then(|| (o.mean_s - base_side.mean_s) / base_side.mean_s * 100.0),
                    t: w.as_ref().map(|w| w.t),
                    df: w.as_ref().map(|w| w.df),
                    p: w.as_ref().map(|w| w.p_two_sided),
                    hedges_g: stats::hedges_g(base_sample, os),
                    holm_threshold: None,
                    significant: false,
                }
            })
            .collect();
        samples.push(sides.iter().map(|(_, s)| s.clone()).collect());
        rows.push(RowCmp {
            key,
            params,
            base: base_side.clone(),
            versus,
        });
    }
    for (r, sh) in runs.iter().zip(&shadowed) {
        for (why, n) in sh {
            not_compared.push(NotCompared {
                params: format!("{n} more row(s) of {}", r.dir.display()),
                why: format!(
                    "the same parameters as a row above once nodes are named A/B (A={} B={}); \
                     {why}",
                    r.meta.node_a, r.meta.node_b
                ),
            });
        }
    }
    let names = runs
        .iter()
        .map(|r| r.dir.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if rows.is_empty() {
        return Err(crate::error::usage(if any_matched {
            format!("no row has at least 2 samples in every run ({names}): nothing to compare")
        } else {
            format!(
                "no row matches between the runs ({names}): they share no (PNID, NB, Mem, \
                 CPU, migration_cost_ns, knobs) combination"
            )
        }));
    }
    let summaries = (1..runs.len())
        .map(|run| holm_and_summary(&mut rows, run))
        .collect();
    Ok(Comparison {
        schema: SCHEMA.into(),
        alpha: ALPHA,
        runs: infos,
        warnings,
        moves_source: if traced { "trace" } else { "probe" }.into(),
        rows,
        not_compared,
        summaries,
    })
}

/// Marks the rows significant for OTHER `run` and sums it up.
fn holm_and_summary(rows: &mut [RowCmp], run: usize) -> RunSummary {
    let with_p: Vec<(usize, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.versus[run - 1].p?)))
        .collect();
    let ps: Vec<f64> = with_p.iter().map(|(_, p)| *p).collect();
    let thr = stats::holm_thresholds(&ps, ALPHA);
    let rej = stats::holm(&ps, ALPHA);
    for (j, (i, _)) in with_p.iter().enumerate() {
        let v = &mut rows[*i].versus[run - 1];
        v.holm_threshold = Some(thr[j]);
        v.significant = rej[j];
    }
    let ratios: Vec<f64> = rows
        .iter()
        .map(|r| r.versus[run - 1].other.mean_s / r.base.mean_s)
        .collect();
    let vs = || rows.iter().map(|r| &r.versus[run - 1]);
    RunSummary {
        run,
        rows: rows.len(),
        geomean_ratio: stats::geometric_mean(&ratios),
        faster: vs()
            .filter(|v| v.significant && v.change_pct.is_some_and(|c| c < 0.0))
            .count(),
        slower: vs()
            .filter(|v| v.significant && v.change_pct.is_some_and(|c| c > 0.0))
            .count(),
    }
}
