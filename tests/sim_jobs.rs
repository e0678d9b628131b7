//! `jobs --backend sim`: the multi-job table from the simulator, the same
//! record and renderings as a host run, one result per seed, nothing
//! changed on this machine, and bad input refused before any work.

mod common;

use serde_json::Value;
use std::path::Path;

fn numalab(args: &[&str], state: &Path) -> (i32, String, String) {
    common::numalab_out(args, state)
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/topo/{name}/root",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn jobs_json(extra: &[&str], state: &Path) -> Value {
    let mut args = vec!["jobs", "--backend", "sim", "--format", "json"];
    args.extend_from_slice(extra);
    let (rc, out, err) = numalab(&args, state);
    assert_eq!(rc, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// `jobs N --size 8M --counts 3` on the 4node-smt guest's topology with
/// the lab-tcg profile, as the lab test ran it.
fn lab_guest_jobs(n: &str, state: &Path) -> Value {
    let root = fixture("4node-smt");
    jobs_json(
        &[
            "--sysfs-root",
            &root,
            n,
            "--size",
            "8M",
            "--counts",
            "3",
            "--profile",
            "lab-tcg",
        ],
        state,
    )
}

#[test]
fn eight_jobs_on_the_4node_smt_guest_each_stay_on_a_node_as_in_the_lab() {
    // The lab's 4node-smt guest ran `numalab jobs 8 --size 8M --counts 3`
    // with 7 of 8 jobs 100% on one node (the 8th moved once it had started
    // under TCG's slow exec); with two CPUs per node and no load, nothing
    // should make a job leave its node.
    let state = tempfile::tempdir().unwrap();
    let r = lab_guest_jobs("8", state.path());
    assert_eq!(r["schema"], "numalab.jobs/1");
    assert_eq!(r["sim"]["model_version"], numalab::sim::MODEL_VERSION);
    let jobs = r["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 8);
    let mut per_node = std::collections::BTreeMap::new();
    for j in jobs {
        let sum: f64 = j["node_pct"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((sum - 100.0).abs() < 0.01, "residency sums to {sum}");
        assert!(j["max_pct"].as_f64().unwrap() > 99.9, "{j}");
        assert_eq!(j["most_node"], j["start_node"]);
        assert_eq!(j["mem_node"], j["most_node"], "first touch where it ran");
        *per_node.entry(j["most_node"].to_string()).or_insert(0) += 1;
    }
    // Exec placement fills the nodes evenly: two jobs per node.
    assert!(per_node.values().all(|&n| n == 2), "{per_node:?}");
    assert!(
        std::fs::read_dir(state.path()).unwrap().next().is_none(),
        "nothing in the state dir: no lock, no journal"
    );
}

#[test]
fn more_jobs_than_cpus_share_and_the_idle_cpus_take_the_waiting_ones() {
    let state = tempfile::tempdir().unwrap();
    let r = lab_guest_jobs("12", state.path());
    let jobs = r["jobs"].as_array().unwrap();
    let user: Vec<f64> = jobs.iter().map(|j| j["user_s"].as_f64().unwrap()).collect();
    let elapsed = r["elapsed_s"].as_f64().unwrap();
    let alone = user.iter().cloned().fold(f64::INFINITY, f64::min);
    // 12 jobs of equal work on 8 CPUs: the run takes longer than one job's
    // work, but less than two (CPUs freed by the first to finish pull the
    // ones still waiting).
    assert!(
        elapsed > 1.2 * alone && elapsed < 2.0 * alone,
        "{elapsed} vs {alone}"
    );
    let moved: u64 = jobs
        .iter()
        .map(|j| j["migrations"]["total"].as_u64().unwrap())
        .sum();
    assert!(moved > 0, "someone was pulled to a freed CPU");
}

#[test]
fn a_seed_gives_one_table_and_the_record_renders_the_same_from_a_file() {
    let state = tempfile::tempdir().unwrap();
    let args = [
        "jobs",
        "16",
        "--backend",
        "sim",
        "--preset",
        "epyc-7551-8n",
        "--load",
        "50",
        "--size",
        "16M",
        "--counts",
        "2",
        "--seed",
        "7",
    ];
    let (rc, a, err) = numalab(&args, state.path());
    assert_eq!(rc, 0, "{err}");
    let (_, b, _) = numalab(&args, state.path());
    assert_eq!(a, b, "same seed, same table");
    let mut other = args.to_vec();
    let last = other.len() - 1;
    other[last] = "8";
    let (_, c, _) = numalab(&other, state.path());
    assert_ne!(a, c, "another seed, another run");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("jobs.json");
    let mut with_out = args.to_vec();
    with_out.extend(["-o", out.to_str().unwrap()]);
    let (rc, fresh, _) = numalab(&with_out, state.path());
    assert_eq!(rc, 0);
    let (rc, again, err) = numalab(&["jobs", "--from", out.to_str().unwrap()], state.path());
    assert_eq!(rc, 0, "{err}");
    assert_eq!(fresh, again);
    assert!(fresh.contains("from the simulator"), "{fresh}");
    // Pinned jobs never leave their node; float ones are free to.
    let r = jobs_json(
        &[
            "8",
            "--preset",
            "epyc-7551-8n",
            "--load",
            "60",
            "--size",
            "16M",
            "--counts",
            "2",
            "--",
            "--cpunodebind",
            "3",
            "--membind",
            "3",
        ],
        state.path(),
    );
    for j in r["jobs"].as_array().unwrap() {
        let pct = j["node_pct"]["3"].as_f64().unwrap();
        // Only the moment between exec and setting its own affinity may be
        // elsewhere.
        assert!(pct > 99.0, "{j}");
        assert_eq!(j["mem_node"], 3);
    }
}

#[test]
fn sim_only_options_and_what_the_sim_cannot_do_exit_2_before_any_work() {
    let state = tempfile::tempdir().unwrap();
    for (args, want) in [
        (
            vec!["jobs", "4", "--preset", "epyc-7551-8n"],
            "add --backend sim",
        ),
        (vec!["jobs", "4", "--seed", "3"], "add --backend sim"),
        (
            vec![
                "jobs",
                "4",
                "--backend",
                "sim",
                "--preset",
                "epyc-7551-8n",
                "--home",
                "1",
            ],
            "--home-cpu agent",
        ),
        (
            vec![
                "jobs",
                "4",
                "--backend",
                "sim",
                "--preset",
                "epyc-7551-8n",
                "--",
                "--membind",
                "9",
            ],
            "9",
        ),
        (
            vec![
                "jobs",
                "4",
                "--backend",
                "sim",
                "--preset",
                "no-such-machine",
            ],
            "no-such-machine",
        ),
    ] {
        let (rc, out, err) = numalab(&args, state.path());
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: nothing printed: {out}");
    }
    // --home with pin works on the simulated machine.
    let r = jobs_json(
        &[
            "4",
            "--preset",
            "epyc-7551-8n",
            "--size",
            "8M",
            "--counts",
            "2",
            "--home",
            "auto",
            "--home-cpu",
            "pin",
        ],
        state.path(),
    );
    for j in r["jobs"].as_array().unwrap() {
        let home = j["home_node"].as_u64().unwrap().to_string();
        assert!(j["node_pct"][&home].as_f64().unwrap() > 99.0, "{j}");
    }
}

#[test]
fn one_job_takes_the_time_a_run_sample_takes_for_its_row() {
    // `run` and `jobs` simulate with one engine (model 8): a run's sample is
    // a jobs run of one job. Their seeds and noise draws differ, so 16 of
    // each must agree within their spread, pinned and floating, in time and
    // in the share of the loop spent waiting behind the load. (Until model
    // 7 the two commands had engines of their own, which this test held
    // within 6% pinned and left apart floating.)
    let state = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("s.toml");
    std::fs::write(
        &spec,
        "samples = 16\nload = 60\nmem = [\"A\"]\ncpu = [\"A\", \"F\"]\n[[blocks]]\npnid = -1\nnb = 1\n\
         [probe]\nsize = \"32M\"\ncounts = 5\npattern = \"gather-add\"\n",
    )
    .unwrap();
    let out = dir.path().join("r");
    let (rc, _, err) = numalab(
        &[
            "run",
            "--backend",
            "sim",
            "--preset",
            "xeon-8167m-2n",
            "--spec",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        state.path(),
    );
    assert_eq!(rc, 0, "{err}");
    let mut run: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut run_wait = Vec::new();
    for line in std::fs::read_to_string(out.join("samples.jsonl"))
        .unwrap()
        .lines()
    {
        let v: Value = serde_json::from_str(line).unwrap();
        let cpu = v["probe"]["spec"]["cpu"].to_string();
        if cpu.contains("node") {
            let c = &v["probe"]["cpu_time"];
            let (r, w) = (
                c["run_ns"].as_f64().unwrap(),
                c["wait_ns"].as_f64().unwrap(),
            );
            run_wait.push(100.0 * w / (r + w));
        }
        run.entry(cpu)
            .or_default()
            .push(v["probe"]["timing"]["total_ns"].as_f64().unwrap() / 1e9);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let jobs = |cpu: &[&str]| -> Vec<(f64, f64)> {
        (1..=16)
            .map(|seed| {
                let seed = seed.to_string();
                let mut a = vec![
                    "1",
                    "--preset",
                    "xeon-8167m-2n",
                    "--load",
                    "60",
                    "--seed",
                    &seed,
                    "--",
                    "--membind",
                    "0",
                ];
                a.extend_from_slice(cpu);
                let r = jobs_json(&a, state.path());
                let j = &r["jobs"][0];
                // Its loop splits into running and waiting, as a run's
                // sample does (to the ns: both are whole ns of the loop).
                let c = &j["cpu_time"];
                let (run, wait) = (
                    c["run_ns"].as_f64().unwrap(),
                    c["wait_ns"].as_f64().unwrap(),
                );
                let loop_ns = j["loop_s"].as_f64().unwrap() * 1e9;
                assert!((run + wait - loop_ns).abs() < 1e3, "{c} vs {loop_ns}");
                (j["loop_s"].as_f64().unwrap(), 100.0 * wait / (run + wait))
            })
            .collect()
    };
    let (pinned, pinned_wait): (Vec<f64>, Vec<f64>) =
        jobs(&["--cpunodebind", "0"]).into_iter().unzip();
    let floating: Vec<f64> = jobs(&[]).into_iter().map(|(t, _)| t).collect();
    let (mut run_pinned, mut run_float) = (None, None);
    for (cpu, v) in &run {
        if cpu.contains("node") {
            run_pinned = Some(mean(v));
        } else {
            run_float = Some(mean(v));
        }
    }
    let (rp, rf) = (run_pinned.unwrap(), run_float.unwrap());
    println!(
        "pinned: run {rp:.3} s, jobs {:.3} s; floating: run {rf:.3} s, jobs {:.3} s",
        mean(&pinned),
        mean(&floating)
    );
    assert!(
        (mean(&pinned) / rp - 1.0).abs() < 0.03,
        "pinned: run {rp:.3} s, jobs {:.3} s",
        mean(&pinned)
    );
    assert!(
        (mean(&floating) / rf - 1.0).abs() < 0.06,
        "floating: run {rf:.3} s, jobs {:.3} s",
        mean(&floating)
    );
    let (jw, rw) = (mean(&pinned_wait), mean(&run_wait));
    println!("pinned: waiting {rw:.1}% (run), {jw:.1}% (jobs)");
    assert!(rw > 5.0 && jw > 5.0, "waiting {rw:.1}% and {jw:.1}%");
    assert!((jw - rw).abs() < 3.0, "waiting {rw:.1}% vs {jw:.1}%");
    assert!(mean(&floating) > mean(&pinned), "floating costs in both");
    assert!(rf > rp);
}

#[test]
fn nb_0_turns_the_simulated_numa_balancing_off() {
    let state = tempfile::tempdir().unwrap();
    let base = [
        "12",
        "--preset",
        "xeon-8167m-2n",
        "--load",
        "60",
        "--size",
        "16M",
        "--counts",
        "8",
    ];
    let mut off = base.to_vec();
    off.extend(["--nb", "0"]);
    let r = jobs_json(&off, state.path());
    assert_eq!(r["numa_balancing"], 0);
    assert!(r["notes"][0]
        .as_str()
        .unwrap()
        .contains("NUMA balancing off"));
    for j in r["jobs"].as_array().unwrap() {
        assert_eq!(j["causes"]["numa_balancing"], 0, "{j}");
    }
    let on = jobs_json(&base, state.path());
    assert_eq!(on["numa_balancing"], 1, "the simulated kernel's default");
    let (rc, _, err) = numalab(
        &["jobs", "2", "--backend", "sim", "--nb", "2"],
        state.path(),
    );
    assert_eq!(rc, 2, "{err}");
}

/// Also the regression test for `jobs --backend sim -- --pnid N` refused on
/// a host kernel without the patch: the simulated kernel has it built in.
#[test]
fn a_forced_node_holds_jobs_only_under_a_load_that_prefers_no_node() {
    let state = tempfile::tempdir().unwrap();
    let run = |policy: &str| {
        let r = jobs_json(
            &[
                "4",
                "--preset",
                "xeon-8167m-2n",
                "--load",
                "60",
                "--counts",
                "120",
                "--load-policy",
                policy,
                "--",
                "--membind",
                "0",
                "--pnid",
                "0",
            ],
            state.path(),
        );
        let jobs = r["jobs"].as_array().unwrap().clone();
        let n = jobs.len() as f64;
        let cross = jobs
            .iter()
            .map(|j| j["migrations"]["cross_node"].as_f64().unwrap())
            .sum::<f64>()
            / n;
        let on_mem = jobs
            .iter()
            .map(|j| j["node_pct"]["0"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
            / n;
        (r, cross, on_mem)
    };
    let (d, d_cross, d_on) = run("default");
    let (l, l_cross, l_on) = run("local");
    eprintln!("default load: {d_cross:.1} cross-node moves per job, {d_on:.1}% on node 0");
    eprintln!("MPOL_LOCAL load: {l_cross:.1} cross-node moves per job, {l_on:.1}% on node 0");
    assert!(d.get("load_policy").is_none(), "the default is left out");
    assert_eq!(l["load_policy"], "local");
    assert!(d_cross > 5.0 && l_cross < d_cross * 0.3);
    assert!(l_on > 99.0 && l_on > d_on);
}

#[test]
fn the_loads_period_and_phases_are_the_jobs_records_and_checked_first() {
    let tmp = tempfile::tempdir().unwrap();
    let shaped = [
        "4",
        "--preset",
        "xeon-8167m-2n",
        "--size",
        "8M",
        "--counts",
        "2",
        "--load-period-ms",
        "100",
        "--load-phases",
        "random",
    ];
    let r = jobs_json(&shaped, tmp.path());
    assert_eq!(r["load_period_ms"], 100.0, "{r}");
    assert_eq!(r["load_phases"], "random", "{r}");
    // The seed draws the phases as it draws the rest: one result per seed.
    let again = jobs_json(&shaped, tmp.path());
    assert_eq!(r["jobs"], again["jobs"]);
    // The defaults are left out, as in records from before them.
    let d = jobs_json(&["2", "--size", "8M", "--counts", "1"], tmp.path());
    assert!(d.get("load_period_ms").is_none() && d.get("load_phases").is_none());
    for bad in ["0", "20000"] {
        let (rc, out, err) = numalab(
            &["jobs", "--backend", "sim", "2", "--load-period-ms", bad],
            tmp.path(),
        );
        assert_eq!(rc, 2, "{bad}: {err}");
        assert!(err.contains("--load-period-ms"), "{err}");
        assert!(out.is_empty());
    }
}

/// Found in review before it landed: when `jobs --backend sim` went
/// through the backend seam it installed the signal handler the host's
/// jobs need, which the simulation never polls, so Ctrl-C was swallowed
/// and a long simulation ran to its end. Nothing on this machine changes
/// under the simulator, so the signal must end it at once.
#[test]
fn ctrl_c_ends_a_simulated_jobs_run_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let state = tempfile::tempdir().unwrap();
    // Minutes of simulation: far longer than the wait below.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args([
            "jobs",
            "1024",
            "--backend",
            "sim",
            "--preset",
            "epyc-7551-8n",
            "--load",
            "50",
            "--size",
            "256M",
            "--counts",
            "200",
            "--format",
            "json",
        ])
        .env("NUMALAB_STATE_DIR", state.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("still simulating 10 s after SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
}

/// `--first-touch start` (the RFC's order) in the simulated jobs: each job
/// touches its buffer wherever it runs, unbound, and binds its CPUs only
/// then. Until model 8 the jobs engine could not do it and refused it.
#[test]
fn jobs_touching_first_bind_their_cpus_after_the_buffer_is_placed() {
    let state = tempfile::tempdir().unwrap();
    let run = |order: &str| {
        jobs_json(
            &[
                "8",
                "--preset",
                "xeon-8167m-2n",
                "--load",
                "60",
                "--size",
                "8M",
                "--counts",
                "3",
                "--nb",
                "0",
                "--",
                "--cpunodebind",
                "1",
                "--first-touch",
                order,
            ],
            state.path(),
        )
    };
    let start = run("start");
    let placed = run("placed");
    let on_node0 = |r: &Value| {
        r["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["mem_node"] == 0)
            .count()
    };
    // Bound first, every buffer is touched on node 1; touching first, a
    // job touches where exec put it (sched_balance_exec spreads them over
    // the nodes), so some buffers land on node 0.
    assert_eq!(on_node0(&placed), 0, "{placed}");
    assert!(on_node0(&start) > 0, "{start}");
    for j in start["jobs"].as_array().unwrap() {
        // Its life is mostly the loop, on node 1 (its time per node counts
        // the warm-up too, wherever that ran).
        assert_eq!(j["most_node"], 1, "{j}");
    }
}
