//! NUMA balancing's scans for the one-probe engine: task_numa_work() at
//! each scan, the cost of the faults and page migrations, and
//! task_numa_migrate() toward the preferred node through
//! [`numa_move`], which needs a view of the machine as the kernel reads it
//! (the workers busy now, the probe on its CPU).

use super::engine::{Cause, Engine};
use super::numa_move;

impl Engine<'_> {
    /// A scan of the probe's address space (task_numa_work()) and what
    /// its faults lead to.
    pub(super) fn numa_scan(&mut self) {
        let node = self.m.node[self.cur];
        let out = self.numa.scan(self.t, node);
        let cost = self.p.scan_cost_ns(&out, self.numa.base_per_page);
        if out.migrated > 0 {
            self.recompute_access();
        }
        self.charge_ns(cost);
        if let Some(target) = out.migrate_to {
            let Some(choice) = numa_move::migrate(&ProbeView(self), self.m, self.cur, target)
            else {
                return;
            };
            match choice {
                numa_move::Choice::Move(to) => self.move_to(to, Cause::NumaBalancing),
                // The workers are pinned: never a swap partner.
                numa_move::Choice::Swap(..) | numa_move::Choice::Stick => self.res.stick_numa += 1,
            }
        }
    }
}

/// The probe's machine as task_numa_migrate() reads it: the workers busy
/// now, the probe on its CPU.
struct ProbeView<'e, 'a>(&'e Engine<'a>);

impl numa_move::NumaView for ProbeView<'_, '_> {
    fn nodes(&self) -> usize {
        self.0.m.node_cpus.len()
    }

    fn node_cpus(&self, node: usize) -> &[usize] {
        &self.0.m.node_cpus[node]
    }

    fn node_stats(&self, node: usize) -> numa_move::NodeStats {
        let e = self.0;
        let cpus = &e.m.node_cpus[node];
        let probes = (e.m.node[e.cur] == node) as usize;
        let busy = cpus.iter().filter(|&&c| e.busy(c, e.t)).count();
        let duty = e.load.busy_ns / e.load.period_ns;
        numa_move::NodeStats::long_run(cpus.len(), busy + probes, duty, probes, probes)
    }

    fn allowed(&self, cpu: usize) -> bool {
        self.0.allowed[cpu]
    }

    fn idle(&self, cpu: usize) -> bool {
        cpu != self.0.cur && !self.0.busy(cpu, self.0.t)
    }

    fn core_idle(&self, cpu: usize) -> bool {
        self.0.m.siblings[cpu].iter().all(|&s| self.idle(s))
    }

    fn curr(&self, cpu: usize, _src: usize, _dst: usize) -> numa_move::Curr {
        if self.idle(cpu) {
            numa_move::Curr::Idle
        } else {
            numa_move::Curr::Fixed
        }
    }

    fn weight(&self, node: usize) -> i64 {
        self.0.numa.weight(node)
    }
}
