//! The jobs table in each format: text (the document's layout), Markdown,
//! CSV and JSON. All four are built from a [`JobsRecord`] alone, so a saved
//! record renders the same as a fresh run.

use super::JobsRecord;
use std::fmt::Write;

/// "(m = i)" when a job ran most on the node it started on, "(m # i)"
/// when it did not.
fn most_vs_start(j: &super::Job) -> String {
    match (j.most_node, j.start_node) {
        (Some(m), Some(i)) if m == i => format!("({m} = {i})"),
        (Some(m), Some(i)) => format!("({m} # {i})"),
        _ => "(? ? ?)".into(),
    }
}

pub fn text(r: &JobsRecord) -> String {
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
    let cols: String = r.nodes.iter().map(|n| format!("{n:>7}")).collect();
    let width = 12 + cols.len() + 42;
    out.push_str(&"-".repeat(width));
    out.push('\n');
    let _ = writeln!(
        out,
        "{:>4} {:>7} {} | {:>5} {:<9} | {:>8} {:>5}",
        "Job", "pid", cols, "Max", "(m , i)", "user (s)", "mem"
    );
    let _ = writeln!(out, "{:>12} % time on node", "");
    out.push_str(&"-".repeat(width));
    out.push('\n');
    for j in &r.jobs {
        let pcts: String = r
            .nodes
            .iter()
            .map(|n| format!("{:>7.1}", j.node_pct.get(n).copied().unwrap_or(0.0)))
            .collect();
        let _ = writeln!(
            out,
            "{:>4} {:>7} {} | {:>5.1} {:<9} | {:>8.2} {:>5}",
            j.job,
            j.pid,
            pcts,
            j.max_pct,
            most_vs_start(j),
            j.user_s,
            j.mem_node.map_or("-".into(), |m| m.to_string())
        );
    }
    out.push_str(&"-".repeat(width));
    out.push('\n');
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
        "time per node from the {src}; mem = node holding the job's memory{}",
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

pub fn markdown(r: &JobsRecord) -> String {
    let mut out = format!(
        "# numalab jobs: {} probes (`{}`), load {}%\n\n",
        r.n,
        r.probe_args.join(" "),
        r.load
    );
    let heads: String = r.nodes.iter().map(|n| format!(" node {n} % |")).collect();
    let _ = writeln!(
        out,
        "| Job | pid |{heads} Max % | most, initial | user (s) | mem node |"
    );
    let seps: String = r.nodes.iter().map(|_| "---|").collect();
    let _ = writeln!(out, "|---|---|{seps}---|---|---|---|");
    for j in &r.jobs {
        let pcts: String = r
            .nodes
            .iter()
            .map(|n| format!(" {:.1} |", j.node_pct.get(n).copied().unwrap_or(0.0)))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} |{pcts} {:.1} | {} | {:.2} | {} |",
            j.job,
            j.pid,
            j.max_pct,
            most_vs_start(j),
            j.user_s,
            j.mem_node.map_or("-".into(), |m| m.to_string())
        );
    }
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

pub fn csv(r: &JobsRecord) -> String {
    let heads: String = r.nodes.iter().map(|n| format!(",node{n}_pct")).collect();
    let mut out = format!(
        "job,pid{heads},max_pct,most_node,start_node,mem_node,user_s,sys_s,loop_s,cross_node,residency_source\n"
    );
    let o = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
    for j in &r.jobs {
        let pcts: String = r
            .nodes
            .iter()
            .map(|n| format!(",{}", j.node_pct.get(n).copied().unwrap_or(0.0)))
            .collect();
        let _ = writeln!(
            out,
            "{},{}{pcts},{},{},{},{},{},{},{},{},{}",
            j.job,
            j.pid,
            j.max_pct,
            o(j.most_node),
            o(j.start_node),
            o(j.mem_node),
            j.user_s,
            j.sys_s,
            j.loop_s,
            j.migrations.cross_node,
            j.residency_source
        );
    }
    out
}

pub fn json(r: &JobsRecord) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::super::{Job, JobsRecord, SCHEMA};
    use super::*;
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
        }
    }

    #[test]
    fn text_has_the_documents_columns_and_marks_moved_jobs() {
        let t = text(&rec());
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
        let c = csv(&r);
        assert_eq!(c.lines().count(), 3);
        assert!(c.starts_with("job,pid,node0_pct,node1_pct,node2_pct,node3_pct,max_pct"));
        let back: JobsRecord = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(back, r);
        assert!(markdown(&r).contains("| 2 | 102 | 0.0 | 37.5 | 0.0 | 62.5 | 62.5 | (3 # 1) |"));
    }
}
