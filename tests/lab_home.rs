//! `numalab home` on a real 2-node kernel (QEMU lab guest, Debian's kernel,
//! no PNID patch): the mechanism, not magnitudes. Home = node 1 (CPUs 2-3):
//! the command starts narrowed to them with its memory preferred there;
//! four busy loops on two home CPUs wait, so they are widened to 0-3 (run
//! delay); when two stop, the others come back (home has room); a loop the
//! command leaves running gets its own CPUs back when the agent ends; the
//! journal is gone.

mod common;

use common::{lab, sections};
use serde_json::Value;

const SCRIPT: &str = r#"
loop() { while [ ! -e /tmp/stop$1 ]; do :; done; }
cat > /tmp/cmd.sh <<'EOS'
loop() { while [ ! -e /tmp/stop$1 ]; do :; done; }
echo @@start; grep Cpus_allowed_list /proc/self/status; grep -c 'prefer:1' /proc/self/numa_maps
loop A & loop A & loop B & loop B &
sleep 4; touch /tmp/stopA
sleep 5
echo @@left; (loop C) & echo $! > /tmp/left
sleep 1; touch /tmp/stopB
EOS
numalab home --node 1 --window-ms 200 -o /tmp/home.jsonl -- sh /tmp/cmd.sh > /tmp/out.txt 2>/tmp/err.txt
echo "rc=$?"
cat /tmp/out.txt
echo @@after; grep Cpus_allowed_list /proc/$(cat /tmp/left)/status; ls /var/lib/numalab/
touch /tmp/stopC
echo @@log; cat /tmp/home.jsonl
echo @@err; cat /tmp/err.txt
echo @@end
"#;

#[test]
fn narrowed_widened_under_run_delay_brought_back_and_restored() {
    let Some(run) = lab::run("2node", SCRIPT, 600) else {
        return;
    };
    let s = sections(&run.output);
    assert!(run.output.contains("rc=0"), "{}", run.output);
    let start: Vec<&str> = s["start"].lines().collect();
    assert_eq!(
        start[0], "Cpus_allowed_list:\t2-3",
        "narrowed before it ran"
    );
    let preferred: u32 = start[1].trim().parse().unwrap();
    assert!(preferred > 0, "memory preferred on node 1: {start:?}");

    let log: Vec<Value> = s["log"]
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |a: &str| log.iter().filter(|e| e["action"] == a).collect::<Vec<_>>();
    let widen = of("widen");
    assert!(!widen.is_empty(), "no widening: {}", s["log"]);
    for w in &widen {
        assert_eq!(w["reason"], "run-delay");
        assert_eq!(w["cpus"], "0-3");
        assert!(w["run_delay_ms"].as_f64().unwrap() > 0.0);
    }
    let back: Vec<_> = of("narrow")
        .into_iter()
        .filter(|e| e["reason"] == "home-has-room")
        .collect();
    assert!(!back.is_empty(), "nothing brought back home: {}", s["log"]);
    for b in &back {
        assert_eq!(b["cpus"], "2-3");
    }

    let after: Vec<&str> = s["after"].lines().collect();
    assert_eq!(
        after[0], "Cpus_allowed_list:\t0-3",
        "a task that outlived the agent got its own CPUs back"
    );
    assert!(
        !after.iter().any(|l| l.contains("restore.json")),
        "journal left: {after:?}"
    );
    assert!(s["err"].contains("widened"), "{}", s["err"]);
}
