//! The threaded probe's record: each thread's report, and the workload's
//! aggregate (its time from the release to the last thread's end, passes
//! ending with the last thread's, migrations and residency over every
//! thread) in the fields the classic probe's record has.

use super::Out;
use crate::analysis::{classify, residency};
use crate::idset::IdSet;
use crate::probe::record::{
    CpuTime, NumaReport, ObservationReport, Placement, PnidReport, ProbeRecord, ThreadReport,
    Timing, SCHEMA,
};
use crate::probe::run::{self as classic, majority};
use crate::probe::timeline::Timeline;
use crate::probe::Validated;
use crate::sys::{self, numa};
use crate::topology::Topology;
use std::collections::BTreeMap;

/// What the calling thread measured, for the record.
pub(super) struct Parts {
    pub(super) start_unix_ns: u128,
    pub(super) go_mono_ns: u64,
    pub(super) shared_warm_ns: u64,
    pub(super) allowed_cpus: IdSet,
    pub(super) pages_per_node: BTreeMap<u32, u64>,
    pub(super) pages_unplaced: u64,
    pub(super) numa: Option<NumaReport>,
    pub(super) timeline: Option<Timeline>,
}

pub(super) fn record(v: &Validated, topo: &Topology, parts: Parts, outs: Vec<Out>) -> ProbeRecord {
    let spec = &v.spec;
    let mem_node = majority(&parts.pages_per_node);
    let ref_node = spec.requested_mem_node().or(mem_node);
    let go = parts.go_mono_ns;
    let since_go = |mono: u64| mono.saturating_sub(go);
    let mut threads = Vec::with_capacity(outs.len());
    let (mut all_moves, mut all_whole, mut all_segments) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen = IdSet::default();
    let mut cpu = None::<CpuTime>;
    let mut accesses = 0u64;
    for o in &outs {
        let ob = &o.lp.observation;
        // Against the node asked for, else its own array's, else the
        // workload's.
        let reference = spec
            .requested_mem_node()
            .or(majority(&o.own_pages))
            .or(mem_node);
        let in_loop = ob.changes_between(o.lp.loop_start_ns, o.lp.loop_end_ns + 1);
        let segs = ob.segments_between(o.lp.loop_start_ns, o.lp.loop_end_ns);
        let t_seen = ob.seen_cpus();
        seen = seen.union(&t_seen);
        let passes = o.lp.iterations_ns.len() as u64;
        let per_pass = o.per_pass;
        accesses += per_pass * passes;
        let loop_start_mono = ob.start_mono_ns + o.lp.loop_start_ns;
        threads.push(ThreadReport {
            index: o.index as u32,
            tid: o.tid,
            iterations_ns: o.lp.iterations_ns.clone(),
            total_ns: o.lp.total_ns,
            ns_per_access: o.lp.total_ns as f64 / (per_pass * passes).max(1) as f64,
            start_ns: since_go(loop_start_mono),
            end_ns: since_go(loop_start_mono + o.lp.total_ns),
            warm_up_ns: o.warm_up_ns,
            own_pages_per_node: o.own_pages.clone(),
            migrations: classify(topo, reference, &in_loop),
            residency: residency(topo, reference, &segs),
            seen_cpus: t_seen,
            observation: ObservationReport::new(spec, ob, o.lp.loop_start_ns, o.lp.loop_end_ns),
            numa: o.numa.clone(),
            cpu_time: o.lp.cpu_time.clone(),
        });
        all_moves.extend(in_loop);
        all_whole.extend(ob.changes.iter().copied());
        all_segments.extend(segs);
        if let Some(c) = &o.lp.cpu_time {
            let a = cpu.get_or_insert(CpuTime {
                source: c.source.clone(),
                run_ns: 0,
                wait_ns: 0,
                timeslices: Some(0),
            });
            a.run_ns += c.run_ns;
            a.wait_ns += c.wait_ns;
            a.timeslices = a.timeslices.zip(c.timeslices).map(|(x, y)| x + y);
        }
    }
    // The workload's passes: pass i ends when the last thread ends its
    // pass i, so the passes add up to the time to the last thread's end.
    let ends: Vec<Vec<u64>> = threads
        .iter()
        .map(|t| {
            let mut at = t.start_ns;
            t.iterations_ns
                .iter()
                .map(|ns| {
                    at += ns;
                    at
                })
                .collect()
        })
        .collect();
    let passes = ends.iter().map(Vec::len).min().unwrap_or(0);
    let mut iterations_ns = Vec::with_capacity(passes);
    let mut prev = 0;
    for i in 0..passes {
        let end = ends.iter().map(|e| e[i]).max().unwrap_or(0);
        iterations_ns.push(end - prev);
        prev = end;
    }
    let total_ns = threads.iter().map(|t| t.end_ns).max().unwrap_or(0);
    // The last pass ends with the last thread's loop (its timing between
    // passes included, and under --min-time the passes some threads made
    // beyond the others').
    if let Some(last) = iterations_ns.last_mut() {
        *last += total_ns.saturating_sub(prev);
    }
    let mismatches = classic::mismatches(
        spec,
        topo,
        &parts.pages_per_node,
        parts.pages_unplaced,
        &seen,
    );
    let zero = &outs[0];
    ProbeRecord {
        schema: SCHEMA.to_string(),
        numalab_version: env!("CARGO_PKG_VERSION").to_string(),
        spec: spec.clone(),
        host: classic::host(topo),
        pid: sys::pid(),
        start_unix_ns: parts.start_unix_ns,
        timing: Timing {
            accesses_per_iteration: outs.iter().map(|o| o.per_pass).sum(),
            iterations_ns,
            total_ns,
            ns_per_access: total_ns as f64 / accesses.max(1) as f64,
            warm_up_ns: parts.shared_warm_ns + outs.iter().map(|o| o.warm_up_ns).max().unwrap_or(0),
            checksum: outs.iter().fold(0u64, |a, o| a.wrapping_add(o.lp.checksum)),
        },
        thp: classic::thp_report(spec.thp),
        pnid: match (&v.pnid, spec.pnid) {
            (Some(iface), Some(nid)) => Some(PnidReport {
                requested: nid,
                interface: iface.clone(),
                read_back: zero.pnid_read_back,
            }),
            _ => None,
        },
        placement: Placement {
            page_size: numa::page_size() as u64,
            matches_request: mismatches.is_empty(),
            pages_per_node: parts.pages_per_node.clone(),
            pages_unplaced: parts.pages_unplaced,
            mem_node,
            allowed_cpus: parts.allowed_cpus,
            seen_cpus: seen,
            mismatches,
        },
        migrations: classify(topo, ref_node, &all_moves),
        migrations_whole: classify(topo, ref_node, &all_whole),
        residency: residency(topo, ref_node, &all_segments),
        observation: threads[0].observation.clone(),
        numa: parts.numa,
        cpu_time: cpu,
        threads,
        timeline: parts.timeline,
    }
}
