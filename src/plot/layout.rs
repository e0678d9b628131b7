//! The layout the row plots share: one horizontal lane per row of the
//! RFC's table, top to bottom in the table's order, labelled like the
//! report (`[NN] PNID: .. NB: .. Mem: .. CPU: ..`), with a gap and a light
//! band per block of rows so the blocks read as groups, as the report's
//! blank lines make them.

use super::style::{self, Area, BAND};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::ops::Range;

/// Pixels per row lane.
pub const PITCH: f64 = 24.0;
/// Extra space between blocks, in lanes.
const GAP: f64 = 0.8;

pub type RowCoord = Cartesian2d<RangedCoordf64, Lanes>;

/// A linear f64 axis whose ticks are exactly the given lanes. plotters'
/// own `with_key_points` decorator leaves its axis without a label
/// formatter (no mesh can be drawn on it), hence this small one.
#[derive(Clone)]
pub struct Lanes {
    pub range: Range<f64>,
    pub keys: Vec<f64>,
}

impl Ranged for Lanes {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let r = RangedCoordf64::from(self.range.clone());
        r.map(value, limit)
    }
    fn key_points<Hint: KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        self.keys.clone()
    }
    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// The rows of a plot, top first. Rows of one block are adjacent; `block`
/// tells where a block starts (a change of value).
pub struct Rows {
    pub labels: Vec<String>,
    pub block: Vec<usize>,
}

impl Rows {
    /// Each row's y (the top row highest: plotters' y grows upwards).
    pub fn ys(&self) -> Vec<f64> {
        let mut gaps = 0.0;
        self.block
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if i > 0 && self.block[i - 1] != *b {
                    gaps += GAP;
                }
                -(i as f64 + gaps)
            })
            .collect()
    }

    fn y_range(&self) -> Range<f64> {
        let ys = self.ys();
        let low = ys.last().copied().unwrap_or(0.0);
        (low - 0.6)..0.6
    }

    /// Height in pixels of the plotting area's rows.
    pub fn height(&self) -> u32 {
        let r = self.y_range();
        ((r.end - r.start) * PITCH).ceil() as u32
    }

    /// Width of the label area: the longest label in the row font.
    pub fn label_width(&self) -> u32 {
        let n = self
            .labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0);
        style::mono_width(n, style::ROW) + 14
    }
}

/// X axis height (tick labels and the axis description).
pub const X_AXIS: u32 = 62;

/// The chart for `rows` over `x`, drawn into `area` (which should be
/// `rows.height() + X_AXIS` high): block bands, x grid, row labels.
pub fn chart<'a, 'b>(
    area: &'a Area<'b>,
    rows: &Rows,
    x: Range<f64>,
    x_desc: &str,
    right: u32,
) -> anyhow::Result<ChartContext<'a, SVGBackend<'b>, RowCoord>> {
    let ys = rows.ys();
    let mut chart = ChartBuilder::on(area)
        .margin_left(16)
        .margin_right(right)
        .margin_top(4)
        .x_label_area_size(X_AXIS)
        .y_label_area_size(rows.label_width())
        .build_cartesian_2d(
            x.clone(),
            Lanes {
                range: rows.y_range(),
                keys: ys.clone(),
            },
        )?;
    // A band behind every other block.
    let mut start = 0;
    let mut band = 0;
    for i in 1..=ys.len() {
        if i == ys.len() || rows.block[i] != rows.block[start] {
            if band % 2 == 0 {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x.start, ys[start] + 0.5), (x.end, ys[i - 1] - 0.5)],
                    BAND.filled(),
                )))?;
            }
            band += 1;
            start = i;
        }
    }
    let span = x.end - x.start;
    let labels = &rows.labels;
    let fmt_y = |y: &f64| {
        ys.iter()
            .position(|v| (v - y).abs() < 1e-9)
            .map(|i| labels[i].clone())
            .unwrap_or_default()
    };
    let fmt_x = |v: &f64| style::tick(*v, span);
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(ys.len())
        .y_label_formatter(&fmt_y)
        .y_label_style(style::mono(style::ROW))
        .x_labels(10)
        .x_label_formatter(&fmt_x)
        .x_label_style(style::sans(style::TEXT))
        .x_desc(x_desc)
        .axis_desc_style(style::sans(style::TEXT))
        .max_light_lines(1)
        .light_line_style(RGBColor(232, 232, 232))
        .bold_line_style(RGBColor(200, 200, 200))
        .draw()?;
    Ok(chart)
}

/// `lo..hi` widened by 4% on each side (and made non-empty), optionally
/// from zero.
pub fn padded(lo: f64, hi: f64, from_zero: bool) -> Range<f64> {
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    let lo = if from_zero && lo >= 0.0 {
        0.0
    } else {
        lo - span * 0.04
    };
    lo..hi + span * 0.04
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_set_apart_and_rows_run_top_down() {
        let rows = Rows {
            labels: vec!["a".into(), "b".into(), "c".into()],
            block: vec![0, 0, 3],
        };
        // Top row at 0, one lane down, then one lane plus the block gap.
        assert_eq!(rows.ys(), vec![0.0, -1.0, -2.8]);
        assert_eq!(rows.y_range(), -3.4..0.6);
        assert_eq!(rows.height(), (4.0 * PITCH).ceil() as u32);
    }

    #[test]
    fn padding_keeps_zero_when_asked_and_never_leaves_an_empty_range() {
        assert_eq!(padded(0.0, 10.0, true), 0.0..10.4);
        let r = padded(1.0, 2.0, false);
        assert!((r.start - 0.96).abs() < 1e-12 && (r.end - 2.04).abs() < 1e-12);
        let flat = padded(2.0, 2.0, false);
        assert!(flat.start < 2.0 && flat.end > 2.0, "{flat:?}");
    }
}
