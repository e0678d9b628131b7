//! Reading the topology from sysfs and procfs.
//!
//! Every read goes through [`SysRoot`], which resolves paths under one root
//! directory (`/` on a live machine, a fixture tree in tests) and can record
//! each file it read so the same tree can be captured as a fixture
//! (`numalab topo --capture DIR`). Parse errors carry the path and content.
//!
//! Files read (relative to the root):
//! - `sys/devices/system/cpu/{possible,present,online}`
//! - `sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_id,thread_siblings_list}`
//! - `sys/devices/system/cpu/cpuN/cache/indexK/{level,type,shared_cpu_list,id}`
//! - `sys/devices/system/node/nodeN/{cpulist,meminfo,distance}` and the
//!   `nodeN/cpuM` links (node of an offline CPU)
//! - `proc/self/status` (Cpus_allowed_list, Mems_allowed_list),
//!   `proc/cpuinfo` (model name), `proc/sys/kernel/osrelease`, and
//!   `proc/meminfo` where the kernel has no node directory.

use super::{CacheFacts, CpuFacts, Facts, NodeFacts, Source, Topology, TopologyError};
use crate::idset::IdSet;
use std::cell::RefCell;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A sysfs file that is missing, unreadable or malformed.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot parse {path}: {reason} (content: {content:?})")]
    Parse {
        path: PathBuf,
        content: String,
        reason: String,
    },
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// A file read (with its content) or a path probed for existence (`None`).
type Recorded = (PathBuf, Option<String>);

/// The root all system files are read under, with an optional recorder.
pub struct SysRoot {
    root: PathBuf,
    recorded: Option<RefCell<Vec<Recorded>>>,
}

impl SysRoot {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        SysRoot {
            root: root.into(),
            recorded: None,
        }
    }

    /// Like [`SysRoot::new`], remembering every file read (and every path
    /// probed for existence) so it can be written out with [`SysRoot::capture`].
    pub fn recording(root: impl Into<PathBuf>) -> Self {
        SysRoot {
            root: root.into(),
            recorded: Some(RefCell::new(Vec::new())),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn record(&self, rel: &str, content: Option<String>) {
        if let Some(r) = &self.recorded {
            r.borrow_mut().push((PathBuf::from(rel), content));
        }
    }

    /// Reads a file; `Ok(None)` when it does not exist.
    pub fn read_opt(&self, rel: &str) -> Result<Option<String>, SysfsError> {
        let path = self.path(rel);
        match fs::read_to_string(&path) {
            Ok(s) => {
                self.record(rel, Some(s.clone()));
                Ok(Some(s))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SysfsError::Read { path, source }),
        }
    }

    pub fn read(&self, rel: &str) -> Result<String, SysfsError> {
        let path = self.path(rel);
        match fs::read_to_string(&path) {
            Ok(s) => {
                self.record(rel, Some(s.clone()));
                Ok(s)
            }
            Err(source) => Err(SysfsError::Read { path, source }),
        }
    }

    /// Whether a path exists (recorded as an empty marker file when it does).
    pub fn exists(&self, rel: &str) -> bool {
        let e = self.path(rel).exists();
        if e {
            self.record(rel, None);
        }
        e
    }

    /// Names in a directory, sorted; empty when it does not exist.
    pub fn list(&self, rel: &str) -> Result<Vec<String>, SysfsError> {
        let path = self.path(rel);
        let rd = match fs::read_dir(&path) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(SysfsError::Read { path, source }),
        };
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|source| SysfsError::Read {
                path: path.clone(),
                source,
            })?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    pub fn parse<T: std::str::FromStr>(&self, rel: &str, content: &str) -> Result<T, SysfsError> {
        content.trim().parse().map_err(|_| SysfsError::Parse {
            path: self.path(rel),
            content: content.to_string(),
            reason: format!("expected a {}", std::any::type_name::<T>()),
        })
    }

    pub fn read_list(&self, rel: &str) -> Result<IdSet, SysfsError> {
        let s = self.read(rel)?;
        IdSet::parse(&s).map_err(|e| SysfsError::Parse {
            path: self.path(rel),
            content: s.clone(),
            reason: e.to_string(),
        })
    }

    /// Writes every recorded file under `dir`, keeping relative paths;
    /// existence probes become empty files. An error names the file.
    pub fn capture(&self, dir: &Path) -> io::Result<usize> {
        let Some(rec) = &self.recorded else {
            return Ok(0);
        };
        let rec = rec.borrow();
        for (rel, content) in rec.iter() {
            let dest = dir.join(rel);
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent).map_err(|e| named(e, "creating", parent))?;
            }
            fs::write(&dest, content.as_deref().unwrap_or(""))
                .map_err(|e| named(e, "writing", &dest))?;
        }
        Ok(rec.len())
    }
}

/// An I/O error that names what it was doing and the path.
fn named(e: io::Error, doing: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

const CPU_DIR: &str = "sys/devices/system/cpu";
const NODE_DIR: &str = "sys/devices/system/node";

/// Reads the machine under `sys` into a topology.
pub fn read_topology(sys: &SysRoot) -> Result<Topology, SysfsError> {
    Ok(Topology::build(read_facts(sys)?)?)
}

pub fn read_facts(sys: &SysRoot) -> Result<Facts, SysfsError> {
    let online = sys.read_list(&format!("{CPU_DIR}/online"))?;
    let known = match sys.read_opt(&format!("{CPU_DIR}/present"))? {
        Some(s) => parse_list(sys, &format!("{CPU_DIR}/present"), &s)?,
        None => sys.read_list(&format!("{CPU_DIR}/possible"))?,
    };
    let known = known.union(&online);

    let node_ids = node_dirs(sys)?;
    let numa_available = !node_ids.is_empty();

    let mut nodes = Vec::new();
    if numa_available {
        for &id in &node_ids {
            let base = format!("{NODE_DIR}/node{id}");
            let cpus = sys.read_list(&format!("{base}/cpulist"))?;
            let (mem_total, mem_free) = read_node_meminfo(sys, &format!("{base}/meminfo"))?;
            let rel = format!("{base}/distance");
            let distances = match sys.read_opt(&rel)? {
                Some(s) => s
                    .split_whitespace()
                    .map(|d| {
                        d.parse::<u32>().map_err(|_| SysfsError::Parse {
                            path: sys.path(&rel),
                            content: s.clone(),
                            reason: format!("distance {d:?} is not a number"),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            };
            nodes.push(NodeFacts {
                id,
                cpus,
                mem_total,
                mem_free,
                distances,
            });
        }
    } else {
        // A kernel without NUMA: one node holding everything.
        let meminfo = sys.read("proc/meminfo")?;
        let field = |name: &str| -> Option<u64> {
            meminfo
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                // checked: a size beyond u64 bytes is unknown, not a panic.
                .and_then(|kb| kb.checked_mul(1024))
        };
        nodes.push(NodeFacts {
            id: 0,
            cpus: online.clone(),
            mem_total: field("MemTotal:"),
            mem_free: field("MemFree:"),
            distances: vec![10],
        });
    }

    let mut cpus = Vec::new();
    for id in known.iter() {
        let is_online = online.contains(id);
        let mut facts = CpuFacts {
            id,
            online: is_online,
            node: None,
            package: None,
            core_id: None,
            siblings: None,
            llc: None,
        };
        if !numa_available && is_online {
            facts.node = Some(0);
        } else if !nodes.iter().any(|n| n.cpus.contains(id)) {
            // Offline CPUs drop out of cpulist; the node's link to them stays.
            facts.node = node_ids
                .iter()
                .copied()
                .find(|n| sys.exists(&format!("{NODE_DIR}/node{n}/cpu{id}")));
        }
        if is_online {
            read_cpu_topology(sys, id, &mut facts)?;
        }
        cpus.push(facts);
    }

    let status = sys.read("proc/self/status")?;
    let status_list = |key: &str| -> Result<Option<IdSet>, SysfsError> {
        match status.lines().find_map(|l| l.strip_prefix(key)) {
            Some(v) => parse_list(sys, "proc/self/status", v).map(Some),
            None => Ok(None),
        }
    };
    let allowed_cpus = status_list("Cpus_allowed_list:")?.unwrap_or_else(|| online.clone());
    let allowed_mems =
        status_list("Mems_allowed_list:")?.unwrap_or_else(|| nodes.iter().map(|n| n.id).collect());

    let cpu_model = sys.read_opt("proc/cpuinfo")?.and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let kernel = sys
        .read_opt("proc/sys/kernel/osrelease")?
        .map(|s| s.trim().to_string());

    Ok(Facts {
        source: Source::Sysfs {
            root: sys.root().display().to_string(),
        },
        cpu_model,
        kernel,
        numa_available,
        nodes,
        cpus,
        allowed_cpus,
        allowed_mems,
    })
}

fn parse_list(sys: &SysRoot, rel: &str, s: &str) -> Result<IdSet, SysfsError> {
    IdSet::parse(s).map_err(|e| SysfsError::Parse {
        path: sys.path(rel),
        content: s.to_string(),
        reason: e.to_string(),
    })
}

/// Node ids that have a `nodeN` directory, ascending.
/// Each node's CPUs (`nodeN/cpulist`), by node id; empty without NUMA
/// sysfs.
pub fn node_cpulists(sys: &SysRoot) -> Result<Vec<(u32, IdSet)>, SysfsError> {
    node_dirs(sys)?
        .into_iter()
        .map(|id| Ok((id, sys.read_list(&format!("{NODE_DIR}/node{id}/cpulist"))?)))
        .collect()
}

fn node_dirs(sys: &SysRoot) -> Result<Vec<u32>, SysfsError> {
    let mut ids: Vec<u32> = sys
        .list(NODE_DIR)?
        .iter()
        .filter_map(|n| n.strip_prefix("node"))
        .filter_map(|n| n.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// `Node N MemTotal:  1234 kB` lines, as bytes (libnuma's numa_node_size64).
fn read_node_meminfo(sys: &SysRoot, rel: &str) -> Result<(Option<u64>, Option<u64>), SysfsError> {
    let Some(text) = sys.read_opt(rel)? else {
        return Ok((None, None));
    };
    let field = |name: &str| -> Result<Option<u64>, SysfsError> {
        for line in text.lines() {
            let mut words = line.split_whitespace();
            // "Node", id, "MemTotal:", value, "kB"
            if words.nth(2) == Some(name) {
                let v = words.next().unwrap_or("");
                let bad = |what: &str| SysfsError::Parse {
                    path: sys.path(rel),
                    content: line.to_string(),
                    reason: format!("{name} value {v:?} {what}"),
                };
                let kb: u64 = v.parse().map_err(|_| bad("is not a number of kB"))?;
                // checked: `kb * 1024` overflowed on a huge (corrupt) value.
                let bytes = kb
                    .checked_mul(1024)
                    .ok_or_else(|| bad("is too large (more than 2^64 bytes)"))?;
                return Ok(Some(bytes));
            }
        }
        Ok(None)
    };
    Ok((field("MemTotal:")?, field("MemFree:")?))
}

fn read_cpu_topology(sys: &SysRoot, id: u32, facts: &mut CpuFacts) -> Result<(), SysfsError> {
    let base = format!("{CPU_DIR}/cpu{id}");
    let num = |file: &str| -> Result<Option<u32>, SysfsError> {
        let rel = format!("{base}/topology/{file}");
        match sys.read_opt(&rel)? {
            // -1 means "unknown" on some architectures.
            Some(s) if s.trim() == "-1" => Ok(None),
            Some(s) => sys.parse(&rel, &s).map(Some),
            None => Ok(None),
        }
    };
    facts.package = num("physical_package_id")?;
    facts.core_id = num("core_id")?;
    let sib_rel = format!("{base}/topology/thread_siblings_list");
    if let Some(s) = sys.read_opt(&sib_rel)? {
        facts.siblings = Some(parse_list(sys, &sib_rel, &s)?);
    }

    // The highest-level data or unified cache is the LLC (L3, else L2).
    let mut best: Option<CacheFacts> = None;
    for (dir, level) in data_caches(sys, id)? {
        let shared = sys.read_list(&format!("{dir}/shared_cpu_list"))?;
        let cache_id = match sys.read_opt(&format!("{dir}/id"))? {
            Some(s) => Some(sys.parse(&format!("{dir}/id"), &s)?),
            None => None,
        };
        if best.as_ref().is_none_or(|b| level > b.level) {
            best = Some(CacheFacts {
                level,
                cache_id,
                shared,
            });
        }
    }
    facts.llc = best;
    Ok(())
}

/// `cpu`'s data and unified caches (instruction caches and indexes without
/// a `type` left out), each as its `cpuN/cache/indexK` directory and level,
/// in sysfs's order.
fn data_caches(sys: &SysRoot, cpu: u32) -> Result<Vec<(String, u8)>, SysfsError> {
    let base = format!("{CPU_DIR}/cpu{cpu}/cache");
    let mut out = Vec::new();
    for entry in sys.list(&base)? {
        if !entry.starts_with("index") {
            continue;
        }
        let dir = format!("{base}/{entry}");
        let Some(kind) = sys.read_opt(&format!("{dir}/type"))? else {
            continue;
        };
        if kind.trim() == "Instruction" {
            continue;
        }
        let level: u8 = sys.parse(&format!("{dir}/level"), &sys.read(&format!("{dir}/level"))?)?;
        out.push((dir, level));
    }
    Ok(out)
}

/// The sizes of one CPU's L2 and last-level data caches, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSizes {
    pub l2_bytes: u64,
    pub llc_bytes: u64,
}

/// `cpu`'s L2 and LLC sizes from `cpuN/cache/indexK/{level,type,size}`
/// (data or unified caches; the LLC is the highest level); `None` when
/// sysfs does not give both (no `size` files, no level 2).
pub fn cache_sizes(sys: &SysRoot, cpu: u32) -> Result<Option<CacheSizes>, SysfsError> {
    let (mut l2, mut llc): (Option<u64>, Option<(u8, u64)>) = (None, None);
    for (dir, level) in data_caches(sys, cpu)? {
        let Some(size) = sys.read_opt(&format!("{dir}/size"))? else {
            continue;
        };
        let bytes = crate::units::parse_size(size.trim()).map_err(|why| SysfsError::Parse {
            path: sys.path(&format!("{dir}/size")),
            content: size.clone(),
            reason: why,
        })?;
        if level == 2 {
            l2 = Some(bytes);
        }
        if llc.is_none_or(|(l, _)| level > l) {
            llc = Some((level, bytes));
        }
    }
    Ok(match (l2, llc) {
        (Some(l2_bytes), Some((_, llc_bytes))) => Some(CacheSizes {
            l2_bytes,
            llc_bytes,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod cache_size_tests {
    use super::*;

    /// Sizes as this machine's sysfs writes them (48K L1d, 64K L1i, 2048K
    /// L2, 491520K L3), the instruction cache left out.
    #[test]
    fn l2_and_llc_sizes_are_read_from_the_cache_indexes() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("sys/devices/system/cpu/cpu0/cache");
        for (i, level, kind, size) in [
            (0, "1", "Data", "48K"),
            (1, "1", "Instruction", "64K"),
            (2, "2", "Unified", "2048K"),
            (3, "3", "Unified", "491520K"),
        ] {
            let d = base.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        let sys = SysRoot::new(tmp.path());
        assert_eq!(
            cache_sizes(&sys, 0).unwrap(),
            Some(CacheSizes {
                l2_bytes: 2 << 20,
                llc_bytes: 480 << 20
            })
        );
        // Captured guest trees have no size files: nothing, not an error.
        for i in 0..4 {
            std::fs::remove_file(base.join(format!("index{i}/size"))).unwrap();
        }
        assert_eq!(cache_sizes(&sys, 0).unwrap(), None);
        assert_eq!(cache_sizes(&sys, 7).unwrap(), None);
    }
}
