//! A topology file is held to the kernel's rules where it is loaded: a
//! distance matrix no kernel reports is refused (exit 2 naming the node and
//! the entry) by `topo --topology` and before a simulated run starts, and
//! every topology that is accepted simulates without a panic.

mod common;
mod prop_common;

use common::{numalab_out, numalab_within};
use numalab::idset::IdSet;
use numalab::topology::{CacheFacts, CpuFacts, Facts, NodeFacts, Source, Topology};
use proptest::prelude::*;
use std::path::Path;

/// `topo --preset ia64-4n --json` with node 0's distances replaced.
fn ia64_with_node0(dir: &Path, distances: &[u32]) -> std::path::PathBuf {
    let (code, json, err) = numalab_out(&["topo", "--preset", "ia64-4n", "--json"], dir);
    assert_eq!(code, 0, "{err}");
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["nodes"][0]["distances"] = serde_json::json!(distances);
    let path = dir.join("f.json");
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

/// The bug: node 0 at distance 10 (or 0, or 255) from the others was
/// accepted, and `run --backend sim` panicked in the balancer, leaving a
/// run directory neither a retry nor `--resume` could use.
#[test]
fn a_distance_matrix_the_kernel_refuses_is_exit_2_not_a_sim_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[u32], &str)] = &[
        (&[10, 10, 10, 10], "node 0's distance to node 1 (entry 10)"),
        (&[0, 0, 0, 0], "node 0's distance to node 0 (entry 0)"),
        (
            &[10, 255, 255, 255],
            "node 0's distance to node 1 (entry 255)",
        ),
        (&[10, 15, 20, 9], "node 0's distance to node 3 (entry 9)"),
    ];
    for (dist, what) in cases {
        let f = ia64_with_node0(tmp.path(), dist);
        let fs = f.to_str().unwrap();
        let (code, _, err) = numalab_out(&["topo", "--topology", fs], tmp.path());
        assert_eq!(code, 2, "{dist:?}: {err}");
        assert!(err.contains(what) && err.contains(fs), "{dist:?}: {err}");
        let out = tmp.path().join("d");
        let args = common::sim_row(["--topology", fs], "2", "4M", out.to_str().unwrap());
        let (code, _, err) = numalab_out(&args, tmp.path());
        assert_eq!(code, 2, "{dist:?}: {err}");
        assert!(err.contains(what), "{dist:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "no run directory left behind");
    }
}

/// Asymmetric matrices exist on real machines (firmware tables): `topo`
/// accepts them. The simulator models one whose domains nest, and refuses
/// one it cannot model before any work (it looped for ever, with 12 GB of
/// memory, on this one): exit 2 saying why, no run directory.
#[test]
fn an_asymmetric_distance_matrix_is_accepted_and_never_hangs_the_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    // Not asserted yet: [10, 14, 19, 19] (the preset once made symmetric)
    // passes the check but runs for minutes (an engine slowness to chase).
    #[allow(clippy::single_element_loop)]
    for (dist, simulates) in [(&[10, 16, 21, 22], false)] {
        let f = ia64_with_node0(tmp.path(), dist);
        let fs = f.to_str().unwrap();
        let (code, _, err) = numalab_out(&["topo", "--topology", fs], tmp.path());
        assert_eq!(code, 0, "{err}");
        let out = tmp.path().join("d");
        // The default rows, floating ones included: a pinned probe never
        // reaches the balancer's cross-node paths a matrix can break.
        let o = out.to_str().unwrap();
        let args = [
            "run",
            "--backend",
            "sim",
            "--topology",
            fs,
            "--samples",
            "2",
            "--size",
            "4M",
            "--counts",
            "1",
            "--nb",
            "0",
            "--out",
            o,
        ];
        let (code, _, err) = numalab_within(&args, tmp.path(), 30);
        if simulates {
            assert_eq!(code, 0, "{dist:?}: {err}");
            std::fs::remove_dir_all(&out).unwrap();
        } else {
            assert_eq!(code, 2, "{dist:?}: {err}");
            assert!(
                err.contains("cannot model this topology's sched domains"),
                "{err}"
            );
            assert!(!out.exists());
        }
    }
}

/// Facts for a small machine: 1-4 nodes (ids with gaps), 0-4 CPUs each
/// (some offline, some SMT pairs), LLC facts or none, memory unknown, zero
/// or some, and a valid (maybe asymmetric) distance matrix.
fn facts() -> impl Strategy<Value = Facts> {
    (1usize..=4).prop_flat_map(|n| {
        (
            prop::collection::vec(0usize..=4, n),
            prop::collection::vec(11u32..=254, n * n),
            any::<bool>(),
            prop::collection::vec(prop::option::of(prop_oneof![Just(0u64), 1u64..1 << 40]), n),
            prop::collection::vec(0u8..4, 16),
            any::<bool>(),
            prop::collection::vec(0u32..3, n),
        )
            .prop_map(move |(per_node, raw, symmetric, mem, flags, llc, gaps)| {
                let mut dist = vec![vec![10u32; n]; n];
                for i in 0..n {
                    for j in 0..n {
                        if i != j {
                            dist[i][j] = if symmetric && j < i {
                                dist[j][i]
                            } else {
                                raw[i * n + j]
                            };
                        }
                    }
                }
                let (mut nodes, mut cpus) = (Vec::new(), Vec::new());
                let (mut node_id, mut cpu_id, mut k) = (0u32, 0u32, 0usize);
                for i in 0..n {
                    node_id += gaps[i];
                    let mut online = IdSet::new();
                    let mut mine = Vec::new();
                    for _ in 0..per_node[i] {
                        let f = flags[k % flags.len()];
                        k += 1;
                        mine.push((cpu_id, f & 1 == 0, f & 2 != 0));
                        if f & 1 == 0 {
                            online.insert(cpu_id);
                        }
                        cpu_id += 1;
                    }
                    // SMT pairs: a CPU with its flag and the next, both
                    // online, each CPU in one pair at most.
                    let mut partner = vec![None; mine.len()];
                    for j in 0..mine.len().saturating_sub(1) {
                        let (a, b) = (mine[j], mine[j + 1]);
                        if partner[j].is_none() && a.1 && a.2 && b.1 {
                            partner[j] = Some(b.0);
                            partner[j + 1] = Some(a.0);
                        }
                    }
                    for (j, &(id, on, _)) in mine.iter().enumerate() {
                        let mut sib: IdSet = [id].into_iter().collect();
                        if let Some(p) = partner[j] {
                            sib.insert(p);
                        }
                        cpus.push(CpuFacts {
                            id,
                            online: on,
                            node: Some(node_id),
                            package: Some(i as u32),
                            core_id: Some(id),
                            siblings: Some(sib),
                            llc: (llc && on).then(|| CacheFacts {
                                level: 3,
                                cache_id: Some(i as u32),
                                shared: online.clone(),
                            }),
                        });
                    }
                    nodes.push(NodeFacts {
                        id: node_id,
                        cpus: online,
                        mem_total: mem[i],
                        mem_free: mem[i].map(|m| m / 2),
                        distances: dist[i].clone(),
                    });
                    node_id += 1;
                }
                let allowed_cpus = nodes.iter().flat_map(|n| n.cpus.iter()).collect();
                let allowed_mems = nodes.iter().map(|n| n.id).collect();
                Facts {
                    source: Source::File {
                        path: "generated".into(),
                    },
                    cpu_model: None,
                    kernel: None,
                    numa_available: true,
                    nodes,
                    cpus,
                    allowed_cpus,
                    allowed_mems,
                }
            })
    })
}

proptest! {
    #![proptest_config(prop_common::config_scaled("topology_validation", 40))]

    /// Whatever `topo --topology` accepts, a short simulated run either
    /// completes, is refused as bad input (exit 2, nothing left behind), or
    /// fails naming a runaway model (exit 1: a sample that made no
    /// progress, which the engine now stops; such machines, e.g. a 2-node
    /// machine of 2 + 3 CPUs at distance 78 in
    /// proptest-regressions/topology_validation.txt, are #28's to fix):
    /// never a panic, never a hang.
    #[test]
    fn every_accepted_topology_simulates_without_a_panic(f in facts()) {
        let topo = Topology::build(f).expect("generated facts are consistent");
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.json");
        std::fs::write(&path, topo.to_json()).unwrap();
        let ps = path.to_str().unwrap();
        let (code, _, err) = numalab_out(&["topo", "--topology", ps], tmp.path());
        prop_assert_eq!(code, 0, "{}", err);
        let out = tmp.path().join("d");
        // The default rows (Mem and CPU A, B, F), floating ones included.
        let o = out.to_str().unwrap();
        let args = [
            "run", "--backend", "sim", "--topology", ps, "--samples", "1", "--size", "1M",
            "--counts", "1", "--nb", "0", "--out", o,
        ];
        let (code, _, err) = numalab_within(
            &args,
            tmp.path(),
            30,
        );
        prop_assert!(!err.contains("panicked"), "{}", err);
        prop_assert!(
            code == 0 || code == 2 || (code == 1 && err.contains("the simulator ran away")),
            "exit {}: {}",
            code,
            err
        );
        if code == 2 {
            prop_assert!(!out.exists(), "refused, yet {} was left: {}", out.display(), err);
        }
    }
}
