//! The seed machines: each preset prints the facts its document states.

use numalab::topology::{presets, render, Relation, Topology};

fn preset(name: &str) -> Topology {
    presets::find(name).expect("preset exists").topology()
}

/// Splits a numactl block into lines with runs of white space folded, so a
/// slide's tab-separated matrix compares with numactl's `% 3d ` cells.
fn folded(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn xeon_8167m_has_104_cpus_in_two_llc_spanned_nodes() {
    let t = preset("xeon-8167m-2n");
    assert_eq!(t.online_cpus().len(), 104);
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.llcs().count(), 2);
    assert_eq!(t.cores().count(), 52);
    assert!(t.cores().all(|c| c.cpus.len() == 2));
    assert_eq!(t.node(0).unwrap().cpus.to_string(), "0-25,52-77");
    assert_eq!(t.relation(0, 52), Relation::SameCore);
    assert_eq!(t.relation(0, 1), Relation::SameLlc);
    assert_eq!(t.relation(0, 26), Relation::CrossNode);
}

#[test]
fn epyc_7551_has_two_llcs_per_node_and_socket_distances() {
    let t = preset("epyc-7551-8n");
    assert_eq!(t.online_cpus().len(), 128);
    assert_eq!(t.nodes.len(), 8);
    assert!(t
        .nodes
        .iter()
        .all(|n| n.cpus.len() == 16 && n.llcs.len() == 2));
    assert!(t.llcs().all(|l| l.cores.len() == 4 && l.cpus.len() == 8));
    assert_eq!(t.distance(0, 0), Some(10));
    assert_eq!(t.distance(0, 3), Some(16));
    assert_eq!(t.distance(0, 4), Some(32));
    assert_eq!(t.distance(7, 4), Some(16));
    assert_eq!(t.relation(0, 64), Relation::SameCore);
    assert_eq!(t.relation(0, 3), Relation::SameLlc);
    assert_eq!(t.relation(0, 4), Relation::SameNode);
    assert_eq!(t.relation(0, 8), Relation::CrossNode);
    assert_eq!(t.packages().len(), 2);
}

#[test]
fn ia64_has_supernode_distances() {
    let t = preset("ia64-4n");
    assert_eq!(t.online_cpus().len(), 16);
    assert!(t.nodes.iter().all(|n| n.cpus.len() == 4));
    assert_eq!(t.distance(0, 1), Some(15));
    assert_eq!(t.distance(1, 2), Some(20));
    assert_eq!(t.distance(2, 3), Some(15));
}

const DL980_SLIDE: &str = "\
available: 8 nodes (0-7)
node 0 cpus: 0 1 2 3 4 5 6 7 8 9
node 0 size: 262133 MB
node 0 free: 250463 MB
node 1 cpus: 10 11 12 13 14 15 16 17 18 19
node 1 size: 262144 MB
node 1 free: 256316 MB
node 2 cpus: 20 21 22 23 24 25 26 27 28 29
node 2 size: 262144 MB
node 2 free: 256439 MB
node 3 cpus: 30 31 32 33 34 35 36 37 38 39
node 3 size: 262144 MB
node 3 free: 255403 MB
node 4 cpus: 40 41 42 43 44 45 46 47 48 49
node 4 size: 262144 MB
node 4 free: 256546 MB
node 5 cpus: 50 51 52 53 54 55 56 57 58 59
node 5 size: 262144 MB
node 5 free: 256036 MB
node 6 cpus: 60 61 62 63 64 65 66 67 68 69
node 6 size: 262144 MB
node 6 free: 256468 MB
node 7 cpus: 70 71 72 73 74 75 76 77 78 79
node 7 size: 262144 MB
node 7 free: 255232 MB
node distances:
node\t0\t1\t2\t3\t4\t5\t6\t7
0:\t10\t12\t17\t17\t19\t19\t19\t19
1:\t12\t10\t17\t17\t19\t19\t19\t19
2:\t17\t17\t10\t12\t19\t19\t19\t19
3:\t17\t17\t12\t10\t19\t19\t19\t19
4:\t19\t19\t19\t19\t10\t12\t17\t17
5:\t19\t19\t19\t19\t12\t10\t17\t17
6:\t19\t19\t19\t19\t17\t17\t10\t12
7:\t19\t19\t19\t19\t17\t17\t12\t10
";

const DL580_SLIDE: &str = "\
available: 4 nodes (0-3)
node 0 cpus: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14
node 0 size: 262040 MB
node 0 free: 249261 MB
node 1 cpus: 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
node 1 size: 262144 MB
node 1 free: 252060 MB
node 2 cpus: 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44
node 2 size: 262144 MB
node 2 free: 250441 MB
node 3 cpus: 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
node 3 size: 262144 MB
node 3 free: 250080 MB
node distances:
node 0 1 2 3
0: 10 21 21 21
1: 21 10 21 21
2: 21 21 10 21
3: 21 21 21 10
";

const IVB_SLIDE_DISTANCES: &str = "\
node distances:
node\t0\t1\t2\t3\t4\t5\t6\t7
0:\t10\t16\t30\t30\t30\t30\t30\t30
1:\t16\t10\t30\t30\t30\t30\t30\t30
2:\t30\t30\t10\t16\t30\t30\t30\t30
3:\t30\t30\t16\t10\t30\t30\t30\t30
4:\t30\t30\t30\t30\t10\t16\t30\t30
5:\t30\t30\t30\t30\t16\t10\t30\t30
6:\t30\t30\t30\t30\t30\t30\t10\t16
7:\t30\t30\t30\t30\t30\t30\t16\t10
";

#[test]
fn hp_presets_print_the_slides_numactl_output() {
    assert_eq!(
        folded(&render::numactl_hardware(&preset("hp-dl980-g7"))),
        folded(DL980_SLIDE)
    );
    assert_eq!(
        folded(&render::numactl_hardware(&preset("hp-dl580-gen8"))),
        folded(DL580_SLIDE)
    );
    let ivb = render::numactl_hardware(&preset("ivybridge-ex-8s"));
    assert!(ivb.starts_with("available: 8 nodes (0-7)\nnode 0 cpus: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14\nnode 0 size: 130956 MB\nnode 0 free: 125414 MB\n"));
    assert!(ivb.contains("node 7 cpus: 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119\nnode 7 size: 131072 MB\nnode 7 free: 124509 MB\n"));
    let dist = ivb.split_once("node distances:").unwrap().1;
    assert_eq!(
        folded(&format!("node distances:{dist}")),
        folded(IVB_SLIDE_DISTANCES)
    );
}

#[test]
fn every_preset_round_trips_through_json() {
    for p in presets::PRESETS {
        let t = p.topology();
        let back = Topology::from_json(&t.to_json(), p.name).unwrap();
        assert_eq!(back, t, "preset {}", p.name);
        assert_eq!(back.digest(), t.digest());
    }
}

#[test]
fn json_whose_tree_contradicts_its_cpus_is_refused() {
    let t = preset("epyc-7551-8n");
    let mut v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
    // Claim CPU 0 sits in LLC 5: the nodes' trees no longer follow.
    v["cpus"][0]["llc"] = serde_json::json!(5);
    let e = Topology::from_json(&v.to_string(), "tampered.json").unwrap_err();
    assert!(e.to_string().contains("tampered.json"), "{e}");

    let mut v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
    v["schema"] = serde_json::json!("numalab.topology/99");
    let e = Topology::from_json(&v.to_string(), "future.json").unwrap_err();
    assert!(e.to_string().contains("numalab.topology/99"), "{e}");
}

#[test]
fn digests_differ_between_machines() {
    let digests: std::collections::BTreeSet<String> = presets::PRESETS
        .iter()
        .map(|p| p.topology().digest())
        .collect();
    assert_eq!(digests.len(), presets::PRESETS.len());
}
