//! `numalab jobs` residency as a heatmap: one line per job, one column per
//! node, the cell's colour and number the job's % of on-CPU time on that
//! node (the document's table), with the memory's node outlined and the
//! node the job started on dotted. Drawn from the record `jobs -o` writes.

use super::layout::Lanes;
use super::style::{self, Glyph};
use crate::run::jobs::JobsRecord;
use plotters::prelude::*;
use std::path::Path;

/// The memory node's outline: crimson, seen on viridis' purple and yellow.
const MARK: RGBColor = RGBColor(220, 0, 60);

/// The heatmap's colour for a percentage (viridis: dark = little time).
fn heat(pct: f64) -> RGBColor {
    ViridisRGB.get_color_normalized(pct.clamp(0.0, 100.0) as f32, 0.0, 100.0)
}

pub fn draw(path: &Path, rec: &JobsRecord) -> anyhow::Result<String> {
    let n = rec.jobs.len();
    let cols = rec.nodes.len().max(1);
    // Lanes shrink for many jobs; below 16 px the numbers are left out.
    let pitch = (640.0 / n as f64).clamp(6.0, 26.0);
    let numbers = pitch >= 16.0;
    let labels: Vec<String> = rec
        .jobs
        .iter()
        .map(|j| format!("job {:>2} (pid {})", j.job, j.pid))
        .collect();
    let label_w = style::mono_width(labels.iter().map(|l| l.len()).max().unwrap_or(0), 16.0) + 14;
    let cell_w = (700 / cols as u32).clamp(60, 140);
    let plot_w = label_w + cell_w * cols as u32 + 40;
    let width = (plot_w + 150).max(1000);
    let sources: Vec<&str> = {
        let mut s: Vec<&str> = rec
            .jobs
            .iter()
            .map(|j| j.residency_source.as_str())
            .collect();
        s.dedup();
        s
    };
    let head = vec![
        format!(
            "{}  ·  numalab jobs {} -- {}{}",
            path.display(),
            rec.n,
            rec.probe_args.join(" "),
            if rec.load > 0.0 {
                format!("  ·  background load {}%", rec.load)
            } else {
                String::new()
            }
        ),
        format!(
            "Kernel: {}  ·  NUM_CPUS: {}  ·  nodes {}  ·  elapsed {:.2} s  ·  average user time \
             {:.2} s  ·  time per node from: {}",
            rec.kernel.as_deref().unwrap_or("unknown"),
            rec.num_cpus,
            rec.nodes.len(),
            rec.elapsed_s,
            rec.average_user_s,
            sources.join(", ")
        ),
    ];
    let mut notes = vec![format!(
        "Cell: % of the job's on-CPU time on the node{}; outlined: the node holding the job's \
         memory; dot: the node it started on.",
        if numbers {
            ""
        } else {
            " (numbers left out: too many jobs)"
        }
    )];
    notes.extend(rec.notes.iter().map(|n| format!("note: {n}")));
    let header_h = style::header_height(head.len(), 1);
    let plot_h = (n as f64 * pitch).ceil() as u32 + 70;
    let notes = style::wrap(&notes, width);
    let height = header_h + plot_h + style::footnotes_height(notes.len());
    let x_keys: Vec<f64> = (0..cols).map(|i| i as f64).collect();
    // Every job labelled while lanes hold the label font; else every k-th.
    let label_size = if numbers { 16.0 } else { 12.0 };
    let every = (label_size / 1.24 / pitch).ceil().max(1.0) as usize;
    let y_keys: Vec<f64> = (0..n)
        .filter(|i| i % every == 0)
        .map(|i| -(i as f64))
        .collect();
    style::svg(width, height, |root| {
        let y = style::header(
            root,
            "Where each job ran: % of its on-CPU time per node",
            &head,
        )?;
        style::legend(
            root,
            16,
            y,
            width as i32 - 16,
            &[
                (
                    Glyph::Outline(MARK),
                    "the node holding the job's memory".into(),
                ),
                (Glyph::Ring, "the node the job started on".into()),
            ],
        )?;
        let (_, rest) = root.split_vertically(header_h);
        let (plot, foot) = rest.split_vertically(plot_h);
        let (grid, bar) = plot.split_horizontally(plot_w);
        let node_label = |v: &f64| {
            rec.nodes
                .get(v.round() as usize)
                .map(|n| format!("node {n}"))
                .unwrap_or_default()
        };
        let job_label = |v: &f64| {
            labels
                .get((-v).round() as usize)
                .cloned()
                .unwrap_or_default()
        };
        let mut chart = ChartBuilder::on(&grid)
            .margin_left(16)
            .margin_right(24)
            .margin_top(4)
            .x_label_area_size(60)
            .y_label_area_size(label_w)
            .build_cartesian_2d(
                Lanes {
                    range: -0.5..cols as f64 - 0.5,
                    keys: x_keys.clone(),
                },
                Lanes {
                    range: -(n as f64) + 0.5..0.5,
                    keys: y_keys.clone(),
                },
            )?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(cols)
            .y_labels(y_keys.len())
            .x_label_formatter(&node_label)
            .y_label_formatter(&job_label)
            .x_label_style(style::sans(style::TEXT))
            .y_label_style(style::mono(label_size))
            .x_desc("NUMA node")
            .axis_desc_style(style::sans(style::TEXT))
            .draw()?;
        for (i, j) in rec.jobs.iter().enumerate() {
            let yc = -(i as f64);
            for (c, node) in rec.nodes.iter().enumerate() {
                let pct = j.node_pct.get(node).copied().unwrap_or(0.0);
                let xc = c as f64;
                let cell = [(xc - 0.5, yc + 0.5), (xc + 0.5, yc - 0.5)];
                chart.draw_series(std::iter::once(Rectangle::new(cell, heat(pct).filled())))?;
                // Cell borders only where lanes are tall enough to keep
                // some colour between them.
                if pitch >= 12.0 {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        cell,
                        WHITE.stroke_width(1),
                    )))?;
                }
                if j.mem_node == Some(*node) {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(xc - 0.46, yc + 0.42), (xc + 0.46, yc - 0.42)],
                        MARK.stroke_width(if pitch >= 16.0 { 4 } else { 2 }),
                    )))?;
                }
                if j.start_node == Some(*node) {
                    let r = (pitch / 6.0).clamp(2.0, 4.0) as i32;
                    chart.draw_series([
                        Circle::new((xc - 0.36, yc), r, WHITE.filled()),
                        Circle::new((xc - 0.36, yc), r, BLACK.stroke_width(1)),
                    ])?;
                }
                if numbers {
                    let ink = if pct < 60.0 { WHITE } else { BLACK };
                    let st =
                        style::sans(15.0)
                            .color(&ink)
                            .pos(plotters::style::text_anchor::Pos::new(
                                plotters::style::text_anchor::HPos::Center,
                                plotters::style::text_anchor::VPos::Center,
                            ));
                    chart.draw_series(std::iter::once(Text::new(
                        format!("{pct:.1}"),
                        (xc, yc),
                        st,
                    )))?;
                }
            }
        }
        // The colour scale, 0 at the bottom.
        let (bx, by, bh) = (20, 10, (plot_h as i32 - 90).clamp(60, 400));
        for k in 0..50 {
            let (y0, y1) = (by + bh * k / 50, by + bh * (k + 1) / 50);
            let pct = 100.0 * (1.0 - (k as f64 + 0.5) / 50.0);
            bar.draw(&Rectangle::new(
                [(bx, y0), (bx + 18, y1)],
                heat(pct).filled(),
            ))?;
        }
        style::text(
            &bar,
            "% of time",
            bx - 6,
            by + bh + 10,
            &style::sans(style::SMALL),
        )?;
        for p in [0, 25, 50, 75, 100] {
            let yy = by + bh - bh * p / 100 - 8;
            style::text(
                &bar,
                &format!("{p}%"),
                bx + 24,
                yy,
                &style::sans(style::SMALL),
            )?;
        }
        style::footnotes(&foot, 6, &notes)
    })
}
