//! What every plot shares: the SVG canvas, fonts, colours, the header
//! (title, subtitle, legend) and footnotes.
//!
//! Text: plotters is built without `ttf`/`ab_glyph`, so it links no font
//! library (no fontconfig, no freetype: the binary stays static) and
//! estimates text widths itself; the SVG holds `<text>` elements that the
//! viewer draws with its own fonts. Widths we lay out by (label areas) are
//! therefore computed here from character counts, generously, with a
//! monospace font for row labels, whose width per character is known.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// plotters font sizes (the SVG gets size / 1.24 px).
pub const TITLE: f64 = 26.0;
pub const SUB: f64 = 16.0;
pub const TEXT: f64 = 16.0;
pub const ROW: f64 = 16.0;
pub const SMALL: f64 = 14.0;

/// Width in pixels of `chars` monospace characters at plotters size `size`
/// (0.6 em per character, DejaVu Sans Mono / Liberation Mono / Courier).
pub fn mono_width(chars: usize, size: f64) -> u32 {
    (chars as f64 * 0.61 * size / 1.24).ceil() as u32
}

/// A generous width of proportional text (0.6 em per character).
pub fn text_width(s: &str, size: f64) -> i32 {
    (s.chars().count() as f64 * 0.6 * size / 1.24).ceil() as i32
}

pub fn sans(size: f64) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&BLACK)
}

pub fn bold(size: f64) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .style(FontStyle::Bold)
        .color(&BLACK)
}

pub fn mono(size: f64) -> TextStyle<'static> {
    ("monospace", size).into_font().color(&BLACK)
}

pub fn grey(size: f64) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .color(&RGBColor(90, 90, 90))
}

/// Categorical colours, distinct for colour-blind readers too (Okabe-Ito).
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(230, 159, 0),   // orange
    RGBColor(0, 158, 115),   // green
    RGBColor(204, 121, 167), // purple
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(120, 120, 120), // grey
];

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Light bands behind alternate blocks of rows.
pub const BAND: RGBColor = RGBColor(238, 240, 244);

/// Draws into an SVG of `w` x `h` pixels and returns its text.
pub fn svg(
    w: u32,
    h: u32,
    f: impl FnOnce(&Area<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        f(&root)?;
        root.present()?;
    }
    Ok(buf)
}

/// Text at (x, y), anchored top-left.
pub fn text(area: &Area<'_>, s: &str, x: i32, y: i32, style: &TextStyle<'_>) -> anyhow::Result<()> {
    area.draw(&Text::new(s.to_string(), (x, y), style.clone()))?;
    Ok(())
}

/// Text at (x, y) with its right edge at x.
pub fn text_right(
    area: &Area<'_>,
    s: &str,
    x: i32,
    y: i32,
    style: &TextStyle<'_>,
) -> anyhow::Result<()> {
    let st = style.pos(Pos::new(HPos::Right, VPos::Top));
    area.draw(&Text::new(s.to_string(), (x, y), st))?;
    Ok(())
}

/// Title and subtitle lines from the top; returns the y below them.
pub fn header(area: &Area<'_>, title: &str, lines: &[String]) -> anyhow::Result<i32> {
    let mut y = 14;
    text(area, title, 16, y, &bold(TITLE))?;
    y += 32;
    for l in lines {
        text(area, l, 16, y, &grey(SUB))?;
        y += 20;
    }
    Ok(y + 4)
}

/// What a legend entry looks like.
#[derive(Clone, Copy)]
pub enum Glyph {
    /// A filled dot.
    Dot(RGBColor),
    /// A box with a median line (a box plot's box).
    Box(RGBColor),
    /// A filled square (a bar's colour).
    Swatch(RGBColor),
    /// A cross (a mean).
    Cross(RGBColor),
    /// A dot with an error bar.
    ErrorBar(RGBColor),
    /// An outlined square (a marked heatmap cell).
    Outline(RGBColor),
    /// A white dot ringed in black (a marker on any colour).
    Ring,
}

/// Legend entries in a row from (x, y), wrapping at `max_x`; returns the y
/// below the legend.
pub fn legend(
    area: &Area<'_>,
    x0: i32,
    y0: i32,
    max_x: i32,
    items: &[(Glyph, String)],
) -> anyhow::Result<i32> {
    let (mut x, mut y) = (x0, y0);
    let style = sans(TEXT);
    for (glyph, label) in items {
        let w = 30 + text_width(label, TEXT) + 22;
        if x + w > max_x && x > x0 {
            x = x0;
            y += 24;
        }
        let (cx, cy) = (x + 10, y + 8);
        match *glyph {
            Glyph::Dot(c) => {
                area.draw(&Circle::new((cx, cy), 4, c.mix(0.6).filled()))?;
            }
            Glyph::Box(c) => {
                area.draw(&Rectangle::new(
                    [(cx - 9, cy - 6), (cx + 9, cy + 6)],
                    c.mix(0.25).filled(),
                ))?;
                area.draw(&Rectangle::new(
                    [(cx - 9, cy - 6), (cx + 9, cy + 6)],
                    c.stroke_width(1),
                ))?;
                area.draw(&PathElement::new(
                    vec![(cx + 1, cy - 6), (cx + 1, cy + 6)],
                    BLACK.stroke_width(2),
                ))?;
            }
            Glyph::Swatch(c) => {
                area.draw(&Rectangle::new(
                    [(cx - 8, cy - 7), (cx + 8, cy + 7)],
                    c.filled(),
                ))?;
            }
            Glyph::Cross(c) => {
                area.draw(&Cross::new((cx, cy), 5, c.stroke_width(2)))?;
            }
            Glyph::ErrorBar(c) => {
                area.draw(&PathElement::new(
                    vec![(cx - 10, cy), (cx + 10, cy)],
                    c.stroke_width(2),
                ))?;
                for ex in [cx - 10, cx + 10] {
                    area.draw(&PathElement::new(
                        vec![(ex, cy - 4), (ex, cy + 4)],
                        c.stroke_width(2),
                    ))?;
                }
                area.draw(&Circle::new((cx, cy), 4, c.filled()))?;
            }
            Glyph::Outline(c) => {
                area.draw(&Rectangle::new(
                    [(cx - 8, cy - 7), (cx + 8, cy + 7)],
                    c.stroke_width(3),
                ))?;
            }
            Glyph::Ring => {
                area.draw(&Circle::new((cx, cy), 4, WHITE.filled()))?;
                area.draw(&Circle::new((cx, cy), 4, BLACK.stroke_width(1)))?;
            }
        }
        text(area, label, x + 24, y, &style)?;
        x += w;
    }
    Ok(y + 26)
}

/// Lines [`legend`] takes for `items` in a canvas `width` wide.
pub fn legend_lines(items: &[(Glyph, String)], width: u32) -> u32 {
    let max_x = width as i32 - 16;
    let (mut lines, mut x) = (1, 16);
    for (_, label) in items {
        let w = 30 + text_width(label, TEXT) + 22;
        if x + w > max_x && x > 16 {
            lines += 1;
            x = 16;
        }
        x += w;
    }
    lines
}

/// Header height: title, `lines` subtitle lines and `legend` legend lines.
pub fn header_height(lines: usize, legend: u32) -> u32 {
    14 + 32 + lines as u32 * 20 + 4 + legend * 24 + 8
}

/// `lines` wrapped at word boundaries to fit a canvas `width` wide in the
/// footnote font.
pub fn wrap(lines: &[String], width: u32) -> Vec<String> {
    let max = ((width as f64 - 32.0) / (0.6 * SMALL / 1.24)).max(20.0) as usize;
    let mut out = Vec::new();
    for l in lines {
        let mut cur = String::new();
        for word in l.split(' ') {
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > max {
                out.push(std::mem::take(&mut cur));
                cur.push_str("    ");
            } else if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        out.push(cur);
    }
    out
}

/// Footnote lines from y, in small grey text.
pub fn footnotes(area: &Area<'_>, y: i32, lines: &[String]) -> anyhow::Result<()> {
    for (i, l) in lines.iter().enumerate() {
        text(area, l, 16, y + i as i32 * 18, &grey(SMALL))?;
    }
    Ok(())
}

/// Height of `n` footnote lines.
pub fn footnotes_height(n: usize) -> u32 {
    n as u32 * 18 + 12
}

/// A number with as many decimals as its size needs (axis ticks).
pub fn tick(v: f64, span: f64) -> String {
    let decimals = if span >= 20.0 {
        0
    } else if span >= 2.0 {
        1
    } else if span >= 0.2 {
        2
    } else {
        3
    };
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footnotes_wrap_at_words_and_indent_what_follows() {
        let long = "word ".repeat(200);
        let lines = wrap(&[long.trim().to_string(), "short".into()], 600);
        assert!(lines.len() > 3, "{lines:?}");
        let max = ((600.0 - 32.0) / (0.6 * SMALL / 1.24)) as usize;
        assert!(lines.iter().all(|l| l.chars().count() <= max), "{lines:?}");
        assert!(lines[1].starts_with("    word"));
        assert_eq!(lines.last().unwrap(), "short");
    }
}
