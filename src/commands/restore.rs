//! `numalab restore`: put back what a killed run changed, from its journal.

use crate::experiment::state::{self, Journal};

pub fn run() -> anyhow::Result<()> {
    let path = state::journal_path();
    let Some(j) = Journal::read(&path)? else {
        println!(
            "restore: nothing to restore (no journal at {})",
            path.display()
        );
        return Ok(());
    };
    if std::path::Path::new(&format!("/proc/{}", j.pid)).exists()
        && std::fs::read_to_string(format!("/proc/{}/comm", j.pid))
            .is_ok_and(|c| c.trim() == "numalab")
    {
        return Err(crate::error::usage(format!(
            "the run that wrote {} (pid {}) is still running; stop it first",
            path.display(),
            j.pid
        )));
    }
    for line in j.restore()? {
        println!("restored {line}");
    }
    std::fs::remove_file(&path)?;
    println!("restore: done; the run's records stay in {}", j.run_dir);
    Ok(())
}
