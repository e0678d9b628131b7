//! The compare view: per row that `numalab compare` compares (its own
//! matching and numbers, [`crate::compare::compare`]), each run's mean time
//! with its 95% CI side by side, BASE on top, and per OTHER its change
//! against BASE, starred when significant after Holm–Bonferroni.

use super::layout::{self, Rows};
use super::style::{self, Glyph};
use crate::compare::{self, LoadedRun, RowKey};
use plotters::prelude::*;

/// A block of compared rows: the key without Mem and CPU.
fn block_of(k: &RowKey) -> (String, u8, Option<u64>, String) {
    (
        k.pnid.clone(),
        k.nb,
        k.migration_cost_ns,
        format!("{:?}", k.knobs),
    )
}

/// The compare view of `runs` (BASE first).
pub fn draw(runs: &[LoadedRun]) -> anyhow::Result<String> {
    let c = compare::compare(runs)?;
    let mut block = Vec::new();
    let mut last = None;
    for r in &c.rows {
        let b = block_of(&r.key);
        if last.as_ref() != Some(&b) {
            block.push(block.last().map_or(0, |x| x + 1));
            last = Some(b);
        } else {
            block.push(*block.last().expect("a row before"));
        }
    }
    let rows = Rows {
        labels: c
            .rows
            .iter()
            .map(|r| format!("[{:02}] {}", r.base.row, r.params))
            .collect(),
        block,
    };
    // Per row, per run (BASE first): mean and CI half-width.
    let sides: Vec<Vec<(f64, Option<f64>)>> = c
        .rows
        .iter()
        .map(|r| {
            std::iter::once(&r.base)
                .chain(r.versus.iter().map(|v| &v.other))
                .map(|s| (s.mean_s, s.ci95_s))
                .collect()
        })
        .collect();
    let (lo, hi) =
        sides
            .iter()
            .flatten()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (m, ci)| {
                let ci = ci.unwrap_or(0.0);
                (l.min(m - ci), h.max(m + ci))
            });
    // Room on the right for the change labels.
    let x = layout::padded(lo, hi + (hi - lo).max(hi * 0.05) * 0.14, false);
    let k = runs.len();
    let name = |i: usize| {
        if i == 0 {
            "BASE".to_string()
        } else {
            format!("OTHER{i}")
        }
    };
    let mut head: Vec<String> = c
        .summaries
        .iter()
        .map(|s| {
            format!(
                "{} {} vs BASE {}: geometric mean of OTHER/BASE over {} rows {}; \
                 significantly faster {}, slower {}",
                name(s.run),
                c.runs[s.run].dir,
                c.runs[0].dir,
                s.rows,
                s.geomean_ratio.map_or("-".into(), |g| format!(
                    "{g:.4} ({:+.1}%)",
                    (g - 1.0) * 100.0
                )),
                s.faster,
                s.slower
            )
        })
        .collect();
    head.push(format!(
        "moves and time on the memory's node: {}",
        if c.moves_source == "trace" {
            "the kernel's trace"
        } else {
            "the probe's own sampling (not every run traced)"
        }
    ));
    let mut notes = vec![
        format!(
            "Dot: the run's mean time; bar: its 95% CI. Per OTHER: change of the mean vs BASE; \
             *: significant (Welch's two-sided p, Holm–Bonferroni over the rows at α = {}), \
             as `numalab compare` marks it.",
            c.alpha
        ),
        "[NN]: the row's number in BASE; rows are matched by parameters with nodes named A/B \
         per run."
            .to_string(),
    ];
    if !c.not_compared.is_empty() {
        notes.push(format!(
            "{} row(s) not compared (not in every run, skipped, or fewer than 2 samples): \
             `numalab compare` lists them with why.",
            c.not_compared.len()
        ));
    }
    notes.extend(c.warnings.iter().map(|w| format!("warning: {w}")));
    let legend: Vec<(Glyph, String)> = c
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                Glyph::ErrorBar(style::color(i)),
                format!("{} {}", name(i), r.dir),
            )
        })
        .collect();
    let width = (rows.label_width() + 860).max(1200);
    let header_h = style::header_height(head.len(), style::legend_lines(&legend, width));
    // Lanes grow with the number of runs so each run keeps ~14 px, and a
    // row's runs sit closer together than two rows' do.
    let lane = (k as f64 * 14.0).max(layout::PITCH);
    let rows_h = (rows.height() as f64 * lane / layout::PITCH).ceil() as u32;
    let plot_h = rows_h + layout::X_AXIS;
    let notes = style::wrap(&notes, width);
    let height = header_h + plot_h + style::footnotes_height(notes.len());
    style::svg(width, height, |root| {
        let top = style::header(
            root,
            &format!(
                "Compare: mean time per row with its 95% CI (BASE and {} OTHER run{})",
                k - 1,
                if k > 2 { "s" } else { "" }
            ),
            &head,
        )?;
        style::legend(root, 16, top, width as i32 - 16, &legend)?;
        let (_, rest) = root.split_vertically(header_h);
        let (plot, foot) = rest.split_vertically(plot_h);
        let mut chart = layout::chart(
            &plot,
            &rows,
            x.clone(),
            "mean time of the probe's timed loop (s), ±95% CI",
            40,
        )?;
        let pad = (x.end - x.start) * 0.006;
        for ((r, side), y) in c.rows.iter().zip(&sides).zip(rows.ys()) {
            for (i, (m, ci)) in side.iter().enumerate() {
                let spread = 0.62 * (k - 1) as f64 / k as f64;
                let off = if k > 1 {
                    spread / 2.0 - spread * i as f64 / (k - 1) as f64
                } else {
                    0.0
                };
                let (yy, col) = (y + off, style::color(i));
                let ci = ci.unwrap_or(0.0);
                let cap = 0.06;
                chart.draw_series([
                    PathElement::new(vec![(m - ci, yy), (m + ci, yy)], col.stroke_width(2)),
                    PathElement::new(
                        vec![(m - ci, yy - cap), (m - ci, yy + cap)],
                        col.stroke_width(2),
                    ),
                    PathElement::new(
                        vec![(m + ci, yy - cap), (m + ci, yy + cap)],
                        col.stroke_width(2),
                    ),
                ])?;
                chart.draw_series(std::iter::once(Circle::new((*m, yy), 4, col.filled())))?;
                if i > 0 {
                    let v = &r.versus[i - 1];
                    let st = style::sans(style::SMALL).color(&col).pos(
                        plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Left,
                            plotters::style::text_anchor::VPos::Center,
                        ),
                    );
                    chart.draw_series(std::iter::once(Text::new(
                        format!(
                            "{}{}",
                            v.change_pct.map_or("-".into(), |c| format!("{c:+.1}%")),
                            if v.significant { " *" } else { "" }
                        ),
                        (m + ci + pad, yy),
                        st,
                    )))?;
                }
            }
        }
        style::footnotes(&foot, 6, &notes)
    })
}
