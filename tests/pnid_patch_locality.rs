//! The PNID series (patches/linux-6.12) against 6.12's return convention of
//! `migrate_degrades_locality()` (docs/preferred-node.md, "The
//! `migrate_degrades_locality()` convention"): 1 = degrades, 0 = improves
//! (`can_migrate_task()` then skips `task_hot()`), -1 = no opinion (only then
//! does `task_hot()` decide). A literal port of the upstream series, written
//! for kernels after 6.14, returns 0 for every task without NUMA faults and
//! so switches the cache-hot check off for nearly every task.
//!
//! No QEMU: the Debian source tarball's files that the series touches are
//! extracted (cached under target/tmp, keyed on the tarball and the
//! patches), the patches applied as lab/kernel/build applies them, and the
//! function body (patched, and 6.12's own) compiled unchanged with gcc
//! against the mock of tests/fixtures/pnid_locality/mock.h. The harness
//! there runs both on cases given on stdin; the expectations are here.
//! Deliberately broken variants show that the checks can fail.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where scripts/deps.sh puts the source; NUMALAB_KERNEL_SOURCE overrides
/// it, as for lab/kernel/build.
const DEFAULT_TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";
/// The tarball's top directory.
const TOP: &str = "linux-source-6.12";
/// The definition (the `#else` stub is `static inline int ...`).
const SIGNATURE: &str = "static int migrate_degrades_locality(";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tarball() -> PathBuf {
    std::env::var_os("NUMALAB_KERNEL_SOURCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| DEFAULT_TARBALL.into())
}

/// The series in order, as lab/kernel/build applies it.
fn patches() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("patches/linux-6.12"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "patch"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no patches in patches/linux-6.12");
    v
}

/// Why the test cannot run here, if it cannot.
fn missing() -> Option<String> {
    let tar = tarball();
    if !tar.is_file() {
        return Some(format!(
            "{} not found (scripts/deps.sh installs linux-source-6.12)",
            tar.display()
        ));
    }
    for tool in ["gcc", "tar", "xz", "patch", "sha256sum"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!("{tool} not found"));
        }
    }
    None
}

/// Runs `cmd`; its stdout, or a panic with its stderr.
fn run(cmd: &mut Command, what: &str) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// sha256 of the tarball and of each patch, then of those digests (not of
/// the paths, so worktrees share the cache).
fn cache_key(tar: &Path, patches: &[PathBuf]) -> String {
    let sums = run(
        Command::new("sha256sum").arg(tar).args(patches),
        "sha256sum",
    );
    let digests: String = String::from_utf8(sums)
        .unwrap()
        .lines()
        .map(|l| format!("{}\n", l.split_whitespace().next().unwrap_or("")))
        .collect();
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(digests.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..16].to_string()
}

/// The files the patches change (their `--- a/PATH` lines): only these are
/// extracted, enough for every hunk to apply.
fn touched(patches: &[PathBuf]) -> Vec<String> {
    let mut v: Vec<String> = patches
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .filter_map(|l| l.strip_prefix("--- a/").map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    v.sort();
    v.dedup();
    assert!(
        v.iter().any(|f| f == "kernel/sched/fair.c"),
        "the series no longer touches kernel/sched/fair.c: {v:?}"
    );
    v
}

/// kernel/sched/fair.c of 6.12 as shipped and with the series applied.
struct FairC {
    orig: String,
    patched: String,
}

/// Extracts and patches on the first run (xz decompresses the whole
/// tarball to reach the files: seconds), then reads the cache. Built in a
/// temporary directory and renamed into place, so a run that is interrupted
/// or races another leaves no half-made cache.
fn build_fair_c() -> FairC {
    let (tar, patches) = (tarball(), patches());
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pnid-locality-src");
    let cache = root.join(cache_key(&tar, &patches));
    let (orig, patched) = (cache.join("orig-fair.c"), cache.join("patched-fair.c"));
    if !(orig.is_file() && patched.is_file()) {
        std::fs::create_dir_all(&root).unwrap();
        let tmp = tempfile::Builder::new()
            .prefix(".extract-")
            .tempdir_in(&root)
            .unwrap();
        let files = touched(&patches);
        let t0 = std::time::Instant::now();
        run(
            Command::new("tar")
                .arg("xf")
                .arg(&tar)
                .arg("-C")
                .arg(tmp.path())
                .args(files.iter().map(|f| format!("{TOP}/{f}"))),
            &format!("extracting {} files from {}", files.len(), tar.display()),
        );
        eprintln!(
            "extracted {} files from {} in {:.1} s",
            files.len(),
            tar.display(),
            t0.elapsed().as_secs_f64()
        );
        let tree = tmp.path().join(TOP);
        let stage = tmp.path().join("stage");
        std::fs::create_dir(&stage).unwrap();
        std::fs::copy(tree.join("kernel/sched/fair.c"), stage.join("orig-fair.c")).unwrap();
        for p in &patches {
            // As lab/kernel/build applies them; --forward makes an already
            // applied hunk an error rather than a question.
            run(
                Command::new("patch")
                    .args(["-p1", "--batch", "--forward", "--silent", "-d"])
                    .arg(&tree)
                    .arg("-i")
                    .arg(p),
                &format!("applying {} to {}", p.display(), tar.display()),
            );
        }
        std::fs::copy(
            tree.join("kernel/sched/fair.c"),
            stage.join("patched-fair.c"),
        )
        .unwrap();
        // Another run may have renamed its copy in first: then use that.
        if let Err(e) = std::fs::rename(&stage, &cache) {
            assert!(patched.is_file(), "caching {}: {e}", cache.display());
        }
    }
    FairC {
        orig: std::fs::read_to_string(orig).unwrap(),
        patched: std::fs::read_to_string(patched).unwrap(),
    }
}

/// The sources, shared by the tests of this binary (one extraction), or
/// None after a visible skip.
fn fair_c() -> Option<&'static FairC> {
    static SRC: OnceLock<Option<FairC>> = OnceLock::new();
    let src = SRC.get_or_init(|| missing().is_none().then(build_fair_c));
    if src.is_none() {
        common::skip_or_fail(&missing().unwrap_or_default());
    }
    src.as_ref()
}

/// The definition of migrate_degrades_locality() in `src`: from its
/// signature line to the first closing brace in column 0.
fn function(src: &str) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with(SIGNATURE))
        .collect();
    assert_eq!(
        starts.len(),
        1,
        "want one line starting {SIGNATURE:?} in fair.c, found {}",
        starts.len()
    );
    let len = lines[starts[0]..]
        .iter()
        .position(|l| *l == "}")
        .expect("no closing brace in column 0 after migrate_degrades_locality(");
    lines[starts[0]..=starts[0] + len].join("\n") + "\n"
}

/// The harness of tests/fixtures/pnid_locality compiled around `patched`
/// and 6.12's function (renamed `..._orig`).
struct Harness {
    _dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Harness {
    fn build(patched: &str, orig: &str) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let orig = orig.replacen(SIGNATURE, "static int migrate_degrades_locality_orig(", 1);
        std::fs::write(
            dir.path().join("functions.c"),
            format!("/* extracted by tests/pnid_patch_locality.rs */\n{patched}\n{orig}"),
        )
        .unwrap();
        let fixtures = repo().join("tests/fixtures/pnid_locality");
        let bin = dir.path().join("harness");
        // -Werror: anything the function uses that mock.h lacks is an error
        // (implicit declarations), never a guess.
        run(
            Command::new("gcc")
                .args(["-std=gnu11", "-O2", "-Wall", "-Werror", "-I"])
                .arg(&fixtures)
                .arg("-I")
                .arg(dir.path())
                .arg("-o")
                .arg(&bin)
                .arg(fixtures.join("harness.c")),
            "compiling the harness",
        );
        Harness { _dir: dir, bin }
    }

    /// (patched, 6.12) results for each input.
    fn run(&self, inputs: &[Input]) -> Vec<(i32, i32)> {
        let text: String = inputs.iter().map(Input::line).collect();
        let mut child = Command::new(&self.bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(
            out.status.success(),
            "harness failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<(i32, i32)> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (a, b) = l.split_once(' ').unwrap();
                (a.parse().unwrap(), b.parse().unwrap())
            })
            .collect();
        assert_eq!(got.len(), inputs.len(), "harness answered too few cases");
        got
    }
}

/// enum cpu_idle_type of 6.12.
const NOT_IDLE: i32 = 0;
const CPU_IDLE: i32 = 1;
const CPU_NEWLY_IDLE: i32 = 2;

/// One call: the task, the balancing environment, the mock weights. On the
/// mock machine CPU c is on node c / 2.
#[derive(Clone, Copy, Debug)]
struct Input {
    numa_balancing: bool,
    sd_numa: bool,
    /// p->numa_faults allocated (the task has fault statistics).
    faults: bool,
    /// p->numa_preferred_nid_force; -1 = not forced. While forced,
    /// sched_setnuma() keeps numa_preferred_nid equal to it.
    force: i32,
    /// p->numa_preferred_nid
    pref: i32,
    /// p->numa_group set.
    group: bool,
    src_cpu: i32,
    dst_cpu: i32,
    /// env->src_rq->nr_running, nr_preferred_running
    nr_running: i32,
    nr_preferred: i32,
    idle: i32,
    /// task_weight() and group_weight() per node.
    task_w: [i32; 4],
    group_w: [i32; 4],
}

impl Input {
    fn line(&self) -> String {
        let b = |x: bool| x as i32;
        let mut v = vec![
            b(self.numa_balancing),
            b(self.sd_numa),
            b(self.faults),
            self.force,
            self.pref,
            b(self.group),
            self.src_cpu,
            self.dst_cpu,
            self.nr_running,
            self.nr_preferred,
            self.idle,
        ];
        v.extend(self.task_w);
        v.extend(self.group_w);
        let words: Vec<String> = v.iter().map(i32::to_string).collect();
        words.join(" ") + "\n"
    }

    fn forced_without_faults(&self) -> bool {
        self.force != -1 && !self.faults
    }
}

/// A plain task without faults, moved from node 0 (CPU 0) to node 1 (CPU
/// 2) by a busy CPU in an SD_NUMA domain, NUMA balancing on.
const BASE: Input = Input {
    numa_balancing: true,
    sd_numa: true,
    faults: false,
    force: -1,
    pref: -1,
    group: false,
    src_cpu: 0,
    dst_cpu: 2,
    nr_running: 2,
    nr_preferred: 1,
    idle: NOT_IDLE,
    task_w: [0; 4],
    group_w: [0; 4],
};

#[path = "pnid_locality/cases.rs"]
mod cases;
use cases::{cases, Case};

/// What is wrong with `got` (patched, 6.12) for `cases`: a result other
/// than the expected one, or, for any task but a forced one without faults
/// (the only one the series means to change), a result other than 6.12's.
fn failures(cases: &[Case], got: &[(i32, i32)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (c, &(patched, orig)) in cases.iter().zip(got) {
        if patched != c.want {
            bad.push(format!(
                "{}: got {patched}, want {} ({})",
                c.name, c.want, c.why
            ));
        }
        if !c.input.forced_without_faults() && patched != orig {
            bad.push(format!(
                "{}: got {patched}, unpatched 6.12 gives {orig}",
                c.name
            ));
        }
    }
    bad
}

#[test]
fn a_task_without_numa_faults_keeps_the_cache_hot_check_on_6_12() {
    let Some(src) = fair_c() else { return };
    let h = Harness::build(&function(&src.patched), &function(&src.orig));
    let cases = cases();
    let got = h.run(&cases.iter().map(|c| c.input).collect::<Vec<_>>());
    for (c, (p, o)) in cases.iter().zip(&got) {
        eprintln!("{:>3} (6.12: {o:>2})  {}", p, c.name);
    }
    let bad = failures(&cases, &got);
    assert!(bad.is_empty(), "the patched function:\n{}", bad.join("\n"));
}

/// A deliberate bug in the patched function, and the case that must catch it.
struct Mutant {
    what: &'static str,
    from: &'static str,
    to: &'static str,
    caught_by: &'static str,
}

const MUTANTS: [Mutant; 2] = [
    Mutant {
        what: "the literal port: 0 (\"improves\") for a task without faults",
        from: "if (!p->numa_faults && !forced)\n\t\treturn -1;",
        to: "if (!p->numa_faults && !forced)\n\t\treturn 0;",
        caught_by: cases::NO_FAULTS,
    },
    Mutant {
        what: "no -1 for a forced task without faults between two other nodes",
        from: "\tif (!p->numa_faults)\n\t\treturn -1;\n",
        to: "",
        caught_by: cases::FORCED_ELSEWHERE,
    },
];

#[test]
fn the_locality_check_fails_on_a_literal_port_that_returns_0_without_faults() {
    let Some(src) = fair_c() else { return };
    let (patched, orig) = (function(&src.patched), function(&src.orig));
    let cases = cases();
    let inputs: Vec<Input> = cases.iter().map(|c| c.input).collect();
    for m in &MUTANTS {
        assert_eq!(
            patched.matches(m.from).count(),
            1,
            "{}: want {:?} once in the patched function:\n{patched}",
            m.what,
            m.from
        );
        let h = Harness::build(&patched.replacen(m.from, m.to, 1), &orig);
        let bad = failures(&cases, &h.run(&inputs));
        eprintln!("mutant \"{}\" fails:\n  {}", m.what, bad.join("\n  "));
        assert!(
            bad.iter()
                .any(|f| f.starts_with(&format!("{}:", m.caught_by))),
            "mutant \"{}\" not caught by {:?}; failures: {bad:?}",
            m.what,
            m.caught_by
        );
    }
}

/// What the series says for a forced task without faults (its commit
/// message): "moving off it degrades locality, moving onto it improves it,
/// anything else has no opinion", moving off under 6.12's own condition
/// (the source runqueue has tasks that do not prefer its node).
fn forced_without_faults_spec(i: &Input) -> i32 {
    let (src, dst) = (i.src_cpu / 2, i.dst_cpu / 2);
    if !i.numa_balancing || !i.sd_numa || src == dst {
        -1
    } else if src == i.force {
        if i.nr_running > i.nr_preferred {
            1
        } else {
            -1
        }
    } else if dst == i.force {
        0
    } else {
        -1
    }
}

/// Every input of `v` once with each of `values`.
fn expand<T: Copy>(v: Vec<Input>, values: &[T], set: impl Fn(&mut Input, T)) -> Vec<Input> {
    v.iter()
        .flat_map(|i| {
            values.iter().map(|&x| {
                let mut i = *i;
                set(&mut i, x);
                i
            })
        })
        .collect()
}

#[test]
fn only_a_forced_task_without_faults_gets_other_answers_than_6_12() {
    let Some(src) = fair_c() else { return };
    let h = Harness::build(&function(&src.patched), &function(&src.orig));
    // (force, preferred): not forced with any preferred node, or forced
    // (then the preferred node is the forced one).
    let nodes = [(-1, -1), (-1, 0), (-1, 1), (-1, 2), (0, 0), (1, 1), (2, 2)];
    let weights = [[500, 300, 200, 0], [200, 300, 500, 0], [300, 300, 300, 100]];
    let mut v = vec![BASE];
    v = expand(v, &[false, true], |i, x| i.numa_balancing = x);
    v = expand(v, &[false, true], |i, x| i.sd_numa = x);
    v = expand(v, &nodes, |i, (f, p)| (i.force, i.pref) = (f, p));
    v = expand(v, &[false, true], |i, x| i.faults = x);
    v = expand(v, &[false, true], |i, x| i.group = x);
    // Nodes 0, 1, 2 to nodes 0, 1, 2 (same node on different CPUs).
    v = expand(v, &[0, 2, 4], |i, x| i.src_cpu = x);
    v = expand(v, &[1, 3, 5], |i, x| i.dst_cpu = x);
    v = expand(v, &[(2, 1), (2, 2)], |i, (r, p)| {
        (i.nr_running, i.nr_preferred) = (r, p)
    });
    v = expand(v, &[NOT_IDLE, CPU_IDLE, CPU_NEWLY_IDLE], |i, x| i.idle = x);
    v = expand(v, &weights, |i, x| i.task_w = x);
    let inputs = expand(v, &weights[..2], |i, x| i.group_w = x);
    let got = h.run(&inputs);
    let mut bad = Vec::new();
    let mut changed = 0;
    for (i, &(patched, orig)) in inputs.iter().zip(&got) {
        let want = if i.forced_without_faults() {
            forced_without_faults_spec(i)
        } else {
            orig
        };
        changed += (patched != orig) as usize;
        if patched != want {
            bad.push(format!("{i:?}: got {patched}, want {want} (6.12: {orig})"));
        }
    }
    eprintln!(
        "{} inputs, {changed} answered differently from 6.12",
        inputs.len()
    );
    assert!(
        bad.is_empty(),
        "{} of {} inputs wrong, e.g.:\n{}",
        bad.len(),
        inputs.len(),
        bad[..bad.len().min(10)].join("\n")
    );
    // The series must change something (forced tasks): else the grid would
    // not reach the new code.
    assert!(changed > 0, "no input reached the forced-node code");
}
