//! The simulated machine: a topology turned into what the scheduler sees,
//! flat tables indexed by CPU position, and each CPU's sched domains built
//! as kernel/sched/topology.c builds them: SMT (core siblings), MC (the
//! LLC), PKG (the node, when it holds several LLCs), then one NUMA level per
//! distinct SLIT distance, each level kept only where it spans more CPUs
//! than the one below; groups are the child level's spans.
//!
//! Per domain it carries what load balancing reads: the balance interval
//! (the span's weight in ms, sd_init), imbalance_pct, cache_nice_tries,
//! whether the child prefers siblings, and imb_numa_nr
//! (build_sched_domains' NUMA imbalance allowance).

use crate::analysis::schedstat::Spans;
use crate::topology::{Relation, Topology};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelKind {
    Smt,
    Mc,
    Pkg,
    Numa(u32),
}

impl LevelKind {
    pub fn name(&self) -> String {
        match self {
            LevelKind::Smt => "SMT".into(),
            LevelKind::Mc => "MC".into(),
            LevelKind::Pkg => "PKG".into(),
            LevelKind::Numa(d) => format!("NUMA{d}"),
        }
    }
}

/// One sched domain (shared by every CPU whose domain it is).
#[derive(Debug, Clone)]
pub struct Domain {
    pub kind: LevelKind,
    /// Span id (see [`Machine::span`]).
    pub span: usize,
    /// The groups: span ids of the child level.
    pub groups: Vec<usize>,
    pub weight: usize,
    pub imbalance_pct: u32,
    pub cache_nice_tries: u32,
    /// SD_PREFER_SIBLING on the child (every non-NUMA level has it).
    pub prefer_sibling: bool,
    pub imb_numa_nr: u32,
    /// Idle balance interval, ns (sd->balance_interval = weight ms).
    pub interval_ns: u64,
}

impl Domain {
    /// The balance interval in whole jiffies of `tick_ns`, times `factor`
    /// (busy_factor while the CPU is busy, else 1).
    pub fn balance_interval_ns(&self, tick_ns: f64, factor: f64) -> f64 {
        ((self.interval_ns as f64 * factor) / tick_ns)
            .ceil()
            .max(1.0)
            * tick_ns
    }

    pub fn is_numa(&self) -> bool {
        matches!(self.kind, LevelKind::Numa(_))
    }
}

/// One level of a CPU's domains while they are built: its kind and its
/// span, shared between the CPUs that have it.
type Level = (LevelKind, Rc<Vec<usize>>);

#[derive(Debug, Clone)]
pub struct Machine {
    pub topo: Topology,
    /// Online CPU ids; a CPU's position here is its index everywhere else.
    pub ids: Vec<u32>,
    pos: HashMap<u32, usize>,
    /// Node index (into `node_ids`) per CPU.
    pub node: Vec<usize>,
    pub node_ids: Vec<u32>,
    pub node_cpus: Vec<Vec<usize>>,
    /// SLIT distance by node index.
    pub dist: Vec<Vec<u32>>,
    /// Other hardware threads of each CPU's core.
    pub siblings: Vec<Vec<usize>>,
    spans: Vec<Vec<usize>>,
    span_cores: Vec<usize>,
    /// Per span: one core of several hardware threads ([`Machine::is_core`]).
    span_is_core: Vec<bool>,
    pub domains: Vec<Domain>,
    /// Per CPU, its domain ids from the lowest level up.
    pub cpu_domains: Vec<Vec<usize>>,
    /// Per CPU and level: the span of its group in its domain there (the
    /// child level's span, or the CPU alone at the lowest level).
    pub cpu_group: Vec<Vec<usize>>,
    /// [`Machine::common_level`] for every pair, indexed `c * n + x`: the
    /// balancer asks it of every CPU `x` for the probe's CPU `c`, so one
    /// probe CPU's answers are contiguous.
    common: Vec<u8>,
}

impl Machine {
    pub fn new(topo: &Topology) -> anyhow::Result<Machine> {
        let ids: Vec<u32> = topo.online_cpus().iter().collect();
        if ids.is_empty() {
            // The topology's fault, not the run's: bad input, exit 2.
            return Err(crate::error::usage(
                "the topology has no online CPUs to simulate",
            ));
        }
        let pos: HashMap<u32, usize> = ids.iter().enumerate().map(|(i, &c)| (c, i)).collect();
        let node_ids: Vec<u32> = topo
            .nodes
            .iter()
            .filter(|n| !n.cpus.is_empty())
            .map(|n| n.id)
            .collect();
        let nidx: HashMap<u32, usize> = node_ids.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let mut node = Vec::with_capacity(ids.len());
        for &c in &ids {
            let n = topo
                .node_of_cpu(c)
                .and_then(|n| nidx.get(&n).copied())
                .ok_or_else(|| anyhow::anyhow!("CPU {c} has no node in the topology"))?;
            node.push(n);
        }
        let node_cpus: Vec<Vec<usize>> = (0..node_ids.len())
            .map(|n| (0..ids.len()).filter(|&i| node[i] == n).collect())
            .collect();
        let dist: Vec<Vec<u32>> = node_ids
            .iter()
            .map(|&a| {
                node_ids
                    .iter()
                    .map(|&b| {
                        let d = |a, b| topo.distance(a, b).unwrap_or(if a == b { 10 } else { 20 });
                        // The larger of both ways: an asymmetric SLIT (real
                        // firmware has them; the kernel only warns) gives
                        // spans that do not hold each other and node
                        // choices that disagree, on which the engines'
                        // balancing looped for ever. The model is of the
                        // symmetric machine.
                        d(a, b).max(d(b, a))
                    })
                    .collect()
            })
            .collect();
        let siblings: Vec<Vec<usize>> = ids
            .iter()
            .map(|&c| {
                topo.cpu(c)
                    .map(|x| {
                        x.smt_siblings
                            .iter()
                            .filter(|&s| s != c)
                            .filter_map(|s| pos.get(&s).copied())
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let mut m = Machine {
            topo: topo.clone(),
            ids,
            pos,
            node,
            node_ids,
            node_cpus,
            dist,
            siblings,
            spans: Vec::new(),
            span_cores: Vec::new(),
            span_is_core: Vec::new(),
            domains: Vec::new(),
            cpu_domains: Vec::new(),
            cpu_group: Vec::new(),
            common: Vec::new(),
        };
        m.build_domains();
        m.check_domains().map_err(|why| {
            crate::error::usage(format!(
                "the simulator cannot model this topology's sched domains: {why}"
            ))
        })?;
        Ok(m)
    }

    /// What the engines assume of the domains: a domain sits at the same
    /// level of every CPU it spans, and its groups split its span without
    /// overlap. The kernel also builds overlapping NUMA groups
    /// (SD_OVERLAP, from distances that do not nest: asymmetric SLITs,
    /// some odd symmetric ones); the simulator does not model them, so it
    /// refuses such a machine before any work instead of looping or
    /// panicking in the balancer.
    fn check_domains(&self) -> Result<(), String> {
        // Each domain once, from the first CPU that has it: what the check
        // finds for it is the same from any of its CPUs (a domain is at one
        // level of each), and a 1024-CPU machine's top domain was sorted
        // 1024 times.
        let mut checked = vec![false; self.domains.len()];
        for (c, doms) in self.cpu_domains.iter().enumerate() {
            for (level, &d) in doms.iter().enumerate() {
                if std::mem::replace(&mut checked[d], true) {
                    continue;
                }
                let dom = &self.domains[d];
                let span = &self.spans[dom.span];
                if let Some(&x) = span
                    .iter()
                    .find(|&&x| self.cpu_domains[x].get(level) != Some(&d))
                {
                    return Err(format!(
                        "CPU {}'s {} domain holds CPU {}, whose domains differ at that level \
                         (distances that do not nest, or are not symmetric)",
                        self.ids[c],
                        dom.kind.name(),
                        self.ids[x]
                    ));
                }
                let covered: usize = dom.groups.iter().map(|&g| self.spans[g].len()).sum();
                let mut all: Vec<usize> = dom
                    .groups
                    .iter()
                    .flat_map(|&g| self.spans[g].iter().copied())
                    .collect();
                all.sort_unstable();
                all.dedup();
                if covered != span.len() || all != *span {
                    return Err(format!(
                        "CPU {}'s {} domain has overlapping groups \
                         (distances that do not nest, or are not symmetric)",
                        self.ids[c],
                        dom.kind.name()
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn pos(&self, id: u32) -> Option<usize> {
        self.pos.get(&id).copied()
    }

    pub fn span(&self, id: usize) -> &[usize] {
        &self.spans[id]
    }

    /// The CPU and node counts of each domain level's spans, ascending,
    /// lowest level first (as /proc/schedstat's levels: a CPU's Nth domain
    /// is level N).
    pub fn level_spans(&self) -> Vec<Spans> {
        let mut out: Vec<Spans> = Vec::new();
        // Nodes per domain, counted once per domain, not once per CPU it
        // spans (a 1024-CPU machine's top domain is shared by all).
        let mut nodes_of: HashMap<usize, usize> = HashMap::new();
        for doms in &self.cpu_domains {
            for (level, &d) in doms.iter().enumerate() {
                if out.len() <= level {
                    out.resize(level + 1, Default::default());
                }
                let span = self.span(self.domains[d].span);
                let nodes = *nodes_of.entry(d).or_insert_with(|| {
                    span.iter()
                        .map(|&c| self.node[c])
                        .collect::<BTreeSet<_>>()
                        .len()
                });
                out[level].note(span.len(), nodes);
            }
        }
        out.iter_mut().for_each(Spans::sort);
        out
    }

    /// How many distinct spans (domains and groups) there are.
    pub fn span_count(&self) -> usize {
        self.spans.len()
    }

    /// Cores (SMT groups) in a span.
    pub fn span_cores(&self, id: usize) -> usize {
        self.span_cores[id]
    }

    pub fn relation(&self, a: usize, b: usize) -> Relation {
        self.topo.relation(self.ids[a], self.ids[b])
    }

    /// SLIT distance between the nodes of two CPUs.
    pub fn cpu_distance(&self, a: usize, b: usize) -> u32 {
        self.dist[self.node[a]][self.node[b]]
    }

    /// The lowest domain of CPU `x` whose span holds CPU `c`.
    pub fn lowest_common(&self, x: usize, c: usize) -> Option<usize> {
        self.cpu_domains[x]
            .iter()
            .copied()
            .find(|&d| self.spans[self.domains[d].span].binary_search(&c).is_ok())
    }

    /// Whether span `id` is one core of several hardware threads: as a
    /// group, its flags carry SD_SHARE_CPUCAPACITY (group_smt_balance).
    pub fn is_core(&self, id: usize) -> bool {
        self.span_is_core[id]
    }

    /// The group whose sched_group_capacity an attempt by CPU `x` at
    /// `level` flags or clears (sched_balance_rq()'s
    /// `sd_parent->groups`): the parent domain's group holding `x`, which
    /// is the span of `x`'s domain at `level`. None at the top level.
    pub fn parent_group(&self, x: usize, level: usize) -> Option<usize> {
        (level + 1 < self.cpu_domains[x].len())
            .then(|| self.domains[self.cpu_domains[x][level]].span)
    }

    /// The group of domain `d` that holds CPU `c`.
    pub fn group_of(&self, d: usize, c: usize) -> Option<usize> {
        self.domains[d]
            .groups
            .iter()
            .copied()
            .find(|&g| self.spans[g].binary_search(&c).is_ok())
    }

    fn intern(&mut self, table: &mut HashMap<Vec<usize>, usize>, span: &[usize]) -> usize {
        if let Some(&id) = table.get(span) {
            return id;
        }
        let cores: BTreeSet<Option<usize>> = span
            .iter()
            .map(|&i| self.topo.cpu(self.ids[i]).and_then(|c| c.core))
            .collect();
        let id = self.spans.len();
        self.span_cores.push(cores.len());
        let core = span.len() > 1
            && self.siblings[span[0]].len() + 1 == span.len()
            && self.siblings[span[0]]
                .iter()
                .all(|c| span.binary_search(c).is_ok());
        self.span_is_core.push(core);
        self.spans.push(span.to_vec());
        table.insert(span.to_vec(), id);
        id
    }

    fn build_domains(&mut self) {
        let n = self.ids.len();
        let mut distances: Vec<u32> = self
            .dist
            .iter()
            .flatten()
            .copied()
            .filter(|&d| d > 10)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        distances.sort();
        // Per CPU: (kind, span) from the lowest level up. The spans above
        // the core are shared (one per LLC, node, node and distance), not
        // copied per CPU: a 1024-CPU machine's would be 40 MB of copies.
        let sorted = |mut span: Vec<usize>| {
            span.sort_unstable();
            span.dedup();
            Rc::new(span)
        };
        let mut llc_spans: HashMap<Option<usize>, Rc<Vec<usize>>> = HashMap::new();
        let node_spans: Vec<Rc<Vec<usize>>> = (0..self.node_ids.len())
            .map(|nd| sorted(self.node_cpus[nd].clone()))
            .collect();
        let numa_spans: Vec<Vec<Rc<Vec<usize>>>> = (0..self.node_ids.len())
            .map(|nd| {
                distances
                    .iter()
                    .map(|&d| {
                        sorted(
                            (0..n)
                                .filter(|&x| self.dist[nd][self.node[x]] <= d)
                                .collect(),
                        )
                    })
                    .collect()
            })
            .collect();
        let mut levels: Vec<Vec<Level>> = Vec::with_capacity(n);
        for c in 0..n {
            let mut v: Vec<Level> = Vec::new();
            let mut push = |kind, span: Rc<Vec<usize>>| {
                let below = v.last().map_or(1, |(_, s)| s.len());
                if span.len() > below {
                    v.push((kind, span));
                }
            };
            let mut smt = self.siblings[c].clone();
            smt.push(c);
            push(LevelKind::Smt, sorted(smt));
            let llc_id = self.topo.cpu(self.ids[c]).and_then(|x| x.llc);
            let llc = match llc_id.and_then(|l| self.topo.llc(l)) {
                Some(l) => llc_spans
                    .entry(llc_id)
                    .or_insert_with(|| sorted(l.cpus.iter().filter_map(|i| self.pos(i)).collect()))
                    .clone(),
                None => sorted(vec![c]),
            };
            push(LevelKind::Mc, llc);
            push(LevelKind::Pkg, node_spans[self.node[c]].clone());
            for (k, &d) in distances.iter().enumerate() {
                push(LevelKind::Numa(d), numa_spans[self.node[c]][k].clone());
            }
            levels.push(v);
        }
        let mut table: HashMap<Vec<usize>, usize> = HashMap::new();
        let mut dom_table: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        let mut by_ptr: HashMap<*const Vec<usize>, usize> = HashMap::new();
        self.cpu_domains = vec![Vec::new(); n];
        for c in 0..n {
            let mut ids = Vec::new();
            for (i, (kind, span)) in levels[c].iter().enumerate() {
                // A shared span is looked up once, not hashed per CPU.
                let span_id = match by_ptr.get(&Rc::as_ptr(span)) {
                    Some(&id) => id,
                    None => {
                        let id = self.intern(&mut table, span);
                        by_ptr.insert(Rc::as_ptr(span), id);
                        id
                    }
                };
                let key = (i, span_id);
                if let Some(&d) = dom_table.get(&key) {
                    ids.push(d);
                    continue;
                }
                // Groups: each member's largest lower span inside this one.
                // Membership through a mask: `span.contains` made this
                // quadratic in the span per member, half of a 1024-CPU
                // jobs run's time (perf, bench/sim.sh).
                let mut inside = vec![false; n];
                span.iter().for_each(|&y| inside[y] = true);
                let mut groups = BTreeSet::new();
                for &x in span.iter() {
                    let child = levels[x]
                        .iter()
                        .rev()
                        .map(|(_, s)| s)
                        .find(|s| s.len() < span.len() && s.iter().all(|&y| inside[y]))
                        .map(|s| s.to_vec())
                        .unwrap_or_else(|| vec![x]);
                    groups.insert(child);
                }
                let groups: Vec<usize> = groups
                    .into_iter()
                    .map(|g| self.intern(&mut table, &g))
                    .collect();
                let child_kind = i.checked_sub(1).map(|j| levels[c][j].0);
                let (imbalance_pct, cache_nice_tries) = match kind {
                    LevelKind::Smt => (110, 0),
                    LevelKind::Mc => (117, 1),
                    LevelKind::Numa(_) => (117, 2),
                    LevelKind::Pkg => (117, 1),
                };
                let d = Domain {
                    kind: *kind,
                    span: span_id,
                    groups,
                    weight: span.len(),
                    imbalance_pct,
                    cache_nice_tries,
                    prefer_sibling: matches!(
                        child_kind,
                        Some(LevelKind::Smt | LevelKind::Mc | LevelKind::Pkg)
                    ),
                    imb_numa_nr: 1,
                    interval_ns: span.len() as u64 * 1_000_000,
                };
                let id = self.domains.len();
                self.domains.push(d);
                dom_table.insert(key, id);
                ids.push(id);
            }
            self.cpu_domains[c] = ids;
        }
        self.set_imb_numa_nr(&levels);
        self.cpu_group = (0..n)
            .map(|c| {
                let doms = self.cpu_domains[c].clone();
                (0..doms.len())
                    .map(|i| match i {
                        0 => self.intern(&mut table, &[c]),
                        _ => self.domains[doms[i - 1]].span,
                    })
                    .collect()
            })
            .collect();
        // Each CPU's domains from the highest down, each writing its level
        // over its span: what is left is the lowest level holding each
        // CPU, in one pass over the spans instead of a search per pair.
        let mut common = vec![u8::MAX; n * n];
        for x in 0..n {
            for (l, &d) in self.cpu_domains[x].iter().enumerate().rev() {
                for &c in &self.spans[self.domains[d].span] {
                    common[c * n + x] = l.min(254) as u8;
                }
            }
        }
        debug_assert!((0..n).all(|x| (0..n).all(|c| self.find_common_level(x, c)
            == (common[c * n + x] != u8::MAX).then_some(common[c * n + x] as usize))));
        self.common = common;
    }

    /// The level (index into `cpu_domains[x]`) of the lowest domain of CPU
    /// `x` whose span holds CPU `c`.
    pub fn common_level(&self, x: usize, c: usize) -> Option<usize> {
        match self.common[c * self.ids.len() + x] {
            u8::MAX => None,
            l => Some(l as usize),
        }
    }

    fn find_common_level(&self, x: usize, c: usize) -> Option<usize> {
        self.cpu_domains[x]
            .iter()
            .position(|&d| self.spans[self.domains[d].span].binary_search(&c).is_ok())
    }

    /// build_sched_domains(): the first domain above the LLC allows an
    /// imbalance of its LLC count (or 1/8 of its weight with one LLC);
    /// higher ones scale that by their weight over the first NUMA span.
    fn set_imb_numa_nr(&mut self, levels: &[Vec<Level>]) {
        for (c, lv) in levels.iter().enumerate() {
            let doms = self.cpu_domains[c].clone();
            let (mut imb, mut imb_span) = (1u32, 1usize);
            for (i, &d) in doms.iter().enumerate() {
                let llc_child = i > 0
                    && matches!(lv[i - 1].0, LevelKind::Smt | LevelKind::Mc)
                    && !matches!(lv[i].0, LevelKind::Mc | LevelKind::Smt);
                if llc_child {
                    let child_w = self.domains[doms[i - 1]].weight;
                    let w = self.domains[d].weight;
                    let nr_llcs = w / child_w.max(1);
                    imb = if nr_llcs == 1 {
                        (w >> 3) as u32
                    } else {
                        nr_llcs as u32
                    }
                    .max(1);
                    self.domains[d].imb_numa_nr = imb;
                    imb_span = doms[i + 1..]
                        .iter()
                        .find(|&&p| self.domains[p].is_numa())
                        .map_or(w, |&p| self.domains[p].weight);
                } else if i > 0 {
                    let factor = (self.domains[d].weight / imb_span.max(1)).max(1) as u32;
                    self.domains[d].imb_numa_nr = imb * factor;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::presets;

    fn kinds(m: &Machine, c: usize) -> Vec<(String, usize, usize)> {
        m.cpu_domains[c]
            .iter()
            .map(|&d| {
                let d = &m.domains[d];
                (d.kind.name(), d.weight, d.groups.len())
            })
            .collect()
    }

    #[test]
    fn epyc_domains_are_the_kernels() {
        let m = Machine::new(&presets::find("epyc-7551-8n").unwrap().topology()).unwrap();
        assert_eq!(m.len(), 128);
        let s = |k: &str, w, g| (k.to_string(), w, g);
        assert_eq!(
            kinds(&m, 0),
            vec![
                s("SMT", 2, 2),
                s("MC", 8, 4),
                s("PKG", 16, 2),
                s("NUMA16", 64, 4),
                s("NUMA32", 128, 2)
            ]
        );
        let d = &m.cpu_domains[0];
        assert_eq!(m.domains[d[2]].imb_numa_nr, 2, "PKG: 2 LLCs");
        assert_eq!(m.domains[d[3]].imb_numa_nr, 2);
        assert_eq!(m.domains[d[4]].imb_numa_nr, 4);
        assert!(m.domains[d[3]].prefer_sibling && !m.domains[d[4]].prefer_sibling);
        assert_eq!(m.domains[d[3]].cache_nice_tries, 2);
    }

    #[test]
    fn xeon_has_smt_mc_numa() {
        let m = Machine::new(&presets::find("xeon-8167m-2n").unwrap().topology()).unwrap();
        let s = |k: &str, w, g| (k.to_string(), w, g);
        assert_eq!(
            kinds(&m, 0),
            vec![s("SMT", 2, 2), s("MC", 52, 26), s("NUMA21", 104, 2)]
        );
        let top = m.cpu_domains[0][2];
        assert_eq!(m.domains[top].imb_numa_nr, 2);
        assert!(m.domains[top].prefer_sibling);
        let c = m.pos(26).unwrap();
        assert_eq!(m.lowest_common(0, c), Some(top));
        assert_eq!(
            m.group_of(top, c),
            Some(m.cpu_domains[c][1]).map(|d| m.domains[d].span)
        );
    }
}
