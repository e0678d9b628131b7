//! The load balancer's view of a sched group, after kernel/sched/fair.c:
//! the counts update_sg_lb_stats() gathers, group_classify()'s type from
//! PELT's sums against the group's capacity (with 6.6's group_smt_balance
//! where the profile's kernel has it), and update_sd_pick_busiest()'s
//! choice between two groups. Pure functions over plain numbers, kept
//! apart from the engine's runqueues so they are tested on their own.

/// A group's numbers as update_sg_lb_stats() would count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupStats {
    pub weight: usize,
    pub cores: usize,
    pub nr_running: usize,
    pub idle_cpus: usize,
}

impl GroupStats {
    pub fn new(weight: usize, cores: usize, nr_running: usize, idle_cpus: usize) -> Self {
        GroupStats {
            weight,
            cores,
            nr_running,
            idle_cpus,
        }
    }

    /// More tasks than CPUs, the imbalance decision's test (choosing the
    /// busiest group weighs PELT's sums too: [`Candidate::new`]).
    pub fn overloaded(&self) -> bool {
        self.nr_running > self.weight
    }
    /// Fewer tasks than CPUs.
    pub fn has_spare(&self) -> bool {
        self.nr_running < self.weight
    }
}

/// group_classify()'s types that occur on symmetric CPUs, in the kernel's
/// order (misfit and asym-packing groups need asymmetric CPUs and are not
/// modelled). `Imbalanced` is a group whose sched_group_capacity carries
/// the `imbalance` flag: a balance attempt one level down, by one of its
/// CPUs, failed because of CPU affinity (see [`Candidate::flagged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupType {
    HasSpare,
    FullyBusy,
    SmtBalance,
    Imbalanced,
    Overloaded,
}

/// A non-local group as update_sd_pick_busiest() compares them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub g: GroupStats,
    pub ty: GroupType,
    /// Load per CPU, in tasks (the kernel computes it only when overloaded).
    pub avg_load: f64,
    /// The group is an SMT core (SD_SHARE_CPUCAPACITY in its flags).
    pub smt: bool,
    /// The 6.6+ rules ([`super::profile::KernelCosts::smt_balance`]).
    pub v6_6: bool,
}

impl Candidate {
    /// update_sg_lb_stats() + group_classify() for a group that is not the
    /// puller's. `util` and `runnable` are PELT's sums in CPUs (1024 = 1):
    /// group_is_overloaded() and group_has_capacity() weigh them against
    /// the group's capacity, so a core whose two CPUs hold a probe and two
    /// 60% workers is not overloaded (1.6 x 117 < 2 x 100) but, for an idle
    /// puller, an SMT core to balance (smt_balance()).
    pub fn new(
        g: GroupStats,
        util: f64,
        runnable: f64,
        pct: u32,
        smt: bool,
        dst_idle: bool,
        smt_balance: bool,
    ) -> Self {
        let (cap, pct) = (g.weight as f64, pct as f64);
        let ty = if g.nr_running > g.weight
            && (cap * 100.0 < util * pct || cap * pct < runnable * 100.0)
        {
            GroupType::Overloaded
        } else if smt_balance && dst_idle && smt && g.nr_running > 1 {
            GroupType::SmtBalance
        } else if g.nr_running < g.weight
            || (cap * pct >= runnable * 100.0 && cap * 100.0 > util * pct)
        {
            GroupType::HasSpare
        } else {
            GroupType::FullyBusy
        };
        let avg_load = match ty {
            GroupType::Overloaded => runnable / cap.max(1.0),
            _ => 0.0,
        };
        Candidate {
            g,
            ty,
            avg_load,
            smt,
            v6_6: smt_balance,
        }
    }

    /// group_classify() checks sg_imbalanced() right after overload: a
    /// flagged group that is not overloaded is group_imbalanced.
    pub fn flagged(mut self, imbalanced: bool) -> Self {
        if imbalanced && self.ty != GroupType::Overloaded {
            self.ty = GroupType::Imbalanced;
        }
        self
    }
}

/// PELT's long-run (util, runnable) sums of a group of `weight` CPUs, in
/// CPUs (1024 = 1): each CPU's worker contributes its duty cycle, a CPU
/// holding a probe is busy throughout, and each probe is runnable
/// throughout. `probe_cpus` CPUs of the group hold the `probes`.
pub fn pelt_sums(weight: usize, duty: f64, probe_cpus: usize, probes: usize) -> (f64, f64) {
    let (w, pc) = (weight as f64, probe_cpus as f64);
    (w * duty + pc * (1.0 - duty), w * duty + probes as f64)
}

/// update_sd_pick_busiest(): whether `s` replaces `best` as the busiest
/// group (groups are met from the puller's own, wrapping).
pub fn busier(s: &Candidate, best: &Candidate) -> bool {
    if s.g.nr_running == 0 {
        return false;
    }
    if s.ty != best.ty {
        return s.ty > best.ty;
    }
    // Fewest idle CPUs, then most tasks; a tie keeps the first.
    let spare = |s: &Candidate, b: &Candidate| {
        s.g.idle_cpus < b.g.idle_cpus
            || (s.g.idle_cpus == b.g.idle_cpus && s.g.nr_running > b.g.nr_running)
    };
    match s.ty {
        GroupType::Overloaded => s.avg_load > best.avg_load,
        // "Select the 1st imbalanced group as we don't have any way to
        // choose one more than another."
        GroupType::Imbalanced => false,
        GroupType::SmtBalance if s.g.idle_cpus != 0 || best.g.idle_cpus != 0 => spare(s, best),
        // avg_load is 0 for both: 6.6+ keeps an SMT busiest and lets a
        // later group of another kind win; 6.1 keeps the first.
        GroupType::SmtBalance | GroupType::FullyBusy => s.v6_6 && !best.smt,
        GroupType::HasSpare if s.v6_6 && s.smt != best.smt => !(s.smt && s.g.nr_running <= 1),
        GroupType::HasSpare => spare(s, best),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(weight: usize, cores: usize, nr: usize, idle: usize) -> GroupStats {
        GroupStats::new(weight, cores, nr, idle)
    }

    #[test]
    fn a_core_of_the_probe_and_two_60pc_workers_is_smt_balance_not_overloaded() {
        // MC level of an SMT machine (imbalance_pct 117): 3 tasks on 2
        // CPUs, util 1 + 0.6, runnable 1 + 0.6 + 0.6: under both limits.
        let c = Candidate::new(g(2, 1, 3, 0), 1.6, 2.2, 117, true, true, true);
        assert_eq!(c.ty, GroupType::SmtBalance);
        assert_eq!(c.avg_load, 0.0);
        // At 80% the runnable sum passes 2 x 117%: overloaded.
        let c = Candidate::new(g(2, 1, 3, 0), 1.8, 2.6, 117, true, true, true);
        assert_eq!(c.ty, GroupType::Overloaded);
        // A busy puller sees no SMT balance: a core of two workers is full.
        let c = Candidate::new(g(2, 1, 2, 0), 1.2, 1.2, 117, true, false, true);
        assert_eq!(c.ty, GroupType::HasSpare);
        // One CPU with two tasks (the SMT level) is overloaded.
        let c = Candidate::new(g(1, 1, 2, 0), 1.0, 1.6, 110, false, true, true);
        assert_eq!(c.ty, GroupType::Overloaded);
    }

    #[test]
    fn the_first_full_smt_core_met_stays_the_busiest() {
        let workers = Candidate::new(g(2, 1, 2, 0), 1.2, 1.2, 117, true, true, true);
        let probe = Candidate::new(g(2, 1, 3, 0), 1.6, 2.2, 117, true, true, true);
        // Same type, no idle CPU on either, avg_load 0: the first stays.
        assert!(!busier(&probe, &workers));
        assert!(!busier(&workers, &probe));
        // The probe's core with its sibling idle loses to a full one.
        let probe_alone = Candidate::new(g(2, 1, 2, 1), 1.6, 1.6, 117, true, true, true);
        assert!(busier(&workers, &probe_alone));
        assert!(!busier(&probe_alone, &workers));
        // A group of one busy worker is below an SMT-balance core.
        let one = Candidate::new(g(2, 1, 1, 1), 1.2, 1.2, 117, true, true, true);
        assert!(!busier(&one, &workers));
        // Groups that are not SMT cores: a later full group replaces.
        let a = Candidate::new(g(8, 8, 8, 0), 7.5, 8.0, 117, false, true, true);
        assert_eq!(a.ty, GroupType::FullyBusy);
        assert!(busier(&a, &a));
        // has_spare: fewer idle CPUs, then more tasks.
        let x = Candidate::new(g(16, 8, 9, 7), 9.0, 9.0, 117, false, true, true);
        let y = Candidate::new(g(16, 8, 10, 7), 9.0, 10.0, 117, false, true, true);
        assert!(busier(&y, &x) && !busier(&x, &y));
    }

    #[test]
    fn on_6_1_the_probes_core_is_the_busiest_by_its_tasks() {
        // No group_smt_balance: both cores have spare capacity by PELT, and
        // the one with more tasks wins whichever is met first.
        let workers = Candidate::new(g(2, 1, 2, 0), 1.2, 1.2, 117, true, true, false);
        let probe = Candidate::new(g(2, 1, 3, 0), 1.6, 2.2, 117, true, true, false);
        assert_eq!(
            (workers.ty, probe.ty),
            (GroupType::HasSpare, GroupType::HasSpare)
        );
        assert!(busier(&probe, &workers) && !busier(&workers, &probe));
        // Fully busy ties keep the first met, SMT or not.
        let a = Candidate::new(g(8, 8, 8, 0), 7.5, 8.0, 117, false, true, false);
        assert!(!busier(&a, &a));
    }

    #[test]
    fn a_flagged_group_is_imbalanced_above_all_but_overloaded_and_the_first_stays() {
        let full = Candidate::new(g(2, 1, 2, 0), 1.2, 1.2, 117, true, true, true);
        let probe = Candidate::new(g(2, 1, 2, 1), 1.6, 1.6, 117, true, true, true);
        assert!(busier(&full, &probe));
        let flagged = probe.flagged(true);
        assert_eq!(flagged.ty, GroupType::Imbalanced);
        assert!(busier(&flagged, &full) && !busier(&full, &flagged));
        // Two flagged groups: the first met stays.
        assert!(!busier(&flagged, &flagged));
        // Overloaded stays overloaded, and outranks a flagged group.
        let over = Candidate::new(g(1, 1, 2, 0), 1.0, 1.6, 110, false, true, true);
        assert_eq!(over.flagged(true).ty, GroupType::Overloaded);
        assert!(busier(&over, &flagged));
        assert_eq!(probe.flagged(false), probe);
    }
}
