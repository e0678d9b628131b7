//! Where the QEMU lab caches its kernel and initramfs (lab/cache-lib.sh,
//! sourced by lab/guest and lab/kernel/build): the scripts run it in bash,
//! so these tests do too, with the environments that broke it.

use std::path::Path;
use std::process::Command;

/// Runs `lab_cache_dir LAB` with `env` (nothing else of the caller's
/// environment but PATH): (exit code, stdout, stderr).
fn cache_dir(lab: &Path, env: &[(&str, &Path)]) -> (i32, String, String) {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/cache-lib.sh");
    let mut cmd = Command::new("bash");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .args(["-c", "source \"$1\" && lab_cache_dir \"$2\"", "bash"])
        .arg(&lib)
        .arg(lab);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory no one can create anything under, root included: a file.
fn blocked(tmp: &Path) -> std::path::PathBuf {
    let f = tmp.join("not-a-dir");
    std::fs::write(&f, "").unwrap();
    f.join("home")
}

#[test]
fn the_cache_is_under_the_users_cache_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (lab, home) = (tmp.path().join("lab"), tmp.path().join("home"));
    let (code, dir, err) = cache_dir(&lab, &[("HOME", &home)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(Path::new(&dir), home.join(".cache/numalab-lab"));
    let xdg = tmp.path().join("xdg");
    let (_, dir, _) = cache_dir(&lab, &[("HOME", &home), ("XDG_CACHE_HOME", &xdg)]);
    assert_eq!(Path::new(&dir), xdg.join("numalab-lab"));
    assert!(!lab.exists(), "nothing written in the lab directory");
}

#[test]
fn an_unwritable_home_caches_in_the_lab_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let lab = tmp.path().join("lab");
    let (code, dir, err) = cache_dir(&lab, &[("HOME", &blocked(tmp.path()))]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(Path::new(&dir), lab.join(".cache"));
    assert!(lab.join(".cache").is_dir());
    assert!(err.contains("cannot create or write"), "says why: {err}");
    // No HOME at all: the same place, without a note.
    let (code, dir, err) = cache_dir(&lab, &[]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(Path::new(&dir), lab.join(".cache"));
}

#[test]
fn an_unusable_numalab_lab_cache_is_an_error_not_overridden() {
    let tmp = tempfile::tempdir().unwrap();
    let (lab, home) = (tmp.path().join("lab"), tmp.path().join("home"));
    let bad = blocked(tmp.path());
    let (code, dir, err) = cache_dir(&lab, &[("HOME", &home), ("NUMALAB_LAB_CACHE", &bad)]);
    assert_ne!(code, 0, "{dir}");
    assert!(err.contains("NUMALAB_LAB_CACHE"), "{err}");
    assert!(!home.exists() && !lab.exists(), "no fallback written");
    let mine = tmp.path().join("mine");
    let (code, dir, err) = cache_dir(&lab, &[("HOME", &home), ("NUMALAB_LAB_CACHE", &mine)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(Path::new(&dir), mine);
}
