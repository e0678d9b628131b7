//! What a traced run (`run --trace`) adds: per row, the kernel-counted
//! migrations per sample by topology level as stacked bars (the means
//! `report` prints, [`crate::report::traced::traced_row`]), and every
//! sample's time against its cross-node moves, with Pearson's r over all
//! samples as the report gives it ([`crate::report::traced::correlations`])
//! and per block.

use super::layout::{self, Rows};
use super::style::{self, Glyph};
use super::times::{missing_rows_note, row_label, run_lines, time_s};
use crate::compare::LoadedRun;
use crate::report::traced::{correlations, traced_row, TracedRow};
use crate::run::record::SampleRecord;
use crate::stats::Correlation;
use plotters::prelude::*;

/// Levels, near to far, with their colours.
const LEVELS: [(&str, usize); 4] = [
    ("same core (SMT sibling)", 5),
    ("same LLC", 0),
    ("same node, other LLC", 1),
    ("cross node", 4),
];

fn levels(t: &TracedRow) -> [f64; 4] {
    [t.same_core, t.same_llc, t.same_node, t.cross_node]
}

pub fn fmt_r(c: &Option<Correlation>) -> String {
    match c {
        Some(c) if c.p < 0.001 => format!("r = {:+.2} (p < 0.001)", c.r),
        Some(c) => format!("r = {:+.2} (p = {:.3})", c.r, c.p),
        None => "r undefined".into(),
    }
}

/// The two traced figures (migrations by level, time vs cross-node moves),
/// or `None` when no sample of the run carries a trace.
pub fn draw(run: &LoadedRun) -> anyhow::Result<Option<(String, String)>> {
    if !run.records.iter().any(|s| s.trace.is_some()) {
        return Ok(None);
    }
    Ok(Some((levels_figure(run)?, scatter_figure(run)?)))
}

fn levels_figure(run: &LoadedRun) -> anyhow::Result<String> {
    let data: Vec<(String, usize, TracedRow)> = run
        .meta
        .rows
        .iter()
        .filter_map(|r| {
            let mine: Vec<&SampleRecord> = run.records.iter().filter(|s| s.row == r.id).collect();
            Some((row_label(r), r.block, traced_row(&mine)?))
        })
        .collect();
    let rows = Rows {
        labels: data.iter().map(|d| d.0.clone()).collect(),
        block: data.iter().map(|d| d.1).collect(),
    };
    let max = data.iter().map(|d| d.2.moves).fold(0.0, f64::max);
    let x = layout::padded(0.0, max.max(1.0) * 1.12, true);
    let lost: u64 = data.iter().map(|d| d.2.lost_events).sum();
    let mut notes = vec![
        "Bars: mean migrations per traced sample (sched_migrate_task), by how far the \
         probe moved; the number at a bar's end: all moves / cross-node moves."
            .to_string(),
    ];
    notes.extend(missing_rows_note(run, data.len()));
    if lost > 0 {
        notes.push(format!(
            "The kernel dropped {lost} trace events in these samples: counts are lower bounds."
        ));
    }
    let head = run_lines(run);
    let width = (rows.label_width() + 800).max(1200);
    let header_h = style::header_height(head.len(), 1);
    let plot_h = rows.height() + layout::X_AXIS;
    let notes = style::wrap(&notes, width);
    let height = header_h + plot_h + style::footnotes_height(notes.len());
    style::svg(width, height, |root| {
        let y = style::header(root, "Migrations per sample by level (kernel trace)", &head)?;
        let items: Vec<(Glyph, String)> = LEVELS
            .iter()
            .map(|(name, c)| (Glyph::Swatch(style::color(*c)), name.to_string()))
            .collect();
        style::legend(root, 16, y, width as i32 - 16, &items)?;
        let (_, rest) = root.split_vertically(header_h);
        let (plot, foot) = rest.split_vertically(plot_h);
        let mut chart = layout::chart(
            &plot,
            &rows,
            x.clone(),
            "migrations per sample (mean over the row's traced samples)",
            40,
        )?;
        for ((_, _, t), y) in data.iter().zip(rows.ys()) {
            let mut from = 0.0;
            for (v, (_, c)) in levels(t).iter().zip(LEVELS) {
                if *v > 0.0 {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(from, y - 0.32), (from + v, y + 0.32)],
                        style::color(c).filled(),
                    )))?;
                }
                from += v;
            }
            chart.draw_series(std::iter::once(Text::new(
                format!("{:.1} / {:.1}", t.moves, t.cross_node),
                (from + (x.end - x.start) * 0.006, y + 0.22),
                style::sans(style::SMALL),
            )))?;
        }
        style::footnotes(&foot, 6, &notes)
    })
}

/// `PNID: -1 NB: 1` plus the block's cost and knobs: a block's name.
fn block_label(r: &crate::run::spec::Row) -> String {
    let mut s = format!("PNID: {} NB: {}", r.pnid, r.nb);
    if let Some(c) = r.migration_cost_ns {
        s.push_str(&format!(" cost: {c}"));
    }
    if !r.knobs.is_empty() {
        s.push(' ');
        s.push_str(&crate::run::knobs::label(&r.knobs));
    }
    s
}

fn scatter_figure(run: &LoadedRun) -> anyhow::Result<String> {
    let traced: Vec<&SampleRecord> = run.records.iter().filter(|s| s.trace.is_some()).collect();
    let cross = |s: &SampleRecord| {
        s.trace
            .as_ref()
            .map_or(0.0, |t| t.task.migrations.cross_node as f64)
    };
    // Blocks in the run's order, each with its samples.
    let mut blocks: Vec<(usize, String, Vec<&SampleRecord>)> = Vec::new();
    for r in &run.meta.rows {
        if !blocks.iter().any(|b| b.0 == r.block) {
            blocks.push((r.block, block_label(r), Vec::new()));
        }
    }
    for s in &traced {
        let b = run.meta.rows.get(s.row).map(|r| r.block);
        if let Some(e) = blocks.iter_mut().find(|e| Some(e.0) == b) {
            e.2.push(s);
        }
    }
    blocks.retain(|b| !b.2.is_empty());
    let (r_all, _) = correlations(&traced);
    let max_x = traced.iter().map(|s| cross(s)).fold(0.0, f64::max);
    let (lo, hi) = traced
        .iter()
        .map(|s| time_s(s))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), t| {
            (l.min(t), h.max(t))
        });
    let y = layout::padded(lo, hi, false);
    let x = -0.5..(max_x + 0.5).max(2.0);
    let head = run_lines(run);
    let notes = vec![
        "One dot per traced sample; dots are spread ±0.15 across their count (whole \
         numbers) so that equal counts stay visible."
            .to_string(),
        "r: Pearson's correlation with its two-sided p-value, over all traced samples (as \
         `numalab report` prints it) in the title, within each block in the legend; rows of a \
         block differ in placement, so a pooled r mixes placement with migration."
            .to_string(),
    ];
    let mut notes = notes;
    if r_all.is_none() || blocks.iter().any(|b| correlations(&b.2).0.is_none()) {
        notes.push(
            "r undefined: the moves or the times are all equal (no cross-node move at all,              as on a one-node machine) or there are fewer than 3 samples."
                .to_string(),
        );
    }
    let legend: Vec<(Glyph, String)> = blocks
        .iter()
        .enumerate()
        .map(|(i, (_, name, ss))| {
            let (r, _) = correlations(ss);
            (
                Glyph::Dot(style::color(i)),
                format!("{name}: n = {}, {}", ss.len(), fmt_r(&r)),
            )
        })
        .collect();
    let (width, plot_h) = (1200u32, 620u32);
    let header_h = style::header_height(head.len(), style::legend_lines(&legend, width));
    let notes = style::wrap(&notes, width);
    let height = header_h + plot_h + style::footnotes_height(notes.len());
    style::svg(width, height, |root| {
        let title = format!(
            "Time vs cross-node moves: {} over {} traced samples",
            fmt_r(&r_all),
            traced.len()
        );
        let top = style::header(root, &title, &head)?;
        style::legend(root, 16, top, width as i32 - 16, &legend)?;
        let (_, rest) = root.split_vertically(header_h);
        let (plot, foot) = rest.split_vertically(plot_h);
        let mut chart = ChartBuilder::on(&plot)
            .margin_left(16)
            .margin_right(40)
            .margin_top(8)
            .x_label_area_size(layout::X_AXIS)
            .y_label_area_size(90)
            .build_cartesian_2d(x.clone(), y.clone())?;
        let ys = y.end - y.start;
        // Counts: whole-number ticks only.
        let fx = |v: &f64| {
            if (v - v.round()).abs() < 1e-9 && *v >= 0.0 {
                format!("{}", v.round() as i64)
            } else {
                String::new()
            }
        };
        let fy = |v: &f64| style::tick(*v, ys);
        chart
            .configure_mesh()
            .x_desc("cross-node moves in the sample (kernel trace, count)")
            .y_desc("time of the probe's timed loop (s)")
            .x_label_formatter(&fx)
            .y_label_formatter(&fy)
            .label_style(style::sans(style::TEXT))
            .axis_desc_style(style::sans(style::TEXT))
            .max_light_lines(1)
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(205, 205, 205))
            .draw()?;
        for (i, (_, _, ss)) in blocks.iter().enumerate() {
            let c = style::color(i);
            chart.draw_series(ss.iter().enumerate().map(|(k, s)| {
                let dx = ((k as f64 * 0.618_034).fract() - 0.5) * 0.3;
                Circle::new((cross(s) + dx, time_s(s)), 3, c.mix(0.6).filled())
            }))?;
        }
        style::footnotes(&foot, 6, &notes)
    })
}
