//! Running scripts in QEMU lab guests (see lab/README.md) from tests.
//!
//! The guest needs a static numalab: the one under test when it is static
//! (scripts/test.sh builds with crt-static), else one built once per test
//! process into target/lab-static (a separate target dir, so it neither
//! fights the outer cargo's lock nor invalidates its build). Guests of one
//! test process run one at a time (each can use both host cores);
//! scripts/test.sh and bench/sim_vs_lab.sh run several processes side by
//! side, one single-threaded guest a host core. Where QEMU, a kernel or
//! busybox is missing the lab tests print SKIPPED with the reason, unless
//! NUMALAB_REQUIRE_TOOLS is set (CI), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use super::required;

fn missing_tools() -> Option<String> {
    let have = |cmd: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !have("qemu-system-x86_64") {
        return Some("qemu-system-x86_64 is not installed (package qemu-system-x86)".into());
    }
    let kernels = std::fs::read_dir("/boot")
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("vmlinuz-"))
        })
        .unwrap_or(false);
    if !kernels && std::env::var_os("NUMALAB_LAB_KERNEL").is_none() {
        return Some("no /boot/vmlinuz-* kernel (package linux-image-amd64)".into());
    }
    if !Path::new("/bin/busybox").exists() {
        return Some("/bin/busybox missing (package busybox-static)".into());
    }
    None
}

static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
static ONE_GUEST: Mutex<()> = Mutex::new(());

/// Whether the file at `path` is a statically linked x86_64 executable:
/// an ELF64 little-endian executable or PIE (ET_EXEC, ET_DYN) for x86_64
/// with program headers, none of them PT_INTERP (the dynamic loader a
/// dynamic executable names). Reads the headers only; anything odd (short,
/// another machine, offsets out of range) is "not static".
pub fn is_static_elf(path: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::FileExt;
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let mut h = [0u8; 64];
    if f.read_exact(&mut h).is_err() {
        return false;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let (e_type, machine) = (u16_at(&h, 0x10), u16_at(&h, 0x12));
    // e_ident: magic, ELFCLASS64 (2), little-endian (1); EM_X86_64 is 62.
    if h[..6] != [0x7f, b'E', b'L', b'F', 2, 1] || !(e_type == 2 || e_type == 3) || machine != 62 {
        return false;
    }
    let phoff = u64::from_le_bytes(h[0x20..0x28].try_into().unwrap());
    let (phentsize, phnum) = (u16_at(&h, 0x36), u16_at(&h, 0x38));
    // PN_XNUM (0xffff) keeps the count elsewhere: not what a linker makes
    // of an executable.
    if phnum == 0 || phnum == 0xffff || phentsize < 4 {
        return false;
    }
    let mut ph = vec![0u8; phentsize * phnum];
    if f.read_exact_at(&mut ph, phoff).is_err() {
        return false;
    }
    const PT_INTERP: u32 = 3;
    ph.chunks_exact(phentsize)
        .all(|e| u32::from_le_bytes(e[..4].try_into().unwrap()) != PT_INTERP)
}

fn static_binary() -> Result<PathBuf, String> {
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("NUMALAB_BIN") {
            return Ok(PathBuf::from(p));
        }
        // scripts/test.sh builds the tests with crt-static: the numalab
        // they test is then the one the guest needs, and a second release
        // build (nearly two minutes on 2 cores) is not needed.
        // A debug build would be too slow for the guests' time limits.
        let tested = PathBuf::from(env!("CARGO_BIN_EXE_numalab"));
        if !cfg!(debug_assertions) && is_static_elf(&tested) {
            return Ok(tested);
        }
        let target_dir = repo().join("target/lab-static");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .current_dir(repo())
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .env("CARGO_TARGET_DIR", &target_dir)
            .args([
                "build",
                "--release",
                "--target",
                "x86_64-unknown-linux-gnu",
                "--bin",
                "numalab",
            ])
            .output()
            .map_err(|e| format!("running cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "static build failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(target_dir.join("x86_64-unknown-linux-gnu/release/numalab"))
    })
    .clone()
}

/// A guest run's exit code and output.
pub struct GuestRun {
    pub code: i32,
    pub output: String,
}

impl GuestRun {
    /// The output's `@@name` sections, of a script that reached `@@end`
    /// (else a panic with the whole output).
    pub fn finished(&self) -> std::collections::BTreeMap<String, String> {
        let s = super::sections(&self.output);
        assert!(
            s.contains_key("end"),
            "script did not finish:\n{}",
            self.output
        );
        s
    }
}

/// How long a lab test measures. Tests whose assertions hold whatever the
/// run's length (what the kernel guarantees, what the records must say)
/// run `check` sized runs by default, CI's, so the lab fits CI's time;
/// `NUMALAB_LAB_MEASURE=1` runs them at `measure` size, the runs whose
/// printed figures docs/ quote. Anything but unset, empty or `0` is an
/// error, so a typo does not quietly shorten a measurement.
pub fn sized<T>(check: T, measure: T) -> T {
    match std::env::var("NUMALAB_LAB_MEASURE").as_deref() {
        Err(_) | Ok("") | Ok("0") => check,
        Ok("1") => measure,
        Ok(v) => panic!("NUMALAB_LAB_MEASURE must be 0 or 1, not {v:?}"),
    }
}

/// Runs `script` (busybox sh) as root in a guest of `topology`; `None` when
/// the lab cannot run here (after printing SKIPPED), panics when it must.
pub fn run(topology: &str, script: &str, timeout_s: u32) -> Option<GuestRun> {
    run_on(None, topology, script, timeout_s)
}

/// What building the lab kernel needs and this machine lacks, if anything.
fn missing_kernel_tools() -> Option<String> {
    let source = std::env::var_os("NUMALAB_KERNEL_SOURCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/src/linux-source-6.12.tar.xz"));
    if !source.exists() {
        return Some(format!(
            "no kernel source {} (package linux-source-6.12)",
            source.display()
        ));
    }
    for (cmd, pkg) in [
        ("gcc", "gcc"),
        ("make", "make"),
        ("flex", "flex"),
        ("bison", "bison"),
        ("bc", "bc"),
        ("patch", "patch"),
    ] {
        let ok = Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            return Some(format!("{cmd} is not installed (package {pkg})"));
        }
    }
    if !Path::new("/usr/include/libelf.h").exists() {
        return Some("libelf.h missing (package libelf-dev)".into());
    }
    None
}

static PNID_KERNEL: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The patched lab kernel (lab/kernel/build: cached, or built now, which
/// takes minutes; its progress shows on stderr). `None` after printing
/// SKIPPED when the lab or the kernel build cannot run here; panics when
/// they must (NUMALAB_REQUIRE_TOOLS) or when the build fails.
pub fn pnid_kernel() -> Option<PathBuf> {
    if let Some(why) = missing_tools().or_else(missing_kernel_tools) {
        assert!(
            !required(),
            "lab kernel required (NUMALAB_REQUIRE_TOOLS) but {why}"
        );
        eprintln!("SKIPPED lab test on the PNID kernel: {why}");
        return None;
    }
    let built = PNID_KERNEL.get_or_init(|| {
        // Guests and the build both want both cores: not at the same time.
        let _one = ONE_GUEST.lock().unwrap_or_else(|p| p.into_inner());
        let start = std::time::Instant::now();
        let out = Command::new("bash")
            .arg(repo().join("lab/kernel/build"))
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("running lab/kernel/build: {e}"))?;
        if !out.status.success() {
            return Err(format!("lab/kernel/build failed ({})", out.status));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let path = stdout.lines().last().unwrap_or("").trim().to_string();
        eprintln!(
            "lab kernel: {path} ({:.0} s, cached or built)",
            start.elapsed().as_secs_f64()
        );
        Ok(PathBuf::from(path))
    });
    Some(built.clone().unwrap_or_else(|e| panic!("{e}")))
}

/// [`run`] on a chosen kernel image (`None`: the host's Debian kernel).
pub fn run_on(
    kernel: Option<&Path>,
    topology: &str,
    script: &str,
    timeout_s: u32,
) -> Option<GuestRun> {
    let (code, out, err) = guest(kernel, topology, script, timeout_s, None)?;
    assert_ne!(
        code, 125,
        "guest {topology} failed to boot or timed out:\n{err}\n--- script output so far ---\n{out}"
    );
    Some(GuestRun { code, output: out })
}

/// [`run`] under multi-threaded TCG (`NUMALAB_LAB_TCG=multi`: every vCPU on
/// its own host thread, so the guest's CPUs run side by side as a real
/// machine's do, where single-threaded TCG runs one at a time). That mode
/// can wedge the guest while the kernel patches its own code with other
/// vCPUs busy (lab/README.md), which `lab/guest` reports as a timeout
/// (125): the emulator's fault, not the kernel's, so the script is run once
/// more before that fails the test.
pub fn run_multi_threaded(topology: &str, script: &str, timeout_s: u32) -> Option<GuestRun> {
    let (mut code, mut out, mut err) = guest(None, topology, script, timeout_s, Some("multi"))?;
    if code == 125 {
        eprintln!(
            "NOTE: multi-threaded TCG guest {topology} timed out (a wedge, lab/README.md); \
             running the script again\n{err}"
        );
        (code, out, err) = guest(None, topology, script, timeout_s, Some("multi"))?;
    }
    assert_ne!(
        code, 125,
        "guest {topology} (multi-threaded TCG) failed to boot or timed out twice:\n{err}\n\
         --- script output so far ---\n{out}"
    );
    Some(GuestRun { code, output: out })
}

/// Boots a guest and runs `script`: its exit code, stdout and stderr;
/// `None` when the lab cannot run here (after printing SKIPPED), panics
/// when it must. `tcg`: NUMALAB_LAB_TCG for this guest (None: lab/guest's
/// default, single-threaded).
fn guest(
    kernel: Option<&Path>,
    topology: &str,
    script: &str,
    timeout_s: u32,
    tcg: Option<&str>,
) -> Option<(i32, String, String)> {
    if let Some(why) = missing_tools() {
        assert!(
            !required(),
            "lab required (NUMALAB_REQUIRE_TOOLS) but {why}"
        );
        eprintln!("SKIPPED lab test on {topology}: {why}");
        return None;
    }
    let bin = static_binary().unwrap_or_else(|e| panic!("{e}"));
    let _one = ONE_GUEST.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("script.sh");
    std::fs::write(&script_path, script).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("lab/guest"))
        .arg("--bin")
        .arg(&bin)
        .args(kernel.iter().flat_map(|k| [Path::new("--kernel"), k]))
        .args(["--timeout", &timeout_s.to_string(), topology])
        .arg(&script_path);
    if let Some(mode) = tcg {
        cmd.env("NUMALAB_LAB_TCG", mode);
    }
    let out = cmd.output().expect("running lab/guest");
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The `lab-tcg` profile with `kernel.ni_random` and `kernel.smt_balance`
/// as the guest's kernel has them.
pub fn lab_tcg_profile(dir: &Path, ni_random: bool, smt_balance: bool) -> std::path::PathBuf {
    let path = dir.join(format!("lab-tcg-ni-random-{ni_random}.toml"));
    let base = std::fs::read_to_string(repo().join("profiles/lab-tcg.toml")).unwrap();
    assert!(
        base.contains("\nni_random = true\n") && base.contains("\nsmt_balance = false\n"),
        "profiles/lab-tcg.toml changed"
    );
    let text = base
        .replace("name = \"lab-tcg\"", "name = \"lab-tcg-guest\"")
        .replace(
            "\nni_random = true\n",
            &format!("\nni_random = {ni_random}\n"),
        )
        .replace(
            "\nsmt_balance = false\n",
            &format!("\nsmt_balance = {smt_balance}\n"),
        );
    std::fs::write(&path, text).unwrap();
    path
}

/// Rewrites the profile file at `path` without its `emulator` section:
/// the load's lateness it states was measured under single-threaded TCG,
/// and a comparison with a multi-threaded guest (each vCPU on its own host
/// thread) must not take it.
pub fn without_emulator(path: &Path) {
    let mut p = numalab::sim::profile::Profile::load(path.to_str().unwrap()).unwrap();
    p.emulator = Default::default();
    std::fs::write(path, toml::to_string(&p).unwrap()).unwrap();
}

/// Whether a kernel release (`uname -r`) has group_smt_balance: Linux 6.6
/// and later (commit fee1759e4f04).
pub fn has_smt_balance(release: &str) -> bool {
    numalab::sim::fit::has_smt_balance(release).unwrap_or(false)
}

/// Runs `numalab run --backend sim --trace` with `spec` (TOML text) on the
/// fixture topology `topology` (tests/fixtures/topo/NAME) and the profile
/// file `profile`, plus `extra` arguments, writing to `out` (which must
/// not exist yet); prints the report and returns run.json and the samples.
pub fn sim_run(
    topology: &str,
    spec: &str,
    profile: &Path,
    extra: &[&str],
    out: &Path,
) -> (serde_json::Value, Vec<serde_json::Value>) {
    let spec_path = out.with_extension("toml");
    std::fs::write(&spec_path, spec).unwrap();
    let root = repo().join(format!("tests/fixtures/topo/{topology}/root"));
    let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("--sysfs-root")
        .arg(&root)
        .args(["run", "--backend", "sim", "--profile"])
        .arg(profile)
        .arg("--spec")
        .arg(&spec_path)
        .arg("--trace")
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eprintln!(
        "--- {topology} sim report ({}) ---\n{}",
        out.display(),
        String::from_utf8_lossy(&o.stdout)
    );
    let meta =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let samples = super::jsonl(&std::fs::read_to_string(out.join("samples.jsonl")).unwrap());
    (meta, samples)
}
