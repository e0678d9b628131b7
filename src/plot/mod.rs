//! `numalab plot DIR... [-o OUTDIR]`: the records as SVG pictures, drawn
//! with the `plotters` crate (SVG backend, no font library: text goes into
//! the SVG as `<text>` and the viewer's fonts draw it, see [`style`]).
//!
//! Inputs are run directories (read with [`crate::compare::load`], the same
//! read-only path as `report` and `compare`) and `numalab jobs -o` records
//! ([`crate::run::jobs::read_record`]). Per run: the RFC table as a picture
//! ([`times`]); for traced runs (`run --trace`) also migrations by level and
//! time vs cross-node moves ([`traced`]); per jobs record the residency
//! heatmap ([`jobs`]); for two or more runs the compare view ([`compare`]),
//! whose rows are `numalab compare`'s own ([`crate::compare::compare`]).
//!
//! Every input is read and every figure drawn in memory before anything is
//! written, so bad input (not a run, no samples, runs without a common row,
//! an output directory inside a run) exits 2 with nothing written. Plots
//! never go into a run directory; each file is replaced atomically
//! ([`crate::sys::state::write_atomic`]).

pub mod compare;
pub mod jobs;
pub mod layout;
pub mod style;
pub mod timeline;
pub mod times;
pub mod traced;

use crate::compare::LoadedRun;
use crate::error::usage;
use crate::probe::record::ProbeRecord;
use crate::run::jobs::JobsRecord;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where plots go when `-o` is not given: `plots/` in the current directory.
pub const DEFAULT_OUTDIR: &str = "plots";

/// One input of `numalab plot`.
pub enum Input {
    // Boxed, both: the two differ much in size (clippy's large_enum_variant).
    Run(Box<LoadedRun>),
    Jobs {
        path: PathBuf,
        record: Box<JobsRecord>,
    },
    /// A threaded probe's record, with its timeline.
    Probe {
        path: PathBuf,
        record: Box<ProbeRecord>,
    },
}

impl Input {
    fn path(&self) -> &Path {
        match self {
            Input::Run(r) => &r.dir,
            Input::Jobs { path, .. } | Input::Probe { path, .. } => path,
        }
    }
}

/// Reads one input without writing anything: a directory is a run (it must
/// hold samples), a file a `numalab jobs -o` record. Anything else exits 2.
pub fn load(path: &Path) -> anyhow::Result<Input> {
    let m = std::fs::metadata(path).map_err(|e| {
        usage(format!(
            "{}: {e} (give a run directory, a `numalab jobs -o` record or a `numalab probe --threads N --json` record)",
            path.display()
        ))
    })?;
    if m.is_dir() {
        let run = crate::compare::load(path)?;
        if run.records.is_empty() {
            return Err(usage(format!(
                "{}: the run has no samples yet (samples.jsonl is missing or empty): \
                 nothing to plot",
                path.display()
            )));
        }
        Ok(Input::Run(Box::new(run)))
    } else {
        let text = crate::input::read_input_text(path, "record", crate::input::RECORD_LIMIT)?;
        if crate::probe::record::schema_of(&text).as_deref() == Some(crate::probe::record::SCHEMA) {
            let record = crate::probe::record::read_record(path)?;
            if record.timeline.as_ref().is_none_or(|t| t.points.is_empty()) {
                return Err(usage(format!(
                    "{}: the probe record has no timeline to plot (record one with \
                     `numalab probe --threads N --json`, --timeline-ms above 0)",
                    path.display()
                )));
            }
            return Ok(Input::Probe {
                path: path.to_path_buf(),
                record: Box::new(record),
            });
        }
        let record = crate::run::jobs::read_record(path).map_err(|e| {
            usage(format!(
                "{e:#} ({} is a file: plot reads run directories, `numalab jobs -o` records and threaded probe records)",
                path.display()
            ))
        })?;
        Ok(Input::Jobs {
            path: path.to_path_buf(),
            record: Box::new(record),
        })
    }
}

/// One picture, drawn but not yet written.
pub struct Figure {
    /// File name in the output directory.
    pub name: String,
    pub svg: String,
}

/// File-name stems, one per input, from the last path component; repeated
/// names get `-2`, `-3`... in argument order so no plot overwrites another.
fn stems(inputs: &[Input]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    inputs
        .iter()
        .map(|i| {
            let p = i.path();
            let base: String = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .filter(|s| !s.is_empty() && s != "." && s != "..")
                .unwrap_or_else(|| "run".into())
                .chars()
                .map(|c| {
                    if c.is_alphanumeric() || "-_.".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let mut name = base.clone();
            let mut k = 2;
            while !seen.insert(name.clone()) {
                name = format!("{base}-{k}");
                k += 1;
            }
            name
        })
        .collect()
}

/// Draws every figure the inputs allow, in memory. Two or more runs that
/// share no comparable row exit 2 (as `numalab compare` does).
pub fn figures(inputs: Vec<Input>) -> anyhow::Result<Vec<Figure>> {
    let mut out = Vec::new();
    let mut runs = Vec::new();
    for (input, stem) in inputs.iter().zip(stems(&inputs)) {
        match input {
            Input::Run(run) => {
                out.push(Figure {
                    name: format!("{stem}-times.svg"),
                    svg: times::draw(run)?,
                });
                if let Some((levels, scatter)) = traced::draw(run)? {
                    out.push(Figure {
                        name: format!("{stem}-migrations.svg"),
                        svg: levels,
                    });
                    out.push(Figure {
                        name: format!("{stem}-time-vs-moves.svg"),
                        svg: scatter,
                    });
                }
            }
            Input::Jobs { path, record } => out.push(Figure {
                name: format!("{stem}-residency.svg"),
                svg: jobs::draw(path, record)?,
            }),
            Input::Probe { path, record } => {
                let tl = record.timeline.as_ref().expect("load checked the timeline");
                out.push(Figure {
                    name: format!("{stem}-timeline.svg"),
                    svg: timeline::draw(path, record, tl)?,
                })
            }
        }
    }
    for input in inputs {
        if let Input::Run(r) = input {
            runs.push(*r);
        }
    }
    if runs.len() >= 2 {
        out.push(Figure {
            name: "compare.svg".into(),
            svg: compare::draw(&runs)?,
        });
    }
    Ok(out)
}

/// The output directory must be creatable and writable and must not be, or
/// lie inside, any run directory: an input's, or another run's (`plot RUN1
/// -o RUN2/figs` would put files into a run that `report`, `--resume` and
/// `compare` read). Looks only; nothing is created.
pub fn check_outdir(outdir: &Path, inputs: &[Input]) -> anyhow::Result<()> {
    let named: Vec<_> = inputs.iter().map(|i| ("an input", i.path())).collect();
    crate::paths::check_output_dir(outdir, "-o", &named)?;
    let abs = absolute(outdir);
    let input_run = inputs.iter().find_map(|i| match i {
        Input::Run(r) if abs.starts_with(absolute(&r.dir)) => Some(r.dir.clone()),
        _ => None,
    });
    // Any directory on the way that holds a run record is a run directory.
    let run = input_run.or_else(|| {
        abs.ancestors()
            .find(|a| crate::run::record::meta_path(a).is_file())
            .map(Path::to_path_buf)
    });
    match run {
        Some(run) => Err(usage(format!(
            "-o {}: is inside the run directory {}; plot never writes into a run \
             directory, choose another -o",
            outdir.display(),
            run.display()
        ))),
        None => Ok(()),
    }
}

/// `p` made absolute with its existing part resolved (symlinks, `..`), so
/// `-o run/../run/x` is seen to be inside `run`.
fn absolute(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut existing = p.clone();
    let mut rest = Vec::new();
    while std::fs::canonicalize(&existing).is_err() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return p,
        }
    }
    let mut out = std::fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    out
}

/// Writes the figures into `outdir` (created when missing), each atomically;
/// returns the paths written.
pub fn write(outdir: &Path, figures: &[Figure]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(outdir)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", outdir.display()))?;
    figures
        .iter()
        .map(|f| {
            let p = outdir.join(&f.name);
            crate::sys::state::write_atomic(&p, f.svg.as_bytes())?;
            Ok(p)
        })
        .collect()
}
