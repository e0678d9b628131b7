//! The task's preferred NUMA node for the scheduler ("Preferred Node
//! Affinity", PNID): the out-of-tree prctl PR_PREFERRED_NID from the RFC.
//!
//! It was posted in two argument layouts:
//! - `poc` (2023 proof of concept): option 101; arg2 command (GET 0, SET 1),
//!   arg3 nid, arg4 pid, arg5 user pointer for GET;
//! - `v2025` (2025 series): option 78 in its first posting (v1), 79 from v3
//!   on, after upstream gave 78 to PR_FUTEX_HASH; arg2 command, arg3 pid,
//!   arg4 nid (-1 clears), arg5 user pointer for GET.
//!
//! On a kernel with PR_FUTEX_HASH, 78 is the futex hash prctl, where arg2 0
//! means "set the futex hash slots": calling an option number blindly can
//! change unrelated state. So the interface is used only on evidence from the running kernel
//! (the handler `prctl_chg_pref_nid` in /proc/kallsyms, or the task field
//! `numa_preferred_nid_force` in /proc/self/sched) or on the user's explicit
//! `--pnid-prctl NUMBER[:LAYOUT]`. Without either, `--pnid` fails up front.

use crate::error::usage;
use crate::sys;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    Poc,
    V2025,
}

/// A usable PR_PREFERRED_NID interface and why numalab believes in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub option: i32,
    pub layout: Layout,
    pub evidence: String,
}

const GET: u64 = 0;
const SET: u64 = 1;

/// Parses `--pnid-prctl NUMBER[:poc|v2025]`.
pub fn parse_explicit(spec: &str) -> anyhow::Result<Interface> {
    let (num, layout) = match spec.split_once(':') {
        Some((n, l)) => (n, Some(l)),
        None => (spec, None),
    };
    let option: i32 = num.trim().parse().map_err(|_| {
        usage(format!(
            "--pnid-prctl {spec:?}: {num:?} is not a prctl option number"
        ))
    })?;
    let layout = match layout.map(str::trim) {
        Some("poc") => Layout::Poc,
        Some("v2025") => Layout::V2025,
        None if option == 101 => Layout::Poc,
        None => Layout::V2025,
        Some(other) => {
            return Err(usage(format!(
                "--pnid-prctl {spec:?}: layout {other:?} is not poc or v2025"
            )))
        }
    };
    Ok(Interface {
        option,
        layout,
        evidence: format!("given by the user (--pnid-prctl {spec})"),
    })
}

/// Looks for evidence of the patch under `proc_root` (normally `/proc`).
pub fn detect(proc_root: &Path) -> anyhow::Result<Interface> {
    let kallsyms = std::fs::read_to_string(proc_root.join("kallsyms")).unwrap_or_default();
    let has_symbol = |name: &str| {
        kallsyms
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some(name))
    };
    let sched = std::fs::read_to_string(proc_root.join("self/sched")).unwrap_or_default();
    let evidence = if has_symbol("prctl_chg_pref_nid") {
        "prctl_chg_pref_nid in /proc/kallsyms"
    } else if sched.contains("numa_preferred_nid_force") {
        "numa_preferred_nid_force in /proc/self/sched"
    } else {
        return Err(usage(
            "--pnid: this kernel shows no Preferred Node Affinity interface \
             (no prctl_chg_pref_nid in /proc/kallsyms, no numa_preferred_nid_force \
             in /proc/self/sched); numalab will not probe prctl numbers blindly. \
             If you know the patched kernel's option, give --pnid-prctl NUMBER[:poc|v2025]",
        ));
    };
    // The 2023 POC was against 6.7-rc and is what patches/linux-6.12
    // carries to 6.12; the 2025 series was written for kernels after 6.14.
    // Its v1 used 78; once upstream gave 78 to PR_FUTEX_HASH, v3 moved to
    // 79. A kernel with the futex hash prctl can only carry a later
    // version, under 79 or a number of its own: numalab does not guess, it
    // asks (and names 79).
    let release =
        std::fs::read_to_string(proc_root.join("sys/kernel/osrelease")).unwrap_or_default();
    let (major, minor) = kernel_version(&release);
    if (major, minor) < (6, 15) {
        return Ok(Interface {
            option: 101,
            layout: Layout::Poc,
            evidence: format!(
                "{evidence}; kernel {} predates the 2025 series",
                release.trim()
            ),
        });
    }
    if has_symbol("futex_hash_prctl") {
        return Err(usage(format!(
            "--pnid: found {evidence}, but this kernel also has PR_FUTEX_HASH (78), so the \
             patch is not the series' v1 (78); v3 moved to 79: give --pnid-prctl 79:v2025 \
             if that is yours, or NUMBER[:poc|v2025]"
        )));
    }
    Ok(Interface {
        option: 78,
        layout: Layout::V2025,
        evidence: format!("{evidence}; kernel {} (2025 series layout)", release.trim()),
    })
}

fn kernel_version(release: &str) -> (u32, u32) {
    let mut it = release.trim().split(['.', '-']);
    let major = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (major, minor)
}

impl Interface {
    fn args(&self, cmd: u64, pid: i32, nid: i64, uaddr: u64) -> (u64, u64, u64, u64) {
        let (pid, nid) = (pid as i64 as u64, nid as u64);
        match self.layout {
            Layout::Poc => (cmd, nid, pid, uaddr),
            Layout::V2025 => (cmd, pid, nid, uaddr),
        }
    }

    /// Sets task `pid`'s (0 = caller) preferred node; -1 clears it.
    pub fn set(&self, pid: i32, nid: i32) -> std::io::Result<()> {
        let (a2, a3, a4, a5) = self.args(SET, pid, nid as i64, 0);
        sys::prctl_raw(self.option, a2, a3, a4, a5).map(|_| ())
    }

    /// Reads task `pid`'s forced preferred node.
    pub fn get(&self, pid: i32) -> std::io::Result<i32> {
        let mut out: i32 = i32::MIN;
        let addr = &mut out as *mut i32 as u64;
        let (a2, a3, a4, a5) = self.args(GET, pid, 0, addr);
        sys::prctl_raw(self.option, a2, a3, a4, a5)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_tree(kallsyms: &str, sched: &str, release: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("self")).unwrap();
        std::fs::create_dir_all(d.path().join("sys/kernel")).unwrap();
        std::fs::write(d.path().join("kallsyms"), kallsyms).unwrap();
        std::fs::write(d.path().join("self/sched"), sched).unwrap();
        std::fs::write(d.path().join("sys/kernel/osrelease"), release).unwrap();
        d
    }

    #[test]
    fn no_evidence_refuses_with_exit_2() {
        let d = proc_tree(
            "0000 T do_sys_open\n",
            "se.sum_exec_runtime : 1\n",
            "6.1.0\n",
        );
        let e = detect(d.path()).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("--pnid-prctl"), "{e}");
    }

    #[test]
    fn poc_kernel_uses_101() {
        let d = proc_tree("ffff T prctl_chg_pref_nid\n", "", "6.7.0-rc1_ch_pna7_7+\n");
        let i = detect(d.path()).unwrap();
        assert_eq!((i.option, i.layout), (101, Layout::Poc));
        // The lab kernel: the POC ported to Debian's 6.12 (patches/linux-6.12).
        let d = proc_tree("ffff t prctl_chg_pref_nid\n", "", "6.12.117-pnid\n");
        let i = detect(d.path()).unwrap();
        assert_eq!((i.option, i.layout), (101, Layout::Poc));
    }

    #[test]
    fn series_2025_v1_uses_78_and_a_futex_hash_kernel_is_asked_naming_79() {
        let d = proc_tree("ffff T prctl_chg_pref_nid\n", "", "6.15.0\n");
        assert_eq!(detect(d.path()).unwrap().option, 78);
        let d = proc_tree(
            "ffff T prctl_chg_pref_nid\nffff T futex_hash_prctl\n",
            "",
            "6.17.0\n",
        );
        let e = detect(d.path()).unwrap_err().to_string();
        assert!(e.contains("--pnid-prctl 79:v2025"), "{e}");
        let d = proc_tree("", "numa_preferred_nid_force : -1\n", "6.15.0\n");
        assert_eq!(detect(d.path()).unwrap().layout, Layout::V2025);
    }

    #[test]
    fn explicit_spec_parses_and_argument_order_follows_layout() {
        let i = parse_explicit("79:v2025").unwrap();
        assert_eq!(i.args(SET, 42, 3, 0), (1, 42, 3, 0));
        let p = parse_explicit("101").unwrap();
        assert_eq!(p.layout, Layout::Poc);
        assert_eq!(p.args(SET, 42, 3, 0), (1, 3, 42, 0));
        assert!(parse_explicit("x").is_err());
        assert!(parse_explicit("78:new").is_err());
    }
}
