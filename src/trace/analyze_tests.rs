//! Hand-made event streams on captured and preset topologies, with exact
//! expected counts.

use super::*;
use crate::topology::sysfs::{read_topology, SysRoot};
use crate::topology::{presets, Topology};

fn fixture(name: &str) -> Topology {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topo")
        .join(name)
        .join("root");
    read_topology(&SysRoot::new(root)).unwrap()
}

fn ev(ts_ns: u64, cpu: u32, kind: Kind) -> Event {
    Event { ts_ns, cpu, kind }
}
fn sw(ts: u64, cpu: u32, prev: u32, runnable: bool, next: u32) -> Event {
    ev(
        ts,
        cpu,
        Kind::Switch {
            prev_pid: prev,
            prev_runnable: runnable,
            next_pid: next,
        },
    )
}
fn mig(ts: u64, pid: u32, from: u32, to: u32) -> Event {
    ev(
        ts,
        to,
        Kind::Migrate {
            pid,
            orig_cpu: from,
            dest_cpu: to,
        },
    )
}
fn pids(p: &[u32]) -> BTreeSet<u32> {
    p.iter().copied().collect()
}

/// 4 nodes x 1 core x 2 SMT threads (node N = CPUs 2N, 2N+1).
#[test]
fn smt_fixture_every_cause_and_residency() {
    let t = fixture("4node-smt");
    let e = vec![
        sw(0, 5, 200, true, 201), // another task: ignored
        sw(100, 0, 100, true, 0), // running since the window opened, preempted
        mig(120, 100, 0, 1),      // runnable: load balance, SMT sibling
        sw(150, 1, 0, false, 100),
        sw(300, 1, 100, false, 0), // goes to sleep
        mig(320, 100, 1, 4),       // woken on node 2: cross-node, from mem node 0
        mig(330, 200, 4, 6),       // not traced
        sw(350, 4, 0, false, 100),
        ev(
            500,
            4,
            Kind::MoveNuma {
                pid: 100,
                src_cpu: 4,
                src_nid: 2,
                dst_cpu: 0,
                dst_nid: 0,
            },
        ),
        sw(510, 4, 100, true, 0), // the stopper preempts it
        mig(511, 100, 4, 0),      // NUMA balancing's move, back to mem node
        sw(512, 0, 0, false, 100),
        mig(600, 100, 0, 0), // same CPU: an event, not a move
        ev(
            700,
            0,
            Kind::StickNuma {
                pid: 100,
                src_cpu: 0,
                src_nid: 0,
                dst_cpu: -1,
                dst_nid: 1,
            },
        ),
    ];
    let w = Window {
        start_ns: 0,
        end_ns: 1000,
    };
    let r = analyze(&t, &e, &pids(&[100]), false, w, &|_| Some(0));
    assert_eq!(r.len(), 1);
    let x = &r[0];
    assert_eq!(x.migrate_events, 4);
    let m = &x.migrations;
    assert_eq!(
        (m.total, m.same_core, m.same_llc, m.same_node, m.cross_node),
        (3, 1, 0, 0, 2)
    );
    assert_eq!((m.to_mem_node, m.from_mem_node), (1, 1));
    assert_eq!(m.cross_by_distance, BTreeMap::from([(20, 2)]));
    assert_eq!(
        x.causes,
        Causes {
            numa_balancing: 1,
            wakeup: 1,
            load_balance: 1,
            unknown: 0
        }
    );
    assert_eq!(
        x.cross_node_causes,
        Causes {
            numa_balancing: 1,
            wakeup: 1,
            ..Causes::default()
        }
    );
    assert_eq!(
        x.numa,
        NumaActivity {
            move_numa: 1,
            swap_numa: 0,
            stick_numa: 1
        }
    );
    // cpu0 0..100, cpu1 150..300, cpu4 350..510, cpu0 512..1000 (open at the end)
    let res = &x.residency;
    assert_eq!(res.total_ns, 100 + 150 + 160 + 488);
    assert_eq!(res.node_ns, BTreeMap::from([(0, 738), (2, 160)]));
    assert_eq!((res.start_node, res.most_node), (Some(0), Some(0)));
    let sum: f64 = res.node_pct.values().sum();
    assert!((sum - 100.0).abs() < 1e-9);
    assert_eq!(x.first_cpu, Some(0));
    assert_eq!(x.moves[2].cause, Cause::NumaBalancing);
    assert_eq!(x.moves[2].t_ns, 511);
}

/// DL980 distances (10/12/17/19), NUMA swaps between two traced tasks, and
/// a NUMA decision whose move never came (expired, so the later move is
/// the load balancer's).
#[test]
fn dl980_fixture_distances_and_swaps() {
    let t = fixture("8node-dl980");
    let swap = ev(
        1_000,
        2,
        Kind::SwapNuma {
            src_pid: 10,
            src_cpu: 2,
            src_nid: 2,
            dst_pid: 20,
            dst_cpu: 5,
            dst_nid: 5,
        },
    );
    let e = vec![
        sw(0, 2, 0, false, 10),
        sw(0, 5, 0, false, 20),
        swap,
        sw(1_100, 2, 10, true, 0),
        sw(1_100, 5, 20, true, 0),
        mig(1_200, 10, 2, 5), // distance 19
        mig(1_201, 20, 5, 2),
        sw(1_300, 5, 0, false, 10),
        sw(1_300, 2, 0, false, 20),
        ev(
            2_000,
            5,
            Kind::MoveNuma {
                pid: 10,
                src_cpu: 5,
                src_nid: 5,
                dst_cpu: 4,
                dst_nid: 4,
            },
        ),
        sw(2_100, 5, 10, true, 0),
        mig(2_000 + NUMA_MATCH_NS + 1, 10, 5, 4), // too late: load balance, distance 12
        mig(2_000 + NUMA_MATCH_NS + 2, 20, 2, 3), // running: load balance, distance 12
    ];
    let w = Window {
        start_ns: 0,
        end_ns: 2_000 + NUMA_MATCH_NS + 10,
    };
    let r = analyze(&t, &e, &pids(&[10, 20]), false, w, &|p| {
        Some(if p == 10 { 2 } else { 5 })
    });
    let (a, b) = (&r[0], &r[1]);
    assert_eq!((a.pid, b.pid), (10, 20));
    assert_eq!(a.numa.swap_numa, 1);
    assert_eq!(b.numa.swap_numa, 1);
    assert_eq!(a.causes.numa_balancing, 1);
    assert_eq!(a.causes.load_balance, 1);
    assert_eq!(b.causes.numa_balancing, 1);
    assert_eq!(b.causes.load_balance, 1);
    assert_eq!(
        a.migrations.cross_by_distance,
        BTreeMap::from([(12, 1), (19, 1)])
    );
    assert_eq!(
        b.migrations.cross_by_distance,
        BTreeMap::from([(12, 1), (19, 1)])
    );
    // Task 10's memory is on node 2: the swap took it away from it.
    assert_eq!(
        (a.migrations.from_mem_node, a.migrations.to_mem_node),
        (1, 0)
    );
    assert_eq!(
        (b.migrations.from_mem_node, b.migrations.to_mem_node),
        (1, 0)
    );
    assert_eq!(a.residency.node_ns[&2], 1_100);
    assert_eq!(a.residency.node_ns[&5], 2_100 - 1_300);
    assert_eq!(a.residency.most_node, Some(2));
}

/// EPYC preset: two LLCs per node. Forked children are followed; the
/// first move of a task with no switch seen yet has an unknown cause.
#[test]
fn epyc_preset_llc_levels_and_forks() {
    let t = presets::find("epyc-7551-8n").unwrap().topology();
    let e = vec![
        mig(10, 1, 0, 1), // unknown: nothing seen of task 1 yet
        sw(20, 1, 0, false, 1),
        ev(
            30,
            1,
            Kind::Fork {
                parent_pid: 1,
                child_pid: 2,
            },
        ),
        mig(40, 2, 1, 4), // the child's wake-up placement: same node, other CCX
        sw(50, 4, 0, false, 2),
        sw(90, 4, 2, false, 0),
        ev(95, 4, Kind::Exit { pid: 2 }),
        ev(
            96,
            1,
            Kind::Fork {
                parent_pid: 99,
                child_pid: 3,
            },
        ), // not ours
        mig(97, 3, 0, 1),
    ];
    let w = Window::of(&e);
    let follow = analyze(&t, &e, &pids(&[1]), true, w, &|_| None);
    assert_eq!(follow.iter().map(|x| x.pid).collect::<Vec<_>>(), vec![1, 2]);
    let (p, c) = (&follow[0], &follow[1]);
    assert_eq!((p.migrations.same_llc, p.causes.unknown), (1, 1));
    assert_eq!((c.parent, c.exited), (Some(1), true));
    assert_eq!((c.migrations.same_node, c.causes.wakeup), (1, 1));
    assert_eq!(c.residency.total_ns, 40);
    // Task 1 runs from 20 to the window's end at 97.
    assert_eq!(p.residency.total_ns, 77);
    assert_eq!(p.residency.on_mem_node_pct, None);
    let alone = analyze(&t, &e, &pids(&[1]), false, w, &|_| None);
    assert_eq!(alone.len(), 1);
}

/// Only events inside the window count; a task never switched in or out
/// has no residency and no start node.
#[test]
fn window_clips_events() {
    let t = fixture("2node");
    let e = vec![mig(5, 7, 0, 2), sw(8, 2, 0, false, 7), mig(50, 7, 2, 0)];
    let w = Window {
        start_ns: 10,
        end_ns: 40,
    };
    let r = analyze(&t, &e, &pids(&[7, 8]), false, w, &|_| Some(1));
    assert_eq!(r[0].migrate_events, 0);
    assert_eq!(r[0].residency.total_ns, 0);
    assert_eq!(r[1].residency.start_node, None);
}

/// A migration recorded on `on` (the CPU whose code moved the task).
fn mig_on(ts: u64, on: u32, pid: u32, from: u32, to: u32) -> Event {
    let mut e = mig(ts, pid, from, to);
    e.cpu = on;
    e
}

/// Each kind of balancing, told apart by where the move was recorded and
/// what the destination switched from (4node-smt: node N = CPUs 2N, 2N+1).
#[test]
fn load_balancing_moves_by_kind() {
    let t = fixture("4node-smt");
    const MS: u64 = 1_000_000;
    let p = 100;
    let e = vec![
        sw(0, 0, 0, false, p),
        // Preempted by CPU 0's worker (300), then pulled by CPU 2, idle,
        // balanced by CPU 5 for it (nohz): cross-node, idle.
        sw(MS, 0, p, true, 300),
        mig_on(2 * MS, 5, p, 0, 2),
        sw(2 * MS + 10, 2, 0, false, p),
        // Pushed while running, by CPU 2's stopper: same node, pushed.
        mig_on(3 * MS, 2, p, 2, 3),
        sw(3 * MS + 10, 3, 0, false, p),
        // Preempted; CPU 4's worker (301) goes to sleep and pulls it in
        // the same schedule(): cross-node, newly idle.
        sw(4 * MS, 3, p, true, 302),
        mig_on(5 * MS, 4, p, 3, 4),
        sw(5 * MS + 200_000, 4, 301, false, p),
        // Preempted; CPU 6 pulls it from its tick while running 303, which
        // it preempts: cross-node, busy.
        sw(6 * MS, 4, p, true, 304),
        mig_on(7 * MS, 6, p, 4, 6),
        sw(7 * MS + 10, 6, 303, true, p),
        // Pulled by CPU 7 from its tick, run when 305 slept 3 ms later:
        // busy too.
        sw(8 * MS, 6, p, true, 303),
        mig_on(9 * MS, 7, p, 6, 7),
        sw(12 * MS, 7, 305, false, p),
        // Pulled to CPU 1, pulled on to CPU 0 before it ran there: the
        // first is unknown (cross-node), the second idle (same core).
        sw(13 * MS, 7, p, true, 305),
        mig_on(14 * MS, 1, p, 7, 1),
        mig_on(15 * MS, 0, p, 1, 0),
        sw(15 * MS + 10, 0, 0, false, p),
        // Goes to sleep and is woken elsewhere: a wake-up, no kind.
        sw(16 * MS, 0, p, false, 0),
        mig_on(17 * MS, 4, p, 0, 2),
        sw(17 * MS + 10, 2, 0, false, p),
        // Pulled again, and the window closes before it runs: unknown.
        sw(18 * MS, 2, p, true, 306),
        mig_on(19 * MS, 3, p, 2, 3),
    ];
    let r = analyze(&t, &e, &pids(&[p]), false, Window::of(&e), &|_| Some(0));
    let x = &r[0];
    assert_eq!(x.causes.load_balance, 8);
    assert_eq!(x.causes.wakeup, 1);
    let all = x.balancing.unwrap();
    assert_eq!(
        all,
        BalanceKinds {
            busy: 2,
            idle: 2,
            newly_idle: 1,
            pushed: 1,
            unknown: 2,
        }
    );
    assert_eq!(all.total(), x.causes.load_balance);
    assert_eq!(
        x.cross_node_balancing.unwrap(),
        BalanceKinds {
            busy: 1,
            idle: 1,
            newly_idle: 1,
            pushed: 0,
            unknown: 1,
        }
    );
    // The switch-in 3 ms after the pull is not the pull's schedule().
    const { assert!(3 * MS > NEWIDLE_SWITCH_NS) };
}

/// The edges of the kinds: a switch-in elsewhere than the pull's CPU (its
/// events lost), a cross-node push, a NUMA balancing move the source's
/// stopper made (no kind), and the newly-idle gap's bound, both sides.
#[test]
fn load_balancing_kinds_at_their_edges() {
    let t = fixture("4node-smt");
    let p = 100;
    let mv_numa = |ts: u64, from: u32, to: u32| {
        ev(
            ts,
            from,
            Kind::MoveNuma {
                pid: p,
                src_cpu: from as i32,
                src_nid: (from / 2) as i32,
                dst_cpu: to as i32,
                dst_nid: (to / 2) as i32,
            },
        )
    };
    let n = NEWIDLE_SWITCH_NS;
    let e = vec![
        sw(0, 0, 0, false, p),
        // Pulled to CPU 2, but runs next on CPU 3: unknown (cross-node).
        sw(10, 0, p, true, 300),
        mig_on(20, 2, p, 0, 2),
        sw(30, 3, 0, false, p),
        // Pushed across nodes by CPU 3's stopper.
        mig_on(40, 3, p, 3, 4),
        sw(50, 4, 0, false, p),
        // NUMA balancing, carried out by CPU 4's stopper: its own cause.
        mv_numa(60, 4, 6),
        mig_on(70, 4, p, 4, 6),
        sw(80, 6, 0, false, p),
        // Switched in exactly NEWIDLE_SWITCH_NS after the pull: newly idle.
        sw(100, 6, p, true, 301),
        mig_on(1_000, 7, p, 6, 7),
        sw(1_000 + n, 7, 302, false, p),
        // One nanosecond later: busy.
        sw(2 * n, 7, p, true, 302),
        mig_on(3 * n, 0, p, 7, 0),
        sw(4 * n + 1, 0, 303, false, p),
    ];
    let r = analyze(&t, &e, &pids(&[p]), false, Window::of(&e), &|_| Some(0));
    let x = &r[0];
    assert_eq!((x.causes.load_balance, x.causes.numa_balancing), (4, 1));
    assert_eq!(
        x.balancing.unwrap(),
        BalanceKinds {
            busy: 1,
            idle: 0,
            newly_idle: 1,
            pushed: 1,
            unknown: 1,
        }
    );
    // Cross-node: 0->2 (unknown), 3->4 (pushed), 7->0 (busy); 6->7 is
    // within node 3.
    assert_eq!(
        x.cross_node_balancing.unwrap(),
        BalanceKinds {
            busy: 1,
            pushed: 1,
            unknown: 1,
            ..Default::default()
        }
    );
}

#[test]
fn over_time_spans_the_tasks_life_not_the_window() {
    // 2node: CPUs 0-1 on node 0, 2-3 on node 1. Task 7 first runs at 100,
    // crosses to node 1 at 150 and back at 350, and exits at 500;
    // the window runs 0-1000. Its life is 100-500: four hundred ns, each
    // tenth forty.
    let t = fixture("2node");
    let e = vec![
        sw(100, 0, 0, false, 7),
        mig(150, 7, 0, 2),
        mig(350, 7, 2, 1),
        ev(500, 1, Kind::Exit { pid: 7 }),
    ];
    let w = Window {
        start_ns: 0,
        end_ns: 1000,
    };
    let r = analyze(&t, &e, &pids(&[7]), false, w, &|_| Some(0));
    let o = r[0].over_time.as_ref().unwrap();
    assert_eq!(o.span_ns, 400);
    assert_eq!(o.cross_node, [0, 1, 0, 0, 0, 0, 1, 0, 0, 0]);
    let on = o.on_mem_node_pct.unwrap();
    assert_eq!(on[0], 100.0);
    assert_eq!(on[1], 25.0, "left node 0 at 150: 10 of 40 ns");
    assert_eq!(on[6], 75.0, "back at 350: 30 of 40 ns");
    assert_eq!(on[9], 100.0);
    // Never seen on a CPU: nothing over time.
    let r = analyze(&t, &e, &pids(&[9]), false, w, &|_| Some(0));
    assert!(r[0].over_time.is_none());
}

/// Regression (the lab's "busy" pulls, #28): an idle CPU pulls the task,
/// a task woken there runs first, and only then the pulled one. By its
/// switch-in alone that read as a busy pull; a trace that follows the CPUs
/// in and out of idle knows the CPU was idle at the pull. A CPU running a
/// task at the pull is still a busy one, and a trace filtered to the
/// traced pids alone keeps the switch-in's reading.
#[test]
fn an_idle_cpu_that_ran_a_woken_task_first_pulled_as_idle() {
    let t = fixture("2node");
    let p = 100;
    let w = 500; // another task: the worker of CPUs 2 and 3
    let e = vec![
        sw(0, 0, 0, false, p),
        sw(10, 0, p, true, 300),
        sw(20, 2, w, false, 0), // CPU 2 goes idle
        mig(30, p, 0, 2),       // pulled to idle CPU 2 (recorded there)
        sw(40, 2, 0, false, w), // its worker wakes and runs first
        sw(50, 2, w, true, p),  // then the task: by the switch-in, busy
        sw(60, 2, p, true, 301),
        mig(70, p, 2, 3), // CPU 3 runs 302 at the pull: busy
        sw(5_000_000, 3, 302, true, p),
    ];
    let kinds = |e: &[Event]| {
        analyze(&t, e, &pids(&[p]), false, Window::of(e), &|_| Some(0))[0]
            .balancing
            .unwrap()
    };
    let mut with_cpu3 = e.clone();
    with_cpu3.insert(0, sw(0, 3, 0, false, 302));
    assert_eq!(
        kinds(&with_cpu3),
        BalanceKinds {
            idle: 1,
            busy: 1,
            ..Default::default()
        }
    );
    // Filtered to the traced pid: no switch of other tasks to or from idle.
    let own: Vec<Event> = with_cpu3
        .iter()
        .filter(|x| match x.kind {
            Kind::Switch {
                prev_pid, next_pid, ..
            } => prev_pid == p || next_pid == p,
            _ => true,
        })
        .cloned()
        .collect();
    assert_eq!(
        kinds(&own),
        BalanceKinds {
            busy: 2,
            ..Default::default()
        }
    );
}
