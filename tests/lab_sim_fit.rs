//! `numalab sim fit` on a real kernel: the DL980-like lab guest (8 nodes,
//! SLIT 10/12/17/19) runs the probe pinned at every distance from its
//! memory; under emulation memory latency is the same on every node, so
//! the fit must find ratio 1 at every distance (within the run's own
//! error), and the profile it writes must load. `--caches base`: the
//! guest's sysfs reports caches the emulator does not model.
//!
//! Ten samples a row, in `run`'s shuffled order: the emulator's clock is
//! the host's, so a host busy with other work slows whichever samples run
//! then; with six a row, one such stretch once put distance 17 at
//! 0.846 ± 0.031. When the fit itself refuses the run as not quiet (a
//! row spread past 50%), the run is measured once more: on 2026-11-28 the
//! host's speed wandered so much that two CI runs in a row were refused
//! (54% and 71%), and so was one of five runs alone on the idle host;
//! stop 42's code, which had passed here, gave errors of 16-28% on its
//! ratios the same day; the ratios came out 1 within their errors
//! whenever the fit took the run.

mod common;

use common::lab;
use serde_json::Value;

const SCRIPT: &str = r#"
# Measured once more, and only once, when the fit itself refuses the run
# as too noisy: the emulator's speed is the host's, and on a host whose
# speed wanders (2026-11-28: the same 0.1 s of work took 0.08-0.72 s) a
# row's spread can pass the fit's 50% limit with nothing wrong in numalab.
for attempt in 1 2; do
    rm -rf /tmp/r
    numalab run --samples 10 --nb 0 --pnid=-1 --mem 1 --cpu 1,0,2,4 --size 4M --counts 16 --load 0 --out /tmp/r >/tmp/run.txt 2>&1
    echo "run rc=$?"
    numalab sim fit /tmp/r -o /tmp/lab.toml --base lab-tcg --caches base --format json >/tmp/fit.json 2>/tmp/fit.err
    fit=$?
    grep -q 'the machine was not quiet' /tmp/fit.err || break
    echo "attempt $attempt: the fit found the guest's samples too spread: $(head -1 /tmp/fit.err)"
done
echo "fit rc=$fit"
echo @@fit; cat /tmp/fit.json
echo @@err; cat /tmp/fit.err /tmp/run.txt
echo @@profile; cat /tmp/lab.toml
echo @@end
"#;

#[test]
fn uniform_emulated_memory_fits_ratio_one_at_every_distance() {
    let Some(run) = lab::run("8node-dl980", SCRIPT, 900) else {
        return;
    };
    let s = run.finished();
    for line in run.output.lines().filter(|l| l.starts_with("attempt ")) {
        eprintln!("{line}");
    }
    assert!(run.output.contains("run rc=0"), "{}", s["err"]);
    assert!(run.output.contains("fit rc=0"), "{}", s["err"]);
    let j: Value = serde_json::from_str(&s["fit"]).unwrap();
    let remote = j["fit"]["remote"].as_array().unwrap();
    let dists: Vec<u64> = remote
        .iter()
        .map(|r| r["distance"].as_u64().unwrap())
        .collect();
    assert_eq!(dists, [12, 17, 19], "{remote:?}");
    for r in remote {
        let (ratio, se) = (
            r["ratio"].as_f64().unwrap(),
            r["ratio_se"].as_f64().unwrap(),
        );
        println!("distance {}: ratio {ratio:.4} ± {se:.4}", r["distance"]);
        // 4 standard errors: one failure in ~16,000 runs from noise alone;
        // the 2% covers what the emulator's timing adds between rows.
        assert!(
            (ratio - 1.0).abs() <= 4.0 * se + 0.02,
            "distance {}: ratio {ratio} ± {se}, not 1\n{}",
            r["distance"],
            s["fit"]
        );
    }
    assert!(s["profile"].contains("name = \"lab\""), "{}", s["profile"]);
}
