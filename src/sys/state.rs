//! System state numalab changes, and putting it back.
//!
//! What numalab may change: sysctls of the scheduler (`kernel.numa_balancing*`,
//! `kernel.sched_*`), the scheduler's debugfs files (`/sys/kernel/debug/sched/`),
//! its own tracing instances (`instances/numalab-PID`), debugfs/tracefs
//! mounts it had to make, and the CPU affinity of tasks it placed (`numalab
//! home`; see [`super::affinity`]). Nothing else: [`allowed_knob`] is the
//! allowlist, and a journal naming anything else is refused before anything
//! is written.
//!
//! The protocol, for every command that changes state (run, trace, jobs):
//! 1. [`StateLock::acquire`]: an exclusive flock on the state directory, taken
//!    before the initial values are read, so two commands never interleave
//!    their changes (a second one exits 2 naming the holder). The kernel drops
//!    the lock when the process dies, however it dies.
//! 2. [`Guard`]: before the first change, a journal with every original value
//!    is written through [`write_atomic`] (temp file, fsync, rename, fsync of
//!    the directory: the journal exists to survive power loss).
//! 3. The guard restores on drop (normal end, error, panic); signals only set
//!    a flag ([`super::signals`]) so the command reaches that drop; after
//!    SIGKILL or power loss, `numalab restore` replays the journal.

use crate::error::usage;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::path::{Component, Path, PathBuf};

pub const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";
pub const DEBUGFS: &str = "/sys/kernel/debug";
pub const DEBUGFS_SCHED: &str = "/sys/kernel/debug/sched";
pub const MIGRATION_COST: &str = "/sys/kernel/debug/sched/migration_cost_ns";
/// Turns the load balancer's counters in /proc/schedstat on (they stay at
/// 0 while it is off); `run --trace` sets it for the whole run.
pub const SCHEDSTATS: &str = "/proc/sys/kernel/sched_schedstats";
/// Where tracefs lives (and where numalab mounts it when it is not mounted).
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// tracefs as seen through debugfs on older setups.
pub const TRACEFS_IN_DEBUGFS: &str = "/sys/kernel/debug/tracing";

/// The state directory: `$NUMALAB_STATE_DIR`, else /var/lib/numalab for
/// root. Other users cannot change system state, so theirs only serves to
/// keep one numalab at a time: `$XDG_STATE_HOME/numalab`, else
/// `$HOME/.local/state/numalab` (the XDG rules: a relative or empty
/// XDG_STATE_HOME is ignored). Refused (exit 2), naming the variable: an
/// empty or relative NUMALAB_STATE_DIR (it put the lock and journal in
/// the current directory, so two runs from two directories were not kept
/// apart and `restore` elsewhere found nothing), and a user without an
/// absolute HOME or XDG_STATE_HOME (the fallback, /tmp/numalab, is a
/// directory another user can take first).
pub fn state_dir() -> anyhow::Result<PathBuf> {
    let absolute = |v: std::ffi::OsString| {
        let p = PathBuf::from(v);
        p.is_absolute().then_some(p)
    };
    if let Some(d) = std::env::var_os("NUMALAB_STATE_DIR") {
        return absolute(d.clone()).ok_or_else(|| {
            usage(format!(
                "NUMALAB_STATE_DIR={:?}: give an absolute path (the lock and the journal \
                 live there, and `numalab restore` must find them from any directory)",
                d
            ))
        });
    }
    if rustix::process::geteuid().is_root() {
        return Ok(PathBuf::from("/var/lib/numalab"));
    }
    std::env::var_os("XDG_STATE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".local/state"))
        })
        .map(|d| d.join("numalab"))
        .ok_or_else(|| {
            usage(
                "no state directory: neither HOME nor XDG_STATE_HOME is an absolute path; \
                 set NUMALAB_STATE_DIR to a directory of your own"
                    .to_string(),
            )
        })
}

/// The journal in a state directory.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join("restore.json")
}

/// Every journal in `dir`: the current one, then per-process tracer
/// journals (`trace-PID.json`) that earlier numalab versions wrote.
pub fn all_journals(dir: &Path) -> Vec<PathBuf> {
    let mut v = vec![journal_path(dir)];
    if let Ok(rd) = std::fs::read_dir(dir) {
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

/// Writes `data` to `path` atomically and durably: a temp file in the same
/// directory, fsync, rename over `path`, fsync of the directory. Readers and
/// crashes see the old content or the new, never half of it. Every error
/// names the path; the temp file never outlives a failure.
pub fn write_atomic(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file path", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| -> anyhow::Result<()> {
        let via = || format!("writing {} (via {})", path.display(), tmp.display());
        let mut f = std::fs::File::create(&tmp).with_context(via)?;
        f.write_all(data)
            .and_then(|()| f.sync_all())
            .with_context(via)?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    sync_dir(dir)
}

/// fsyncs a directory, so a rename or create in it survives power loss.
pub fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing directory {}", dir.display()))
}

/// Whether numalab may write the knob at system path `path`: the scheduler's
/// sysctls and debugfs files, nothing else. Paths are absolute, with no `..`
/// or `.` components, so nothing can climb out of the allowed trees.
pub fn allowed_knob(path: &str) -> bool {
    if !is_plain_absolute(path) {
        return false;
    }
    if let Some(name) = path.strip_prefix("/proc/sys/kernel/") {
        return !name.contains('/')
            && (name.starts_with("numa_balancing") || name.starts_with("sched_"));
    }
    path.strip_prefix(DEBUGFS_SCHED)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|rest| !rest.is_empty())
}

/// Whether `path` names a tracing instance numalab creates
/// (`<tracefs>/instances/numalab-<pid>`).
pub fn allowed_instance(path: &str) -> bool {
    is_plain_absolute(path)
        && [TRACEFS, TRACEFS_IN_DEBUGFS].iter().any(|root| {
            path.strip_prefix(root)
                .and_then(|r| r.strip_prefix("/instances/numalab-"))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        })
}

fn is_plain_absolute(path: &str) -> bool {
    let p = Path::new(path);
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// The journal: what to put back if the process that changed it dies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub pid: i32,
    /// The run's records ("" for commands without a run directory).
    pub run_dir: String,
    /// Knob system path -> original content.
    pub originals: BTreeMap<String, String>,
    /// True when numalab mounted debugfs itself (unmounted on restore).
    pub mounted_debugfs: bool,
    /// Tracing instances numalab created (removed on restore).
    #[serde(default)]
    pub tracefs_instances: Vec<String>,
    /// Where numalab mounted tracefs itself (unmounted on restore).
    #[serde(default)]
    pub mounted_tracefs: Option<String>,
    /// Where the system paths are: "/" for a real journal. Tests journal
    /// knobs of a scratch tree; `numalab restore` refuses any other root.
    #[serde(default = "slash")]
    pub root: String,
    /// Tasks (thread ids) whose CPU affinity numalab changed -> what to put
    /// back (see [`super::affinity`]). Always real tasks, whatever `root`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub affinity: BTreeMap<i32, super::affinity::AffinityOriginal>,
}

fn slash() -> String {
    "/".into()
}

impl Journal {
    fn empty(root: &Path, run_dir: &Path) -> Journal {
        Journal {
            pid: crate::sys::pid(),
            run_dir: run_dir.display().to_string(),
            originals: BTreeMap::new(),
            mounted_debugfs: false,
            tracefs_instances: Vec::new(),
            mounted_tracefs: None,
            root: root.display().to_string(),
            affinity: BTreeMap::new(),
        }
    }

    /// Reads a journal; `None` when there is none. A journal that does not
    /// parse, or names anything outside the allowlist, is an error (exit 2)
    /// that names the file and what is wrong.
    pub fn read(path: &Path) -> anyhow::Result<Option<Journal>> {
        // Bytes, not a String: a journal that is not UTF-8 is as corrupt as
        // one that is not JSON (exit 2), not an I/O error.
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let j: Journal = serde_json::from_slice(&bytes).map_err(|e| {
            usage(format!(
                "journal {} is corrupt ({e}); inspect and delete it",
                path.display()
            ))
        })?;
        j.check()
            .map_err(|why| usage(format!("journal {}: {why}; refused", path.display())))?;
        Ok(Some(j))
    }

    /// Every path the journal names is one numalab may touch.
    pub fn check(&self) -> Result<(), String> {
        if !Path::new(&self.root).is_absolute() {
            return Err(format!("root {:?} is not an absolute path", self.root));
        }
        if let Some(k) = self.originals.keys().find(|k| !allowed_knob(k)) {
            return Err(format!("{k:?} is not a knob numalab changes"));
        }
        if let Some(i) = self.tracefs_instances.iter().find(|i| !allowed_instance(i)) {
            return Err(format!("{i:?} is not a tracing instance numalab creates"));
        }
        if let Some(m) = self
            .mounted_tracefs
            .as_ref()
            .filter(|m| *m != TRACEFS && *m != TRACEFS_IN_DEBUGFS)
        {
            return Err(format!("{m:?} is not where numalab mounts tracefs"));
        }
        for (tid, e) in &self.affinity {
            super::affinity::check_entry(*tid, e)?;
        }
        Ok(())
    }

    /// The real location of system path `path` under this journal's root.
    pub fn at(&self, path: &str) -> PathBuf {
        Path::new(&self.root).join(path.trim_start_matches('/'))
    }

    fn write(&self, path: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        write_atomic(path, text.as_bytes())
    }

    /// Writes every original back; returns what was restored. Checks the
    /// allowlist again, so a journal built in memory cannot escape it.
    pub fn restore(&self) -> anyhow::Result<Vec<String>> {
        self.check()
            .map_err(|why| usage(format!("journal: {why}")))?;
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (path, value) in &self.originals {
            match std::fs::write(self.at(path), value.trim()) {
                Ok(()) => done.push(format!("{path} = {}", value.trim())),
                Err(e) => failed.push(format!("{path}: {e}")),
            }
        }
        for dir in &self.tracefs_instances {
            match remove_instance_dir(&self.at(dir)) {
                Ok(()) => done.push(format!("removed tracing instance {dir}")),
                Err(e) => failed.push(format!("{e:#}")),
            }
        }
        let proc = crate::topology::sysfs::SysRoot::new("/");
        for (tid, e) in &self.affinity {
            match super::affinity::restore_one(&proc, *tid, e) {
                Ok(msg) => done.push(msg),
                Err(msg) => failed.push(msg),
            }
        }
        if let Some(m) = &self.mounted_tracefs {
            crate::sys::unmount(&self.at(m).display().to_string()).ok();
            done.push(format!("unmounted {m}"));
        }
        if self.mounted_debugfs {
            crate::sys::unmount(&self.at(DEBUGFS).display().to_string()).ok();
            done.push(format!("unmounted {DEBUGFS}"));
        }
        if failed.is_empty() {
            Ok(done)
        } else {
            anyhow::bail!("could not restore: {}", failed.join("; "))
        }
    }
}

/// Removes a tracing instance directory; tracefs answers EBUSY while a
/// reader still has one of its files open, so it retries for a second.
pub fn remove_instance_dir(dir: &Path) -> anyhow::Result<()> {
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Err(e) => return Err(e).with_context(|| format!("removing {}", dir.display())),
        }
    }
    anyhow::bail!("removing {}: still busy after 1 s", dir.display())
}

/// The exclusive lock of a state directory: one state-changing numalab at
/// a time. Released by the kernel when the process ends, however it ends.
#[derive(Debug)]
pub struct StateLock {
    dir: PathBuf,
    _file: std::fs::File,
}

impl StateLock {
    /// Takes the lock of `dir` (created if missing) for `what` (e.g.
    /// "numalab run"). Another holder, or a directory this process cannot
    /// write, is an environment error (exit 2) that says who or why.
    pub fn acquire(dir: &Path, what: &str) -> anyhow::Result<StateLock> {
        // Blame what is wrong: a file in the way is not a question of root,
        // and root is not told it needs root.
        let no = |e: std::io::Error| {
            let not_dir = dir
                .ancestors()
                .find(|p| p.symlink_metadata().is_ok())
                .filter(|p| !p.is_dir());
            let why = match not_dir {
                Some(p) => format!("{} is not a directory", p.display()),
                None if e.kind() == std::io::ErrorKind::PermissionDenied
                    && !rustix::process::geteuid().is_root() =>
                {
                    format!("{e} (changing system state needs root)")
                }
                None => e.to_string(),
            };
            usage(format!(
                "cannot use the state directory {}: {why}; NUMALAB_STATE_DIR names another \
                 directory",
                dir.display()
            ))
        };
        std::fs::create_dir_all(dir).map_err(no)?;
        let path = dir.join("lock");
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(no)?;
        if let Err(e) = rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            let e = std::io::Error::from(e);
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(no(e));
            }
            // The holder writes who it is just after it takes the lock: a
            // command that lost the race by microseconds may find the file
            // still empty, so it looks again for up to 100 ms.
            let mut holder = String::new();
            for _ in 0..50 {
                holder.clear();
                let _ = f.rewind().and_then(|()| f.read_to_string(&mut holder));
                if !holder.trim().is_empty() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let holder = holder.trim();
            return Err(usage(format!(
                "another numalab is changing system state ({}; lock {}): one at a time; \
                 wait for it to end or stop it",
                if holder.is_empty() {
                    "holder unknown".to_string()
                } else {
                    holder.to_string()
                },
                path.display()
            )));
        }
        // Who holds it, for the message a second command prints.
        let who = format!("pid {}: {what}\n", std::process::id());
        f.set_len(0)
            .and_then(|()| f.rewind())
            .and_then(|()| f.write_all(who.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(StateLock {
            dir: dir.to_path_buf(),
            _file: f,
        })
    }

    /// The locked state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Refuses to go on while a journal of a killed command is waiting for
    /// `numalab restore` (its changes would be taken for the originals).
    pub fn refuse_if_unfinished(&self) -> anyhow::Result<()> {
        for path in all_journals(&self.dir) {
            if let Some(j) = Journal::read(&path)? {
                return Err(usage(format!(
                    "a numalab that did not finish (pid {}{}) left system state to restore \
                     (journal {}): run `numalab restore` first",
                    j.pid,
                    if j.run_dir.is_empty() {
                        String::new()
                    } else {
                        format!(", results in {}", j.run_dir)
                    },
                    path.display()
                )));
            }
        }
        Ok(())
    }
}

/// Changes knobs and tracing state, journaled first, restored when dropped.
/// Holding the [`StateLock`] is what makes a guard possible.
pub struct Guard {
    /// None for a run that changes nothing (the simulator): every change
    /// is refused.
    lock: Option<StateLock>,
    path: PathBuf,
    pub(super) journal: Journal,
    active: bool,
}

impl Guard {
    /// A guard for the real system.
    pub fn new(lock: StateLock, run_dir: &Path) -> Guard {
        Guard::with_root(lock, run_dir, Path::new("/"))
    }

    /// A guard whose system paths live under `root` (tests: a scratch tree).
    pub fn with_root(lock: StateLock, run_dir: &Path, root: &Path) -> Guard {
        Guard {
            path: journal_path(lock.dir()),
            lock: Some(lock),
            journal: Journal::empty(root, run_dir),
            active: false,
        }
    }

    /// A guard for a run that changes no system state (the simulator): no
    /// lock, no journal, and any change it is asked for is an error.
    pub fn inert(run_dir: &Path) -> Guard {
        Guard {
            path: PathBuf::new(),
            lock: None,
            journal: Journal::empty(Path::new("/"), run_dir),
            active: false,
        }
    }

    /// The journal's path.
    pub fn journal_path(&self) -> &Path {
        &self.path
    }

    /// The state directory this guard holds the lock of.
    pub fn state_dir(&self) -> &Path {
        self.lock.as_ref().map_or(Path::new(""), StateLock::dir)
    }

    pub(super) fn journal_change(
        &mut self,
        change: impl FnOnce(&mut Journal),
    ) -> anyhow::Result<()> {
        if self.lock.is_none() {
            anyhow::bail!("internal error: a run that changes no system state was asked to");
        }
        change(&mut self.journal);
        self.journal.check().map_err(usage)?;
        self.journal.write(&self.path)?;
        self.active = true;
        Ok(())
    }

    /// Mounts debugfs (`"debugfs"` at [`DEBUGFS`]) or tracefs (`"tracefs"`
    /// at [`TRACEFS`]), journaled first so restore unmounts it; a mount that
    /// fails is taken out of the journal again.
    pub fn mount(&mut self, fstype: &str) -> anyhow::Result<()> {
        let at = match fstype {
            "debugfs" => DEBUGFS,
            "tracefs" => TRACEFS,
            other => return Err(usage(format!("numalab does not mount {other}"))),
        };
        let set = |j: &mut Journal, on: bool| match fstype {
            "debugfs" => j.mounted_debugfs = on,
            _ => j.mounted_tracefs = on.then(|| at.to_string()),
        };
        self.journal_change(|j| set(j, true))?;
        let target = self.journal.at(at).display().to_string();
        if let Err(e) = crate::sys::mount_fs(fstype, &target) {
            self.journal_change(|j| set(j, false))?;
            return Err(e).with_context(|| format!("mounting {fstype} at {target}"));
        }
        Ok(())
    }

    /// Journals a tracing instance about to be created.
    pub fn tracefs_instance(&mut self, dir: &Path) -> anyhow::Result<()> {
        let d = dir.display().to_string();
        self.journal_change(|j| j.tracefs_instances.push(d))
    }

    /// Drops a removed tracing instance from the journal.
    pub fn tracefs_instance_removed(&mut self, dir: &Path) -> anyhow::Result<()> {
        let d = dir.display().to_string();
        if self.journal.tracefs_instances.contains(&d) {
            self.journal_change(|j| j.tracefs_instances.retain(|x| *x != d))?;
        }
        Ok(())
    }

    /// The current value of knob `path` (a system path).
    pub fn read(&self, path: &str) -> anyhow::Result<String> {
        let at = self.journal.at(path);
        std::fs::read_to_string(&at).with_context(|| format!("reading {}", at.display()))
    }

    /// Sets knob `path` (a system path on the allowlist) to `value`,
    /// journaling its original first.
    pub fn set(&mut self, path: &str, value: &str) -> anyhow::Result<()> {
        if !allowed_knob(path) {
            return Err(usage(format!("{path} is not a knob numalab changes")));
        }
        let current = self.read(path)?;
        if current.trim() == value {
            return Ok(());
        }
        let journaled_now = !self.journal.originals.contains_key(path);
        if journaled_now {
            let (p, c) = (path.to_string(), current);
            self.journal_change(|j| {
                j.originals.insert(p, c);
            })?;
        }
        let at = self.journal.at(path);
        let written = std::fs::write(&at, value)
            .with_context(|| format!("writing {value} to {}", at.display()));
        if written.is_err() && journaled_now {
            // Nothing changed: a journal naming the knob would have the
            // restore write it, and a restore that fails the same way keeps
            // the journal and refuses every later run.
            let p = path.to_string();
            self.journal_change(|j| {
                j.originals.remove(&p);
            })?;
        }
        written
    }

    /// Whether knob `path` (a system path, under this guard's root) can be
    /// written by this process.
    pub fn writable(&self, path: &str) -> bool {
        writable(&self.journal.at(path).to_string_lossy())
    }

    /// Tries `value` on knob `path` and puts what it held straight back:
    /// whether the kernel takes the value, learnt before anything depends
    /// on it. Journaled as [`Guard::set`] is, so a kill between the two
    /// writes is put right by `restore`. The kernel's refusal is the error.
    pub fn try_value(&mut self, path: &str, value: &str) -> anyhow::Result<()> {
        let before = self.read(path)?;
        let tried = self.set(path, value);
        let at = self.journal.at(path);
        if std::fs::read_to_string(&at).unwrap_or_default().trim() != before.trim() {
            std::fs::write(&at, before.trim())
                .with_context(|| format!("writing {} back to {}", before.trim(), at.display()))?;
        }
        tried
    }

    /// Puts every journaled knob not in `keep` back to its original value
    /// (a row without a knob runs with the system's own value, whatever
    /// the row before it set). They stay journaled: a later row may set
    /// them again.
    pub fn reset_except(
        &mut self,
        keep: &std::collections::BTreeSet<String>,
    ) -> anyhow::Result<()> {
        for (path, orig) in &self.journal.originals {
            if keep.contains(path) {
                continue;
            }
            let at = self.journal.at(path);
            let cur = std::fs::read_to_string(&at).unwrap_or_default();
            if cur.trim() != orig.trim() {
                std::fs::write(&at, orig.trim())
                    .with_context(|| format!("writing {} back to {}", orig.trim(), at.display()))?;
            }
        }
        Ok(())
    }

    /// Restores everything and removes the journal.
    pub fn restore(&mut self) -> anyhow::Result<Vec<String>> {
        if !self.active {
            return Ok(Vec::new());
        }
        let done = self.journal.restore()?;
        std::fs::remove_file(&self.path)
            .with_context(|| format!("removing {}", self.path.display()))?;
        if let Some(lock) = &self.lock {
            sync_dir(lock.dir())?;
        }
        self.journal.originals.clear();
        self.journal.tracefs_instances.clear();
        self.journal.mounted_tracefs = None;
        self.journal.mounted_debugfs = false;
        self.journal.affinity.clear();
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

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
