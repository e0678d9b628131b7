//! Reading a user-given input file, bounded: the one way numalab reads a
//! file someone named (a topology, a spec, a profile, a trace, a record).
//!
//! Why: an unbounded read of `/dev/zero` fills memory (4 GB in 3 s), and
//! a FIFO blocks forever, before any check could say what is wrong. So the
//! path is stat()ed first and anything but a regular file is refused by
//! name; the open is non-blocking (a FIFO swapped in after the stat cannot
//! hang it); and at most `limit + 1` bytes are read, a larger file refused
//! naming the file and the limit. Bottom layer: it imports nothing of the
//! crate, so every reader can use it; [`crate::error`] makes its errors
//! exit 2 (bad input).

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Topologies, experiment specs and hardware profiles: hand-sized
/// documents. The largest preset's topology (1024 CPUs) is under 1 MiB as
/// JSON; 16 MiB leaves room for far larger machines.
pub const DOC_LIMIT: u64 = 16 << 20;

/// `run.json` and jobs records: machine-written documents that embed a
/// topology and per-row or per-job data, so larger than a spec; 256 MiB is
/// far beyond any run numalab can plan (a spec's rows and samples are
/// bounded).
pub const RECORD_LIMIT: u64 = 256 << 20;

/// `samples.jsonl` and trace text (`trace --from`): one line per sample or
/// event, the largest inputs numalab reads. 1 GiB holds hours of a busy
/// machine's sched_migrate_task events, and still fits in memory.
pub const STREAM_LIMIT: u64 = 1 << 30;

/// Why an input file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {what} {path}: {source}")]
    Io {
        what: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {path} is {kind}, not a regular file")]
    NotRegular {
        what: String,
        path: String,
        kind: &'static str,
    },
    #[error("{what} {path} is larger than the limit of {} for it", human(*limit))]
    TooLarge {
        what: String,
        path: String,
        limit: u64,
    },
}

impl InputError {
    /// The file does not exist (some readers take that as "empty").
    pub fn is_not_found(&self) -> bool {
        matches!(self, InputError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{b} bytes"),
    }
}

/// What kind of file a non-regular one is, for the message.
fn kind_of(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads at most `limit` bytes of the regular file at `path` (symlinks
/// followed), `what` naming it in errors ("topology file", "--spec").
pub fn read_input(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>, InputError> {
    let shown = path.display().to_string();
    let io = |source| InputError::Io {
        what: what.to_string(),
        path: shown.clone(),
        source,
    };
    let not_regular = |ft: &std::fs::FileType| InputError::NotRegular {
        what: what.to_string(),
        path: shown.clone(),
        kind: kind_of(ft),
    };
    let too_large = || InputError::TooLarge {
        what: what.to_string(),
        path: shown.clone(),
        limit,
    };
    // stat before open: open() of a FIFO blocks until a writer comes.
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(not_regular(&meta.file_type()));
    }
    if meta.len() > limit {
        return Err(too_large());
    }
    // O_NONBLOCK: if the path became a FIFO since the stat, the open
    // returns at once; on a regular file the flag changes nothing.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let ft = f.metadata().map_err(io)?.file_type();
    if !ft.is_file() {
        return Err(not_regular(&ft));
    }
    // The size can grow after the stat: read one byte past the limit to
    // tell a file at the limit from one over it.
    let mut data = Vec::with_capacity(meta.len().min(limit) as usize);
    f.take(limit.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(io)?;
    if data.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(data)
}

/// [`read_input`] as UTF-8 text (invalid UTF-8 is an error, as with
/// `std::fs::read_to_string`).
pub fn read_input_text(path: &Path, what: &str, limit: u64) -> Result<String, InputError> {
    let data = read_input(path, what, limit)?;
    String::from_utf8(data).map_err(|e| InputError::Io {
        what: what.to_string(),
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_naming_file_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![b'x'; 2 << 20]).unwrap();
        assert_eq!(read_input(&p, "spec", 2 << 20).unwrap().len(), 2 << 20);
        let e = read_input(&p, "spec", (2 << 20) - 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("2097151 bytes"),
            "{e}"
        );
        let e = read_input(&p, "spec", 1 << 20).unwrap_err().to_string();
        assert!(e.contains("1 MiB") && e.starts_with("spec "), "{e}");
    }

    #[test]
    fn dev_zero_and_a_directory_are_not_regular_files() {
        let e = read_input(Path::new("/dev/zero"), "trace", 1 << 30).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = read_input(dir.path(), "trace", 1 << 30).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = read_input(&dir.path().join("none"), "trace", 1).unwrap_err();
        assert!(e.is_not_found(), "{e}");
    }
}
