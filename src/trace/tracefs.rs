//! tracefs: finding it, and a private tracing instance for numalab.
//!
//! numalab never touches the top-level tracing state. It creates its own
//! instance (`instances/numalab-PID`: its own ring buffer, event enables,
//! filters, clock and `tracing_on`), and removes it when done, so tracefs
//! is left byte for byte as it was, whatever another tracer is doing at the
//! same time. The instance (and a tracefs mount numalab had to make) is
//! journaled first, so `numalab restore` removes it after a SIGKILL.
//!
//! Events are read from `per_cpu/cpuN/trace_pipe_raw` (binary ring buffer
//! pages, [`super::ringbuf`]) and decoded through the event format files
//! ([`super::format`]). The clock is `mono`, so times line up with
//! CLOCK_MONOTONIC readings taken by numalab and the probe.

use super::decode::Decoder;
use super::event::{self, Event};
use super::format::{EventFormat, PageHeader};
use super::ringbuf;
use crate::error::usage;
use anyhow::Context;
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted, and whether numalab mounted it.
#[derive(Debug, Clone)]
pub struct Tracefs {
    pub root: PathBuf,
    pub mounted_here: bool,
}

pub const DEFAULT_MOUNT: &str = crate::sys::state::TRACEFS;

/// tracefs at `root` can be read by this process.
fn check_readable(root: &Path) -> anyhow::Result<()> {
    let probe = root.join("events/sched/sched_switch/format");
    read_text(&probe).map(drop).map_err(|e| {
        usage(format!(
            "cannot read {}: {e}: tracing needs root (or CAP_SYS_ADMIN, or a tracefs \
             mounted readable for this user, e.g. `mount -o remount,mode=755 {}`)",
            probe.display(),
            root.display()
        ))
    })
}

/// Reads a tracefs file with one large buffer. Some tracefs files
/// (`events/header_page` among them) are generated on every read() and
/// answer a short first read (std's `read_to_string` probes with 32 bytes)
/// with the first bytes and then end-of-file.
pub fn read_text(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(out).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The tracefs mount point listed in a /proc/mounts text, if any.
pub fn find_in_mounts(mounts: &str) -> Option<PathBuf> {
    let mut debugfs = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        match f[2] {
            "tracefs" => return Some(PathBuf::from(unescape(f[1]))),
            "debugfs" if debugfs.is_none() => {
                debugfs = Some(PathBuf::from(unescape(f[1])).join("tracing"))
            }
            _ => {}
        }
    }
    debugfs.filter(|p| p.join("events").is_dir())
}

/// Events lost in one per_cpu/cpuN/stats text (`overrun:` and `dropped
/// events:`), saturating: a huge value must not overflow the sum.
fn lost_in_stats(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "overrun" | "dropped events")
                .then(|| v.trim().parse::<u64>().ok())?
        })
        .fold(0, u64::saturating_add)
}

/// /proc/mounts escapes spaces and such as octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // In u32 and at most \377: `\777` overflowed the u8 arithmetic (a
        // panic in debug builds); the kernel never writes more than \377,
        // so anything larger is kept as it is.
        let code = b.get(i + 1..i + 4).and_then(|d| {
            d.iter().try_fold(0u32, |v, &c| {
                (b'0'..=b'7')
                    .contains(&c)
                    .then(|| v * 8 + u32::from(c - b'0'))
            })
        });
        if let (b'\\', Some(c @ 0..=0o377)) = (b[i], code) {
            out.push(c as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Tracefs {
    /// Checks, without writing anything, that tracing can work here: tracefs
    /// is mounted and readable by this process, or it is not mounted and
    /// this process may mount it (root). Anything else is an environment
    /// error (exit 2) that says why, found before any state is touched.
    pub fn preflight() -> anyhow::Result<Option<PathBuf>> {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        match find_in_mounts(&mounts) {
            Some(root) => {
                check_readable(&root)?;
                Ok(Some(root))
            }
            None => {
                if !Path::new(DEFAULT_MOUNT).is_dir() {
                    return Err(usage(format!(
                        "tracefs is not mounted and {DEFAULT_MOUNT} does not exist: \
                         this kernel has no tracing support (CONFIG_FTRACE)"
                    )));
                }
                if !rustix::process::geteuid().is_root() {
                    return Err(usage(format!(
                        "tracefs is not mounted, and mounting it at {DEFAULT_MOUNT} needs root: \
                         tracing needs root (or CAP_SYS_ADMIN), or a tracefs mounted readable \
                         for this user (mount -t tracefs -o mode=755 tracefs {DEFAULT_MOUNT})"
                    )));
                }
                Ok(None)
            }
        }
    }

    /// Finds tracefs (see [`Tracefs::preflight`]), mounting it at
    /// [`DEFAULT_MOUNT`] when it is not mounted; the mount is journaled in
    /// `guard` first.
    pub fn locate(guard: &mut crate::sys::state::Guard) -> anyhow::Result<Tracefs> {
        let tfs = match Tracefs::preflight()? {
            Some(root) => Tracefs {
                root,
                mounted_here: false,
            },
            None => {
                guard.mount("tracefs").map_err(|e| {
                    usage(format!(
                        "tracefs is not mounted and {e:#} \
                         (needs root; or mount it: mount -t tracefs tracefs {DEFAULT_MOUNT})"
                    ))
                })?;
                let root = PathBuf::from(DEFAULT_MOUNT);
                check_readable(&root)?;
                Tracefs {
                    root,
                    mounted_here: true,
                }
            }
        };
        Ok(tfs)
    }

    /// The format of `sched/NAME`, `None` when this kernel lacks the event.
    pub fn format(&self, name: &str) -> anyhow::Result<Option<EventFormat>> {
        let p = self.root.join("events/sched").join(name).join("format");
        match read_text(&p) {
            Ok(t) => Ok(Some(EventFormat::parse(&t, &p.display().to_string())?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
        }
    }
}

/// The events a live trace uses: required ones first.
pub const REQUIRED: [&str; 2] = [event::MIGRATE, event::SWITCH];
pub const OPTIONAL: [&str; 5] = [
    event::MOVE_NUMA,
    event::SWAP_NUMA,
    event::STICK_NUMA,
    event::FORK,
    event::EXIT,
];

/// A private tracing instance with numalab's events, filtered to a set of
/// pids. Removed (events off, directory gone) when dropped.
pub struct Instance {
    pub dir: PathBuf,
    header: PageHeader,
    formats: Vec<EventFormat>,
    decoder: Decoder,
    readers: Vec<(u32, std::fs::File)>,
    page: Vec<u8>,
    /// Events this kernel does not have.
    pub missing: Vec<String>,
    /// Pages that said events were lost before them.
    pub missed_pages: u64,
    removed: bool,
}

/// The filter expression for `fmt` matching any of `pids`, on whichever
/// of its pid fields exist; `None` when it would be too long for the
/// kernel (a page), and the event stays unfiltered (filtered here).
pub fn filter_for(fmt: &EventFormat, pids: &BTreeSet<u32>) -> Option<String> {
    let fields: Vec<&str> = match fmt.name.as_str() {
        event::SWITCH => vec!["prev_pid", "next_pid"],
        event::SWAP_NUMA => vec!["src_pid", "dst_pid"],
        event::FORK => vec!["parent_pid"],
        _ => ["pid", "src_pid"]
            .into_iter()
            .filter(|f| fmt.field(f).is_some())
            .take(1)
            .collect(),
    };
    let mut terms: Vec<String> = pids
        .iter()
        .flat_map(|p| fields.iter().map(move |f| format!("{f} == {p}")))
        .collect();
    // Every CPU's switches in and out of idle too, whoever they involve:
    // they tell whether a CPU that pulled a traced task was idle then
    // ([`super::analyze`]).
    if fmt.name == event::SWITCH && !terms.is_empty() {
        terms.extend(["prev_pid == 0".to_string(), "next_pid == 0".to_string()]);
    }
    let s = terms.join(" || ");
    (s.len() < 3500 && !s.is_empty()).then_some(s)
}

impl Instance {
    /// Creates `instances/NAME` with the mono clock and `buffer_kb` per CPU,
    /// and sets up (but does not enable) the events for `cpus`.
    pub fn create(
        tfs: &Tracefs,
        name: &str,
        buffer_kb: u32,
        cpus: &[u32],
    ) -> anyhow::Result<Instance> {
        let hp = tfs.root.join("events/header_page");
        let header = PageHeader::parse(
            &read_text(&hp).with_context(|| format!("reading {}", hp.display()))?,
            &hp.display().to_string(),
        )?;
        let mut formats = Vec::new();
        let mut missing = Vec::new();
        for name in REQUIRED.iter().chain(OPTIONAL.iter()) {
            match tfs.format(name)? {
                Some(f) => formats.push(f),
                None if REQUIRED.contains(name) => {
                    return Err(usage(format!(
                        "this kernel has no sched:{name} trace event; numalab trace needs it"
                    )))
                }
                None => missing.push(name.to_string()),
            }
        }
        let decoder = Decoder::new(&formats).map_err(usage)?;
        let dir = tfs.root.join("instances").join(name);
        std::fs::create_dir(&dir).with_context(|| {
            format!(
                "creating the tracing instance {} (tracefs instances need root)",
                dir.display()
            )
        })?;
        let mut inst = Instance {
            dir,
            page: vec![0; header.page_size],
            header,
            formats,
            decoder,
            readers: Vec::new(),
            missing,
            missed_pages: 0,
            removed: false,
        };
        inst.write("tracing_on", "0")?;
        inst.write("trace_clock", "mono")?;
        inst.write("buffer_size_kb", &buffer_kb.to_string())?;
        for &cpu in cpus {
            let p = inst.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .with_context(|| format!("opening {}", p.display()))?;
            inst.readers.push((cpu, f));
        }
        Ok(inst)
    }

    fn write(&self, rel: &str, value: &str) -> anyhow::Result<()> {
        let p = self.dir.join(rel);
        std::fs::write(&p, value).with_context(|| format!("writing '{value}' to {}", p.display()))
    }

    /// Sets every event's filter to `pids`.
    pub fn set_filters(&self, pids: &BTreeSet<u32>) -> anyhow::Result<()> {
        for f in &self.formats {
            let rel = format!("events/sched/{}/filter", f.name);
            match filter_for(f, pids) {
                Some(expr) => self.write(&rel, &expr)?,
                None => self.write(&rel, "0")?,
            }
        }
        Ok(())
    }

    /// Enables the events and starts recording.
    pub fn start(&self) -> anyhow::Result<()> {
        for f in &self.formats {
            self.write(&format!("events/sched/{}/enable", f.name), "1")?;
        }
        self.write("tracing_on", "1")
    }

    /// Stops recording (what is in the buffers can still be read).
    pub fn stop(&self) -> anyhow::Result<()> {
        self.write("tracing_on", "0")
    }

    /// Reads every page available now and appends the decoded events.
    pub fn read_available(&mut self, out: &mut Vec<Event>) -> anyhow::Result<()> {
        for (cpu, f) in &mut self.readers {
            loop {
                match f.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => {
                        let page = ringbuf::decode_page(&self.header, &self.page[..n])
                            .with_context(|| format!("CPU {cpu}'s trace buffer"))?;
                        if page.missed_events {
                            self.missed_pages += 1;
                        }
                        out.extend(
                            page.records
                                .iter()
                                .filter_map(|r| self.decoder.decode(*cpu, r)),
                        );
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(e).with_context(|| format!("reading CPU {cpu}'s trace buffer"))
                    }
                }
            }
        }
        Ok(())
    }

    /// Events the kernel dropped (buffer full), from per_cpu/cpuN/stats.
    pub fn lost_events(&self) -> u64 {
        self.readers
            .iter()
            .filter_map(|(cpu, _)| {
                read_text(&self.dir.join(format!("per_cpu/cpu{cpu}/stats"))).ok()
            })
            .map(|s| lost_in_stats(&s))
            .fold(0, u64::saturating_add)
    }

    /// Turns everything off and removes the instance.
    pub fn remove(&mut self) -> anyhow::Result<()> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let _ = self.write("tracing_on", "0");
        for f in &self.formats {
            let _ = self.write(&format!("events/sched/{}/enable", f.name), "0");
        }
        self.readers.clear();
        crate::sys::state::remove_instance_dir(&self.dir)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("numalab: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tracefs_or_debugfs_in_mounts() {
        let m = "sysfs /sys sysfs rw 0 0\ntracefs /sys/kernel/trac\\040ing tracefs rw 0 0\n";
        assert_eq!(
            find_in_mounts(m),
            Some(PathBuf::from("/sys/kernel/trac ing"))
        );
        assert_eq!(find_in_mounts("proc /proc proc rw 0 0\n"), None);
    }

    /// Found by tests/prop_procfs.rs: `a /\400 tracefs rw 0 0` in
    /// /proc/mounts overflowed u8 (4 * 64) in unescape.
    #[test]
    fn mounts_octal_escape_above_377_is_kept_not_a_panic() {
        assert_eq!(unescape("/a\\777b\\400"), "/a\\777b\\400");
        assert_eq!(unescape("/a\\134b\\011\\0"), "/a\\b\t\\0");
    }

    /// Huge `overrun` and `dropped events` counts saturate instead of
    /// overflowing the sum.
    #[test]
    fn stats_lost_events_saturate_not_overflow() {
        let m = u64::MAX;
        let s = format!("entries: 5\noverrun: {m}\ncommit overrun: 0\ndropped events: 3\n");
        assert_eq!(lost_in_stats(&s), m);
        assert_eq!(
            lost_in_stats("overrun: 2\ndropped events: 3\nread events: 9\n"),
            5
        );
    }

    #[test]
    fn filters_name_the_pid_fields() {
        let f = |name: &str, fields: &[&str]| EventFormat {
            name: name.into(),
            id: 1,
            fields: fields
                .iter()
                .map(|n| super::super::format::Field {
                    name: n.to_string(),
                    offset: 0,
                    size: 4,
                    signed: true,
                })
                .collect(),
        };
        let p: BTreeSet<u32> = [5, 9].into();
        assert_eq!(
            filter_for(&f("sched_switch", &["prev_pid", "next_pid"]), &p).unwrap(),
            "prev_pid == 5 || next_pid == 5 || prev_pid == 9 || next_pid == 9 \
             || prev_pid == 0 || next_pid == 0"
        );
        assert_eq!(
            filter_for(&f("sched_stick_numa", &["src_pid", "dst_pid"]), &p).unwrap(),
            "src_pid == 5 || src_pid == 9"
        );
        assert_eq!(
            filter_for(&f("sched_migrate_task", &["comm", "pid"]), &p).unwrap(),
            "pid == 5 || pid == 9"
        );
        let many: BTreeSet<u32> = (1_000_000..1_000_200).collect();
        assert_eq!(filter_for(&f("sched_switch", &["prev_pid"]), &many), None);
    }
}
