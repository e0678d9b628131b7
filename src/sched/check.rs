//! Whether this system can run numalab's scheduler now, read before anything
//! changes: sched_ext in the kernel, its BTF, no scheduler already loaded,
//! and root. Every read goes through [`SysRoot`], so tests point it at
//! fixture trees.

use crate::topology::sysfs::SysRoot;

/// What `/sys/kernel/sched_ext` says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScxState {
    /// `state`: disabled, enabling, enabled, disabling.
    pub state: String,
    /// `root/ops`: the loaded scheduler's name, when one is loaded.
    pub ops: Option<String>,
    /// `enable_seq`: how many times a scheduler was loaded since boot.
    pub enable_seq: Option<u64>,
}

/// Reads sched_ext's state; `None` when the kernel has no sched_ext.
pub fn scx_state(sys: &SysRoot) -> Option<ScxState> {
    let state = sys.read_opt("sys/kernel/sched_ext/state").ok()??;
    let ops = sys
        .read_opt("sys/kernel/sched_ext/root/ops")
        .ok()
        .flatten()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let enable_seq = sys
        .read_opt("sys/kernel/sched_ext/enable_seq")
        .ok()
        .flatten()
        .and_then(|s| s.trim().parse().ok());
    Some(ScxState {
        state: state.trim().to_string(),
        ops,
        enable_seq,
    })
}

/// Everything that must hold before loading, each failure named with what
/// is missing. `euid` is passed in so tests can ask as root and as not.
pub fn can_load(sys: &SysRoot, euid: u32) -> Result<ScxState, String> {
    let release = sys
        .read_opt("proc/sys/kernel/osrelease")
        .ok()
        .flatten()
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "this kernel".into());
    let Some(st) = scx_state(sys) else {
        return Err(format!(
            "kernel {release} has no sched_ext (no /sys/kernel/sched_ext: it needs \
             CONFIG_SCHED_CLASS_EXT, Linux 6.12 or later); numalab home is the preferred \
             node for kernels without it"
        ));
    };
    if !sys.exists("sys/kernel/btf/vmlinux") {
        return Err(format!(
            "kernel {release} has sched_ext but no /sys/kernel/btf/vmlinux \
             (CONFIG_DEBUG_INFO_BTF), which loading a BPF scheduler needs"
        ));
    }
    if st.state != "disabled" {
        return Err(format!(
            "a sched_ext scheduler is already {} ({}); numalab's cannot load beside it",
            st.state,
            st.ops
                .as_deref()
                .map(|o| format!("ops {o:?}"))
                .unwrap_or_else(|| "no ops name".into())
        ));
    }
    if euid != 0 {
        return Err(
            "loading a scheduler needs root (CAP_SYS_ADMIN and CAP_BPF): run numalab sched as root"
                .into(),
        );
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(state: Option<&str>, ops: &str, btf: bool) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        fs::create_dir_all(p.join("proc/sys/kernel")).unwrap();
        fs::write(p.join("proc/sys/kernel/osrelease"), "6.12.117-pnid\n").unwrap();
        if let Some(s) = state {
            fs::create_dir_all(p.join("sys/kernel/sched_ext/root")).unwrap();
            fs::write(p.join("sys/kernel/sched_ext/state"), format!("{s}\n")).unwrap();
            fs::write(p.join("sys/kernel/sched_ext/root/ops"), ops).unwrap();
            fs::write(p.join("sys/kernel/sched_ext/enable_seq"), "3\n").unwrap();
        }
        if btf {
            fs::create_dir_all(p.join("sys/kernel/btf")).unwrap();
            fs::write(p.join("sys/kernel/btf/vmlinux"), "").unwrap();
        }
        d
    }

    #[test]
    fn a_kernel_without_sched_ext_is_named() {
        let d = tree(None, "", true);
        let e = can_load(&SysRoot::new(d.path()), 0).unwrap_err();
        assert!(e.contains("6.12.117-pnid has no sched_ext"), "{e}");
        assert!(e.contains("CONFIG_SCHED_CLASS_EXT"), "{e}");
    }

    #[test]
    fn a_scheduler_already_loaded_is_named() {
        let d = tree(Some("enabled"), "simple\n", true);
        let e = can_load(&SysRoot::new(d.path()), 0).unwrap_err();
        assert!(e.contains("already enabled (ops \"simple\")"), "{e}");
    }

    #[test]
    fn missing_btf_and_not_root_are_refused() {
        let d = tree(Some("disabled"), "", false);
        assert!(can_load(&SysRoot::new(d.path()), 0)
            .unwrap_err()
            .contains("btf"));
        let d = tree(Some("disabled"), "", true);
        assert!(can_load(&SysRoot::new(d.path()), 1000)
            .unwrap_err()
            .contains("root"));
        let st = can_load(&SysRoot::new(d.path()), 0).unwrap();
        assert_eq!(
            (st.state.as_str(), st.ops, st.enable_seq),
            ("disabled", None, Some(3))
        );
    }
}
