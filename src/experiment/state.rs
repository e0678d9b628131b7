//! System state an experiment changes, and putting it back.
//!
//! Knobs: `kernel.numa_balancing` (/proc/sys/kernel/numa_balancing) and the
//! scheduler's debugfs files (/sys/kernel/debug/sched/migration_cost_ns,
//! sched/numa_balancing/scan_*). Before the first change a journal is
//! written (and fsynced) with every original value, so that after SIGKILL or
//! power loss `numalab restore` can put them back; a run refuses to start
//! while a journal of an unfinished run exists. [`Guard`] restores on drop,
//! which covers normal exit, errors and panics; the runner's signal flag
//! covers Ctrl-C and SIGTERM.

use crate::error::usage;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";
pub const DEBUGFS: &str = "/sys/kernel/debug";
pub const MIGRATION_COST: &str = "/sys/kernel/debug/sched/migration_cost_ns";

/// The state directory: `$NUMALAB_STATE_DIR`, else /var/lib/numalab.
pub fn state_dir() -> PathBuf {
    std::env::var_os("NUMALAB_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/numalab"))
}

/// The journal of `numalab run` (one run at a time).
pub fn journal_path() -> PathBuf {
    state_dir().join("restore.json")
}

/// The journal of a process that only traces (`trace`, `jobs`): one per
/// process, since several may trace at once.
pub fn trace_journal_path() -> PathBuf {
    state_dir().join(format!("trace-{}.json", crate::sys::pid()))
}

/// Every journal in the state directory: the run's, then tracers'.
pub fn all_journals() -> Vec<PathBuf> {
    let mut v = vec![journal_path()];
    if let Ok(rd) = std::fs::read_dir(state_dir()) {
        let mut t: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("trace-") && n.ends_with(".json"))
            })
            .collect();
        t.sort();
        v.extend(t);
    }
    v
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub pid: i32,
    pub run_dir: String,
    /// Knob path -> original content.
    pub originals: BTreeMap<String, String>,
    /// True when numalab mounted debugfs itself (unmounted on restore).
    pub mounted_debugfs: bool,
    /// Tracing instances numalab created (removed on restore).
    #[serde(default)]
    pub tracefs_instances: Vec<String>,
    /// Where numalab mounted tracefs itself (unmounted on restore).
    #[serde(default)]
    pub mounted_tracefs: Option<String>,
}

impl Journal {
    pub fn read(path: &Path) -> anyhow::Result<Option<Journal>> {
        match std::fs::read_to_string(path) {
            Ok(t) => Ok(Some(serde_json::from_str(&t).with_context(|| {
                format!(
                    "journal {} is corrupt; inspect and delete it",
                    path.display()
                )
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn write(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let tmp = path.with_extension("tmp");
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(serde_json::to_string_pretty(self)?.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// Writes every original back; returns what was restored.
    pub fn restore(&self) -> anyhow::Result<Vec<String>> {
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (path, value) in &self.originals {
            match std::fs::write(path, value.trim()) {
                Ok(()) => done.push(format!("{path} = {}", value.trim())),
                Err(e) => failed.push(format!("{path}: {e}")),
            }
        }
        for dir in &self.tracefs_instances {
            match crate::trace::tracefs::remove_instance_dir(Path::new(dir)) {
                Ok(()) => done.push(format!("removed tracing instance {dir}")),
                Err(e) => failed.push(format!("{e:#}")),
            }
        }
        if let Some(m) = &self.mounted_tracefs {
            crate::sys::unmount(m).ok();
            done.push(format!("unmounted {m}"));
        }
        if self.mounted_debugfs {
            crate::sys::unmount(DEBUGFS).ok();
            done.push(format!("unmounted {DEBUGFS}"));
        }
        if failed.is_empty() {
            Ok(done)
        } else {
            anyhow::bail!("could not restore: {}", failed.join("; "))
        }
    }
}

/// Refuses to start while an unfinished run's journal exists.
pub fn refuse_if_unfinished(path: &Path) -> anyhow::Result<()> {
    if let Some(j) = Journal::read(path)? {
        let alive = Path::new(&format!("/proc/{}", j.pid)).exists();
        return Err(usage(format!(
            "an unfinished run (pid {}{}, results in {}) left system state to restore \
             (journal {}): run `numalab restore` first",
            j.pid,
            if alive {
                ", still running"
            } else {
                ", no longer running"
            },
            j.run_dir,
            path.display()
        )));
    }
    Ok(())
}

/// Changes knobs during a run and restores them when dropped.
pub struct Guard {
    path: PathBuf,
    journal: Journal,
    active: bool,
}

impl Guard {
    pub fn new(path: PathBuf, run_dir: &Path) -> Guard {
        Guard {
            path,
            journal: Journal {
                pid: crate::sys::pid(),
                run_dir: run_dir.display().to_string(),
                originals: BTreeMap::new(),
                mounted_debugfs: false,
                tracefs_instances: Vec::new(),
                mounted_tracefs: None,
            },
            active: false,
        }
    }

    /// Notes that numalab mounted debugfs, so restore unmounts it.
    pub fn mounted_debugfs(&mut self) -> anyhow::Result<()> {
        self.journal.mounted_debugfs = true;
        self.journal.write(&self.path)?;
        self.active = true;
        Ok(())
    }

    /// Journals a tracing instance about to be created.
    pub fn tracefs_instance(&mut self, dir: &Path) -> anyhow::Result<()> {
        self.journal
            .tracefs_instances
            .push(dir.display().to_string());
        self.journal.write(&self.path)?;
        self.active = true;
        Ok(())
    }

    /// Drops a removed tracing instance from the journal.
    pub fn tracefs_instance_removed(&mut self, dir: &Path) -> anyhow::Result<()> {
        let d = dir.display().to_string();
        let before = self.journal.tracefs_instances.len();
        self.journal.tracefs_instances.retain(|x| *x != d);
        if self.journal.tracefs_instances.len() != before {
            self.journal.write(&self.path)?;
        }
        Ok(())
    }

    /// Journals a tracefs mount about to be made.
    pub fn mounted_tracefs(&mut self, at: &str) -> anyhow::Result<()> {
        self.journal.mounted_tracefs = Some(at.to_string());
        self.journal.write(&self.path)?;
        self.active = true;
        Ok(())
    }

    /// Sets `path` to `value`, journaling its original first.
    pub fn set(&mut self, path: &str, value: &str) -> anyhow::Result<()> {
        let current = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        if current.trim() == value {
            return Ok(());
        }
        if !self.journal.originals.contains_key(path) {
            self.journal.originals.insert(path.to_string(), current);
            self.journal.write(&self.path)?;
            self.active = true;
        }
        std::fs::write(path, value).with_context(|| format!("writing {value} to {path}"))?;
        Ok(())
    }

    /// Restores everything and removes the journal.
    pub fn restore(&mut self) -> anyhow::Result<Vec<String>> {
        if !self.active {
            return Ok(Vec::new());
        }
        let done = self.journal.restore()?;
        std::fs::remove_file(&self.path).ok();
        self.active = false;
        Ok(done)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "numalab: {e:#}; the journal {} stays for `numalab restore`",
                self.path.display()
            );
        }
    }
}

/// Whether a knob can be written by this process.
pub fn writable(path: &str) -> bool {
    std::fs::OpenOptions::new().write(true).open(path).is_ok()
}
