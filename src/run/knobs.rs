//! Knobs a block of rows sets besides NB: the scheduler's sysctls
//! (`kernel.numa_balancing_*`, `kernel.sched_*`) and its debugfs files
//! (`sched/migration_cost_ns`, `sched/numa_balancing/scan_delay_ms`, ...).
//!
//! A spec names them as users know them, `kernel.X` for /proc/sys/kernel/X
//! and `sched/...` for /sys/kernel/debug/sched/..., so the author's "NB on,
//! no hinting faults" cell is a block with the scan knobs at their maximum:
//!
//! ```toml
//! [[blocks]]
//! pnid = "A"
//! nb = 1
//! knobs = { "sched/numa_balancing/scan_delay_ms" = "4294967295" }
//! ```
//!
//! Names are checked against the state allowlist ([`crate::sys::state`])
//! and values are single tokens when the spec is read; a value that is not
//! a number where the knob holds one is refused before anything changes
//! ([`check_values`]). NB and migration_cost_ns have their own fields and
//! cannot be named twice.

use crate::error::usage;
use crate::sys::state;
use std::collections::BTreeMap;

/// The system path of knob `name`, or why it is not one numalab sets.
pub fn path(name: &str) -> Result<String, String> {
    let p = if let Some(rest) = name.strip_prefix("kernel.") {
        format!("/proc/sys/kernel/{rest}")
    } else if name.starts_with("sched/") {
        format!("{}/{name}", state::DEBUGFS)
    } else {
        return Err(format!(
            "knob {name:?}: name a scheduler sysctl (kernel.numa_balancing_*, kernel.sched_*) \
             or a debugfs file under sched/ (e.g. sched/numa_balancing/scan_delay_ms)"
        ));
    };
    if p == state::NUMA_BALANCING {
        return Err(format!("knob {name:?}: set NB with the block's `nb`"));
    }
    if p == state::MIGRATION_COST {
        return Err(format!(
            "knob {name:?}: set it with `migration_cost_ns` (each value a block list)"
        ));
    }
    if p == state::SCHEDSTATS {
        return Err(format!(
            "knob {name:?}: `run --trace` turns it on for the whole run to record the load \
             balancer's counters; a block cannot set it"
        ));
    }
    if !state::allowed_knob(&p) {
        return Err(format!("knob {name:?} ({p}) is not a knob numalab changes"));
    }
    Ok(p)
}

/// Checks a block's knobs without the machine: names and value syntax.
pub fn check(knobs: &BTreeMap<String, String>) -> anyhow::Result<()> {
    for (name, value) in knobs {
        path(name).map_err(usage)?;
        let v = value.trim();
        if v.is_empty() || v.len() > 64 || v.chars().any(char::is_whitespace) {
            return Err(usage(format!(
                "knob {name:?} = {value:?}: a value is one word of at most 64 characters"
            )));
        }
    }
    Ok(())
}

/// Checks values against the knobs' current contents (read with `read`):
/// where a knob holds a number, the new value must be one too. Call before
/// the first change; absent knobs are left to the planner's skip reasons.
pub fn check_values(
    knobs: &BTreeMap<String, String>,
    read: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<()> {
    for (name, value) in knobs {
        let p = path(name).map_err(usage)?;
        if let Some(cur) = read(&p) {
            let numeric = |s: &str| s.trim().parse::<i64>().is_ok();
            if numeric(&cur) && !numeric(value) {
                return Err(usage(format!(
                    "knob {name:?} = {value:?}: {p} holds a number ({})",
                    cur.trim()
                )));
            }
        }
    }
    Ok(())
}

/// `name=value` pairs for labels.
pub fn label(knobs: &BTreeMap<String, String>) -> String {
    knobs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_allowed_paths_only() {
        assert_eq!(
            path("sched/numa_balancing/scan_delay_ms").unwrap(),
            "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms"
        );
        assert_eq!(
            path("kernel.numa_balancing_promote_rate_limit_MBps").unwrap(),
            "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps"
        );
        for bad in [
            "kernel.numa_balancing",
            "sched/migration_cost_ns",
            "kernel.core_pattern",
            "sched/../tracing/trace",
            "vm.drop_caches",
            "numa_balancing",
        ] {
            assert!(path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_are_one_word_and_numbers_where_the_knob_holds_one() {
        let k = |n: &str, v: &str| BTreeMap::from([(n.to_string(), v.to_string())]);
        check(&k("sched/numa_balancing/scan_delay_ms", "1000")).unwrap();
        assert!(check(&k("sched/numa_balancing/scan_delay_ms", "1 000")).is_err());
        assert!(check(&k("sched/numa_balancing/scan_delay_ms", "")).is_err());
        let cur = |_: &str| Some("1000\n".to_string());
        check_values(&k("sched/numa_balancing/scan_delay_ms", "5"), cur).unwrap();
        let e = check_values(&k("sched/numa_balancing/scan_delay_ms", "max"), cur).unwrap_err();
        assert!(e.to_string().contains("holds a number (1000)"), "{e}");
        assert_eq!(crate::error::exit_code(&e), 2);
    }
}
