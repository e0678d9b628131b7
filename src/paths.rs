//! Output paths checked before the work, not after it: a command that will
//! write a file or a directory checks first that it can (the parent is a
//! writable directory, the path is not a directory or a device, the
//! directory can be created), so an hour of tracing or probing is never
//! lost to a typo. The checks only look (stat and access(2)); they leave
//! nothing behind. Failures are usage errors (exit 2) naming the path.
//!
//! Writes can still fail later (the disk fills up): every writer names its
//! path in that error too.
//!
//! Every output check takes the command's inputs: an output that is one of
//! them (`trace --from t.txt -o t.txt`) would replace what is being read, so
//! it is refused by name. Identity is the file's device and inode, so a
//! link, `./` or `..` does not hide a clash.

use crate::error::usage;
use std::path::{Path, PathBuf};

/// Whether this process may write (and search) `dir`, by access(2) with the
/// effective ids: false on a read-only file system even for root.
fn writable(dir: &Path) -> bool {
    use rustix::fs::{Access, AtFlags, CWD};
    // A path with a NUL in it is refused (Err), as access(2) would never see it.
    rustix::fs::accessat(
        CWD,
        dir,
        Access::WRITE_OK | Access::EXEC_OK,
        AtFlags::EACCESS,
    )
    .is_ok()
}

/// Not there, or not there because a component is a file.
fn missing(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// The directory a relative file name lands in.
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Kernel pseudo file systems (statfs f_type): access(2) calls /proc or
/// /sys writable for root, yet no file or directory can be made there.
const PSEUDO_FS: &[(i64, &str)] = &[
    (0x9fa0, "procfs"),
    (0x6265_6572, "sysfs"),
    (0x6463_6267, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x2701_9a89, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0xcafe_4a11, "bpffs"),
    (0x7363_6673, "securityfs"),
    (0x6e73_6673, "nsfs"),
];

/// The pseudo file system `dir` is on, if it is on one.
fn pseudo_fs(dir: &Path) -> Option<&'static str> {
    let f_type = rustix::fs::statfs(dir).ok()?.f_type as i64;
    PSEUDO_FS
        .iter()
        .find(|(t, _)| *t == f_type)
        .map(|(_, n)| *n)
}

/// A command's input, by the option that named it (`--from`, `--spec`).
pub type Input<'a> = (&'a str, &'a Path);

/// The device and inode of an existing path (links followed).
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// `what OUT` is not one of the command's `inputs` (an output that does not
/// exist yet cannot be one).
pub fn check_not_an_input(out: &Path, what: &str, inputs: &[Input]) -> anyhow::Result<()> {
    let Some(id) = identity(out) else {
        return Ok(());
    };
    match inputs.iter().find(|(_, p)| identity(p) == Some(id)) {
        Some((opt, p)) => Err(usage(format!(
            "{what} {}: is also the input {opt} {}; numalab never writes over what it \
             reads, choose another {what}",
            out.display(),
            p.display()
        ))),
        None => Ok(()),
    }
}

/// `what PATH` can be written as a file (replaced atomically: a temp file
/// next to it, then a rename): its directory exists and is writable, the
/// path is not a directory, device or other special file, and it is not one
/// of the command's `inputs`.
pub fn check_output_file(path: &Path, what: &str, inputs: &[Input]) -> anyhow::Result<()> {
    let bad = |why: String| usage(format!("{what} {}: {why}", path.display()));
    if path.as_os_str().is_empty() {
        return Err(usage(format!("{what}: empty path")));
    }
    check_not_an_input(path, what, inputs)?;
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(bad("is a directory; name a file".into())),
        Ok(m) if !m.is_file() => {
            return Err(bad(
                "is not a regular file (numalab replaces its output atomically, so it \
                 writes regular files only)"
                    .into(),
            ))
        }
        Ok(_) => {}
        // Not there (or under a file): the parent check below says which.
        Err(e) if missing(&e) => {}
        Err(e) => return Err(bad(e.to_string())),
    }
    let dir = parent_of(path);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(bad(format!("{} is not a directory", dir.display()))),
        Err(e) => return Err(bad(format!("directory {}: {e}", dir.display()))),
    }
    if let Some(why) = no_file_in(&dir) {
        return Err(bad(format!("directory {why}")));
    }
    Ok(())
}

/// Why no file can be made in the existing directory `dir`, if none can:
/// it is not writable by this process, or it is on a pseudo filesystem
/// (proc, sysfs...) that refuses new files whatever the permissions say.
/// The one check under both [`check_output_file`] and [`check_output_dir`].
fn no_file_in(dir: &Path) -> Option<String> {
    if !writable(dir) {
        return Some(format!("{} is not writable", dir.display()));
    }
    pseudo_fs(dir).map(|fs| format!("{} is on {fs}, where no file can be made", dir.display()))
}

/// `what DIR` can hold new files: it is a writable directory, or it can be
/// created (its nearest existing ancestor is a writable directory), and it
/// is not one of the command's `inputs`.
pub fn check_output_dir(dir: &Path, what: &str, inputs: &[Input]) -> anyhow::Result<()> {
    let bad = |why: String| usage(format!("{what} {}: {why}", dir.display()));
    if dir.as_os_str().is_empty() {
        return Err(usage(format!("{what}: empty path")));
    }
    check_not_an_input(dir, what, inputs)?;
    let mut probe = dir.to_path_buf();
    loop {
        match std::fs::metadata(&probe) {
            Ok(m) if m.is_dir() => break,
            Ok(_) if probe == dir => return Err(bad("exists and is not a directory".into())),
            Ok(_) => {
                return Err(bad(format!(
                    "cannot be created: {} is not a directory",
                    probe.display()
                )))
            }
            Err(e) if missing(&e) => {
                probe = parent_of(&probe);
            }
            Err(e) => return Err(bad(format!("{}: {e}", probe.display()))),
        }
    }
    if let Some(why) = no_file_in(&probe) {
        return Err(bad(if probe == dir {
            format!("cannot be written: {why}")
        } else {
            format!("cannot be created: {why}")
        }));
    }
    Ok(())
}

/// Reads a versioned JSON record of `what` from `path`: exit 2 (usage)
/// when the file cannot be read, is not such a record, or carries another
/// schema than `schema` (`schema_of` gives the record's).
pub fn read_json_record<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
    schema: &str,
    schema_of: impl Fn(&T) -> &str,
) -> anyhow::Result<T> {
    let text = crate::input::read_input_text(path, what, crate::input::RECORD_LIMIT)?;
    let rec: T = serde_json::from_str(text.trim()).map_err(|e| {
        crate::error::usage(format!("{}: not a numalab {what}: {e}", path.display()))
    })?;
    if schema_of(&rec) != schema {
        return Err(crate::error::usage(format!(
            "{}: schema {:?}, expected {schema:?}",
            path.display(),
            schema_of(&rec)
        )));
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_checks_name_the_path_and_leave_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let msg = |r: anyhow::Result<()>| {
            let e = r.unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            e.to_string()
        };
        assert!(msg(check_output_file(tmp.path(), "-o", &[])).contains("is a directory"));
        assert!(msg(check_output_file(&file.join("x"), "-o", &[])).contains("is not a directory"));
        assert!(msg(check_output_file(&tmp.path().join("no/x"), "-o", &[])).contains("no/x"));
        assert!(msg(check_output_file(Path::new("/dev/full"), "-o", &[])).contains("regular"));
        assert!(msg(check_output_dir(&file, "--out", &[])).contains("not a directory"));
        assert!(
            msg(check_output_dir(&file.join("a/b"), "--out", &[])).contains("cannot be created")
        );
        // Regression: `topo --capture /proc/nonexistent/x` passed the check
        // (root may "write" /proc) and failed after it started writing.
        assert!(msg(check_output_dir(
            Path::new("/proc/nonexistent/x"),
            "--capture",
            &[]
        ))
        .contains("procfs"));
        assert!(msg(check_output_file(Path::new("/proc/x.json"), "-o", &[])).contains("procfs"));
        check_output_file(&file, "-o", &[]).unwrap();
        check_output_file(&tmp.path().join("new.json"), "-o", &[]).unwrap();
        check_output_dir(&tmp.path().join("a/b/c"), "--out", &[]).unwrap();
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the file made by the test");
    }

    /// Regression: `trace --from t.txt -o t.txt` replaced its own input.
    #[test]
    fn an_output_that_is_an_input_is_refused_however_it_is_spelled() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("t.txt");
        std::fs::write(&file, "x").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let dotted = tmp.path().join(".").join("t.txt");
        for out in [&file, &link, &dotted] {
            let e = check_output_file(out, "-o", &[("--from", &file)]).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            assert!(e.to_string().contains("is also the input --from"), "{e}");
        }
        let e =
            check_output_dir(tmp.path(), "--capture", &[("--sysfs-root", tmp.path())]).unwrap_err();
        assert!(e.to_string().contains("--sysfs-root"), "{e}");
        check_output_file(&tmp.path().join("other"), "-o", &[("--from", &file)]).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    }
}
