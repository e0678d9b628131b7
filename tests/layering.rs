//! The crate's layers: lower modules never import higher ones, so there is
//! no import cycle between top-level modules.
//!
//! Why a test of our own instead of a tool: `cargo modules` (crates.io) can
//! draw the graph, but it builds rust-analyzer's crates (many minutes on two
//! cores, in every fresh CI) and checks no declared order. This reads every
//! `crate::` path in the code (comments left out, so doc links do not count)
//! and holds each edge to the order below, in every CI run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom first. A module may import modules of lower layers only.
const LAYERS: &[&[&str]] = &[
    &["idset", "units", "stats", "table", "rng", "input"],
    &["topology"],
    &["error"],
    &["sys", "paths"],
    &["analysis", "load"],
    &["sim"],
    &["home", "sched"],
    &["probe"],
    &["trace"],
    &["run"],
    &["exec"],
    &["experiment"],
    &["report"],
    &["compare"],
    &["plot"],
    &["cli"],
    &["commands"],
];

/// Edges the order alone would allow but the design forbids: readers of
/// records read the run's data model (`run`), never the runner that writes
/// it (`experiment`) or its child-process executor (`exec`).
const FORBIDDEN: &[(&str, &str)] = &[
    ("report", "experiment"),
    ("report", "exec"),
    ("compare", "experiment"),
    ("compare", "exec"),
    ("plot", "experiment"),
    ("plot", "exec"),
];

fn layer_of(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

fn rs_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            rs_files(&e.path(), out);
        }
    } else if p.extension().is_some_and(|e| e == "rs") {
        out.push(p.to_path_buf());
    }
}

/// Top-level modules named by `crate::` paths in `code`, including the
/// heads of `use crate::{a, b::{c, d}}` groups, nested or broken over
/// lines (rustfmt breaks a long group, one item a line).
fn referenced(code: &str) -> BTreeSet<String> {
    // Comments out first (doc links do not count), then the text as one.
    let code: Vec<&str> = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let code = code.join("\n");
    let head = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            let h = head(rest);
            if !h.is_empty() {
                out.insert(h);
            }
            continue;
        };
        // The group's top-level items; a nested group belongs to its item.
        let (mut depth, mut start) = (0usize, 0usize);
        let mut items = Vec::new();
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[start..j]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[start..j]);
                    start = j + 1;
                }
                _ => {}
            }
        }
        for item in items {
            let h = head(item);
            if !h.is_empty() && h != "self" {
                out.insert(h);
            }
        }
    }
    out
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" || name == "main" {
            continue;
        }
        let mut files = Vec::new();
        rs_files(&p, &mut files);
        let deps = graph.entry(name.clone()).or_default();
        for f in files {
            let code = std::fs::read_to_string(&f).unwrap();
            deps.extend(referenced(&code).into_iter().filter(|d| *d != name));
        }
    }
    let mut bad = Vec::new();
    for (m, deps) in &graph {
        let Some(lm) = layer_of(m) else {
            bad.push(format!("module {m} is in no layer: add it to LAYERS"));
            continue;
        };
        for d in deps {
            match layer_of(d) {
                _ if FORBIDDEN.contains(&(m.as_str(), d.as_str())) => bad.push(format!(
                    "{m} imports {d}: a reader of records imports no runner"
                )),
                Some(ld) if ld < lm => {}
                Some(_) => bad.push(format!("{m} imports {d}, which is not below it")),
                None => bad.push(format!("{m} imports {d}, which is in no layer")),
            }
        }
    }
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
}

#[test]
fn the_scanner_sees_grouped_and_plain_paths_but_not_comments() {
    let code = "use crate::{sys::state, trace};\nlet x = crate::probe::run();\n\
                /// see [`crate::report`]\n// crate::cli";
    let got: Vec<String> = referenced(code).into_iter().collect();
    assert_eq!(got, ["probe", "sys", "trace"]);
}

/// Regression: a `use crate::{` group broken over lines (as rustfmt writes
/// a long one) was read as empty, so an import in it escaped the check; a
/// nested group's inner names were taken for modules.
#[test]
fn the_scanner_sees_groups_over_lines_and_nested_groups() {
    let code = "use crate::{\n    experiment::{spec, Row},\n    // crate::cli\n    report,\n};";
    let got: Vec<String> = referenced(code).into_iter().collect();
    assert_eq!(got, ["experiment", "report"]);
}
