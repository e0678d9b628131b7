//! Compiles the scheduler's BPF C (src/bpf/) with clang into one object that
//! src/lib.rs embeds, so numalab stays one executable.
//!
//! clang 16 or newer: sched_ext's headers and open-coded iterators need it
//! (clang 14 miscompiles 64-bit enums and lacks the BTF tags). Set
//! `NUMALAB_CLANG` to choose one; otherwise the newest `clang-N` on PATH, then
//! `clang`. Without one the build stops naming what to install.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCES: &[&str] = &[
    "src/bpf/numalab_sched.bpf.c",
    "src/bpf/abi.h",
    "src/bpf/compat.h",
    "src/bpf/kernel.h",
    "src/bpf/state.h",
    "src/bpf/cpus.h",
];

fn clang_major(clang: &Path) -> Option<u32> {
    let out = Command::new(clang).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.split("clang version ").nth(1)?;
    v.split('.').next()?.trim().parse().ok()
}

fn find_clang() -> Result<PathBuf, String> {
    if let Some(c) = std::env::var_os("NUMALAB_CLANG") {
        let c = PathBuf::from(c);
        return match clang_major(&c) {
            Some(v) if v >= 16 => Ok(c),
            Some(v) => Err(format!(
                "NUMALAB_CLANG={} is clang {v}; 16 or newer is needed",
                c.display()
            )),
            None => Err(format!(
                "NUMALAB_CLANG={}: not a clang that answers --version",
                c.display()
            )),
        };
    }
    let mut names: Vec<String> = (16..=30).rev().map(|v| format!("clang-{v}")).collect();
    names.push("clang".into());
    for n in names {
        let p = PathBuf::from(&n);
        if let Some(v) = clang_major(&p) {
            if v >= 16 {
                return Ok(p);
            }
        }
    }
    Err("no clang 16 or newer found (tried clang-30 .. clang-16, clang)".into())
}

fn main() {
    for s in SOURCES {
        println!("cargo:rerun-if-changed={s}");
    }
    println!("cargo:rerun-if-env-changed=NUMALAB_CLANG");
    let clang = find_clang().unwrap_or_else(|e| {
        panic!(
            "numalab's sched_ext scheduler is BPF C compiled at build time: {e}. \
             Install clang 16+ (Debian 12: apt-get install clang-16; bash scripts/deps.sh does it) \
             or set NUMALAB_CLANG."
        )
    });
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let bpf_include = std::env::var_os("DEP_BPF_INCLUDE").expect("libbpf-sys's include dir");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("target arch");
    let (target_arch, multiarch) = match arch.as_str() {
        "x86_64" => ("x86", "x86_64-linux-gnu"),
        "aarch64" => ("arm64", "aarch64-linux-gnu"),
        other => panic!("numalab's BPF scheduler is built for x86_64 and aarch64, not {other}"),
    };
    let object = out_dir.join("numalab_sched.bpf.o");
    let mut cmd = Command::new(&clang);
    cmd.args(["-g", "-O2", "-target", "bpf", "-mcpu=v3"])
        .arg(format!("-D__TARGET_ARCH_{target_arch}"))
        .arg("-I")
        .arg(&bpf_include)
        // asm/types.h, which linux/types.h includes.
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-Wall", "-Werror", "-Wno-unused-function"])
        .arg("-c")
        .arg(SOURCES[0])
        .arg("-o")
        .arg(&object);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", clang.display()));
    assert!(
        status.success(),
        "{} failed to compile {} ({status})",
        clang.display(),
        SOURCES[0]
    );
}
