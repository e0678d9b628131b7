//! The experiment spec: which rows to run and how, from the command line or
//! a TOML file, and the row list it expands to.
//!
//! The default is the RFC's 36 rows on two nodes A and B: blocks (PNID -1,
//! NB 0), (PNID -1, NB 1), (PNID A, NB 1), (PNID B, NB 1); in each block Mem
//! in {A, B, F} (outer) x CPU in {A, B, F} (inner), numbered [00]..[35] in
//! that order. Every `migration_cost_ns` value repeats the whole block list.

use crate::error::usage;
use crate::idset::IdSet;
use crate::load::{LoadPhases, LoadPolicy, DEFAULT_PERIOD_MS};
use crate::probe::{Pattern, ThpMode};
use crate::sys::numa::PolicyScope;
use crate::topology::sysfs::SysRoot;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most rows a spec may expand to: the RFC's matrix is 36 rows per
/// migration cost, and a spec file is outside input, so a few kB of TOML
/// (`mem` and `cpu` lists of thousands of entries) must not expand to
/// millions of rows before anything looks at the size.
pub const MAX_ROWS: u64 = 100_000;
/// The most samples (rows x `samples`) a run may plan: the sample order is
/// one list of them (the RFC's full run is 2304).
pub const MAX_SAMPLES: u64 = 10_000_000;

/// Checks a run's size before anything of that size is allocated.
pub fn check_size(rows: u64, samples: u32) -> anyhow::Result<()> {
    if rows > MAX_ROWS {
        return Err(usage(format!(
            "the spec expands to {rows} rows, more than {MAX_ROWS}: \
             fewer mem, cpu, blocks or migration_cost_ns values"
        )));
    }
    let total = rows.saturating_mul(samples as u64);
    if total > MAX_SAMPLES {
        return Err(usage(format!(
            "{rows} rows x {samples} samples = {total} samples, more than {MAX_SAMPLES}"
        )));
    }
    Ok(())
}

/// A node named by role (A, B) or number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeRef {
    Role(String),
    Id(u32),
}

/// One block of rows: the PNID and NB they share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// -1 (not set), "A", "B" or a node number.
    pub pnid: PnidRef,
    /// kernel.numa_balancing for the block: 0 or 1.
    pub nb: u8,
    /// Other knobs the block's rows run under ([`super::knobs`]): name ->
    /// value, e.g. `"sched/numa_balancing/scan_delay_ms" = "4294967295"`.
    /// Rows of blocks without a knob run with its original value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PnidRef {
    Num(i32),
    Role(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeParams {
    pub pattern: Pattern,
    pub size: crate::units::Size,
    pub counts: u32,
    pub thp: ThpMode,
    pub observe_every: u32,
    /// What a Mem row's policy covers: the buffer (mbind) or the whole
    /// probe (set_mempolicy, as numactl --membind).
    #[serde(skip_serializing_if = "PolicyScope::is_buffer")]
    pub bind_scope: PolicyScope,
    /// When the probe first touches its buffer: after its CPU binding
    /// (`placed`, absent) or before it (`start`, the RFC's order).
    #[serde(skip_serializing_if = "crate::probe::FirstTouch::is_placed")]
    pub first_touch: crate::probe::FirstTouch,
    /// The probe as several threads (`[probe.threads]`: count, sharing,
    /// timeline_ms); absent: the classic one-thread probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<crate::probe::Threads>,
}

impl Default for ProbeParams {
    fn default() -> Self {
        ProbeParams {
            pattern: Pattern::RandRw,
            size: crate::units::Size(256 << 20),
            counts: 4,
            thp: ThpMode::System,
            observe_every: 4096,
            bind_scope: PolicyScope::Buffer,
            first_touch: crate::probe::FirstTouch::Placed,
            threads: None,
        }
    }
}

/// The whole experiment, as written in a spec file (every field optional).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExperimentSpec {
    /// Nodes A and B (default: the first two nodes with CPUs).
    pub nodes: Vec<u32>,
    pub samples: u32,
    /// Background load percent on every CPU.
    pub load: f64,
    /// The load workers' memory policy (how NUMA balancing sees them).
    #[serde(skip_serializing_if = "LoadPolicy::is_default")]
    pub load_policy: LoadPolicy,
    /// The load's duty-cycle period, ms (absent: `numalab load`'s default).
    #[serde(skip_serializing_if = "crate::load::is_default_period_ms")]
    pub load_period_ms: f64,
    /// When each load worker's busy part starts (absent: staggered).
    #[serde(skip_serializing_if = "LoadPhases::is_default")]
    pub load_phases: LoadPhases,
    /// Seed of the sample-order shuffle.
    pub seed: u64,
    /// sched migration_cost_ns values; each is a separate block of rows.
    /// Empty: leave the knob as it is.
    pub migration_cost_ns: Vec<u64>,
    pub blocks: Vec<Block>,
    /// Mem values: "A", "B", "F" (float), "I" (interleave A,B) or node numbers.
    pub mem: Vec<String>,
    /// CPU values: "A", "B", "F" or node numbers.
    pub cpu: Vec<String>,
    pub probe: ProbeParams,
    /// Trace every sample with the kernel's scheduler events (`run --trace`).
    pub trace: bool,
    /// Adaptive sampling (`run --precision`): rows stop once precise
    /// enough, `samples` is then their most ([`crate::experiment::adaptive`]). Absent:
    /// every row takes `samples`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
}

/// The adaptive rule: a row stops once the half-width of its mean's 95%
/// confidence interval is within `pct` percent of the mean, after at least
/// `min_samples` and at most `max_samples` samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Precision {
    pub pct: f64,
    #[serde(default = "Precision::default_min")]
    pub min_samples: u32,
    #[serde(default = "Precision::default_max")]
    pub max_samples: u32,
}

impl Precision {
    pub const DEFAULT_MIN: u32 = 5;
    pub const DEFAULT_MAX: u32 = 64;
    fn default_min() -> u32 {
        Self::DEFAULT_MIN
    }
    fn default_max() -> u32 {
        Self::DEFAULT_MAX
    }

    /// P > 0 and finite, 2 <= min <= max (a CI needs two samples).
    pub fn check(&self) -> anyhow::Result<()> {
        if !(self.pct > 0.0 && self.pct.is_finite()) {
            return Err(usage(format!(
                "precision {}: must be a positive percentage",
                self.pct
            )));
        }
        if self.min_samples < 2 {
            return Err(usage(format!(
                "min-samples {}: at least 2 (a confidence interval needs two samples)",
                self.min_samples
            )));
        }
        if self.min_samples > self.max_samples {
            return Err(usage(format!(
                "min-samples {} is more than max-samples {}",
                self.min_samples, self.max_samples
            )));
        }
        Ok(())
    }
}

impl ExperimentSpec {
    /// The background load of every sample, on `cpus` of `topo`.
    pub fn load_spec(
        &self,
        topo: &crate::topology::Topology,
        cpus: IdSet,
    ) -> crate::load::LoadSpec {
        crate::load::LoadSpec::new(
            topo,
            self.load,
            cpus,
            self.load_period_ms,
            self.load_policy,
            self.load_phases,
            self.seed,
        )
    }
}

impl Default for ExperimentSpec {
    fn default() -> Self {
        let b = |pnid: PnidRef, nb| Block {
            pnid,
            nb,
            knobs: BTreeMap::new(),
        };
        ExperimentSpec {
            nodes: Vec::new(),
            samples: 64,
            load: 60.0,
            load_policy: LoadPolicy::Default,
            load_period_ms: DEFAULT_PERIOD_MS,
            load_phases: LoadPhases::Staggered,
            seed: 1,
            migration_cost_ns: Vec::new(),
            blocks: vec![
                b(PnidRef::Num(-1), 0),
                b(PnidRef::Num(-1), 1),
                b(PnidRef::Role("A".into()), 1),
                b(PnidRef::Role("B".into()), 1),
            ],
            mem: vec!["A".into(), "B".into(), "F".into()],
            cpu: vec!["A".into(), "B".into(), "F".into()],
            probe: ProbeParams::default(),
            trace: false,
            precision: None,
        }
    }
}

/// Memory placement of a row, resolved to node numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowMem {
    Node(u32),
    Float,
    Interleave(IdSet),
}

/// CPU placement of a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowCpu {
    Node(u32),
    Float,
}

/// One row of the matrix, with the labels the table prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub id: usize,
    pub block: usize,
    pub pnid: i32,
    pub nb: u8,
    pub mem: RowMem,
    pub cpu: RowCpu,
    pub migration_cost_ns: Option<u64>,
    /// The block's other knobs (name -> value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
    /// The row names node B (or interleaves A,B): meaningless where A = B.
    #[serde(default)]
    pub needs_two_nodes: bool,
    /// Why the row cannot run here (set by the planner), if it cannot.
    pub skip: Option<String>,
}

impl Row {
    pub fn mem_label(&self) -> String {
        match &self.mem {
            RowMem::Node(n) => n.to_string(),
            RowMem::Float => "F".into(),
            RowMem::Interleave(s) => format!("I{s}"),
        }
    }
    pub fn cpu_label(&self) -> String {
        match &self.cpu {
            RowCpu::Node(n) => n.to_string(),
            RowCpu::Float => "F".into(),
        }
    }
    /// `PNID: -1 NB: 0 Mem: 0 CPU: F`, the RFC's parameter column, with
    /// the block's other knobs after it when it has any.
    pub fn params(&self) -> String {
        let mut p = format!(
            "PNID: {} NB: {} Mem: {} CPU: {}",
            self.pnid,
            self.nb,
            self.mem_label(),
            self.cpu_label()
        );
        if !self.knobs.is_empty() {
            p.push(' ');
            p.push_str(&super::knobs::label(&self.knobs));
        }
        p
    }
    /// The node the row's memory is on, when it is one node.
    pub fn mem_node(&self) -> Option<u32> {
        match self.mem {
            RowMem::Node(n) => Some(n),
            _ => None,
        }
    }
}

impl ExperimentSpec {
    /// Reads a TOML spec; unknown keys and bad values are usage errors.
    pub fn from_toml(text: &str, origin: &str) -> anyhow::Result<ExperimentSpec> {
        toml::from_str(text).map_err(|e| usage(format!("spec {origin}: {e}")))
    }

    /// Nodes A and B on `topo`, checked.
    pub fn resolve_nodes(&self, topo: &Topology) -> anyhow::Result<(u32, u32)> {
        let with_cpus: Vec<u32> = topo.cpu_node_ids().iter().collect();
        let (a, b) = match self.nodes.as_slice() {
            [] => match with_cpus.as_slice() {
                [a, b, ..] => (*a, *b),
                [a] => (*a, *a),
                [] => return Err(usage("no node has CPUs")),
            },
            [a, b] => (*a, *b),
            other => {
                return Err(usage(format!(
                    "nodes: give exactly two nodes A,B (got {other:?})"
                )))
            }
        };
        for n in [a, b] {
            if topo.node(n).is_none() {
                return Err(usage(format!(
                    "nodes: node {n} does not exist here (nodes {})",
                    topo.node_ids()
                )));
            }
        }
        Ok((a, b))
    }

    /// Checks everything that does not need the machine.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.samples == 0 {
            return Err(usage("samples must be at least 1"));
        }
        if let Some(p) = &self.precision {
            p.check()?;
            if self.samples != p.max_samples {
                return Err(usage(format!(
                    "samples {} with precision: an adaptive run takes at most \
                     precision.max_samples ({}) per row; set max_samples, not samples",
                    self.samples, p.max_samples
                )));
            }
        }
        if !(0.0..=100.0).contains(&self.load) || self.load.is_nan() {
            return Err(usage(format!(
                "load {}: must be between 0 and 100",
                self.load
            )));
        }
        for (name, empty) in [
            ("blocks", self.blocks.is_empty()),
            ("mem", self.mem.is_empty()),
            ("cpu", self.cpu.is_empty()),
        ] {
            if empty {
                return Err(usage(format!("{name}: empty dimension, nothing to run")));
            }
        }
        for b in &self.blocks {
            if b.nb > 1 {
                return Err(usage(format!("nb {}: must be 0 or 1", b.nb)));
            }
            super::knobs::check(&b.knobs)?;
        }
        if self.probe.counts == 0 {
            return Err(usage("probe counts must be at least 1"));
        }
        crate::load::check_period_ms(
            "load period (--load-period-ms, load_period_ms)",
            self.load_period_ms,
        )?;
        if self.probe.size.bytes() < 4096 {
            return Err(usage(format!(
                "probe size {}: at least one page (4 KiB)",
                self.probe.size
            )));
        }
        if let Some(t) = &self.probe.threads {
            crate::probe::check_threads(t, self.probe.size.bytes())?;
            if t.shm_numa_balancing && self.mem.iter().any(|m| matches!(m.trim(), "I" | "i")) {
                return Err(usage(crate::probe::SHM_POLICY_CONFLICT));
            }
            if self.trace {
                return Err(usage(
                    "--trace with --threads: a sample's trace follows the probe's task, and a \
                     threaded probe's work is in its threads; trace one with `numalab trace -- \
                     numalab probe --threads N ...`",
                ));
            }
        }
        Ok(())
    }

    /// Checks the probe's buffer against what the machine under `sys` can
    /// give (`crate::probe::memory`, with its margin): for every row, and
    /// for rows whose memory is on one node, against that node's free
    /// memory. Before any work, so a size the machine cannot hold is an
    /// error instead of an OOM kill.
    pub fn check_memory(&self, sys: &SysRoot, topo: &Topology) -> anyhow::Result<()> {
        self.check()?;
        let bytes = self.probe.size.bytes();
        let what = format!("probe size {}", self.probe.size);
        crate::probe::memory::check(sys, topo, &what, bytes, None)?;
        let nodes: std::collections::BTreeSet<u32> =
            self.rows(topo)?.iter().filter_map(Row::mem_node).collect();
        for n in nodes {
            crate::probe::memory::check_node(sys, topo, &what, bytes, n)?;
        }
        Ok(())
    }

    /// Expands to rows numbered in the RFC's order.
    pub fn rows(&self, topo: &Topology) -> anyhow::Result<Vec<Row>> {
        self.check()?;
        let n_rows = [
            self.migration_cost_ns.len().max(1),
            self.blocks.len(),
            self.mem.len(),
            self.cpu.len(),
        ]
        .iter()
        .fold(1u64, |n, &d| n.saturating_mul(d as u64));
        check_size(n_rows, self.samples)?;
        let (a, b) = self.resolve_nodes(topo)?;
        let node = |s: &str, what: &str| -> anyhow::Result<Option<u32>> {
            match s.trim() {
                "A" | "a" => Ok(Some(a)),
                "B" | "b" => Ok(Some(b)),
                "F" | "f" => Ok(None),
                n => {
                    let id: u32 = n.parse().map_err(|_| {
                        usage(format!("{what} value {s:?}: use A, B, F or a node number"))
                    })?;
                    if topo.node(id).is_none() {
                        return Err(usage(format!(
                            "{what} value {id}: node {id} does not exist here (nodes {})",
                            topo.node_ids()
                        )));
                    }
                    Ok(Some(id))
                }
            }
        };
        let is_b = |s: &str| matches!(s.trim(), "B" | "b" | "I" | "i");
        let mut mems = Vec::new();
        for m in &self.mem {
            let v = if matches!(m.trim(), "I" | "i") {
                RowMem::Interleave([a, b].into_iter().collect())
            } else {
                node(m, "mem")?.map_or(RowMem::Float, RowMem::Node)
            };
            mems.push((v, is_b(m)));
        }
        let mut cpus = Vec::new();
        for c in &self.cpu {
            if matches!(c.trim(), "I" | "i") {
                return Err(usage("cpu value \"I\": interleave is a memory placement"));
            }
            cpus.push((node(c, "cpu")?.map_or(RowCpu::Float, RowCpu::Node), is_b(c)));
        }
        let mut blocks = Vec::new();
        for blk in &self.blocks {
            let pnid = match &blk.pnid {
                PnidRef::Num(-1) => -1,
                PnidRef::Num(n) if *n >= 0 => {
                    node(&n.to_string(), "pnid")?.map_or(-1, |v| v as i32)
                }
                PnidRef::Num(n) => return Err(usage(format!("pnid {n}: use -1, A, B or a node"))),
                PnidRef::Role(r) => match node(r, "pnid")? {
                    Some(v) => v as i32,
                    None => return Err(usage("pnid \"F\": use -1 for not set")),
                },
            };
            let pnid_b = matches!(&blk.pnid, PnidRef::Role(r) if is_b(r));
            blocks.push((pnid, blk.nb, pnid_b, &blk.knobs));
        }
        let costs: Vec<Option<u64>> = if self.migration_cost_ns.is_empty() {
            vec![None]
        } else {
            self.migration_cost_ns.iter().map(|c| Some(*c)).collect()
        };
        let mut rows = Vec::new();
        for cost in costs {
            for (bi, (pnid, nb, pnid_b, knobs)) in blocks.iter().enumerate() {
                for (m, mem_b) in &mems {
                    for (c, cpu_b) in &cpus {
                        rows.push(Row {
                            id: rows.len(),
                            block: bi,
                            pnid: *pnid,
                            nb: *nb,
                            mem: m.clone(),
                            cpu: c.clone(),
                            migration_cost_ns: cost,
                            knobs: (*knobs).clone(),
                            needs_two_nodes: *pnid_b || *mem_b || *cpu_b,
                            skip: None,
                        });
                    }
                }
            }
        }
        // Blocks of the same cost repeat per cost value: renumber them.
        let per_cost = blocks.len();
        for r in rows.iter_mut() {
            r.block += per_cost * (r.id / (per_cost * mems.len() * cpus.len()));
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::presets;

    #[test]
    fn default_is_the_rfc_36_rows_in_order() {
        let t = presets::find("xeon-8167m-2n").unwrap().topology();
        let rows = ExperimentSpec::default().rows(&t).unwrap();
        assert_eq!(rows.len(), 36);
        let p: Vec<String> = rows.iter().map(|r| r.params()).collect();
        assert_eq!(p[0], "PNID: -1 NB: 0 Mem: 0 CPU: 0");
        assert_eq!(p[2], "PNID: -1 NB: 0 Mem: 0 CPU: F");
        assert_eq!(p[6], "PNID: -1 NB: 0 Mem: F CPU: 0");
        assert_eq!(p[17], "PNID: -1 NB: 1 Mem: F CPU: F");
        assert_eq!(p[20], "PNID: 0 NB: 1 Mem: 0 CPU: F");
        assert_eq!(p[32], "PNID: 1 NB: 1 Mem: 1 CPU: F");
        assert_eq!(p[35], "PNID: 1 NB: 1 Mem: F CPU: F");
    }

    #[test]
    fn migration_costs_repeat_the_blocks() {
        let t = presets::find("xeon-8167m-2n").unwrap().topology();
        let s = ExperimentSpec {
            migration_cost_ns: vec![500000, 5000000],
            ..Default::default()
        };
        let rows = s.rows(&t).unwrap();
        assert_eq!(rows.len(), 72);
        assert_eq!(rows[36].migration_cost_ns, Some(5000000));
        assert_eq!(rows[36].block, 4);
    }

    #[test]
    fn bad_specs_are_usage_errors() {
        let t = presets::find("xeon-8167m-2n").unwrap().topology();
        let bad = [
            "samples = 0",
            "mem = []",
            "nodes = [0, 7]",
            "load = 120",
            "cpu = [\"Q\"]",
            "colour = 3",
            "samples = ",
        ];
        for text in bad {
            let e = ExperimentSpec::from_toml(text, "t.toml").and_then(|s| s.rows(&t).map(|_| ()));
            let e = e.unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2, "{text}: {e}");
        }
        let ok = ExperimentSpec::from_toml(
            "samples = 3\nmem = [\"A\", \"I\"]\n[probe]\nsize = \"64M\"",
            "t",
        )
        .unwrap();
        assert_eq!(ok.rows(&t).unwrap().len(), 4 * 2 * 3);
    }
}
