//! `numalab restore`: put back what a killed run or tracer changed, from
//! its journal (the run's `restore.json`, tracers' `trace-PID.json`).

use crate::experiment::state::{self, Journal};

fn alive_numalab(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "numalab")
}

pub fn run() -> anyhow::Result<()> {
    let mut found = 0;
    for path in state::all_journals() {
        let Some(j) = Journal::read(&path)? else {
            continue;
        };
        found += 1;
        if alive_numalab(j.pid) {
            return Err(crate::error::usage(format!(
                "the numalab process that wrote {} (pid {}) is still running; stop it first",
                path.display(),
                j.pid
            )));
        }
        for line in j.restore()? {
            println!("restored {line}");
        }
        std::fs::remove_file(&path)?;
        if j.run_dir.is_empty() {
            println!("restore: done ({})", path.display());
        } else {
            println!("restore: done; the run's records stay in {}", j.run_dir);
        }
    }
    if found == 0 {
        println!(
            "restore: nothing to restore (no journal in {})",
            state::state_dir().display()
        );
    }
    Ok(())
}
