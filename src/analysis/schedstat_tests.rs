//! /proc/schedstat captured in the lab's 2-node guest (4 CPUs, two per
//! node, `numalab load --percent 60` running, sched_schedstats on) under
//! Debian's 6.1 kernel (version 15) and the lab kernel, 6.12 (version 16).

use super::*;

const V15: &str = include_str!("../../tests/fixtures/proc/schedstat-v15-6.1-2node.txt");
const V16: &str = include_str!("../../tests/fixtures/proc/schedstat-v16-6.12-2node.txt");

/// The guest's CPUs 0-1 are node 0, 2-3 node 1.
fn two_per_node(cpu: u32) -> Option<u32> {
    Some(cpu / 2)
}

#[test]
fn both_versions_read_with_their_own_column_order() {
    for text in [V15, V16] {
        let s = parse(text).unwrap();
        assert_eq!(s.domains.len(), 8, "4 CPUs x 2 domains");
        let levels = by_level(&s.domains, two_per_node);
        assert_eq!(levels.len(), 2);
        assert_eq!(levels[0].spans.cpus, vec![2], "a node's two CPUs");
        assert_eq!(levels[0].spans.nodes, vec![1]);
        assert_eq!(levels[1].spans.cpus, vec![4], "the NUMA domain");
        assert_eq!(levels[1].spans.nodes, vec![2]);
        // A CPU whose node is unknown counts in no span's nodes.
        let none = by_level(&s.domains, |_| None);
        assert!(none.iter().all(|l| l.spans.nodes.is_empty()));
    }
    // cpu0 domain0 of version 16: busy, idle, newly idle.
    // "3 23 23 0 0 0 0 0 23 57 57 0 0 0 0 0 57 14 14 0 ... 6 1 0"
    let d = &parse(V16).unwrap().domains[0];
    assert_eq!((d.cpu, d.level), (0, 0));
    assert_eq!(d.span, IdSet::parse("0-1").unwrap());
    let c = &d.counters;
    assert_eq!(c.lb(BalanceKind::Busy).count, 23);
    assert_eq!(c.lb(BalanceKind::Idle).count, 57);
    assert_eq!(c.lb(BalanceKind::NewlyIdle).count, 14);
    assert_eq!((c.ttwu_wake_remote, c.ttwu_move_affine), (6, 1));
    // cpu0 domain0 of version 15: idle first, then busy.
    // "3 43 39 4 98 0 0 0 39 32 32 0 0 0 0 0 32 15 14 0 1 1 0 0 14 ... 3 0 0"
    let c = parse(V15).unwrap().domains[0].counters;
    let idle = c.lb(BalanceKind::Idle);
    assert_eq!(
        (idle.count, idle.balanced, idle.failed, idle.imbalance),
        (43, 39, 4, 98)
    );
    assert_eq!(c.lb(BalanceKind::Busy).count, 32);
    let ni = c.lb(BalanceKind::NewlyIdle);
    assert_eq!(
        (ni.count, ni.balanced, ni.imbalance, ni.gained),
        (15, 14, 1, 1)
    );
    assert_eq!(c.moved(), 1);
    assert_eq!(c.ttwu_wake_remote, 3);
}

#[test]
fn other_versions_and_damaged_text_are_refused_by_name() {
    let v17 = V16.replacen("version 16", "version 17", 1);
    assert!(parse(&v17).unwrap_err().contains("version 17"));
    let short = V16.replacen(" 6 1 0\n", " 6 1\n", 1);
    let e = parse(&short).unwrap_err();
    assert!(e.contains("line 4") && e.contains("35 counters"), "{e}");
    assert!(parse("version 16\n").unwrap_err().contains("timestamp"));
    assert!(parse("version 16\ntimestamp 1\ncpu0 1 2\n")
        .unwrap_err()
        .contains("no domain lines"));
}

#[test]
fn masks_wider_than_32_cpus_read_most_significant_group_first() {
    let m = hex_mask("00000001,00000003").unwrap();
    assert_eq!(m, IdSet::parse("0-1,32").unwrap());
    assert_eq!(hex_mask("f").unwrap(), IdSet::parse("0-3").unwrap());
    assert!(hex_mask("xyz").is_none());
}

#[test]
fn a_delta_is_the_growth_per_domain_and_sums_per_level() {
    let before = parse(V16).unwrap();
    // cpu3's NUMA domain (the last line): 5 more idle gains, 2 of them hot,
    // and an active push.
    let mut after = before.clone();
    {
        let c = &mut after.domains[7].counters;
        c.lb[BalanceKind::Idle as usize].gained += 5;
        c.lb[BalanceKind::Idle as usize].hot_gained += 2;
        c.alb_pushed += 1;
    }
    let d = delta(&before, &after).unwrap();
    let levels = by_level(&d, two_per_node);
    assert_eq!(levels[0].counters, Counters::default());
    let numa = &levels[1].counters;
    assert_eq!(numa.lb(BalanceKind::Idle).hot_gained, 2);
    // The push is one of the five gained (active balancing counts it as
    // an idle CPU's pull too).
    assert_eq!(numa.moved(), 5);
    // Against itself: nothing moved anywhere.
    assert!(by_level(&delta(&before, &before).unwrap(), two_per_node)
        .iter()
        .all(|l| l.counters == Counters::default()));
    // Counters only grow, and the domains must be the same ones.
    let e = delta(&after, &before).unwrap_err();
    assert!(
        e.contains("went back") && e.contains("CPU 3 domain1"),
        "{e}"
    );
    let mut moved = before.clone();
    moved.domains[0].span = IdSet::parse("0").unwrap();
    assert!(delta(&before, &moved).unwrap_err().contains("changed"));
}

#[test]
fn a_tasks_schedstat_line_has_exactly_three_counters() {
    let t = parse_task_schedstat("5000 1200 10\n").unwrap();
    assert_eq!((t.run_ns, t.wait_ns, t.timeslices), (5000, 1200, 10));
    assert_eq!(parse_task_schedstat("1 2\n"), None);
    assert_eq!(parse_task_schedstat("1 2 3 4\n"), None);
    assert_eq!(parse_task_schedstat("1 x 3\n"), None);
}
