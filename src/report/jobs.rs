//! The jobs table in each format, all built from a [`JobsRecord`] alone (so
//! a saved record renders the same as a fresh run): JSON is the record;
//! text, Markdown and CSV are views of its row model, one [`JobRow`] per
//! job, through [`crate::table`].

use crate::run::jobs::{Job, JobsRecord};
use crate::table::Table;
use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::fmt::Write;

/// One job's row of the table. Serialized (CSV), the node shares are one
/// column `node{N}_pct` each, between `pid` and `max_pct`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub job: u32,
    pub pid: u32,
    /// (node, % of the job's on-CPU time) for every node of the record, in
    /// its order.
    pub node_pct: Vec<(u32, f64)>,
    pub max_pct: f64,
    pub most_node: Option<u32>,
    pub start_node: Option<u32>,
    pub mem_node: Option<u32>,
    pub user_s: f64,
    pub sys_s: f64,
    pub loop_s: f64,
    /// Share of the timed loop spent waiting for a CPU, %.
    pub wait_pct: Option<f64>,
    pub cross_node: u64,
    pub residency_source: String,
}

/// `node{n}_pct`, as a `&'static str` because serde's struct fields are
/// static. The names are interned, one allocation per node id ever seen
/// (a machine has at most a few hundred), so nothing grows per call.
fn node_column(n: u32) -> &'static str {
    use std::collections::BTreeMap;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<BTreeMap<u32, &'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    names
        .entry(n)
        .or_insert_with(|| Box::leak(format!("node{n}_pct").into_boxed_str()))
}

impl Serialize for JobRow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("JobRow", 12 + self.node_pct.len())?;
        st.serialize_field("job", &self.job)?;
        st.serialize_field("pid", &self.pid)?;
        for (n, p) in &self.node_pct {
            st.serialize_field(node_column(*n), p)?;
        }
        st.serialize_field("max_pct", &self.max_pct)?;
        st.serialize_field("most_node", &self.most_node)?;
        st.serialize_field("start_node", &self.start_node)?;
        st.serialize_field("mem_node", &self.mem_node)?;
        st.serialize_field("user_s", &self.user_s)?;
        st.serialize_field("sys_s", &self.sys_s)?;
        st.serialize_field("loop_s", &self.loop_s)?;
        st.serialize_field("wait_pct", &self.wait_pct)?;
        st.serialize_field("cross_node", &self.cross_node)?;
        st.serialize_field("residency_source", &self.residency_source)?;
        st.end()
    }
}

impl JobRow {
    pub fn of(r: &JobsRecord, j: &Job) -> JobRow {
        JobRow {
            job: j.job,
            pid: j.pid,
            node_pct: r
                .nodes
                .iter()
                .map(|n| (*n, j.node_pct.get(n).copied().unwrap_or(0.0)))
                .collect(),
            max_pct: j.max_pct,
            most_node: j.most_node,
            start_node: j.start_node,
            mem_node: j.mem_node,
            user_s: j.user_s,
            sys_s: j.sys_s,
            loop_s: j.loop_s,
            wait_pct: j.wait_pct(),
            cross_node: j.migrations.cross_node,
            residency_source: j.residency_source.clone(),
        }
    }

    /// "(m = i)" when the job ran most on the node it started on, "(m # i)"
    /// when it did not.
    fn most_vs_start(&self) -> String {
        match (self.most_node, self.start_node) {
            (Some(m), Some(i)) if m == i => format!("({m} = {i})"),
            (Some(m), Some(i)) => format!("({m} # {i})"),
            _ => "(? ? ?)".into(),
        }
    }
}

pub fn rows(r: &JobsRecord) -> Vec<JobRow> {
    r.jobs.iter().map(|j| JobRow::of(r, j)).collect()
}

/// The document's table; `node_head` names a node's column.
fn table(r: &JobsRecord, node_head: impl Fn(u32) -> String, most: &str) -> Table {
    let mut t = Table::new().right("Job").right("pid");
    for n in &r.nodes {
        t = t.right(node_head(*n));
    }
    let mut t = t
        .bar()
        .right("Max %")
        .left(most)
        .bar()
        .right("user (s)")
        .right("wait %")
        .right("mem node");
    for j in rows(r) {
        // A simulated job has no pid.
        let pid = if j.pid == 0 {
            "-".to_string()
        } else {
            j.pid.to_string()
        };
        let mut cells = vec![j.job.to_string(), pid];
        cells.extend(j.node_pct.iter().map(|(_, p)| format!("{p:.1}")));
        cells.extend([
            format!("{:.1}", j.max_pct),
            j.most_vs_start(),
            format!("{:.2}", j.user_s),
            j.wait_pct.map_or("-".into(), |w| format!("{w:.1}")),
            j.mem_node.map_or("-".into(), |m| m.to_string()),
        ]);
        t.row(cells);
    }
    t
}

/// The jobs table in every format ([`crate::table::Format`]): the text form
/// is the document's own (`Executing N times: ...`, `(m , i)`, the average
/// user time), the others carry the same rows.
impl crate::table::Render for JobsRecord {
    fn text(&self) -> String {
        let r = self;
        let mut out = format!(
            "Executing {} times: numalab probe {}{}\n",
            r.n,
            r.probe_args.join(" "),
            if r.load > 0.0 {
                format!(" (background load {}% on every CPU)", r.load)
            } else {
                String::new()
            }
        );
        out.push_str(&table(r, |n| format!("{n}"), "(m , i)").text());
        let moved = r
            .jobs
            .iter()
            .filter(|j| j.most_node.is_some() && j.most_node != j.start_node)
            .count();
        let _ = writeln!(
            out,
            "Average user time = {:.2} seconds; elapsed {:.2} s; {} of {} jobs ran most on a node \
             other than their first (#)",
            r.average_user_s,
            r.elapsed_s,
            moved,
            r.jobs.len()
        );
        let src = r.jobs.first().map_or("", |j| j.residency_source.as_str());
        let _ = writeln!(
            out,
            "columns {}: % time on that node, from the {src}; (m , i) = node run on most, initial \
             node; wait % = share of its timed loop spent waiting for a CPU; mem node = node holding \
             the job's memory{}",
            r.nodes
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            if r.trace_events > 0 {
                format!(" ({} trace events)", r.trace_events)
            } else {
                String::new()
            }
        );
        for n in &r.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }

    fn markdown(&self) -> String {
        let r = self;
        let mut out = format!(
            "# numalab jobs: {} probes (`{}`), load {}%\n\n",
            r.n,
            r.probe_args.join(" "),
            r.load
        );
        out.push_str(&table(r, |n| format!("node {n} %"), "most, initial").markdown());
        let _ = writeln!(
            out,
            "\nAverage user time = {:.2} s; elapsed {:.2} s.",
            r.average_user_s, r.elapsed_s
        );
        for n in &r.notes {
            let _ = writeln!(out, "\n> note: {n}");
        }
        out
    }

    fn csv(&self) -> anyhow::Result<String> {
        crate::table::csv(rows(self))
    }

    fn json(&self) -> anyhow::Result<String> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use crate::run::jobs::{Job, JobsRecord, SCHEMA};
    use crate::table::Render;
    use std::collections::BTreeMap;

    fn rec() -> JobsRecord {
        let job = |k: u32, pct: &[(u32, f64)], most, start| Job {
            job: k,
            pid: 100 + k,
            node_pct: pct.iter().copied().collect::<BTreeMap<_, _>>(),
            max_pct: pct.iter().map(|p| p.1).fold(0.0, f64::max),
            most_node: Some(most),
            start_node: Some(start),
            mem_node: Some(start),
            user_s: 26.5 + k as f64,
            sys_s: 0.1,
            loop_s: 26.0,
            migrations: Default::default(),
            causes: Default::default(),
            residency_source: "kernel trace".into(),
            home_node: None,
            cpu_time: None,
            sched: None,
        };
        JobsRecord {
            schema: SCHEMA.into(),
            numalab_version: "0".into(),
            kernel: None,
            topology_digest: "d".into(),
            nodes: vec![0, 1, 2, 3],
            num_cpus: 16,
            n: 2,
            probe_args: vec!["--size".into(), "32M".into()],
            load: 0.0,
            elapsed_s: 30.0,
            average_user_s: 28.0,
            trace_events: 10,
            lost_events: 0,
            notes: vec![],
            jobs: vec![
                job(1, &[(0, 100.0)], 0, 0),
                job(2, &[(1, 37.5), (3, 62.5)], 3, 1),
            ],
            home: None,
            numa_balancing: None,
            load_policy: Default::default(),
            load_period_ms: crate::load::DEFAULT_PERIOD_MS,
            load_phases: Default::default(),
            sim: None,
        }
    }

    #[test]
    fn text_has_the_documents_columns_and_marks_moved_jobs() {
        let t = rec().text();
        assert!(t.contains("Executing 2 times"), "{t}");
        let l1 = t
            .lines()
            .find(|l| l.trim_start().starts_with("1 "))
            .unwrap();
        assert!(
            l1.contains("100.0") && l1.contains("(0 = 0)") && l1.contains("27.50"),
            "{l1}"
        );
        let l2 = t
            .lines()
            .find(|l| l.trim_start().starts_with("2 "))
            .unwrap();
        assert!(
            l2.contains("37.5") && l2.contains("62.5") && l2.contains("(3 # 1)"),
            "{l2}"
        );
        assert!(t.contains("Average user time = 28.00 seconds"));
        assert!(t.contains("1 of 2 jobs ran most on a node other than their first"));
    }

    #[test]
    fn csv_and_json_round_trip() {
        let r = rec();
        let c = r.csv().unwrap();
        assert_eq!(c.lines().count(), 3);
        assert!(c.starts_with("job,pid,node0_pct,node1_pct,node2_pct,node3_pct,max_pct"));
        let back: JobsRecord = serde_json::from_str(&r.json().unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(r
            .markdown()
            .contains("| 2 | 102 | 0.0 | 37.5 | 0.0 | 62.5 | 62.5 | (3 # 1) |"));
        assert!(
            c.contains("\n2,102,0.0,37.5,0.0,62.5,62.5,3,1,1,28.5,0.1,26.0,,0,kernel trace\n"),
            "{c}"
        );
    }
}
