//! task_numa_migrate() for the engine: [`numa_move`] reads the
//! machine through a view of the runqueues as they are now (a CPU's
//! running entity, what is queued on each node), so a job moves to an idle
//! CPU of its preferred node only where that keeps the nodes balanced,
//! swaps with a job running there (only on a busy node, and only for a
//! real gain), tries the other nodes when neither works, or sticks.

use super::multi::{Ent, Multi};
use super::numa_move::{self, Choice, Curr, NodeStats, NumaView, SwapCandidate};
use super::sample::Cause;

/// NUMA balancing wants job `i` on node `target`.
pub fn numa_migrate(e: &mut Multi, i: usize, target: usize) {
    let src_cpu = e.tasks[i].cpu;
    let Some(choice) = numa_move::migrate(&JobView { e, i }, e.m, src_cpu, target) else {
        return;
    };
    match choice {
        Choice::Move(to) => e.move_task(i, to, Cause::NumaBalancing),
        Choice::Swap(c, j) => {
            e.move_task(i, c, Cause::NumaBalancing);
            e.move_task(j, src_cpu, Cause::NumaBalancing);
            e.tasks[i].res.swap_numa += 1;
        }
        Choice::Stick => e.tasks[i].res.stick_numa += 1,
    }
}

/// The machine as job `i`'s task_numa_migrate() reads it.
struct JobView<'e, 'a> {
    e: &'e Multi<'a>,
    i: usize,
}

impl NumaView for JobView<'_, '_> {
    fn nodes(&self) -> usize {
        self.e.m.node_cpus.len()
    }

    fn node_cpus(&self, node: usize) -> &[usize] {
        &self.e.m.node_cpus[node]
    }

    fn node_stats(&self, node: usize) -> NodeStats {
        let e = self.e;
        let cpus = &e.m.node_cpus[node];
        let nr_running = cpus.iter().map(|&c| e.rqs[c].nr_running()).sum();
        let probes: usize = cpus.iter().map(|&c| e.rqs[c].probes).sum();
        let probe_cpus = cpus.iter().filter(|&&c| e.rqs[c].probes > 0).count();
        let duty = e.duty;
        NodeStats::long_run(cpus.len(), nr_running, duty, probe_cpus, probes)
    }

    fn allowed(&self, cpu: usize) -> bool {
        self.e.tasks[self.i].allowed[cpu]
    }

    fn idle(&self, cpu: usize) -> bool {
        self.e.rqs[cpu].nr_running() == 0
    }

    fn core_idle(&self, cpu: usize) -> bool {
        self.e.m.siblings[cpu].iter().all(|&s| self.idle(s))
    }

    fn curr(&self, cpu: usize, src: usize, dst: usize) -> Curr {
        let e = self.e;
        match e.rqs[cpu].curr {
            None => Curr::Idle,
            Some(Ent::Worker) => Curr::Fixed,
            Some(Ent::Task(j)) if j == self.i => Curr::Fixed,
            Some(Ent::Task(j)) => {
                let t = &e.tasks[j];
                if !t.allowed[e.tasks[self.i].cpu] {
                    return Curr::Fixed;
                }
                Curr::Task(
                    j,
                    SwapCandidate {
                        weight_src: t.numa.weight(src),
                        weight_dst: t.numa.weight(dst),
                        prefers_src: t.numa.preferred == Some(src),
                        prefers_dst: t.numa.preferred == Some(dst),
                    },
                )
            }
        }
    }

    fn weight(&self, node: usize) -> i64 {
        self.e.tasks[self.i].numa.weight(node)
    }
}
