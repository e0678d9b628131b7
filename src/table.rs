//! The one table writer behind every text and Markdown table (`report`,
//! `jobs`, `compare`), and the one CSV writer (the `csv` crate over
//! serialized row structs, so the header comes from the struct's fields and
//! a column added in one place cannot shift another).
//!
//! A table is its columns (head, alignment, and for text an optional `|`
//! before the column) and rows of cells, each row built from the table's
//! row model by one function, so a column's head and cell are written next
//! to each other. Text pads every column to its widest cell; Markdown marks
//! the alignment in the separator row and escapes `|` in cells.
//!
//! Why our own writer: the table crates on crates.io (comfy-table, tabled,
//! prettytable) draw box-drawing text tables but do not write the plain
//! aligned layout the RFC's table and the reports use (no borders, a lone
//! `|` between column groups, gaps between blocks) together with Markdown
//! from the same definition; this is about 150 lines.

use serde::Serialize;

/// Every format a result is exported in (`--format`; a run's report.txt,
/// .md, .csv and .json).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Csv,
    Json,
}

impl Format {
    /// Every format, in the order a run's report files are written.
    pub const ALL: [Format; 4] = [Format::Text, Format::Markdown, Format::Csv, Format::Json];
}

/// A result that exports in every [`Format`]: a run's report, a
/// comparison, a jobs record. Each says how it looks in each format; the
/// one match on the format is [`Render::render`] (hyperfine's exporter
/// model), so a new format is one method here and one per result, found by
/// the compiler.
pub trait Render {
    /// The aligned text table with its header and notes.
    fn text(&self) -> String;
    /// The same as GitHub Markdown.
    fn markdown(&self) -> String;
    /// One CSV row per table row, header from the row struct.
    fn csv(&self) -> anyhow::Result<String>;
    /// The whole result as a versioned JSON document.
    fn json(&self) -> anyhow::Result<String>;

    fn render(&self, format: Format) -> anyhow::Result<String> {
        match format {
            Format::Text => Ok(self.text()),
            Format::Markdown => Ok(self.markdown()),
            Format::Csv => self.csv(),
            Format::Json => self.json(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone)]
struct Column {
    head: String,
    align: Align,
    /// Text only: a `|` between this column and the one before.
    bar: bool,
}

#[derive(Debug, Clone)]
enum Line {
    Cells(Vec<String>),
    /// Text only: an empty line (between blocks of rows).
    Gap,
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    cols: Vec<Column>,
    lines: Vec<Line>,
    bar_next: bool,
}

impl Table {
    pub fn new() -> Table {
        Table::default()
    }

    fn col(mut self, head: impl Into<String>, align: Align) -> Table {
        self.cols.push(Column {
            head: head.into(),
            align,
            bar: std::mem::take(&mut self.bar_next),
        });
        self
    }

    /// A left-aligned column.
    pub fn left(self, head: impl Into<String>) -> Table {
        self.col(head, Align::Left)
    }

    /// A right-aligned column (numbers).
    pub fn right(self, head: impl Into<String>) -> Table {
        self.col(head, Align::Right)
    }

    /// In text, a `|` before the next column.
    pub fn bar(mut self) -> Table {
        self.bar_next = true;
        self
    }

    /// Adds a row. One cell per column: a row builder that disagrees with
    /// its columns is a bug, so it panics.
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.cols.len(),
            "a table row needs one cell per column"
        );
        self.lines.push(Line::Cells(cells));
    }

    /// In text, an empty line here (blocks of rows); nothing in Markdown.
    pub fn gap(&mut self) {
        if !self.lines.is_empty() {
            self.lines.push(Line::Gap);
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.lines.iter().any(|l| matches!(l, Line::Cells(_)))
    }

    /// Aligned plain text, two spaces between columns: header, a dashed
    /// rule as wide as the header, the rows; no trailing spaces.
    pub fn text(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut w: Vec<usize> = self.cols.iter().map(|c| width(&c.head)).collect();
        for l in &self.lines {
            if let Line::Cells(cells) = l {
                for (i, c) in cells.iter().enumerate() {
                    w[i] = w[i].max(width(c));
                }
            }
        }
        let line = |cells: &[&str]| {
            let mut s = String::new();
            for (i, (c, col)) in cells.iter().zip(&self.cols).enumerate() {
                if i > 0 {
                    s.push_str(if col.bar { " | " } else { "  " });
                }
                let pad = " ".repeat(w[i] - width(c));
                match col.align {
                    Align::Left => {
                        s.push_str(c);
                        s.push_str(&pad);
                    }
                    Align::Right => {
                        s.push_str(&pad);
                        s.push_str(c);
                    }
                }
            }
            s.truncate(s.trim_end().len());
            s.push('\n');
            s
        };
        let heads: Vec<&str> = self.cols.iter().map(|c| c.head.as_str()).collect();
        let head = line(&heads);
        let mut out = head.clone();
        out.push_str(&"-".repeat(width(head.trim_end())));
        out.push('\n');
        for l in &self.lines {
            match l {
                Line::Cells(cells) => {
                    let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
                    out.push_str(&line(&cells));
                }
                Line::Gap => out.push('\n'),
            }
        }
        out
    }

    /// A Markdown (GitHub) table.
    pub fn markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let row = |cells: &mut dyn Iterator<Item = String>| {
            let mut s = String::from("|");
            for c in cells {
                s.push(' ');
                s.push_str(&c);
                s.push_str(" |");
            }
            s.push('\n');
            s
        };
        let mut out = row(&mut self.cols.iter().map(|c| esc(&c.head)));
        out.push('|');
        for c in &self.cols {
            out.push_str(match c.align {
                Align::Left => "---|",
                Align::Right => "--:|",
            });
        }
        out.push('\n');
        for l in &self.lines {
            if let Line::Cells(cells) = l {
                out.push_str(&row(&mut cells.iter().map(|c| esc(c))));
            }
        }
        out
    }
}

/// CSV of `rows` through the `csv` crate: the header is the row struct's
/// field names, each line its serialized fields.
pub fn csv<T: Serialize>(rows: impl IntoIterator<Item = T>) -> anyhow::Result<String> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r)?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// `v` with `prec` decimals, or `none` when absent.
pub fn num(v: Option<f64>, prec: usize, none: &str) -> String {
    v.map_or_else(|| none.to_string(), |x| format!("{x:.prec$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new().left("Row").right("n").bar().left("what");
        t.row(vec!["[00]".into(), "5".into(), "a|b".into()]);
        t.gap();
        t.row(vec!["[01]".into(), "12".into(), "".into()]);
        t
    }

    #[test]
    fn text_pads_columns_and_keeps_bars_and_gaps() {
        assert_eq!(
            table().text(),
            "Row    n | what\n---------------\n[00]   5 | a|b\n\n[01]  12 |\n"
        );
    }

    #[test]
    fn markdown_marks_alignment_and_escapes_bars() {
        assert_eq!(
            table().markdown(),
            "| Row | n | what |\n|---|--:|---|\n| [00] | 5 | a\\|b |\n| [01] | 12 |  |\n"
        );
    }

    #[test]
    #[should_panic(expected = "one cell per column")]
    fn a_row_of_the_wrong_width_is_a_bug() {
        Table::new().left("a").row(vec![]);
    }

    #[derive(Serialize)]
    struct R {
        a: u32,
        b: Option<f64>,
        c: &'static str,
    }

    #[test]
    fn csv_header_comes_from_the_struct() {
        let s = csv([
            R {
                a: 1,
                b: None,
                c: "x,y",
            },
            R {
                a: 2,
                b: Some(0.5),
                c: "z",
            },
        ])
        .unwrap();
        assert_eq!(s, "a,b,c\n1,,\"x,y\"\n2,0.5,z\n");
    }
}
