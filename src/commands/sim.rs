//! `numalab sim fit RUN_DIR... -o my.toml`: read the runs (never written),
//! fit ([`crate::sim::fit`]), write the profile atomically, print the fit
//! ([`crate::report::fit`]). Every check that can fail on the input runs
//! before anything is written.

use crate::cli::{FitArgs, FitCaches, MachineSource, SimCommand};
use crate::error::usage;
use crate::report::fit::{FitReport, SCHEMA};
use crate::run::fit::{check_recorded_on, read_runs};
use crate::run::record::RunMeta;
use crate::sim::Profile;
use crate::table::Render;
use crate::topology::Topology;
use std::path::Path;

pub fn run(sysfs_root: &Path, cmd: &SimCommand) -> anyhow::Result<()> {
    match cmd {
        SimCommand::Fit(a) => fit(sysfs_root, a),
    }
}

fn fit(sysfs_root: &Path, a: &FitArgs) -> anyhow::Result<()> {
    let inputs: Vec<crate::paths::Input> = a
        .runs
        .iter()
        .map(|d| ("run directory", d.as_path()))
        .collect();
    crate::paths::check_output_file(&a.out, "--out", &inputs)?;
    let name = match &a.name {
        Some(n) => n.trim().to_string(),
        None => a
            .out
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if name.is_empty() {
        return Err(usage("--name: the profile needs a name"));
    }
    let mut base = Profile::load(&a.base)?;
    let given = a
        .topology
        .as_ref()
        .map(|f| MachineSource::File(f.clone()).load())
        .transpose()?;
    let mut here: Option<Topology> = None;
    let mut topology_for = |meta: &RunMeta, dir: &Path| -> anyhow::Result<Topology> {
        if let Some(t) = &given {
            check_recorded_on(meta, dir, t, "the --topology file")?;
            return Ok(t.clone());
        }
        if here.is_none() {
            here = Some(MachineSource::host(sysfs_root).load()?);
        }
        let t = here.clone().expect("read above");
        check_recorded_on(meta, dir, &t, "this machine")?;
        Ok(t)
    };
    let input = read_runs(&a.runs, &mut topology_for)?;
    let mut warnings = input.warnings.clone();
    // The caches of the machine the runs were made on, when that is this
    // one: the hit shares decide how much of a row's time is DRAM's, and a
    // base's 32 MiB LLC on a machine with 480 MiB makes a buffer that
    // never leaves the LLC look like memory latency.
    let mut cache_note = None;
    let sim_caches: Vec<&crate::sim::profile::Caches> = input
        .runs
        .iter()
        .filter_map(|(m, _)| m.sim.as_ref().map(|s| &s.profile.caches))
        .collect();
    if a.caches == FitCaches::Auto && here.is_none() && !sim_caches.is_empty() {
        // Simulated runs: the caches of the profile they were simulated
        // with, when they agree.
        if sim_caches.len() == input.runs.len() && sim_caches.iter().all(|c| **c == *sim_caches[0])
        {
            base.caches = sim_caches[0].clone();
            base.sources.insert(
                "caches".into(),
                "the simulated runs' profile (sim fit --caches auto)".into(),
            );
            cache_note = Some("caches from the simulated runs' profile".to_string());
        } else {
            warnings.push(format!(
                "the runs' caches differ (simulated with different profiles, or mixed with host \
                 runs): the caches are {}'s",
                base.name
            ));
        }
    }
    if let (FitCaches::Auto, None, Some(t)) = (a.caches, &given, &here) {
        let cpu = t.online_cpus().iter().next().unwrap_or(0);
        let sys = crate::topology::sysfs::SysRoot::new(sysfs_root);
        match crate::topology::sysfs::cache_sizes(&sys, cpu)? {
            Some(c) => {
                base.caches.l2_bytes = c.l2_bytes;
                base.caches.llc_bytes = c.llc_bytes;
                let from = format!("this machine's sysfs (cpu{cpu}/cache/index*/size)");
                base.sources.insert("caches.l2_bytes".into(), from.clone());
                base.sources.insert("caches.llc_bytes".into(), from);
                cache_note = Some(format!(
                    "cache sizes from this machine: L2 {}, LLC {} (cpu{cpu}); latencies from {}",
                    crate::units::fmt_size(c.l2_bytes),
                    crate::units::fmt_size(c.llc_bytes),
                    base.name
                ));
            }
            None => warnings.push(format!(
                "this machine's sysfs gives no cache sizes: the caches are {}'s",
                base.name
            )),
        }
    }
    // The balancer rule that changed in 6.6 follows the kernel the runs
    // were made on, when they agree on one that says.
    if let [k] = input.kernels.as_slice() {
        if let Some(v) = crate::sim::fit::has_smt_balance(k) {
            base.kernel.smt_balance = v;
            base.sources.insert(
                "kernel.smt_balance".into(),
                format!("from the runs' kernel {k}: group_smt_balance is in Linux 6.6 and later"),
            );
        }
    } else if input.kernels.len() > 1 {
        warnings.push(format!(
            "the runs were made on different kernels ({}): kernel.smt_balance kept from {}",
            input.kernels.join(", "),
            base.name
        ));
    }
    let runs: Vec<String> = input.dirs.iter().map(|d| d.display().to_string()).collect();
    let origin = runs.join(", ");
    // The model's own speed per row under the base, then again under the
    // first fit: the factor hardly depends on the latencies, so twice is
    // enough.
    let mut input = input;
    let mut profile = base.clone();
    let mut fitted = None;
    for _ in 0..2 {
        crate::experiment::simulated::fit::speed_factors(&mut input, &profile)?;
        let f = crate::sim::fit::fit(&base, &input.obs, &name, &origin);
        if let Ok(f) = &f {
            profile = f.profile.clone();
        }
        fitted = Some(f);
    }
    let mut fit = fitted.expect("fitted twice").map_err(|why| {
        let mut msg = format!("sim fit: {why}");
        if !input.left_out.is_empty() {
            msg.push_str("\nrows not used:");
            for l in &input.left_out {
                msg.push_str(&format!("\n  {l}"));
            }
        }
        usage(msg)
    })?;
    if let Some(n) = cache_note {
        fit.notes.insert(0, n);
    }
    let text = format!(
        "# Fitted by numalab sim fit {} from {origin}, on profile {}.\n{}",
        env!("CARGO_PKG_VERSION"),
        base.name,
        toml::to_string(&fit.profile)?
    );
    // What is written must load as a profile: checked before the write.
    Profile::from_toml(&text, &a.out.display().to_string())?;
    crate::sys::state::write_atomic(&a.out, text.as_bytes())?;
    let report = FitReport {
        schema: SCHEMA,
        out: a.out.display().to_string(),
        base: base.name.clone(),
        runs,
        fit,
        left_out: input.left_out,
        warnings,
    };
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    print!("{}", report.render(a.format)?);
    Ok(())
}
