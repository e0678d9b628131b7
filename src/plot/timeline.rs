//! A threaded probe's timeline as a picture: where each array's pages
//! were over time (one band per node, stacked to 100%: a shared array
//! spreading over the nodes its threads run on is pseudo-interleaving
//! converging; a private array moving to its thread's node is NUMA
//! balancing migrating memory to the task), and below, each thread's
//! preferred node over time, a ring where it joined the group it ended in.
//! Drawn from a `numalab probe --threads N --json` record.

use super::style::{self, Glyph};
use crate::probe::record::ProbeRecord;
use crate::probe::timeline::{group_since, placed, settled_ns, Timeline, SETTLED_PER_S};
use plotters::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;

/// Arrays drawn at most: the shared one and the first threads' own.
const MAX_ARRAYS: usize = 9;
const PANEL_H: u32 = 120;
const WIDTH: u32 = 1100;

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

pub fn draw(path: &Path, rec: &ProbeRecord, tl: &Timeline) -> anyhow::Result<String> {
    let nodes: Vec<u32> = {
        let mut s = BTreeSet::new();
        for p in &tl.points {
            for a in &p.pages {
                s.extend(a.keys().copied());
            }
            for t in &p.threads {
                if let Some(n) = t.numa_preferred_nid.filter(|n| *n >= 0) {
                    s.insert(n as u32);
                }
            }
        }
        s.into_iter().collect()
    };
    let color_of = |n: u32| style::color(nodes.iter().position(|&x| x == n).unwrap_or(0));
    let shown = tl.arrays.len().min(MAX_ARRAYS);
    let t_end = tl.points.last().map_or(1.0, |p| secs(p.t_ns)).max(1e-3);
    let threads = rec.threads.len();
    let spec = &rec.spec;
    let t = spec.threads.expect("a threaded record");
    let head = vec![
        format!(
            "{}  ·  numalab probe --threads {} --sharing {}{}{} --size {} --pattern {}",
            path.display(),
            t.count,
            t.sharing,
            if t.processes { " --processes" } else { "" },
            if t.shm_numa_balancing {
                " --shm-numa-balancing"
            } else {
                ""
            },
            spec.size,
            spec.pattern.name()
        ),
        format!(
            "Kernel: {}  ·  NUM_CPUS: {}  ·  {} samples every {} ms  ·  workload {:.2} s",
            rec.host.kernel.as_deref().unwrap_or("unknown"),
            rec.host.num_cpus,
            tl.points.len(),
            tl.every_ms,
            secs(rec.timing.total_ns)
        ),
    ];
    let mut notes = vec![
        "Bands: the array's resident pages per node, as % of those placed at that moment; \
         a reading with over 10% of its pages on no node (hinting-protected or migrating) is left out. \
         Settled: from then on under 1% of the array's pages a second changed node."
            .to_string(),
        "Lower panel: each thread's preferred node while it ran (numa_preferred_nid; none: \
         -1), lines offset a little per thread; ring: when it joined the NUMA group it ended \
         its loop in."
            .to_string(),
    ];
    if tl.arrays.len() > shown {
        notes.push(format!(
            "{} more arrays not drawn (the record holds them all).",
            tl.arrays.len() - shown
        ));
    }
    let legend: Vec<(Glyph, String)> = nodes
        .iter()
        .map(|&n| (Glyph::Swatch(color_of(n)), format!("node {n}")))
        .collect();
    let legend_h = style::legend_lines(&legend, WIDTH);
    let header_h = style::header_height(head.len(), legend_h);
    let pref_h = (threads as u32 * 6 + 40 * nodes.len() as u32).clamp(160, 360);
    let plot_h = shown as u32 * PANEL_H + pref_h + 70;
    let notes = style::wrap(&notes, WIDTH);
    let height = header_h + plot_h + style::footnotes_height(notes.len());
    style::svg(WIDTH, height, |root| {
        let y = style::header(
            root,
            "Where the memory went: pages per node over time",
            &head,
        )?;
        style::legend(root, 16, y, WIDTH as i32 - 16, &legend)?;
        let (_, rest) = root.split_vertically(header_h);
        let (plot, foot) = rest.split_vertically(plot_h);
        let (arrays, prefs) = plot.split_vertically(shown as u32 * PANEL_H);
        let panels = arrays.split_evenly((shown.max(1), 1));
        for (i, area) in panels.iter().enumerate().take(shown) {
            let settled = settled_ns(tl, i, SETTLED_PER_S).map_or_else(
                || "not settled".to_string(),
                |s| format!("settled at {:.1} s", secs(s)),
            );
            let mut chart = ChartBuilder::on(area)
                .margin_left(16)
                .margin_right(24)
                .margin_top(14)
                .x_label_area_size(if i + 1 == shown { 30 } else { 0 })
                .y_label_area_size(170)
                .build_cartesian_2d(0.0..t_end, 0.0..100.0)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_labels(3)
                .x_labels(10)
                .y_label_formatter(&|v| format!("{v:.0}%"))
                .x_label_formatter(&|v| format!("{v:.0} s"))
                .label_style(style::sans(style::SMALL))
                .draw()?;
            // Cumulative shares per point, node by node, drawn as bands.
            // Readings of hinting-protected or migrating pages say nothing of where the pages
            // are: the bands join the readings on either side.
            let shares: Vec<(f64, Vec<f64>)> = tl
                .points
                .iter()
                .filter(|p| placed(p, i))
                .map(|p| {
                    let m = p.pages.get(i).cloned().unwrap_or_default();
                    let total = m.values().sum::<u64>().max(1) as f64;
                    let mut acc = 0.0;
                    let cum = nodes
                        .iter()
                        .map(|n| {
                            acc += m.get(n).copied().unwrap_or(0) as f64 * 100.0 / total;
                            acc
                        })
                        .collect();
                    (secs(p.t_ns), cum)
                })
                .collect();
            for (k, &n) in nodes.iter().enumerate() {
                let top: Vec<(f64, f64)> = shares.iter().map(|(t, c)| (*t, c[k])).collect();
                let bottom: Vec<(f64, f64)> = shares
                    .iter()
                    .rev()
                    .map(|(t, c)| (*t, if k == 0 { 0.0 } else { c[k - 1] }))
                    .collect();
                let poly: Vec<(f64, f64)> = top.into_iter().chain(bottom).collect();
                if poly.len() >= 3 {
                    chart.draw_series(std::iter::once(Polygon::new(poly, color_of(n).filled())))?;
                }
            }
            let (lx, ly) = (16, 10 + PANEL_H as i32 / 2 - 20);
            style::text(area, &tl.arrays[i], lx, ly, &style::bold(style::TEXT))?;
            style::text(area, &settled, lx, ly + 20, &style::grey(style::SMALL))?;
        }
        // Preferred node per thread, as steps, offset a little per thread
        // so equal lines stay apart.
        let lo = -1.5;
        let hi = nodes.last().copied().unwrap_or(0) as f64 + 0.5;
        let mut chart = ChartBuilder::on(&prefs)
            .margin_left(16)
            .margin_right(40)
            .margin_top(16)
            .x_label_area_size(40)
            .y_label_area_size(170)
            .build_cartesian_2d(0.0..t_end, lo..hi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_labels(nodes.len() + 2)
            .y_label_formatter(&|v| {
                if (v - v.round()).abs() > 0.01 {
                    String::new()
                } else if *v < -0.5 {
                    "none".into()
                } else {
                    format!("node {v:.0}")
                }
            })
            .x_label_formatter(&|v| format!("{v:.0} s"))
            .x_desc("seconds since the threads were let go")
            .label_style(style::sans(style::SMALL))
            .axis_desc_style(style::sans(style::SMALL))
            .draw()?;
        for th in 0..threads {
            let off = (th as f64 - threads as f64 / 2.0) * 0.6 / threads.max(1) as f64;
            let pts: Vec<(f64, f64)> = tl
                .points
                .iter()
                .filter_map(|p| {
                    let n = p.threads.get(th)?.numa_preferred_nid?;
                    Some((secs(p.t_ns), n.max(-1) as f64 + off))
                })
                .collect();
            let c = style::color(6);
            let mut steps = Vec::with_capacity(pts.len() * 2);
            for w in pts.windows(2) {
                steps.push(w[0]);
                steps.push((w[1].0, w[0].1));
            }
            if let Some(&last) = pts.last() {
                steps.push(last);
                chart.draw_series(std::iter::once(Text::new(
                    format!("t{th}"),
                    (last.0, last.1),
                    style::sans(style::SMALL).pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Left,
                        plotters::style::text_anchor::VPos::Center,
                    )),
                )))?;
            }
            chart.draw_series(std::iter::once(PathElement::new(steps, c.stroke_width(2))))?;
            if let Some((_, at)) = group_since(tl, th).filter(|(g, _)| *g != 0) {
                if let Some(&(_, y)) = pts.iter().find(|(t, _)| *t >= secs(at)) {
                    chart.draw_series([
                        Circle::new((secs(at), y), 5, WHITE.filled()),
                        Circle::new((secs(at), y), 5, c.stroke_width(2)),
                    ])?;
                }
            }
        }
        style::text(&prefs, "preferred node", 16, 20, &style::bold(style::TEXT))?;
        style::text(
            &prefs,
            &if t.processes {
                format!("{threads} processes, tN: process N")
            } else {
                format!("{threads} threads, tN: thread N")
            },
            16,
            40,
            &style::grey(style::SMALL),
        )?;
        style::footnotes(&foot, 6, &notes)
    })
}
