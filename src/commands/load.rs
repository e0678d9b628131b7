//! `numalab load`: start the load, report what each CPU really carries,
//! stop cleanly on Ctrl-C, SIGTERM or --duration.

use crate::cli::LoadArgs;
use crate::error::usage;
use crate::idset::IdSet;
use crate::load::{procstat, Load, LoadSpec};
use std::path::Path;
use std::time::{Duration, Instant};

/// Builds a load spec from the command line, checked against the CPUs this
/// process may use.
pub fn spec(
    topo: &crate::topology::Topology,
    a: &LoadArgs,
    allowed: &IdSet,
) -> anyhow::Result<LoadSpec> {
    let (percent, period_ms) = (a.percent, a.period_ms);
    if !(0.0..=100.0).contains(&percent) || percent.is_nan() {
        return Err(usage(format!(
            "--percent {percent}: must be between 0 and 100"
        )));
    }
    crate::load::check_period_ms("--period-ms", period_ms)?;
    let cpus = match a.cpus.as_deref() {
        None => allowed.clone(),
        Some(list) => {
            let set = IdSet::parse(list)?;
            if set.is_empty() {
                return Err(usage(format!("--cpus {list:?}: no CPU selected")));
            }
            let outside = set.difference(allowed);
            if !outside.is_empty() {
                return Err(usage(format!(
                    "--cpus {list}: CPUs {outside} are outside the CPUs this process may use ({allowed})"
                )));
            }
            set
        }
    };
    Ok(LoadSpec::new(
        topo, percent, cpus, period_ms, a.policy, a.phases, a.seed,
    ))
}

pub fn run(sysfs_root: &Path, a: &LoadArgs) -> anyhow::Result<()> {
    let topo = crate::cli::MachineSource::host(sysfs_root).load()?;
    let allowed = topo.usable_cpus();
    let spec = spec(&topo, a, &allowed)?;
    if let Some(d) = a.duration {
        if d.is_nan() || d <= 0.0 {
            return Err(usage(format!("--duration {d}: must be positive")));
        }
    }
    let stop = crate::sys::signals::Stop::on_signals()?;
    let before = procstat::read()?;
    let started = Instant::now();
    let load = Load::start(&spec)?;
    eprintln!(
        "load: {}% on CPUs {} (period {:.3} ms, {} phases from CLOCK_MONOTONIC {:.6} s); Ctrl-C to stop",
        spec.percent,
        spec.cpus,
        spec.period_ms,
        match spec.phases {
            crate::load::LoadPhases::Staggered => "staggered".to_string(),
            crate::load::LoadPhases::Random => format!("random (seed {})", spec.seed),
            crate::load::LoadPhases::Spread => "spread".to_string(),
        },
        load.epoch_mono_ns() as f64 / 1e9
    );
    let deadline = a.duration.map(|d| started + Duration::from_secs_f64(d));
    while !stop.is_set() && deadline.is_none_or(|d| Instant::now() < d) {
        std::thread::sleep(Duration::from_millis(20));
    }
    load.stop();
    let after = procstat::read()?;
    let busy = procstat::busy_percent(&before, &after);
    println!(
        "load: {:.1} s at {}% on CPUs {}; measured busy per CPU (/proc/stat):",
        started.elapsed().as_secs_f64(),
        spec.percent,
        spec.cpus
    );
    for cpu in spec.cpus.iter() {
        if let Some(p) = busy.get(&cpu) {
            println!("  cpu {cpu:>4}: {p:5.1}%");
        }
    }
    // A stop signal is load's normal end (scripts start it in the
    // background and TERM it), so it exits 0 after reporting, unlike the
    // commands whose work a signal cuts short.
    Ok(())
}
