//! Other tasks' CPU affinity as journaled state (`numalab home`, `run
//! --pnid-via agent`): what the journal keeps of a task whose mask numalab
//! changed, and how that mask is put back.
//!
//! The care taken (the affinity part of the journal's allowlist):
//! - an entry is written only by [`super::state::Guard::set_task_affinity`]
//!   (or `journal_task_affinity` for a task that inherited a mask numalab
//!   set), before the first change, so the journal names only tasks numalab
//!   itself changed;
//! - kernel threads are refused (their placement is the kernel's);
//! - each entry keeps the task's start time (field 22 of its `stat`), so a
//!   restore after SIGKILL never touches another task that got the same id
//!   later: a tid that is gone or was reused is left alone and said so.

use crate::idset::IdSet;
use crate::topology::sysfs::SysRoot;
use serde::{Deserialize, Serialize};

/// What the journal keeps of one task (thread) whose mask numalab changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityOriginal {
    /// The process (thread group) of the thread.
    pub tgid: i32,
    /// The thread's start time in clock ticks since boot (`stat` field 22).
    pub start_time: u64,
    /// Its CPU mask before numalab changed it, as a CPU list.
    pub cpus: String,
}

/// PF_KTHREAD in the `flags` field (9) of `stat`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields after the command name of a `stat` line (the name, in
/// parentheses, may itself hold spaces and parentheses).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// Start time (field 22) and whether it is a kernel thread, from a `stat`
/// text.
pub fn parse_stat(text: &str) -> Option<(u64, bool)> {
    let f = stat_fields(text)?;
    // After the name, field 3 (state) is index 0: field k is index k - 3.
    let start = f.get(22 - 3)?.parse().ok()?;
    let flags: u64 = f.get(9 - 3)?.parse().ok()?;
    Some((start, flags & PF_KTHREAD != 0))
}

/// Who a task is, from a `stat` text: its command name (between the first
/// `(` and the last `)`: the name may itself hold both), its parent's pid
/// (field 4) and whether it is a kernel thread (PF_KTHREAD in field 9).
pub fn parse_stat_identity(text: &str) -> Option<(&str, i32, bool)> {
    let comm = text.get(text.find('(')? + 1..text.rfind(')')?)?;
    let f = stat_fields(text)?;
    let ppid = f.get(4 - 3)?.parse().ok()?;
    let flags: u64 = f.get(9 - 3)?.parse().ok()?;
    Some((comm, ppid, flags & PF_KTHREAD != 0))
}

/// The CPU a task last ran on (field 39 of a `stat` text).
pub fn parse_stat_cpu(text: &str) -> Option<u32> {
    stat_fields(text)?.get(39 - 3)?.parse().ok()
}

/// A task's CPU time so far, user plus system (fields 14 and 15 of a
/// `stat` text), in USER_HZ ticks as /proc/stat counts them.
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let f = stat_fields(text)?;
    let (u, s): (u64, u64) = (f.get(14 - 3)?.parse().ok()?, f.get(15 - 3)?.parse().ok()?);
    Some(u + s)
}

/// Reads thread `tid` of process `tgid`: its start time and whether it is a
/// kernel thread; `None` when it does not exist (any more).
pub fn task_stat(sys: &SysRoot, tgid: i32, tid: i32) -> Option<(u64, bool)> {
    let text = sys
        .read_opt(&format!("proc/{tgid}/task/{tid}/stat"))
        .ok()??;
    parse_stat(&text)
}

/// Whether an entry is well formed (checked when a journal is read, and
/// again before it is restored).
pub fn check_entry(tid: i32, e: &AffinityOriginal) -> Result<(), String> {
    if tid <= 0 || e.tgid <= 0 {
        return Err(format!("task {tid} (process {}) is not a task id", e.tgid));
    }
    if e.start_time == 0 {
        return Err(format!("task {tid} has no start time"));
    }
    match IdSet::parse(&e.cpus) {
        Ok(s) if !s.is_empty() => Ok(()),
        _ => Err(format!("task {tid}: {:?} is not a CPU list", e.cpus)),
    }
}

/// Puts task `tid`'s original mask back if it is still the task numalab
/// changed. Ok(message) says what was done (restored, gone, reused).
pub fn restore_one(sys: &SysRoot, tid: i32, e: &AffinityOriginal) -> Result<String, String> {
    check_entry(tid, e)?;
    match task_stat(sys, e.tgid, tid) {
        None => Ok(format!("task {tid}: gone, nothing to restore")),
        Some((_, true)) => Err(format!(
            "task {tid} is a kernel thread: numalab never places those; refused"
        )),
        Some((start, _)) if start != e.start_time => Ok(format!(
            "task {tid}: the id now names another task (started at {start}, not {}); left alone",
            e.start_time
        )),
        Some(_) => {
            let cpus = IdSet::parse(&e.cpus).map_err(|x| x.to_string())?;
            match super::set_affinity(tid, &cpus) {
                Ok(()) => Ok(format!("task {tid} (process {}): CPUs {}", e.tgid, e.cpus)),
                Err(x) if x.raw_os_error() == Some(libc::ESRCH) => {
                    Ok(format!("task {tid}: gone, nothing to restore"))
                }
                Err(x) => Err(format!("task {tid}: setting CPUs {}: {x}", e.cpus)),
            }
        }
    }
}

impl super::state::Guard {
    /// Sets thread `tid` of process `tgid` to `cpus`, journaling its
    /// original mask first (once per task). Kernel threads are refused.
    pub fn set_task_affinity(&mut self, tgid: i32, tid: i32, cpus: &IdSet) -> anyhow::Result<()> {
        if !self.journal.affinity.contains_key(&tid) {
            let original = super::get_affinity(tid)
                .map_err(|e| anyhow::anyhow!("reading task {tid}'s CPUs: {e}"))?;
            self.journal_task_affinity(tgid, tid, &original)?;
        }
        super::set_affinity(tid, cpus)
            .map_err(|e| anyhow::anyhow!("setting task {tid}'s CPUs to {cpus}: {e}"))
    }

    /// Journals `original` as thread `tid`'s mask to put back, for a task
    /// whose current mask numalab caused without setting it (a thread or
    /// child that inherited a mask numalab set on its creator). Kernel
    /// threads and tasks that are not (any more) are refused.
    pub fn journal_task_affinity(
        &mut self,
        tgid: i32,
        tid: i32,
        original: &IdSet,
    ) -> anyhow::Result<()> {
        let proc = SysRoot::new("/");
        let (start_time, kthread) = task_stat(&proc, tgid, tid)
            .ok_or_else(|| anyhow::anyhow!("task {tid} of process {tgid}: no such task"))?;
        if kthread {
            return Err(crate::error::usage(format!(
                "task {tid} is a kernel thread: numalab does not place those"
            )));
        }
        let e = AffinityOriginal {
            tgid,
            start_time,
            cpus: original.to_string(),
        };
        self.journal_change(|j| {
            j.affinity.insert(tid, e);
        })
    }

    /// The journaled original mask of thread `tid`, if numalab changed it.
    pub fn task_original(&self, tid: i32) -> Option<IdSet> {
        self.journal
            .affinity
            .get(&tid)
            .and_then(|e| IdSet::parse(&e.cpus).ok())
    }

    /// Drops tasks from the journal without touching them (they exited,
    /// or set their own mask and were let go).
    pub fn forget_tasks(&mut self, tids: &[i32]) -> anyhow::Result<()> {
        if tids.iter().any(|t| self.journal.affinity.contains_key(t)) {
            self.journal_change(|j| {
                for t in tids {
                    j.affinity.remove(t);
                }
            })?;
        }
        Ok(())
    }

    /// Puts every journaled task's mask back and drops them from the
    /// journal (knobs and tracing state stay). Returns what was done; a
    /// task that could not be restored stays journaled for `numalab
    /// restore`, and is named in the error.
    pub fn restore_tasks(&mut self) -> anyhow::Result<Vec<String>> {
        let proc = SysRoot::new("/");
        let mut done = Vec::new();
        let mut failed = Vec::new();
        let mut settled = Vec::new();
        for (tid, e) in &self.journal.affinity {
            match restore_one(&proc, *tid, e) {
                Ok(m) => {
                    done.push(m);
                    settled.push(*tid);
                }
                Err(m) => failed.push(m),
            }
        }
        self.forget_tasks(&settled)?;
        if failed.is_empty() {
            Ok(done)
        } else {
            anyhow::bail!("could not restore: {}", failed.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_names_with_spaces_and_parentheses() {
        let line = "42 (a b) c)) S 1 42 42 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 3 0 98765 1000 10";
        assert_eq!(parse_stat(line), Some((98765, false)));
        let kt = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_stat(kt), Some((5, true)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat_identity(line), Some(("a b) c)", 1, false)));
        assert_eq!(parse_stat_identity(kt), Some(("kthreadd", 0, true)));
        assert_eq!(parse_stat_identity("1 )x( S 1 1 1 0 -1 0"), None);
        // Fields 3..=52 after the name; field 39 (the last CPU) is 7.
        let f: Vec<String> = (3..=52)
            .map(|k| if k == 39 { "7".into() } else { k.to_string() })
            .collect();
        assert_eq!(parse_stat_cpu(&format!("1 (x y) {}", f.join(" "))), Some(7));
        assert_eq!(parse_stat_cpu("1 (x) S 1"), None);
        // utime (field 14) + stime (field 15).
        assert_eq!(
            parse_stat_cpu_ticks(&format!("1 (x y) {}", f.join(" "))),
            Some(29)
        );
        assert_eq!(parse_stat_cpu_ticks("1 (x) S 1"), None);
    }

    #[test]
    fn entries_need_ids_a_start_time_and_a_cpu_list() {
        let ok = AffinityOriginal {
            tgid: 10,
            start_time: 5,
            cpus: "0-3".into(),
        };
        assert!(check_entry(11, &ok).is_ok());
        assert!(check_entry(0, &ok).is_err());
        assert!(check_entry(
            11,
            &AffinityOriginal {
                start_time: 0,
                ..ok.clone()
            }
        )
        .is_err());
        assert!(check_entry(
            11,
            &AffinityOriginal {
                cpus: "x".into(),
                ..ok.clone()
            }
        )
        .is_err());
        assert!(check_entry(
            11,
            &AffinityOriginal {
                cpus: "".into(),
                ..ok
            }
        )
        .is_err());
    }

    #[test]
    fn a_reused_or_gone_tid_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("proc/7/task/8");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("stat"),
            "8 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 0 0",
        )
        .unwrap();
        let kt = tmp.path().join("proc/2/task/2");
        std::fs::create_dir_all(&kt).unwrap();
        std::fs::write(
            kt.join("stat"),
            "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
        )
        .unwrap();
        let sys = SysRoot::new(tmp.path());
        let e = AffinityOriginal {
            tgid: 7,
            start_time: 444,
            cpus: "0".into(),
        };
        assert!(restore_one(&sys, 8, &e).unwrap().contains("another task"));
        assert!(restore_one(&sys, 9, &e).unwrap().contains("gone"));
        let k = AffinityOriginal {
            tgid: 2,
            start_time: 5,
            cpus: "0".into(),
        };
        assert!(restore_one(&sys, 2, &k)
            .unwrap_err()
            .contains("kernel thread"));
    }
}
