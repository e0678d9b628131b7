//! The RFC table as a picture: per row, every sample's time as a dot and a
//! box plot (quartiles, median, Tukey whiskers) with the mean, rows grouped
//! by block and labelled as in the report.
//!
//! Quartiles are plotters' [`Quartiles`] (linear interpolation between
//! order statistics); its "fences" are q1 − 1.5·IQR and q3 + 1.5·IQR, which
//! can lie beyond every sample, so the whiskers are drawn to the farthest
//! sample inside them (Tukey), and samples beyond are the dots alone.

use super::layout::{self, Rows};
use super::style::{self, Glyph};
use crate::compare::LoadedRun;
use crate::run::record::SampleRecord;
use plotters::data::Quartiles;
use plotters::prelude::*;

/// A box plot's numbers, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxStats {
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    /// The farthest samples within 1.5 IQR of the box.
    pub low: f64,
    pub high: f64,
    pub mean: f64,
}

/// The box plot of `v` (not empty).
pub fn box_stats(v: &[f64]) -> BoxStats {
    let q = Quartiles::new(v).values().map(f64::from);
    // Quartiles are f32: compare with a little slack so a sample on the
    // fence counts as inside it.
    let eps = 1e-6 * q[2].abs().max(1e-9);
    let inside = v
        .iter()
        .copied()
        .filter(|x| *x >= q[0] - eps && *x <= q[4] + eps);
    let (low, high) = inside.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
        (l.min(x), h.max(x))
    });
    BoxStats {
        q1: q[1],
        median: q[2],
        q3: q[3],
        low: low.min(q[1]),
        high: high.max(q[3]),
        mean: v.iter().sum::<f64>() / v.len() as f64,
    }
}

pub fn time_s(s: &SampleRecord) -> f64 {
    s.probe.timing.total_ns as f64 / 1e9
}

/// `[NN] PNID: .. NB: .. Mem: .. CPU: ..`, the report's row label.
pub fn row_label(row: &crate::run::spec::Row) -> String {
    format!("[{:02}] {}", row.id, row.params())
}

/// The run's header lines: where it ran, then the RFC's header values.
pub fn run_lines(run: &LoadedRun) -> Vec<String> {
    let m = &run.meta;
    let rfc: Vec<String> = crate::report::header(m)
        .into_iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    vec![
        format!(
            "{}  ·  nodes A={} B={}  ·  backend {}  ·  {} of {} samples recorded{}",
            run.dir.display(),
            m.node_a,
            m.node_b,
            m.backend,
            run.records.len(),
            m.planned_samples,
            if m.end_unix_s.is_some() {
                ""
            } else {
                " (incomplete)"
            }
        ),
        rfc.join("  ·  "),
    ]
}

/// Rows without samples, said in one footnote line (the report lists why).
pub fn missing_rows_note(run: &LoadedRun, shown: usize) -> Option<String> {
    let skipped = run.meta.rows.iter().filter(|r| r.skip.is_some()).count();
    let pending = run.meta.rows.len() - shown - skipped;
    let mut parts = Vec::new();
    if skipped > 0 {
        parts.push(format!("{skipped} row(s) skipped on this machine"));
    }
    if pending > 0 {
        parts.push(format!("{pending} row(s) without samples yet"));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "Not shown: {} (`numalab report {}` says why).",
            parts.join(", "),
            run.dir.display()
        )
    })
}

pub fn draw(run: &LoadedRun) -> anyhow::Result<String> {
    let data: Vec<(String, usize, Vec<f64>)> = run
        .meta
        .rows
        .iter()
        .filter(|r| r.skip.is_none())
        .map(|r| {
            let t: Vec<f64> = run
                .records
                .iter()
                .filter(|s| s.row == r.id)
                .map(time_s)
                .collect();
            (row_label(r), r.block, t)
        })
        .filter(|(_, _, t)| !t.is_empty())
        .collect();
    let rows = Rows {
        labels: data.iter().map(|d| d.0.clone()).collect(),
        block: data.iter().map(|d| d.1).collect(),
    };
    let (lo, hi) = data
        .iter()
        .flat_map(|d| d.2.iter())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
            (l.min(*x), h.max(*x))
        });
    let x = layout::padded(lo, hi, false);
    let mut notes = vec![
        "Box: quartiles; line in the box: median; whiskers: the farthest samples within \
         1.5 IQR of the box; ×: mean; dots: every sample (spread vertically to be seen)."
            .to_string(),
    ];
    notes.extend(missing_rows_note(run, data.len()));
    if !run.notes.is_empty() {
        notes.push(format!(
            "{} warning(s) about the records: see `numalab report {}`.",
            run.notes.len(),
            run.dir.display()
        ));
    }
    let head = run_lines(run);
    let width = (rows.label_width() + 800).max(1200);
    let header_h = style::header_height(head.len(), 1);
    let plot_h = rows.height() + layout::X_AXIS;
    let notes = style::wrap(&notes, width);
    let height = header_h + plot_h + style::footnotes_height(notes.len());
    let fill = style::color(0);
    style::svg(width, height, |root| {
        let y = style::header(
            root,
            "Probe time per row (the RFC's table as a picture)",
            &head,
        )?;
        style::legend(
            root,
            16,
            y,
            width as i32 - 16,
            &[
                (Glyph::Dot(fill), "sample".into()),
                (Glyph::Box(fill), "quartiles and median".into()),
                (Glyph::Cross(style::color(4)), "mean".into()),
            ],
        )?;
        let (_, rest) = root.split_vertically(header_h);
        let (plot, foot) = rest.split_vertically(plot_h);
        let mut chart = layout::chart(
            &plot,
            &rows,
            x.clone(),
            "time of the probe's timed loop (s)",
            40,
        )?;
        let ys = rows.ys();
        for ((_, _, t), y) in data.iter().zip(&ys) {
            let b = box_stats(t);
            let h = 0.3;
            chart.draw_series([
                PathElement::new(vec![(b.low, *y), (b.q1, *y)], BLACK.stroke_width(1)),
                PathElement::new(vec![(b.q3, *y), (b.high, *y)], BLACK.stroke_width(1)),
                PathElement::new(
                    vec![(b.low, y - h / 2.0), (b.low, y + h / 2.0)],
                    BLACK.stroke_width(1),
                ),
                PathElement::new(
                    vec![(b.high, y - h / 2.0), (b.high, y + h / 2.0)],
                    BLACK.stroke_width(1),
                ),
            ])?;
            chart.draw_series([
                Rectangle::new([(b.q1, y - h), (b.q3, y + h)], fill.mix(0.18).filled()),
                Rectangle::new([(b.q1, y - h), (b.q3, y + h)], fill.stroke_width(1)),
            ])?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(b.median, y - h), (b.median, y + h)],
                BLACK.stroke_width(2),
            )))?;
            // Dots spread over the lane by a golden-ratio sequence: the
            // same picture every time, no two dots on one line.
            chart.draw_series(t.iter().enumerate().map(|(i, v)| {
                let dy = ((i as f64 * 0.618_034).fract() - 0.5) * 0.56;
                Circle::new((*v, y + dy), 3, fill.mix(0.55).filled())
            }))?;
            chart.draw_series(std::iter::once(Cross::new(
                (b.mean, *y),
                5,
                style::color(4).stroke_width(2),
            )))?;
        }
        style::footnotes(&foot, 6, &notes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whiskers_stop_at_the_farthest_sample_inside_the_fences() {
        // q1 = 2, median = 3, q3 = 4 (linear interpolation over 1..=5 and
        // 100 at the end: positions 1.5, 3, 4.5 of 0..6): take plain 1..=5.
        let b = box_stats(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((b.q1, b.median, b.q3), (2.0, 3.0, 4.0));
        // Fences -1 and 7: every sample inside, whiskers at 1 and 5 (not
        // at the fences, where plotters would draw them).
        assert_eq!((b.low, b.high), (1.0, 5.0));
        // An outlier: 1,2,3,4,100 -> q1 2, q3 4, fences -1 and 7: the
        // whisker ends at 4, and 100 stays a dot.
        let b = box_stats(&[1.0, 2.0, 3.0, 4.0, 100.0]);
        assert_eq!((b.low, b.high), (1.0, 4.0));
        assert_eq!(b.mean, 22.0);
        let one = box_stats(&[1.5]);
        assert_eq!(
            (one.low, one.q1, one.median, one.q3, one.high),
            (1.5, 1.5, 1.5, 1.5, 1.5)
        );
    }
}
