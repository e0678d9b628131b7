//! The agent on a fixture /proc tree with a recording placer: placement,
//! widening under run delay, re-attraction, new threads and children,
//! tasks that set their own mask, tasks that end.

use super::*;
use std::path::Path;

#[derive(Default)]
struct Fake {
    masks: BTreeMap<i32, IdSet>,
    journal: BTreeMap<i32, IdSet>,
    sets: Vec<(i32, String)>,
    /// A task that exits the moment numalab changes or journals it.
    exits_when_touched: Option<i32>,
}

impl Fake {
    fn touch(&mut self, tid: i32) -> anyhow::Result<()> {
        if self.exits_when_touched == Some(tid) {
            self.masks.remove(&tid);
            anyhow::bail!("task {tid}: no such task");
        }
        Ok(())
    }
}

impl Placer for Fake {
    fn get(&mut self, tid: i32) -> Option<IdSet> {
        self.masks.get(&tid).cloned()
    }
    fn set(&mut self, _: i32, tid: i32, cpus: &IdSet) -> anyhow::Result<()> {
        self.touch(tid)?;
        let cur = self.masks.get(&tid).cloned().expect("a known task");
        self.journal.entry(tid).or_insert(cur);
        self.masks.insert(tid, cpus.clone());
        self.sets.push((tid, cpus.to_string()));
        Ok(())
    }
    fn adopt(&mut self, _: i32, tid: i32, original: &IdSet) -> anyhow::Result<()> {
        self.touch(tid)?;
        self.journal.insert(tid, original.clone());
        Ok(())
    }
    fn forget(&mut self, tids: &[i32]) -> anyhow::Result<()> {
        for t in tids {
            self.journal.remove(t);
        }
        Ok(())
    }
}

fn cpus(s: &str) -> IdSet {
    s.parse().unwrap()
}

struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(tempfile::tempdir().unwrap())
    }
    fn task(&self, pid: i32, tid: i32, allowed: &str) {
        let d = self.0.path().join(format!("proc/{pid}/task/{tid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("status"), format!("Cpus_allowed_list:\t{allowed}\n")).unwrap();
        std::fs::write(d.join("schedstat"), "0 0 0\n").unwrap();
    }
    fn end(&self, pid: i32, tid: i32) {
        std::fs::remove_dir_all(self.0.path().join(format!("proc/{pid}/task/{tid}"))).unwrap();
    }
    fn children(&self, pid: i32, tid: i32, kids: &str) {
        let d = self
            .0
            .path()
            .join(format!("proc/{pid}/task/{tid}/children"));
        std::fs::write(d, kids).unwrap();
    }
    fn sched(&self, pid: i32, tid: i32, run_ms: u64, delay_ms: u64) {
        let d = self
            .0
            .path()
            .join(format!("proc/{pid}/task/{tid}/schedstat"));
        std::fs::write(
            d,
            format!("{} {} 1\n", run_ms * 1_000_000, delay_ms * 1_000_000),
        )
        .unwrap();
    }
    /// CPUs 0-3 with cumulative busy and idle ticks.
    fn stat(&self, busy: [u64; 4], idle: [u64; 4]) {
        let text: String = (0..4)
            .map(|c| format!("cpu{c} {} 0 0 {} 0 0 0 0\n", busy[c], idle[c]))
            .collect();
        std::fs::write(self.0.path().join("proc/stat"), text).unwrap();
    }
    fn root(&self) -> &Path {
        self.0.path()
    }
}

fn agent(tree: &Tree) -> Agent {
    Agent::new(
        SysRoot::new(tree.root()),
        0,
        cpus("0-1"),
        Thresholds::default(),
        Duration::from_millis(500),
        None,
    )
}

/// An agent following process 10 (CPUs 0-3, home CPUs 0-1), attached.
fn started() -> (Tree, Fake, Agent) {
    let tree = Tree::new();
    tree.task(10, 10, "0-3");
    tree.stat([0; 4], [0; 4]);
    let mut p = Fake::default();
    p.masks.insert(10, cpus("0-3"));
    let mut a = agent(&tree);
    a.attach(&mut p, 10).unwrap();
    (tree, p, a)
}

#[test]
fn places_widens_under_delay_and_brings_back_when_home_has_room() {
    let tree = Tree::new();
    tree.task(10, 10, "0-3");
    tree.task(10, 11, "0-3");
    tree.stat([0; 4], [0; 4]);
    let mut p = Fake::default();
    p.masks.insert(10, cpus("0-3"));
    p.masks.insert(11, cpus("0-3"));
    let mut a = agent(&tree);
    a.attach(&mut p, 10).unwrap();
    assert_eq!(p.masks[&10], cpus("0-1"));
    assert_eq!(p.masks[&11], cpus("0-1"));
    assert_eq!(p.journal[&10], cpus("0-3"), "original journaled");

    let t0 = Instant::now();
    let at = |k: u64| t0 + Duration::from_millis(500 * k);
    a.window_step(&mut p, at(0)).unwrap(); // baselines
                                           // Thread 11 waits 200 of 500 ms, twice; home CPUs busy.
    let (mut busy, mut idle) = ([0u64; 4], [0u64; 4]);
    for k in 1..=2 {
        tree.sched(10, 11, 300 * k, 200 * k);
        busy[0] += 50;
        busy[1] += 50;
        idle[2] += 50;
        idle[3] += 50;
        tree.stat(busy, idle);
        a.window_step(&mut p, at(k)).unwrap();
    }
    assert_eq!(p.masks[&11], cpus("0-3"), "widened to its own CPUs");
    assert_eq!(p.masks[&10], cpus("0-1"), "the idle thread stays home");
    assert_eq!(a.counts.widened, 1);
    // The homenode goes idle: back home after min_wide windows.
    let mut k = 3;
    while p.masks[&11] != cpus("0-1") {
        assert!(k < 20, "never narrowed back");
        tree.sched(10, 11, 600 + 100 * (k - 2), 400);
        for i in idle.iter_mut() {
            *i += 50;
        }
        tree.stat(busy, idle);
        a.window_step(&mut p, at(k)).unwrap();
        k += 1;
    }
    assert_eq!(a.counts.narrowed, 3);
}

#[test]
fn follows_new_threads_and_children_and_lets_go_of_self_placed_tasks() {
    let (tree, mut p, mut a) = started();
    // A thread inheriting the narrowed mask, and a child process.
    tree.task(10, 12, "0-1");
    p.masks.insert(12, cpus("0-1"));
    tree.task(20, 20, "0-1");
    p.masks.insert(20, cpus("0-1"));
    tree.children(10, 10, "20 ");
    let t0 = Instant::now();
    a.window_step(&mut p, t0).unwrap();
    assert_eq!(a.tracked(), 3);
    assert_eq!(p.journal[&12], cpus("0-3"), "original = the creator's");
    assert_eq!(p.journal[&20], cpus("0-3"));
    assert!(
        !p.sets.iter().any(|(t, _)| *t == 12),
        "inherited: no change needed"
    );
    // Thread 12 sets its own mask: let go, out of the journal.
    p.masks.insert(12, cpus("3"));
    tree.sched(10, 12, 10, 0);
    a.window_step(&mut p, t0 + Duration::from_millis(500))
        .unwrap();
    assert_eq!(a.counts.released, 1);
    assert!(!p.journal.contains_key(&12));
    assert_eq!(p.masks[&12], cpus("3"));
    // The child ends: forgotten.
    tree.end(20, 20);
    a.window_step(&mut p, t0 + Duration::from_millis(1000))
        .unwrap();
    assert!(!p.journal.contains_key(&20));
    assert_eq!(a.tracked(), 1);
}

#[test]
fn a_task_whose_cpuset_leaves_out_the_homenode_is_left_alone() {
    let tree = Tree::new();
    tree.task(10, 10, "2-3");
    tree.stat([0; 4], [0; 4]);
    let mut p = Fake::default();
    p.masks.insert(10, cpus("2-3"));
    let mut a = agent(&tree);
    a.attach(&mut p, 10).unwrap();
    assert!(p.sets.is_empty());
    assert_eq!(a.counts.outside, 1);
}

/// The agent stopped with "task 127 of process 127: no such task" (lab_home,
/// CI) when a new child exited between being read and being taken up.
#[test]
fn a_task_that_exits_while_being_taken_up_is_skipped_not_fatal() {
    let (tree, mut p, mut a) = started();
    // Two children: 21 inherited the narrowed mask (journaled: adopt), 22
    // did not (set); each exits as numalab touches it.
    let t0 = Instant::now();
    for (tid, mask) in [(21, "0-1"), (22, "0-3")] {
        tree.task(tid, tid, mask);
        p.masks.insert(tid, cpus(mask));
        tree.children(10, 10, &format!("{tid} "));
        p.exits_when_touched = Some(tid);
        a.window_step(&mut p, t0).unwrap();
        assert!(!p.journal.contains_key(&tid), "task {tid}");
        tree.end(tid, tid);
    }
    // The ones that stay are followed as before.
    p.exits_when_touched = None;
    tree.task(23, 23, "0-3");
    p.masks.insert(23, cpus("0-3"));
    tree.children(10, 10, "23 ");
    a.window_step(&mut p, t0 + Duration::from_millis(500))
        .unwrap();
    assert_eq!(p.masks[&23], cpus("0-1"));
}
