//! The configuration the scheduler gets for a machine: pools, distances,
//! delays and steal order, on the document's own 4-node IA64 machine.

use super::*;
use crate::topology::presets;

fn ia64() -> Topology {
    presets::find("ia64-4n").unwrap().topology()
}

#[test]
fn pools_list_each_nodes_cpus_in_compressed_rows() {
    let c = build_config(&ia64(), &Options::default()).unwrap();
    assert_eq!((c.nr_cpus, c.nr_nodes), (16, 4));
    for n in 0..4usize {
        let (a, b) = (c.node_first[n] as usize, c.node_first[n + 1] as usize);
        assert_eq!(b - a, 4, "node {n} has 4 CPUs");
        for &cpu in &c.node_cpus[a..b] {
            assert_eq!(c.cpu_node[cpu as usize], n as i32);
        }
    }
    assert_eq!(c.cpu_node[16], -1, "no CPU 16");
}

#[test]
fn the_steal_delay_grows_with_distance_as_in_the_document() {
    // The document: 2, 3, 4 ms at distances 10, 15, 20 (low load).
    let c = build_config(&ia64(), &Options::default()).unwrap();
    assert_eq!(c.distance[0][1], 15);
    assert_eq!(c.distance[0][2], 20);
    assert_eq!(c.steal_delay_ns[0][1], 3_000_000);
    assert_eq!(c.steal_delay_ns[0][2], 4_000_000);
    assert_eq!(c.steal_delay_ns[0][0], 0);
    // Busy: the document's average-load column, 132/198/264 ms.
    assert_eq!(c.steal_delay_busy_ns[0][1], 198_000_000);
    assert_eq!(c.steal_delay_busy_ns[0][2], 264_000_000);
    assert_eq!(c.nr_online, 16);
    // The scan runs at half the shortest delay.
    assert_eq!(c.timer_ns, 1_500_000);
}

#[test]
fn thieves_look_at_the_nearest_node_first() {
    let c = build_config(&ia64(), &Options::default()).unwrap();
    assert_eq!(&c.steal_order[0][..3], &[1, 2, 3]);
    assert_eq!(&c.steal_order[2][..3], &[3, 0, 1]);
}

#[test]
fn without_the_steal_delay_bit_delays_are_still_computed_but_switched_off_in_bpf() {
    let o = Options {
        mechanisms: mechanisms_without(&["steal-delay".into()]).unwrap(),
        ..Options::default()
    };
    let c = build_config(&ia64(), &o).unwrap();
    assert_eq!(c.mechanisms & mech::STEAL_DELAY, 0);
    assert_eq!(c.mechanisms & mech::REATTRACT, mech::REATTRACT);
}

#[test]
fn unknown_mechanisms_and_policies_are_named() {
    let e = mechanisms_without(&["steal".into()]).unwrap_err();
    assert!(e.contains("steal-delay"), "{e}");
    assert!(NodePolicy::parse("sometimes").is_err());
    assert_eq!(NodePolicy::parse("1").unwrap(), NodePolicy::ForkMm);
}

#[test]
fn options_out_of_range_are_refused() {
    let bad = Options {
        slice_ms: 0.0,
        ..Options::default()
    };
    assert!(bad.check().unwrap_err().contains("--slice"));
    let bad = Options {
        steal_delay_ms: -1.0,
        ..Options::default()
    };
    assert!(bad.check().unwrap_err().contains("--steal-delay"));
}

#[test]
fn a_machine_beyond_the_schedulers_arrays_is_refused() {
    let mut t = ia64();
    t.nodes[3].id = 16;
    let Err(e) = build_config(&t, &Options::default()) else {
        panic!("node 16 accepted");
    };
    assert!(e.contains("node 16"), "{e}");
}
