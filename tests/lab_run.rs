//! `numalab run` on a real 2-node kernel (QEMU lab guest): a small full
//! matrix with NB toggled per row and every knob restored after; then a run
//! killed with SIGKILL, `numalab restore`, and `--resume` to exactly the plan.

mod common;

use common::{lab, sections};
use serde_json::Value;
use std::collections::BTreeSet;

const SCRIPT: &str = r#"
NB=/proc/sys/kernel/numa_balancing
MC=/sys/kernel/debug/sched/migration_cost_ns
echo 1 > $NB
echo @@before; cat $NB $MC
numalab run --samples 1 --size 8M --counts 1 --load 60 --migration-cost-ns 250000 --out /tmp/full >/tmp/full.txt 2>&1
echo "full rc=$?"
echo @@after; cat $NB $MC
echo @@table; cat /tmp/full.txt
echo @@meta; cat /tmp/full/run.json
echo @@samples; cat /tmp/full/samples.jsonl
echo 1 > $NB
numalab run --samples 3 --size 8M --counts 1 --nb 0 --pnid -1 --mem A,B --cpu F --out /tmp/k >/dev/null 2>&1 &
P=$!
i=0; while [ ! -s /tmp/k/samples.jsonl ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
kill -9 $P; wait $P 2>/dev/null
sleep 0.5
echo @@killed; cat $NB; ls -1 /var/lib/numalab/; ps | grep -c '[n]umalab' || true
echo @@tmpleft; ls -a /tmp | grep -c '^numalab-' || true
echo @@refused; numalab run --samples 1 --size 8M --out /tmp/other; echo "rc=$?"
echo @@restore; numalab restore; echo "rc=$?"; cat $NB; ls /var/lib/numalab/ | grep -c json
echo @@resume; numalab run --resume /tmp/k >/dev/null 2>&1; echo "rc=$?"
echo @@kmeta; cat /tmp/k/run.json
echo @@ksamples; cat /tmp/k/samples.jsonl
echo @@kafter; cat $NB; ps | grep -c '[n]umalab' || true
echo @@end
"#;

fn lines_json(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn full_matrix_then_sigkill_restore_and_resume() {
    let Some(run) = lab::run("2node", SCRIPT, 1500) else {
        return;
    };
    let s = sections(&run.output);
    assert!(run.output.contains("full rc=0"), "{}", s["table"]);
    let first2 = |t: &str| t.lines().take(2).collect::<Vec<_>>().join("\n");
    assert_eq!(
        first2(&s["before"]),
        first2(&s["after"]),
        "knobs not restored after a normal run"
    );

    let meta: Value = serde_json::from_str(&s["meta"]).unwrap_or_else(|e| {
        panic!(
            "{e}: ...{}",
            &s["meta"][s["meta"].len().saturating_sub(300)..]
        )
    });
    let rows = meta["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 36);
    let runnable: Vec<&Value> = rows.iter().filter(|r| r["skip"].is_null()).collect();
    assert_eq!(
        runnable.len(),
        18,
        "PNID rows skip without the patch; the rest run"
    );
    let samples = lines_json(&s["samples"]);
    assert_eq!(samples.len(), 18);
    for smp in &samples {
        let row = &rows[smp["row"].as_u64().unwrap() as usize];
        assert_eq!(smp["numa_balancing"], row["nb"], "NB per row");
        let p = &smp["probe"]["placement"];
        assert_eq!(p["matches_request"], true, "row {}: {p}", row["id"]);
        if let Some(n) = row["cpu"]["node"].as_u64() {
            let seen = numalab::idset::IdSet::parse(p["seen_cpus"].as_str().unwrap()).unwrap();
            let node = if n == 0 { "0-1" } else { "2-3" };
            assert!(
                seen.is_subset(&numalab::idset::IdSet::parse(node).unwrap()),
                "row {} ran on {seen}",
                row["id"]
            );
        }
    }
    assert!(s["table"].contains("[00] "), "{}", s["table"]);

    // SIGKILL mid-run: the journal stays and no numalab process survives.
    let killed: Vec<&str> = s["killed"].lines().collect();
    assert_eq!(killed[0], "0", "the killed run had set NB 0");
    assert!(killed.contains(&"restore.json"), "{killed:?}");
    assert_eq!(
        killed.last().unwrap().trim(),
        "0",
        "numalab processes survived SIGKILL"
    );
    // Regression: a killed run left /tmp/numalab-probe-PID.json behind;
    // children now write to memfds that vanish with the process.
    assert_eq!(s["tmpleft"].trim(), "0", "temp files left in /tmp");
    assert!(
        s["refused"].contains("numalab restore") && s["refused"].contains("rc=2"),
        "{}",
        s["refused"]
    );
    let restore: Vec<&str> = s["restore"].lines().collect();
    assert!(restore.contains(&"rc=0"), "{restore:?}");
    assert!(restore.contains(&"1"), "NB back to 1: {restore:?}");
    assert_eq!(
        restore.last().unwrap().trim(),
        "0",
        "journal removed (the lock file stays)"
    );

    assert!(s["resume"].contains("rc=0"), "{}", s["resume"]);
    let kmeta: Value = serde_json::from_str(&s["kmeta"]).unwrap();
    let ks = lines_json(&s["ksamples"]);
    let pairs: BTreeSet<(u64, u64)> = ks
        .iter()
        .map(|x| (x["row"].as_u64().unwrap(), x["sample"].as_u64().unwrap()))
        .collect();
    assert_eq!(ks.len() as u64, kmeta["planned_samples"].as_u64().unwrap());
    assert_eq!(pairs.len(), ks.len(), "duplicates after resume");
    assert!(!kmeta["end_unix_s"].is_null());
    let kafter: Vec<&str> = s["kafter"].lines().collect();
    assert_eq!(
        kafter,
        vec!["1", "0"],
        "NB restored and no process left after resume"
    );
}
