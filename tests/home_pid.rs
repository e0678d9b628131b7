//! `home --pid` (and `sched --pid`) take up whole process trees: init and
//! kernel threads are refused before anything changes, and what was taken
//! up is counted aloud (the second reliability floor).

mod common;

use common::numalab_out;

/// Regression: `home --pid 1` took up init and every descendant, nearly
/// the whole system, without a word.
#[test]
fn home_pid_1_and_kernel_threads_are_refused_before_any_change() {
    let tmp = tempfile::tempdir().unwrap();
    let kthreadd_children: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            (rest.split_whitespace().nth(1)? == "2").then(|| pid.to_string())
        })
        .take(1)
        .collect();
    let mut pids = vec![("1", "that is init"), ("2", "is a kernel thread")];
    if let Some(k) = kthreadd_children.first() {
        pids.push((k, "is a kernel thread"));
    }
    for cmd in ["home", "sched"] {
        for (pid, why) in &pids {
            let args: Vec<&str> = match cmd {
                "home" => vec!["home", "--node", "0", "--pid", pid, "--duration", "1"],
                _ => vec!["sched", "--home", "0", "--pid", pid, "--duration", "1"],
            };
            let (rc, _, err) = numalab_out(&args, tmp.path());
            assert_eq!(rc, 2, "{cmd} --pid {pid}: {err}");
            // sched's --pid starts at 2 already (clap's range).
            let why = if (cmd, *pid) == ("sched", "1") {
                "not in 2.."
            } else {
                why
            };
            assert!(err.contains(why), "{cmd} --pid {pid}: {err}");
        }
    }
    assert!(
        !tmp.path().join("journal").exists(),
        "a journal was written: state changed"
    );
}

/// `home --pid` says how many tasks it took up.
#[test]
fn home_pid_says_how_many_tasks_it_took_up() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let (rc, _, err) = numalab_out(
        &["home", "--node", "0", "--pid", &pid, "--duration", "0.5"],
        tmp.path(),
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    if rc == 2 && err.contains("root") {
        println!("SKIPPED: home --pid needs root here: {err}");
        return;
    }
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains(&format!("took up 1 tasks (the threads of pid {pid}")),
        "{err}"
    );
}
