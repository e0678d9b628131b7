//! `run --first-touch` on a real kernel (the 2-node lab guest): with
//! `placed` (the default) a Mem F row's pages are on the node its CPU is
//! bound to; with `start` (the RFC's order) they are on the node the probe
//! started on, before it bound itself, so a pinned row can run remote.
//! Both recorded in run.json and in every sample.

mod common;

use common::{jsonl, lab, sections};
use serde_json::Value;

const SCRIPT: &str = r#"
for ft in placed start; do
  numalab run --samples 4 --nb 0 --pnid=-1 --mem F --cpu A,B --size 8M --counts 2 --load 0 --first-touch $ft --out /tmp/$ft >/tmp/$ft.txt 2>&1
  echo "$ft rc=$?"
done
echo @@placed_meta; cat /tmp/placed/run.json
echo @@placed; cat /tmp/placed/samples.jsonl
echo @@start_meta; cat /tmp/start/run.json
echo @@start; cat /tmp/start/samples.jsonl
echo @@err; cat /tmp/placed.txt /tmp/start.txt
echo @@topo; numalab topo --json
echo @@end
"#;

/// Whether `cpu` is in a CPU list such as `0-1,4`.
fn in_list(list: &str, cpu: u64) -> bool {
    list.split(',').any(|part| match part.split_once('-') {
        Some((a, b)) => (a.parse::<u64>().unwrap()..=b.parse().unwrap()).contains(&cpu),
        None => part.parse::<u64>().ok() == Some(cpu),
    })
}

fn node_of(topo: &Value, cpu: u64) -> u64 {
    topo["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["cpus"].as_str().is_some_and(|l| in_list(l, cpu)))
        .map(|n| n["id"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("cpu {cpu} on no node"))
}

#[test]
fn mem_f_pages_follow_the_binding_or_the_start() {
    let Some(run) = lab::run("2node", SCRIPT, 600) else {
        return;
    };
    let s = sections(&run.output);
    assert!(s.contains_key("end"), "{}", run.output);
    for ft in ["placed", "start"] {
        assert!(run.output.contains(&format!("{ft} rc=0")), "{}", s["err"]);
    }
    let topo: Value = serde_json::from_str(&s["topo"]).unwrap();
    let placed_meta: Value = serde_json::from_str(&s["placed_meta"]).unwrap();
    let start_meta: Value = serde_json::from_str(&s["start_meta"]).unwrap();
    assert!(placed_meta["spec"]["probe"].get("first_touch").is_none());
    assert_eq!(start_meta["spec"]["probe"]["first_touch"], "start");
    let cpu_node = |meta: &Value, row: &Value| -> u64 {
        let id = row["row"].as_u64().unwrap();
        meta["rows"][id as usize]["cpu"]["node"].as_u64().unwrap()
    };
    for rec in jsonl(&s["placed"]) {
        let want = cpu_node(&placed_meta, &rec);
        assert_eq!(
            rec["probe"]["placement"]["mem_node"].as_u64(),
            Some(want),
            "placed: pages not on the bound node {want}: {}",
            rec["probe"]["placement"]
        );
    }
    // Touched before binding: on the node it started on, whichever the
    // row binds it to (a move during the short warm-up could split them:
    // three samples in four must follow the start).
    let recs = jsonl(&s["start"]);
    assert_eq!(recs.len(), 8);
    let mut followed = 0;
    for rec in &recs {
        assert_eq!(rec["probe"]["spec"]["first_touch"], "start");
        let p = &rec["probe"];
        let start = node_of(&topo, p["observation"]["start_cpu"].as_u64().unwrap());
        if p["placement"]["mem_node"].as_u64() == Some(start) {
            followed += 1;
        }
        // Bound after the touch: the loop ran on the row's node.
        let want = cpu_node(&start_meta, rec);
        let on: Vec<u64> = p["residency"]["node_ns"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
            .map(|(k, _)| k.parse().unwrap())
            .collect();
        assert_eq!(on, [want], "start: the loop ran outside node {want}");
    }
    assert!(
        followed * 4 >= recs.len() * 3,
        "start: {followed} of {} samples' pages on the start node",
        recs.len()
    );
}
