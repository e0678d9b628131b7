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
        // user nice system idle iowait irq softirq steal
        let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
        out.insert(
            id,
            CpuTimes {
                busy,
                total: busy + get(3) + get(4),
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
            (total > 0).then(|| (*cpu, (y.busy - x.busy) as f64 * 100.0 / total as f64))
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
}
