//! The cost gate of sched_balance_newidle(): a CPU going idle balances a
//! domain only while its `avg_idle` is at least the domain's
//! `max_newidle_lb_cost` (plus what the walk has cost so far), so that
//! balancing does not delay the CPU's next wake-up.
//!
//! `avg_idle` is kept as the kernel keeps it: idle_stamp is set when
//! sched_balance_newidle() starts (whether or not it balances), a
//! wake-up onto the CPU (ttwu_do_activate()) folds the time since then
//! into the average with a weight of 1/8 (update_avg()) and caps it at
//! twice `max_idle_balance_cost`, and a newly-idle pull clears the stamp.
//!
//! The costs are the profile's ([`KernelCosts::newidle_cost_ms_per_cpu`]).
//! On hardware an attempt costs microseconds against idle periods of
//! milliseconds: the hardware profiles give none and the gate is always
//! open. Under the lab's single-threaded TCG an attempt costs milliseconds
//! (the guest's clock runs on while the emulator's one thread serves the
//! other vCPUs) and the gate is shut much of the time. There the model
//! draws each domain's `max_newidle_lb_cost` per sample from the
//! distribution `bench/lab_newidle_cost.sh` measured, scaled by the
//! machine's CPUs, instead of tracking the emulator's cost of each
//! attempt: the attempt itself is taken as free (a cheap attempt costs
//! about 0.2 ms under TCG, the long ones are the emulator's), and the
//! kernel's `max_idle_balance_cost` as the sum of the domains' costs,
//! floored at migration_cost, as sched_balance_domains() resets it.
//!
//! [`KernelCosts::newidle_cost_ms_per_cpu`]: super::profile::KernelCosts::newidle_cost_ms_per_cpu

use super::machine::Machine;
use super::profile::Profile;
use super::rng::{hash3, quantile};

/// Each CPU's `avg_idle` and idle stamp, and each domain's cost.
#[derive(Debug, Clone)]
pub struct NewIdleGate {
    /// `rq->avg_idle`, ns.
    pub avg_idle: Vec<f64>,
    /// `rq->idle_stamp`, ns; NaN when not set.
    stamp: Vec<f64>,
    /// Twice `rq->max_idle_balance_cost`, ns: the cap on avg_idle.
    cap: Vec<f64>,
    /// `max_newidle_lb_cost` per (CPU, level), ns.
    pub cost: Vec<Vec<f64>>,
}

impl NewIdleGate {
    /// The gate of machine `m` under profile `p` for the sample of `seed`.
    /// `idle_gap_ns` is how long the load leaves each CPU idle in a period
    /// (infinite with no load): avg_idle starts where the load alone keeps
    /// it, as the lab's load has run for a while before a probe starts.
    pub fn new(
        m: &Machine,
        p: &Profile,
        migration_cost_ns: f64,
        idle_gap_ns: f64,
        seed: u64,
    ) -> Self {
        let q = &p.kernel.newidle_cost_ms_per_cpu;
        let scale = 1e6 * m.len() as f64;
        let cost: Vec<Vec<f64>> = (0..m.len())
            .map(|c| {
                (0..m.cpu_domains[c].len())
                    .map(|l| match q.len() {
                        0 => 0.0,
                        // A stream of its own: the engine's draws stay
                        // as they are.
                        _ => {
                            scale * quantile(q, hash3(seed ^ 0x6e69_6761_7465, c as u64, l as u64))
                        }
                    })
                    .collect()
            })
            .collect();
        let cap: Vec<f64> = cost
            .iter()
            .map(|levels| 2.0 * levels.iter().sum::<f64>().max(migration_cost_ns.max(0.0)))
            .collect();
        NewIdleGate {
            avg_idle: cap.iter().map(|&c| idle_gap_ns.min(c)).collect(),
            stamp: vec![f64::NAN; m.len()],
            cap,
            cost,
        }
    }

    /// CPU `c` enters sched_balance_newidle() at `t`.
    pub fn went_idle(&mut self, c: usize, t: f64) {
        self.stamp[c] = t;
    }

    /// A task is woken onto CPU `c` at `t` (ttwu_do_activate()).
    pub fn woken(&mut self, c: usize, t: f64) {
        let s = self.stamp[c];
        if s.is_nan() {
            return;
        }
        // update_avg(): avg += (sample - avg) / 8, in integer ns there.
        let a = &mut self.avg_idle[c];
        *a += (t - s - *a) / 8.0;
        *a = a.min(self.cap[c]);
        self.stamp[c] = f64::NAN;
    }

    /// CPU `c`'s newly-idle balance pulled a task: it did not go idle.
    pub fn pulled(&mut self, c: usize) {
        self.stamp[c] = f64::NAN;
    }

    /// Whether CPU `c` may balance its domain at `level` now (the walk's
    /// own cost taken as nil).
    pub fn open(&self, c: usize, level: usize) -> bool {
        self.avg_idle[c] >= self.cost[c][level]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::presets;

    fn machine(preset: &str) -> Machine {
        Machine::new(&presets::find(preset).unwrap().topology()).unwrap()
    }

    fn lab(costs: Vec<f64>) -> Profile {
        let mut p = Profile::load("lab-tcg").unwrap();
        p.kernel.newidle_cost_ms_per_cpu = costs;
        p
    }

    #[test]
    fn avg_idle_folds_in_each_idle_period_an_eighth_at_a_time_up_to_twice_the_domains_cost() {
        let m = machine("xeon-8167m-2n");
        // Every domain costs 0.01 ms per CPU.
        let p = lab(vec![0.01]);
        let one = 0.01e6 * m.len() as f64;
        let levels = m.cpu_domains[0].len() as f64;
        let cap = 2.0 * levels * one;
        let mut g = NewIdleGate::new(&m, &p, 500e3, 8e6, 1);
        assert!(g.cost[0].iter().all(|&c| (c - one).abs() < 1.0));
        assert_eq!(
            g.avg_idle[0],
            8e6f64.min(cap),
            "starts where the load keeps it"
        );
        g.avg_idle[0] = 1e6;
        g.went_idle(0, 10e6);
        g.woken(0, 13e6);
        assert_eq!(g.avg_idle[0], 1e6 + (3e6 - 1e6) / 8.0);
        // Woken again without going idle: nothing to fold in.
        g.woken(0, 20e6);
        assert_eq!(g.avg_idle[0], 1.25e6);
        // A pull means it never went idle: the stamp is dropped.
        g.went_idle(0, 30e6);
        g.pulled(0);
        g.woken(0, 90e6);
        assert_eq!(g.avg_idle[0], 1.25e6);
        // A long sleep: capped at twice max_idle_balance_cost.
        g.went_idle(0, 100e6);
        g.woken(0, 10e9);
        assert!((g.avg_idle[0] - cap).abs() < 1.0);
        // The gate: open at or above a domain's cost.
        g.avg_idle[0] = one - 1.0;
        assert!(!g.open(0, 0));
        g.avg_idle[0] = one;
        assert!(g.open(0, 0));
    }

    #[test]
    fn without_costs_the_gate_never_shuts_and_with_them_each_domain_draws_its_own() {
        let m = machine("xeon-8167m-2n");
        let hw = Profile::load("xeon-8167m").unwrap();
        assert!(hw.kernel.newidle_cost_ms_per_cpu.is_empty());
        let mut g = NewIdleGate::new(&m, &hw, 500e3, f64::INFINITY, 1);
        // migration_cost floors max_idle_balance_cost: no load, the cap.
        assert_eq!(g.avg_idle[3], 1e6);
        g.avg_idle[3] = 0.0;
        assert!((0..m.cpu_domains[3].len()).all(|l| g.open(3, l)));
        let p = lab(vec![0.0, 1.0]);
        let a = NewIdleGate::new(&m, &p, 500e3, 8e6, 1);
        let b = NewIdleGate::new(&m, &p, 500e3, 8e6, 1);
        let c = NewIdleGate::new(&m, &p, 500e3, 8e6, 2);
        assert_eq!(a.cost, b.cost, "a seed decides the draw");
        assert_ne!(a.cost, c.cost);
        let all: Vec<f64> = a.cost.iter().flatten().copied().collect();
        let top = 1e6 * m.len() as f64;
        assert!(all.iter().all(|&x| (0.0..top).contains(&x)));
        let below_half = all.iter().filter(|&&x| x < top / 2.0).count() as f64;
        let share = below_half / all.len() as f64;
        assert!((0.35..0.65).contains(&share), "uniform draw: {share}");
    }
}
