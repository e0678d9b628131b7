//! `numalab trace` and `numalab jobs` on real multi-node kernels (QEMU lab
//! guests): the tracer's count of a floating probe's migrations equals an
//! independent tracefs instance's sched_migrate_task events for its pid,
//! residency sums to 100%, and tracefs is left byte for byte as it was
//! after a normal run, after Ctrl-C, and (with `numalab restore`) after
//! SIGKILL. Then the multi-job table in a 4-node guest.

mod common;

use common::{lab, migrate_lines, sections};
use serde_json::Value;

const TRACE_SCRIPT: &str = r#"
T=/sys/kernel/tracing
# Non-default global state that numalab must leave alone.
echo 0 > $T/tracing_on
echo 2048 > $T/buffer_size_kb
echo 'pid == 1' > $T/events/sched/sched_wakeup/filter
echo 1 > $T/events/sched/sched_wakeup/enable
# An independent check: our own instance counting sched_migrate_task.
C=$T/instances/check
mkdir $C
echo mono > $C/trace_clock
echo 1 > $C/events/sched/sched_migrate_task/enable
snap() {
    for f in tracing_on trace_clock buffer_size_kb current_tracer set_event set_event_pid tracing_cpumask; do
        echo "$f: $(cat $T/$f)"
    done
    echo "instances: $(ls $T/instances | tr '\n' ' ')"
    for e in $T/events/sched/*/; do
        echo "$(basename $e): $(cat $e/enable) $(cat $e/filter)"
    done
    grep -c . $T/trace
}
snap > /tmp/before
export NUMALAB_STATE_DIR=/tmp/state
numalab load --percent 60 --duration 600 >/dev/null 2>&1 &
LP=$!
sleep 1
numalab trace -o /tmp/trace.json -- sh -c 'echo "pid == $$" > /sys/kernel/tracing/instances/check/events/sched/sched_migrate_task/filter; exec numalab probe FLOAT_PROBE --observe-every 1024 --json' > /tmp/float.json
echo "trace rc=$?"
kill -TERM $LP; wait $LP
echo 0 > $C/events/sched/sched_migrate_task/enable
snap > /tmp/after
echo @@float; cat /tmp/float.json
echo @@trace; cat /tmp/trace.json
echo @@check; grep sched_migrate_task $C/trace
echo @@normal; diff /tmp/before /tmp/after && echo same
# Ctrl-C: SIGINT to numalab only; it must stop the command, report, restore.
numalab trace -- sleep 30 > /tmp/int.txt 2>&1 &
TP=$!
sleep 2
kill -INT $TP; wait $TP; echo "int rc=$?"
snap > /tmp/after-int
echo @@int; cat /tmp/int.txt; [ "$(ps | grep -c '[s]leep 30')" = 0 ] && echo "no sleep left" || echo "sleep left"
diff /tmp/before /tmp/after-int && echo same
# SIGKILL: the instance stays until `numalab restore`.
numalab trace -- sleep 30 >/dev/null 2>&1 &
TP=$!
sleep 2
kill -KILL $TP; wait $TP
echo @@killed; ls $T/instances; ls /tmp/state
numalab restore; echo "restore rc=$?"
snap > /tmp/after-kill
[ "$(ps | grep -c '[s]leep 30')" = 0 ] && echo "no sleep left" || echo "sleep left"
diff /tmp/before /tmp/after-kill && echo same
echo @@end
"#;

#[test]
fn trace_counts_match_the_kernel_and_leave_tracefs_as_it_was() {
    // The floating probe: long enough for hundreds of moves in CI, longer
    // (a 12-pass 32 MiB probe, six times as long) with NUMALAB_LAB_MEASURE=1.
    let script = TRACE_SCRIPT.replace(
        "FLOAT_PROBE",
        lab::sized("--size 16M --counts 4", "--size 32M --counts 12"),
    );
    let Some(run) = lab::run("2node", &script, 900) else {
        return;
    };
    let s = sections(&run.output);
    let out = &run.output;
    assert!(out.contains("trace rc=0"), "{out}");

    let probe: Value = serde_json::from_str(s["float"].lines().next().unwrap()).unwrap();
    let rec: Value = serde_json::from_str(s["trace"].trim()).unwrap();
    assert_eq!(rec["schema"], "numalab.trace/1");
    assert_eq!(rec["lost_events"], 0, "{}", rec["notes"]);
    let task = &rec["tasks"][0];
    let pid = task["pid"].as_u64().unwrap();
    assert_eq!(probe["pid"].as_u64(), Some(pid));

    // Self-observed and traced counts both show cross-node moves.
    let selfobs = probe["migrations_whole"]["cross_node"].as_u64().unwrap();
    let traced = task["migrations"]["cross_node"].as_u64().unwrap();
    assert!(selfobs > 0 && traced > 0, "self {selfobs}, traced {traced}");
    // Over time: the same crossings, tenth by tenth of the window.
    let ot = &task["over_time"];
    let sum: u64 = ot["cross_node"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(sum, traced, "{ot}");
    // Over the probe's own life, which the window holds.
    let w = &rec["window"];
    let window = w["end_ns"].as_u64().unwrap() - w["start_ns"].as_u64().unwrap();
    let life = ot["span_ns"].as_u64().unwrap();
    assert!(life > 0 && life <= window, "life {life}, window {window}");

    // Exact agreement with the independent instance over the probe's
    // observed life (the check's filter is set by the shell, a moment
    // after numalab starts watching).
    let obs = &probe["observation"];
    let start = obs["start_mono_ns"].as_u64().unwrap();
    let end = start + obs["end_ns"].as_u64().unwrap();
    let w0 = rec["window"]["start_ns"].as_u64().unwrap();
    let ours: Vec<(u64, u64, u64)> = task["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                w0 + m["t_ns"].as_u64().unwrap(),
                m["from"].as_u64().unwrap(),
                m["to"].as_u64().unwrap(),
            )
        })
        .filter(|m| m.0 >= start && m.0 <= end)
        .collect();
    let theirs: Vec<(u64, u64, u64)> = migrate_lines(&s["check"])
        .into_iter()
        .filter(|m| m.1 == pid)
        .map(|(t, _, a, b)| (t, a, b))
        .filter(|m| m.0 >= start && m.0 <= end && m.1 != m.2)
        .collect();
    assert_eq!(ours.len(), theirs.len(), "ours {ours:?}\ntheirs {theirs:?}");
    for (a, b) in ours.iter().zip(&theirs) {
        // Each instance stamps its own copy of the event as it writes it:
        // microseconds apart, or milliseconds when single-threaded TCG
        // switches vCPUs in between.
        assert!(
            a.0.abs_diff(b.0) < 50_000_000 && a.1 == b.1 && a.2 == b.2,
            "{a:?} vs {b:?}"
        );
    }
    eprintln!(
        "float probe: {} traced moves in its observed life = {} check events; kernel \
         nr_migrations {}; cross-node self-observed {selfobs}, traced {traced}; causes {}",
        ours.len(),
        theirs.len(),
        obs["kernel_migrations"],
        task["causes"]
    );

    let pct: f64 = task["residency"]["node_pct"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!((pct - 100.0).abs() <= 0.5, "residency sums to {pct}");

    assert!(s["normal"].contains("same"), "after a run: {}", s["normal"]);
    let int = &s["int"];
    // Interrupted work exits 128 + signal after restoring (the rc line is
    // printed before the @@int marker).
    assert!(s["normal"].contains("int rc=130"), "{}", s["normal"]);
    assert!(int.contains("stopped by SIGINT"), "{int}");
    assert!(
        int.contains("no sleep left") && int.contains("same"),
        "{int}"
    );
    let killed = &s["killed"];
    assert!(
        killed.contains("numalab-"),
        "instance left after SIGKILL: {killed}"
    );
    assert!(
        killed.contains("restore.json"),
        "journal after SIGKILL: {killed}"
    );
    assert!(killed.contains("removed tracing instance"), "{killed}");
    assert!(killed.contains("restore rc=0"), "{killed}");
    assert!(
        killed.contains("no sleep left") && killed.trim_end().ends_with("same"),
        "{killed}"
    );
}

const JOBS_SCRIPT: &str = r#"
export NUMALAB_STATE_DIR=/tmp/state
numalab jobs 8 --size 8M --counts 3 -o /tmp/jobs.json; echo "jobs rc=$?"
echo @@json; cat /tmp/jobs.json
echo @@md; numalab jobs --from /tmp/jobs.json --format markdown
echo @@end
"#;

#[test]
fn jobs_table_on_four_nodes() {
    let Some(run) = lab::run("4node-smt", JOBS_SCRIPT, 900) else {
        return;
    };
    let s = sections(&run.output);
    assert!(run.output.contains("jobs rc=0"), "{}", run.output);
    eprintln!("{}", run.output.split("@@json").next().unwrap());
    let rec: Value = serde_json::from_str(&s["json"]).unwrap();
    assert_eq!(rec["nodes"].as_array().unwrap().len(), 4);
    let jobs = rec["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 8);
    for j in jobs {
        assert_eq!(j["residency_source"], "kernel trace");
        let sum: f64 = j["node_pct"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((sum - 100.0).abs() <= 0.5, "job {}: {sum}", j["job"]);
        assert!(j["user_s"].as_f64().unwrap() > 0.0);
    }
    assert!(run.output.contains("Average user time ="));
    assert_eq!(s["md"].lines().filter(|l| l.starts_with("| ")).count(), 9);
}
