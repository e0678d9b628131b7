//! A probe's own progress in the engine: its speed on its CPU
//! (the cache model for where its pages are, its SMT sibling), phases,
//! cache refills after moves, first-touch placement, NUMA scans, exit,
//! and the runaway guard.
//! A child module of [`super`], so it shares the engine's private state.

use super::{Ent, Ev, Multi, Phase, MAX_EVENTS, RUNAWAY_MOVES_MIN, RUNAWAY_MOVES_PER_MS};

impl Multi<'_> {
    /// Why the run is not a result, if it is not: past its time limit,
    /// its event budget, or moving a job more often than any kernel can
    /// (each move is a scheduler decision on a tick or a wake-up; a model
    /// that ping-pongs a job at no cost grows its moves list until memory
    /// runs out: 24 GB in 8 minutes, ia64-4n with the CPU floating).
    pub(super) fn ran_away(&self) -> Option<String> {
        if self.t > self.limit_ns {
            return Some(format!(
                "the jobs not done after {:.0} s simulated, a hundred times their work at \
                 the slowest access",
                self.t / 1e9
            ));
        }
        if self.events > MAX_EVENTS {
            return Some(format!(
                "{} events without the jobs finishing ({:.3} s simulated)",
                self.events,
                self.t / 1e9
            ));
        }
        let most = self.tasks.iter().map(|t| t.res.moves.len()).max()? as f64;
        (most > RUNAWAY_MOVES_MIN && most > RUNAWAY_MOVES_PER_MS * self.t / 1e6).then(|| {
            format!(
                "{most} moves of one job in {:.3} ms simulated (a ping-pong no kernel makes)",
                self.t / 1e6
            )
        })
    }

    /// The task's progress per ns now.
    pub(super) fn speed(&self, i: usize) -> f64 {
        let task = &self.tasks[i];
        let smt = if self.m.siblings[task.cpu]
            .iter()
            .any(|&s| self.rqs[s].curr.is_some())
        {
            self.p.cpu.smt_share
        } else {
            1.0
        };
        match task.phase {
            Phase::WarmUp => self.p.kernel.touch_pages_per_us / 1000.0 * smt,
            Phase::Loop(_) => smt / task.access_ns[self.m.node[task.cpu]],
            Phase::Done => 0.0,
        }
    }

    pub(super) fn running(&self, i: usize) -> bool {
        self.rqs[self.tasks[i].cpu].curr == Some(Ent::Task(i))
    }

    /// Accounts a running task's progress up to now.
    pub(super) fn settle(&mut self, i: usize) {
        if !self.running(i) {
            return;
        }
        let v = self.speed(i);
        let t = self.t;
        let task = &mut self.tasks[i];
        let dt = (t - task.since).max(0.0);
        task.res.run_ns[task.cpu] += dt as u64;
        task.work_left -= v * dt;
        let warm_up = task.phase == Phase::WarmUp;
        let lines = crate::sim::cold::lines_per_unit(warm_up, self.spec.page_bytes);
        task.cold.advance(v * dt, lines);
        if let Phase::Loop(_) = task.phase {
            task.res.run_ns_loop[task.cpu] += dt as u64;
        }
        task.since = t;
        if task.phase == Phase::WarmUp {
            let done = task.buffer_pages as f64 - task.work_left.max(0.0);
            self.place_warm_pages(i, done);
        }
    }

    pub(super) fn schedule_done(&mut self, i: usize) {
        if !self.running(i) || !self.tasks[i].alive() {
            return;
        }
        let v = self.speed(i);
        self.tasks[i].gen += 1;
        let gen = self.tasks[i].gen;
        if v > 0.0 {
            let at = self.t + self.tasks[i].work_left.max(0.0) / v;
            self.push(at, Ev::Done(i, gen));
        }
    }

    /// Time task `i` owes (cache refill, faults), as work at its speed.
    pub(super) fn charge_ns(&mut self, i: usize, ns: f64) {
        let task = &mut self.tasks[i];
        let per = match task.phase {
            Phase::WarmUp => 1000.0 / self.p.kernel.touch_pages_per_us,
            Phase::Loop(_) => task.access_ns[self.m.node[task.cpu]],
            Phase::Done => return,
        };
        task.work_left += ns / per;
        task.cold.owe(ns / per);
    }

    /// Charges the misses task `i`'s cold caches have cost since last
    /// charged ([`crate::sim::cold`]), in its loop only. Returns the ns added.
    pub(super) fn pay_cold(&mut self, i: usize) -> f64 {
        let task = &mut self.tasks[i];
        if !matches!(task.phase, Phase::Loop(_)) {
            return 0.0;
        }
        let dram = task.dram_ns[self.m.node[task.cpu]];
        let add = task.cold.accrue(self.p, self.spec.buffer_bytes, dram);
        self.charge_ns(i, add);
        add
    }

    pub(super) fn recompute_access(&mut self, i: usize) {
        let task = &mut self.tasks[i];
        let per_node = task.numa.buffer_pages_per_node().to_vec();
        crate::sim::access_by_node(
            self.p,
            self.m,
            &per_node,
            self.spec.buffer_bytes,
            task.noise_factor,
            &mut task.dram_ns,
            &mut task.access_ns,
        );
    }

    pub(super) fn place_warm_pages(&mut self, i: usize, upto: f64) {
        let nodes = self.m.node_ids.len();
        let node_now = self.m.node[self.tasks[i].cpu];
        let task = &mut self.tasks[i];
        let from = task.warm_pages_done as usize;
        let to = (upto as usize).min(task.buffer_pages);
        let other = task.numa.other_pages;
        for k in from..to {
            let node = task.mem.first_touch(k, node_now);
            task.numa.place(other + k, node.min(nodes - 1));
        }
        task.warm_pages_done = upto.max(task.warm_pages_done);
    }

    /// Task `i` starts on CPU `c` (exec), its other memory there.
    pub fn start(&mut self, i: usize, c: usize) {
        let other = self.tasks[i].numa.other_pages;
        let node = self.m.node[c];
        (0..other).for_each(|p| self.tasks[i].numa.place(p, node));
        self.tasks[i].res.start_cpu = c;
        self.recompute_access(i);
        if self.spec.numa.enabled {
            let at = self.tasks[i].numa.next_scan_ns;
            self.push(at, Ev::Scan(i));
        }
        self.join(c, Ent::Task(i));
    }

    pub(super) fn end_phase(&mut self, i: usize) {
        let t = self.t;
        let task = &mut self.tasks[i];
        match task.phase {
            Phase::WarmUp => {
                let n = task.buffer_pages as f64;
                self.place_warm_pages(i, n);
                let task = &mut self.tasks[i];
                task.res.warm_up_ns = (t - task.phase_start) as u64;
                task.res.pages_after_warm_up = task.numa.buffer_pages_per_node().to_vec();
                task.phase = Phase::Loop(0);
                self.recompute_access(i);
                let task = &mut self.tasks[i];
                let dram = task.dram_ns[self.m.node[task.cpu]];
                task.cold.forgive(self.p, self.spec.buffer_bytes, dram);
                task.res.loop_start_ns = t as u64;
                task.phase_start = t;
                task.work_left = self.spec.accesses_per_iteration as f64;
                if self.spec.jobs[i].touch_first {
                    // After the loop's work is set, so the move's refill
                    // is owed by the loop.
                    self.bind_after_touch(i);
                }
                self.tasks[i].res.loop_start_cpu = Some(self.tasks[i].cpu);
                self.schedule_done(i);
                return;
            }
            Phase::Loop(k) => {
                // The refill owed for the pass's accesses is part of it.
                let per = task.access_ns[self.m.node[task.cpu]];
                if self.pay_cold(i) > per {
                    self.schedule_done(i);
                    return;
                }
                let task = &mut self.tasks[i];
                task.res.iterations_ns.push((t - task.phase_start) as u64);
                task.phase = if k + 1 >= self.spec.iterations {
                    Phase::Done
                } else {
                    Phase::Loop(k + 1)
                };
            }
            Phase::Done => return,
        }
        let task = &mut self.tasks[i];
        task.phase_start = t;
        task.work_left = self.spec.accesses_per_iteration as f64;
        if task.phase == Phase::Done {
            self.exit(i);
        } else {
            self.schedule_done(i);
        }
    }

    /// `--first-touch start`: the buffer touched, job `i` binds to its
    /// CPUs, moving off the one it is on if it must (__set_cpus_allowed_ptr:
    /// any allowed CPU, idle ones first).
    fn bind_after_touch(&mut self, i: usize) {
        let allowed = &self.spec.jobs[i].allowed;
        let task = &mut self.tasks[i];
        task.allowed = vec![false; self.m.len()];
        allowed.iter().for_each(|&c| task.allowed[c] = true);
        if !task.allowed[task.cpu] {
            self.bind_move(i);
        }
    }

    /// Moves job `i` off a CPU it may no longer use: to any allowed CPU,
    /// idle ones first (__set_cpus_allowed_ptr).
    pub fn bind_move(&mut self, i: usize) {
        let allowed: Vec<usize> = (0..self.m.len())
            .filter(|&c| self.tasks[i].allowed[c])
            .collect();
        let idle: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|&c| self.rqs[c].nr_running() == 0)
            .collect();
        let pool = if idle.is_empty() { &allowed } else { &idle };
        let to = pool[self.rng.below(pool.len())];
        self.move_task(i, to, crate::sim::sample::Cause::Affinity);
    }

    pub(super) fn exit(&mut self, i: usize) {
        let c = self.tasks[i].cpu;
        let task = &mut self.tasks[i];
        task.res.end_ns = self.t as u64;
        task.res.end_cpu = c;
        task.res.numa_pages_migrated = task.numa.pages_migrated;
        task.res.numa_scan_seq = task.numa.scan_seq;
        task.res.numa_faults = task.numa.faults().to_vec();
        task.res.pages_at_end = task.numa.buffer_pages_per_node().to_vec();
        task.res.total_numa_faults = task.numa.total_faults;
        task.res.preferred = task.numa.preferred;
        self.alive -= 1;
        self.leave(c, Ent::Task(i));
    }

    pub(super) fn numa_scan(&mut self, i: usize) {
        if !self.tasks[i].alive() {
            return;
        }
        self.settle(i);
        let node = self.m.node[self.tasks[i].cpu];
        let t = self.t;
        let out = self.tasks[i].numa.scan(t, node);
        let cost = self.p.scan_cost_ns(&out, self.tasks[i].numa.base_per_page);
        if out.migrated > 0 {
            self.recompute_access(i);
        }
        self.charge_ns(i, cost);
        self.schedule_done(i);
        if let Some(target) = out.migrate_to {
            crate::sim::multi_numa::numa_migrate(self, i, target);
        }
        let next = self.tasks[i].numa.next_scan_ns.max(self.t + 1.0);
        self.push(next, Ev::Scan(i));
    }
}
