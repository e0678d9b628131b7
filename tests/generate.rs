//! `numalab generate`: the man pages and shell completions come from the
//! clap definitions, so every subcommand and option the binary has is in
//! them, and nothing else.

mod common;

use common::numalab_out;

fn generate(args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = vec!["generate"];
    a.extend_from_slice(args);
    let (rc, out, err) = numalab_out(&a, tmp.path());
    assert_eq!(rc, 0, "{args:?}: {err}");
    out
}

const SUBCOMMANDS: [&str; 12] = [
    "topo", "probe", "load", "run", "report", "compare", "plot", "trace", "jobs", "home", "sched",
    "restore",
];

#[test]
fn the_man_page_lists_every_subcommand_and_each_has_its_own_page() {
    let top = generate(&["man"]);
    assert!(top.contains(".TH numalab 1"), "{top}");
    for sub in SUBCOMMANDS {
        assert!(top.contains(sub), "numalab(1) lacks {sub}");
        let page = generate(&["man", sub]);
        assert!(
            page.contains(&format!(".TH numalab-{sub} 1")),
            "{sub}: {page}"
        );
    }
    assert!(
        !top.contains("__gate"),
        "an internal subcommand is in the page"
    );
    // Options are there as clap has them (roff escapes the dashes).
    let run = generate(&["man", "run"]);
    for opt in ["resume", "pnid\\-via", "precision", "knob"] {
        assert!(
            run.contains(&format!("\\-\\-{opt}")),
            "numalab-run(1) lacks --{opt}"
        );
    }
}

#[test]
fn completions_know_every_subcommand_in_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let s = generate(&[shell]);
        for sub in SUBCOMMANDS {
            assert!(s.contains(sub), "{shell}: no {sub}");
        }
        assert!(s.contains("pnid-via"), "{shell}: no run --pnid-via");
    }
}

#[test]
fn an_unknown_page_or_a_page_for_a_shell_is_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let (rc, out, err) = numalab_out(&["generate", "man", "nope"], tmp.path());
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("no such subcommand") && err.contains("run"),
        "{err}"
    );
    assert!(out.is_empty());
    let (rc, _, err) = numalab_out(&["generate", "bash", "run"], tmp.path());
    assert_eq!(rc, 2, "{err}");
}
