//! `numalab restore`: put back what a killed run or tracer changed, from
//! its journal (`restore.json`; `trace-PID.json` of earlier versions).
//! It takes the state lock first: while the numalab that wrote a journal
//! still runs, it holds the lock, and restore refuses.
//!
//! `numalab sched`'s scheduler needs no journal (the kernel unloads it when
//! its loader dies), so restore only says what sched_ext's state is.

use crate::sys::state::{self, Journal, StateLock};
use crate::topology::sysfs::SysRoot;
use std::path::Path;

/// One line on sched_ext, when this kernel has it.
fn say_sched_ext(sysfs_root: &Path) {
    if let Some(st) = crate::sched::check::scx_state(&SysRoot::new(sysfs_root)) {
        match st.ops {
            Some(ops) => println!(
                "restore: sched_ext scheduler {ops:?} is {} (a live process holds it; \
                 the kernel unloads it when that process ends)",
                st.state
            ),
            None => println!(
                "restore: sched_ext: no BPF scheduler loaded (state {})",
                st.state
            ),
        }
    }
}

pub fn run(sysfs_root: &Path) -> anyhow::Result<()> {
    say_sched_ext(sysfs_root);
    let dir = state::state_dir()?;
    if !dir.exists() {
        println!(
            "restore: nothing to restore (no state directory {})",
            dir.display()
        );
        return Ok(());
    }
    let lock = StateLock::acquire(&dir, "numalab restore")?;
    let mut found = 0;
    for path in state::all_journals(lock.dir()) {
        let Some(j) = Journal::read(&path)? else {
            continue;
        };
        found += 1;
        if j.root != "/" {
            return Err(crate::error::usage(format!(
                "journal {} is for the tree {}, not this system: refused",
                path.display(),
                j.root
            )));
        }
        for line in j.restore()? {
            println!("restored {line}");
        }
        std::fs::remove_file(&path)
            .map_err(|e| anyhow::anyhow!("removing {}: {e}", path.display()))?;
        state::sync_dir(lock.dir())?;
        if j.run_dir.is_empty() {
            println!("restore: done ({})", path.display());
        } else {
            println!("restore: done; the run's records stay in {}", j.run_dir);
        }
    }
    if found == 0 {
        println!(
            "restore: nothing to restore (no journal in {})",
            lock.dir().display()
        );
    }
    Ok(())
}
