//! A sample's load-balancing counters per sched-domain level, as records
//! carry them (the `balance` field of `numalab.sample/1`, docs/run-schema.md):
//! tasks pulled by each kind of balancing, pulled although cache hot, and
//! pushed by the active balancer. A real run reads them from
//! /proc/schedstat around the sample ([`super::schedstat`]), for every task
//! of the machine; a simulated run counts the simulated probe's own moves.
//! The same fields either way, so one report reads both, and the lab can
//! hold the simulator's account of *how* the probe moved against the
//! kernel's (tests/lab_pnid_load.rs).

pub use super::schedstat::Spans;
use super::schedstat::{BalanceKind, Counters, LevelTotals};
use serde::{Deserialize, Serialize};

/// One number per kind of balancing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByKind {
    pub busy: u64,
    pub idle: u64,
    pub newly_idle: u64,
}

impl ByKind {
    fn from_fn(f: impl Fn(BalanceKind) -> u64) -> ByKind {
        ByKind {
            busy: f(BalanceKind::Busy),
            idle: f(BalanceKind::Idle),
            newly_idle: f(BalanceKind::NewlyIdle),
        }
    }

    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.newly_idle
    }
}

impl std::ops::Add for ByKind {
    type Output = ByKind;
    fn add(self, o: ByKind) -> ByKind {
        ByKind {
            busy: self.busy + o.busy,
            idle: self.idle + o.idle,
            newly_idle: self.newly_idle + o.newly_idle,
        }
    }
}

/// Where the counters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// /proc/schedstat's growth over the sample: every task's moves.
    Schedstat,
    /// The simulator: the probe's moves only.
    Sim,
}

/// One domain level's counters, summed over the CPUs that have it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelBalance {
    /// 0 for each CPU's lowest domain.
    pub level: usize,
    /// The CPU counts of the level's domain spans, ascending.
    pub span_cpus: Vec<usize>,
    /// How many nodes the level's spans hold, ascending (absent from
    /// records written before it was: then no level counts as crossing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub span_nodes: Vec<usize>,
    /// Balance attempts; `None` from the simulator, which makes only the
    /// attempts that can move the probe.
    pub attempts: Option<ByKind>,
    /// Attempts that wanted to move a task and moved none; `None` as above.
    pub failed: Option<ByKind>,
    /// Tasks pulled (active pushes, which the kernel's lb_gained counts as
    /// idle pulls too, taken out: they are `active_pushed`).
    pub gained: ByKind,
    /// Of those, pulled although cache hot or leaving their preferred node
    /// (the domain's failures had passed cache_nice_tries).
    pub hot_gained: ByKind,
    /// Tasks pushed by the active balancer.
    pub active_pushed: u64,
}

impl LevelBalance {
    fn new(level: usize, spans: Spans, c: &Counters, attempts: bool) -> LevelBalance {
        let by = |f: fn(&super::schedstat::LbCounters) -> u64| ByKind::from_fn(|k| f(c.lb(k)));
        // The kernel counts an active push in lb_gained[CPU_IDLE] too
        // ([`Counters::moved`]); here `gained` is pulls only, so that it
        // and `active_pushed` never overlap.
        let mut gained = by(|l| l.gained);
        gained.idle = gained.idle.saturating_sub(c.alb_pushed);
        LevelBalance {
            level,
            span_cpus: spans.cpus,
            span_nodes: spans.nodes,
            attempts: attempts.then(|| by(|l| l.count)),
            failed: attempts.then(|| by(|l| l.failed)),
            gained,
            hot_gained: by(|l| l.hot_gained),
            active_pushed: c.alb_pushed,
        }
    }

    /// Tasks moved at this level: pulled or pushed.
    pub fn moved(&self) -> u64 {
        self.gained.total() + self.active_pushed
    }

    /// Whether every move here goes between nodes: each span holds two or
    /// more, so the groups balanced against each other (the spans of the
    /// level below) lie on different nodes.
    pub fn crosses_nodes(&self) -> bool {
        self.span_nodes.first().is_some_and(|&n| n >= 2)
    }
}

/// The moves of some of a sample's levels, added up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Moves {
    pub gained: ByKind,
    pub hot_gained: ByKind,
    pub active_pushed: u64,
}

impl Moves {
    pub fn moved(&self) -> u64 {
        self.gained.total() + self.active_pushed
    }
}

/// A sample's counters, every level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleBalance {
    pub source: Source,
    pub levels: Vec<LevelBalance>,
}

impl SampleBalance {
    /// From /proc/schedstat's growth over a sample, summed per level.
    pub fn from_schedstat(levels: &[LevelTotals]) -> SampleBalance {
        SampleBalance {
            source: Source::Schedstat,
            levels: levels
                .iter()
                .map(|l| LevelBalance::new(l.level, l.spans.clone(), &l.counters, true))
                .collect(),
        }
    }

    /// From the simulator's counts per level (`counters[level]`), with the
    /// spans of each level's domains.
    pub fn from_sim(counters: &[Counters], spans: &[Spans]) -> SampleBalance {
        SampleBalance {
            source: Source::Sim,
            levels: counters
                .iter()
                .zip(spans)
                .enumerate()
                .map(|(level, (c, spans))| LevelBalance::new(level, spans.clone(), c, false))
                .collect(),
        }
    }

    /// The moves of the levels `which` keeps, added up; `None` when it
    /// keeps none.
    pub fn moves(&self, which: impl Fn(&LevelBalance) -> bool) -> Option<Moves> {
        self.levels
            .iter()
            .filter(|l| which(l))
            .fold(None, |acc: Option<Moves>, l| {
                let a = acc.unwrap_or_default();
                Some(Moves {
                    gained: a.gained + l.gained,
                    hot_gained: a.hot_gained + l.hot_gained,
                    active_pushed: a.active_pushed + l.active_pushed,
                })
            })
    }

    /// The moves of every level that crosses nodes ([`LevelBalance::crosses_nodes`]),
    /// added up; `None` when no level does (one node, or a record without
    /// `span_nodes`).
    pub fn cross_node(&self) -> Option<Moves> {
        self.moves(LevelBalance::crosses_nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::schedstat::{by_level, delta, parse, Schedstat};

    fn cpu0(s: &mut Schedstat, level: usize) -> &mut Counters {
        let d = s
            .domains
            .iter_mut()
            .find(|d| d.cpu == 0 && d.level == level);
        &mut d.unwrap().counters
    }

    const V16: &str = include_str!("../../tests/fixtures/proc/schedstat-v16-6.12-2node.txt");

    #[test]
    fn schedstat_growth_becomes_per_level_counts_by_kind() {
        let before = parse(V16).unwrap();
        let mut after = before.clone();
        // CPU 0's NUMA domain (level 1): two idle pulls, one of them hot,
        // and an active push; its MC domain: a newly-idle pull.
        let numa = cpu0(&mut after, 1);
        // The push is in lb_gained[CPU_IDLE] too, as the kernel counts it.
        let idle = &mut numa.lb[BalanceKind::Idle as usize];
        (idle.count, idle.failed) = (idle.count + 5, idle.failed + 3);
        (idle.gained, idle.hot_gained) = (idle.gained + 3, idle.hot_gained + 1);
        numa.alb_pushed += 1;
        cpu0(&mut after, 0).lb[BalanceKind::NewlyIdle as usize].gained += 1;
        let b = SampleBalance::from_schedstat(&by_level(&delta(&before, &after).unwrap(), |c| {
            Some(c / 2)
        }));
        assert_eq!(b.source, Source::Schedstat);
        let [l0, l1] = &b.levels[..] else {
            panic!("two levels: {b:?}")
        };
        assert_eq!(
            (l0.span_cpus.clone(), l1.span_cpus.clone()),
            (vec![2], vec![4])
        );
        assert_eq!(l0.gained.newly_idle, 1);
        assert_eq!(l0.moved(), 1);
        assert_eq!(l1.attempts.unwrap().idle, 5);
        assert_eq!(l1.failed.unwrap().idle, 3);
        assert_eq!(
            l1.gained,
            ByKind {
                busy: 0,
                idle: 2,
                newly_idle: 0
            }
        );
        assert_eq!(l1.hot_gained.idle, 1);
        assert_eq!(l1.moved(), 3);
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["source"], "schedstat");
        assert_eq!(json["levels"][1]["gained"]["idle"], 2);
        assert_eq!(json["levels"][1]["span_nodes"], serde_json::json!([2]));
        // Only the NUMA domain crosses nodes: its two pulls and the push.
        assert!(!l0.crosses_nodes() && l1.crosses_nodes());
        let x = b.cross_node().unwrap();
        assert_eq!(
            (x.gained.idle, x.hot_gained.idle, x.active_pushed),
            (2, 1, 1)
        );
        assert_eq!(x.moved(), 3);
    }

    #[test]
    fn records_without_node_counts_cross_no_level() {
        let mut b = SampleBalance::from_sim(
            &[Counters::default(); 2],
            &[
                Spans {
                    cpus: vec![2],
                    nodes: vec![1],
                },
                Spans {
                    cpus: vec![4],
                    nodes: vec![2],
                },
            ],
        );
        let mut json = serde_json::to_value(&b).unwrap();
        json["levels"][1]
            .as_object_mut()
            .unwrap()
            .remove("span_nodes");
        let old: SampleBalance = serde_json::from_value(json).unwrap();
        assert!(old.levels[1].span_nodes.is_empty());
        assert_eq!(old.cross_node(), None);
        // One node: nothing crosses either.
        b.levels[1].span_nodes = vec![1];
        assert_eq!(b.cross_node(), None);
        // Mixed spans (one within a node) are not all cross-node.
        b.levels[1].span_nodes = vec![1, 2];
        assert_eq!(b.cross_node(), None);
    }

    #[test]
    fn the_simulator_has_no_attempt_counts() {
        let mut c = Counters::default();
        c.lb[BalanceKind::Busy as usize].gained = 4;
        let spans = |cpus: usize, nodes: usize| Spans {
            cpus: vec![cpus],
            nodes: vec![nodes],
        };
        let b = SampleBalance::from_sim(&[Counters::default(), c], &[spans(2, 1), spans(4, 2)]);
        assert_eq!(b.levels[1].gained.busy, 4);
        assert!(b.levels[1].attempts.is_none());
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["source"], "sim");
        assert!(json["levels"][0]["attempts"].is_null());
    }
}
