//! Per-CPU busy time from /proc/stat, to measure the load a CPU really carries.
//!
//! Busy = user + nice + system + irq + softirq + steal; total adds idle and
//! iowait. Values are in USER_HZ ticks; only differences are used.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
}

/// Parses the `cpuN` lines of /proc/stat.
pub fn parse(text: &str) -> BTreeMap<u32, CpuTimes> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let Some(name) = w.next() else { continue };
        let Some(id) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let v: Vec<u64> = w.filter_map(|x| x.parse().ok()).collect();
        if v.len() < 5 {
            continue;
        }
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal. Saturating: the
        // text is outside input, and a corrupt or hostile line with huge
        // values must not panic (debug) or wrap (release) the sums.
        let sum = |idx: &[usize]| idx.iter().fold(0u64, |a, &i| a.saturating_add(get(i)));
        let busy = sum(&[0, 1, 2, 5, 6, 7]);
        out.insert(
            id,
            CpuTimes {
                busy,
                total: busy.saturating_add(sum(&[3, 4])),
            },
        );
    }
    out
}

pub fn read() -> std::io::Result<BTreeMap<u32, CpuTimes>> {
    Ok(parse(&std::fs::read_to_string("/proc/stat")?))
}

/// Busy percent of each CPU between two readings.
pub fn busy_percent(
    a: &BTreeMap<u32, CpuTimes>,
    b: &BTreeMap<u32, CpuTimes>,
) -> BTreeMap<u32, f64> {
    b.iter()
        .filter_map(|(cpu, y)| {
            let x = a.get(cpu)?;
            let total = y.total.checked_sub(x.total)?;
            // A counter that went down (a corrupt reading, or a CPU whose
            // counters restarted) gives no figure, as for `total`, instead
            // of an overflow panic.
            let busy = y.busy.checked_sub(x.busy)?;
            (total > 0).then(|| (*cpu, busy as f64 * 100.0 / total as f64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_diffs() {
        let a = parse(
            "cpu  1 2 3 4 5 6 7 8\ncpu0 10 0 10 80 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0\nintr 5\n",
        );
        let b = parse("cpu0 40 0 20 140 0 0 0 0\ncpu1 0 0 0 200 0 0 0 0\n");
        let p = busy_percent(&a, &b);
        assert!((p[&0] - 40.0).abs() < 1e-9);
        assert_eq!(p[&1], 0.0);
    }

    /// Found by tests/prop_procfs.rs: `cpu0 0 0 3923629280549292990
    /// 4300262683832036479 10222852109328222147` overflowed the sum.
    #[test]
    fn procstat_huge_counters_saturate_not_overflow() {
        let m = u64::MAX;
        let t = parse(&format!("cpu0 {m} {m} {m} {m} {m} {m} {m} {m}\n"));
        assert_eq!(t[&0], CpuTimes { busy: m, total: m });
    }

    /// Found by tests/prop_procfs.rs: a second reading whose busy time went
    /// down while the total went up panicked on `y.busy - x.busy`.
    #[test]
    fn procstat_busy_going_down_is_skipped_not_a_panic() {
        let a = parse("cpu0 50 0 0 10 0 0 0 0\n");
        let b = parse("cpu0 10 0 0 100 0 0 0 0\n");
        assert!(busy_percent(&a, &b).is_empty());
    }
}
