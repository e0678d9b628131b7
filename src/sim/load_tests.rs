//! Tests of the load model ([`super`]): the planned load's transitions,
//! and a reshaped load's against its draws, at the start of a sample and an
//! hour into one.

use super::*;
use crate::topology::presets;

fn machine() -> Machine {
    Machine::new(&presets::find("xeon-8167m-2n").unwrap().topology()).unwrap()
}

#[test]
fn transitions_come_in_time_order_and_each_flips_its_worker() {
    let m = machine();
    for phases in [LoadPhases::Staggered, LoadPhases::Random] {
        let l = LoadModel::shaped(&m, 60.0, 20_618_000.0, phases, 3);
        let start = 3_000_000.0;
        let mut tr = Transitions::new(&l, start);
        let mut t = start;
        let mut seen = vec![0; m.len()];
        // Two periods: every worker wakes and sleeps twice.
        while let Some((at, c)) = tr.peek() {
            if at > start + 2.0 * l.period_ns {
                break;
            }
            assert!(at > t - EPS, "{at} after {t}");
            assert_ne!(l.busy(c, at - 1.0), l.busy(c, at + 1.0), "CPU {c} at {at}");
            if l.busy(c, at + 1.0) {
                assert!((l.last_busy_start(c, at + 1.0) - at).abs() < 1e-3);
            }
            seen[c] += 1;
            t = at;
            // The planned transition says which way it flips.
            assert_eq!(tr.pop(), Some(l.busy(c, at + 1.0)), "CPU {c} at {at}");
        }
        assert!(seen.iter().all(|&k| k == 4), "{seen:?}");
    }
    // No duty cycle, no transitions.
    for pct in [0.0, 100.0] {
        let l = LoadModel::new(&m, pct, 20_618_000.0);
        assert_eq!(Transitions::new(&l, 0.0).peek(), None);
    }
}

/// A lab-like reshaping: stops 0-8 ms late (a third past the 8.25 ms
/// idle part), wake-ups 0-4 ms late.
fn reshape() -> Reshape {
    Reshape {
        stop_late_ns: vec![0.0, 2e6, 4e6, 9e6, 12e6],
        wake_late_ns: vec![0.0, 1e6, 2e6, 3e6, 4e6],
        seed: 0,
    }
}

/// Regression: read a nanosecond's millionth past the transition's
/// time, the state after a transition an hour into a sample was the
/// one before it (below the time's precision), and the engine missed
/// one busy part in ten.
#[test]
fn a_reshaped_load_flips_at_each_transition_and_keeps_its_drawn_busy_share() {
    let m = machine();
    let base = LoadModel::new(&m, 60.0, 20_618_000.0).reshaped(Some(reshape()));
    let l = base.for_sample(7);
    for start in [3_000_000.0, 3.6e12] {
        let periods = 200.0;
        let end = start + periods * l.period_ns;
        let mut tr = Transitions::new(&l, start);
        let mut t = start;
        let mut busy_ns = vec![0.0; m.len()];
        let mut state: Vec<bool> = (0..m.len()).map(|c| l.busy_after(c, start)).collect();
        let mut since = vec![start; m.len()];
        let mut idle_parts = 0;
        let mut flips = vec![Vec::new(); m.len()];
        while let Some((at, c)) = tr.peek() {
            if at > end {
                break;
            }
            assert!(at > t - EPS, "{at} after {t}");
            let now = l.busy_after(c, at);
            assert_ne!(l.busy(c, at - 1e3), now, "CPU {c} at {at}");
            assert_ne!(state[c], now, "CPU {c} at {at}: no flip");
            if state[c] {
                busy_ns[c] += at - since[c];
            } else {
                // Woken: its busy part began here.
                assert!(
                    (l.last_busy_start(c, at + 1e3) - at).abs() < 1.0,
                    "CPU {c} at {at}"
                );
            }
            idle_parts += state[c] as usize;
            state[c] = now;
            since[c] = at;
            flips[c].push(at);
            t = at;
            tr.pop();
        }
        for c in 0..m.len() {
            busy_ns[c] += if state[c] { end - since[c] } else { 0.0 };
        }
        // The flips are where a scan of the state in 10 us steps sees
        // it change, over the first 20 periods of three CPUs.
        for c in [0, 17, 55] {
            let mut x = start + 5e3;
            let mut prev = l.busy(c, x);
            let mut seen = Vec::new();
            while x < start + 20.0 * l.period_ns {
                x += 1e4;
                let now = l.busy(c, x);
                if now != prev {
                    seen.push(x);
                }
                prev = now;
            }
            let heap: Vec<f64> = flips[c]
                .iter()
                .copied()
                .filter(|&f| f < seen.last().copied().unwrap_or(0.0) + 1e4)
                .collect();
            assert_eq!(heap.len(), seen.len(), "CPU {c} from {start}");
            assert!(
                heap.iter().zip(&seen).all(|(a, b)| (a - b).abs() <= 1e4),
                "CPU {c}"
            );
        }
        let share = busy_ns.iter().sum::<f64>() / (m.len() as f64 * (end - start));
        // Later and fewer idle parts than the plan's 0.60 and one a period.
        assert!(
            (share - l.busy_share()).abs() < 0.02,
            "{share} {} from {start}",
            l.busy_share()
        );
        assert!(share > 0.65, "{share}");
        let per_period = idle_parts as f64 / (m.len() as f64 * periods);
        assert!(
            (0.55..0.8).contains(&per_period),
            "{per_period} from {start}"
        );
    }
    // Another sample's draws differ; the same sample's do not.
    let other = base.for_sample(8);
    let differ = (0..m.len()).any(|c| {
        (0..50).any(|k| {
            let t = 3e6 + k as f64 * 1e6;
            l.busy(c, t) != other.busy(c, t)
        })
    });
    assert!(differ);
    assert_eq!(l.for_sample(7).busy(3, 5e7), l.busy(3, 5e7));
    // Unreshaped, as planned.
    let plan = LoadModel::new(&m, 60.0, 20_618_000.0).reshaped(None);
    assert_eq!(plan.busy_share(), 0.6);
    assert_eq!(plan.idle_gap_ns(), 20_618_000.0 * 0.4);
}

#[test]
fn a_stop_later_than_the_idle_part_leaves_no_idle_part_and_no_late_wake_up() {
    let m = machine();
    let late = |stop_ms: f64| Reshape {
        stop_late_ns: vec![stop_ms * 1e6],
        wake_late_ns: vec![3e6],
        seed: 1,
    };
    let p = 20_618_000.0;
    let l = LoadModel::new(&m, 60.0, p).reshaped(Some(late(1.0)));
    let c = 5;
    let s = l.phase[c] + 10.0 * p;
    // Wakes 3 ms into its period, stops 1 ms past the plan's end.
    assert!(!l.busy(c, s + 2.9e6) && l.busy(c, s + 3.1e6));
    assert!(l.busy(c, s + 0.6 * p + 0.9e6) && !l.busy(c, s + 0.6 * p + 1.1e6));
    assert!((l.idle_gap_ns() - (0.4 * p - 1e6 + 3e6)).abs() < 1.0);
    // Late past the idle part: busy throughout, every period.
    let l = LoadModel::new(&m, 60.0, p).reshaped(Some(late(9.0)));
    assert!((0..100).all(|i| l.busy(c, s + i as f64 * 0.37e6)));
    assert_eq!(l.busy_share(), 1.0);
    assert_eq!(l.idle_gap_ns(), f64::INFINITY);
    assert_eq!(Transitions::new(&l, s).peek(), None);
    // Woken past its busy part, a worker sleeps at once, however late
    // its stop would have been: the next period starts idle too.
    let past = Reshape {
        stop_late_ns: vec![20e6],
        wake_late_ns: vec![13e6],
        seed: 1,
    };
    let l = LoadModel::new(&m, 60.0, p).reshaped(Some(past));
    assert!((0..400).all(|i| !l.busy(c, s + i as f64 * 0.37e6)));
    assert_eq!(Transitions::new(&l, s).peek(), None);
    // A load that never sleeps has nothing to reshape.
    let full = LoadModel::new(&m, 100.0, p).reshaped(Some(late(1.0)));
    assert!(full.reshape.is_none());
}
