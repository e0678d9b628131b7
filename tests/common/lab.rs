//! Running scripts in QEMU lab guests (see lab/README.md) from tests.
//!
//! The guest needs a static numalab; it is built once per test process into
//! target/lab-static (a separate target dir, so it neither fights the outer
//! cargo's lock nor invalidates its build). Guests run one at a time: each
//! already uses both host cores. Where QEMU, a kernel or busybox is missing
//! the lab tests print SKIPPED with the reason, unless NUMALAB_REQUIRE_TOOLS
//! is set (CI), where that is a failure.

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

fn static_binary() -> Result<PathBuf, String> {
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("NUMALAB_BIN") {
            return Ok(PathBuf::from(p));
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

/// Runs `script` (busybox sh) as root in a guest of `topology`; `None` when
/// the lab cannot run here (after printing SKIPPED), panics when it must.
pub fn run(topology: &str, script: &str, timeout_s: u32) -> Option<GuestRun> {
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
    let out = Command::new("bash")
        .arg(repo().join("lab/guest"))
        .arg("--bin")
        .arg(&bin)
        .args(["--timeout", &timeout_s.to_string(), topology])
        .arg(&script_path)
        .output()
        .expect("running lab/guest");
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(
        code,
        125,
        "guest {topology} failed to boot or timed out:\n{}\n--- script output so far ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Some(GuestRun {
        code,
        output: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}
