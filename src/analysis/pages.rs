//! Where a process's memory really is, from /proc/PID/numa_maps.
//!
//! Each mapping line lists its pages per node as `N<node>=<pages>` in units
//! of `kernelpagesize_kB` (4 kB, or 2048 kB for huge pages). Summing them
//! gives the bytes resident on each node right now.

use std::collections::BTreeMap;

/// Bytes resident per node in a numa_maps text.
pub fn bytes_per_node(numa_maps: &str) -> BTreeMap<u32, u64> {
    let mut out: BTreeMap<u32, u64> = BTreeMap::new();
    for line in numa_maps.lines() {
        let mut page_kb = 4u64;
        let mut counts = Vec::new();
        for w in line.split_whitespace() {
            if let Some(v) = w.strip_prefix("kernelpagesize_kB=") {
                page_kb = v.parse().unwrap_or(4);
            } else if let Some(rest) = w.strip_prefix('N') {
                if let Some((n, c)) = rest.split_once('=') {
                    if let (Ok(n), Ok(c)) = (n.parse::<u32>(), c.parse::<u64>()) {
                        counts.push((n, c));
                    }
                }
            }
        }
        // Saturating: numa_maps is outside input (a corrupt or hand-made
        // file), and huge page counts or sizes must not overflow.
        for (n, c) in counts {
            let bytes = c.saturating_mul(page_kb).saturating_mul(1024);
            let e = out.entry(n).or_default();
            *e = e.saturating_add(bytes);
        }
    }
    out
}

/// The node holding more than half of `bytes`, if one does.
pub fn majority_node(bytes: &BTreeMap<u32, u64>) -> Option<u32> {
    // In u128: the per-node figures may be as large as u64::MAX.
    let total: u128 = bytes.values().map(|&b| b as u128).sum();
    bytes
        .iter()
        .find(|(_, &b)| total > 0 && b as u128 * 2 > total)
        .map(|(&n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_pages_by_node_and_page_size() {
        let text = "\
55d0c8a00000 default file=/usr/bin/x mapped=3 N0=3 kernelpagesize_kB=4
7f0000000000 bind:1 anon=8192 dirty=8192 N1=8000 N0=192 kernelpagesize_kB=4
7f1000000000 default anon=2 dirty=2 N1=2 kernelpagesize_kB=2048
7ffd00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
";
        let b = bytes_per_node(text);
        assert_eq!(b[&0], (3 + 192 + 3) * 4096);
        assert_eq!(b[&1], 8000 * 4096 + 2 * 2048 * 1024);
        assert_eq!(majority_node(&b), Some(1));
        assert_eq!(majority_node(&BTreeMap::from([(0, 5), (1, 5)])), None);
        assert_eq!(majority_node(&BTreeMap::new()), None);
    }

    /// Found by tests/prop_procfs.rs: `N0=140737488355328
    /// kernelpagesize_kB=64` (2^63 bytes) overflowed `b * 2` in
    /// majority_node; larger counts overflowed `c * page_kb * 1024`.
    #[test]
    fn numa_maps_huge_counts_saturate_not_overflow() {
        let b = bytes_per_node("7f00 default N0=140737488355328 kernelpagesize_kB=64\n");
        assert_eq!(b[&0], 1 << 63);
        assert_eq!(majority_node(&b), Some(0));
        let b = bytes_per_node(
            "7f00 default N0=18014398509481985 kernelpagesize_kB=18446744073709551615\n\
             7f01 default N0=5 N1=1\n",
        );
        assert_eq!(b[&0], u64::MAX);
        assert_eq!(b[&1], 4096);
        assert_eq!(majority_node(&b), Some(0));
        let even = BTreeMap::from([(0, u64::MAX), (1, u64::MAX)]);
        assert_eq!(majority_node(&even), None);
    }
}
