//! Event format files: where each field of a trace event sits.
//!
//! tracefs describes every event in `events/SYSTEM/EVENT/format`:
//!
//! ```text
//! name: sched_migrate_task
//! ID: 300
//! format:
//!     field:unsigned short common_type;  offset:0;  size:2;  signed:0;
//!     ...
//!     field:int orig_cpu;  offset:32;  size:4;  signed:1;
//! ```
//!
//! and the ring buffer's page layout in `events/header_page`. Offsets differ
//! between kernels and configurations, so they are always read from these
//! files, never assumed. Integers are in the host's byte order (the buffer
//! is the running kernel's memory).

use std::collections::BTreeMap;

/// A format file that does not parse: the path and the offending text.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {msg}: {text:?}")]
pub struct FormatError {
    pub path: String,
    pub msg: String,
    pub text: String,
}

/// One field of an event record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

impl Field {
    /// Reads the field as an integer from a record; `None` when the record
    /// is too short or the field is not a 1, 2, 4 or 8 byte integer.
    pub fn int(&self, rec: &[u8]) -> Option<i64> {
        // checked: offset and size come from a format file, and a huge
        // offset must give None, not an overflow panic.
        let b = rec.get(self.offset..self.offset.checked_add(self.size)?)?;
        Some(match (self.size, self.signed) {
            (1, true) => b[0] as i8 as i64,
            (1, false) => b[0] as i64,
            (2, true) => i16::from_ne_bytes([b[0], b[1]]) as i64,
            (2, false) => u16::from_ne_bytes([b[0], b[1]]) as i64,
            (4, true) => i32::from_ne_bytes(b.try_into().ok()?) as i64,
            (4, false) => u32::from_ne_bytes(b.try_into().ok()?) as i64,
            (8, _) => i64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// One event's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl EventFormat {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Parses a `format` file's text; `path` is for messages.
    pub fn parse(text: &str, path: &str) -> Result<EventFormat, FormatError> {
        let err = |msg: &str, t: &str| FormatError {
            path: path.to_string(),
            msg: msg.to_string(),
            text: t.to_string(),
        };
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let l = line.trim();
            if let Some(v) = l.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = l.strip_prefix("ID:") {
                id = Some(
                    v.trim()
                        .parse::<u16>()
                        .map_err(|_| err("bad event ID", line))?,
                );
            } else if l.starts_with("field:") {
                fields.push(parse_field(l).ok_or_else(|| err("bad field line", line))?);
            }
        }
        let name = name.ok_or_else(|| err("no 'name:' line", text))?;
        let id = id.ok_or_else(|| err("no 'ID:' line", text))?;
        if fields.is_empty() {
            return Err(err("no fields", text));
        }
        Ok(EventFormat { name, id, fields })
    }

    /// The field `name`, required: an error naming the event otherwise.
    pub fn need(&self, name: &str) -> Result<&Field, String> {
        self.field(name)
            .ok_or_else(|| format!("event {} has no field '{name}'", self.name))
    }
}

/// `field:TYPE NAME[N];\toffset:O;\tsize:S;\tsigned:G;`
fn parse_field(l: &str) -> Option<Field> {
    let mut parts = l.split(';').map(str::trim);
    let decl = parts.next()?.strip_prefix("field:")?;
    let mut kv = BTreeMap::new();
    for p in parts {
        if let Some((k, v)) = p.split_once(':') {
            kv.insert(k.trim(), v.trim());
        }
    }
    // The name is the last word of the declaration, without an array suffix
    // ("char comm[16]", "__data_loc char[] name").
    let last = decl.split_whitespace().last()?;
    let name = last.split('[').next()?.trim_start_matches('*').to_string();
    if name.is_empty() {
        return None;
    }
    Some(Field {
        name,
        offset: kv.get("offset")?.parse().ok()?,
        size: kv.get("size")?.parse().ok()?,
        signed: kv.get("signed").is_some_and(|s| *s == "1"),
    })
}

/// The largest page header [`PageHeader::parse`] accepts (16 bytes on
/// 64-bit kernels).
pub const MAX_HEADER: usize = 4096;
/// The largest page data [`PageHeader::parse`] accepts: the page's data
/// length is the low 27 bits of `commit`.
pub const MAX_DATA: usize = 1 << 27;

/// The ring buffer page layout from `events/header_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    pub timestamp_offset: usize,
    pub commit_offset: usize,
    pub commit_size: usize,
    /// Where events start in a page.
    pub data_offset: usize,
    /// The whole page (sub-buffer) size in bytes.
    pub page_size: usize,
}

impl PageHeader {
    /// Parses `events/header_page`.
    pub fn parse(text: &str, path: &str) -> Result<PageHeader, FormatError> {
        let mut fields = BTreeMap::new();
        for l in text.lines().map(str::trim) {
            if l.starts_with("field:") {
                let f = parse_field(l).ok_or_else(|| FormatError {
                    path: path.into(),
                    msg: "bad field line".into(),
                    text: l.into(),
                })?;
                // "commit" and "overwrite" share an offset; keep the first.
                fields.entry(f.name.clone()).or_insert(f);
            }
        }
        let get = |n: &str| {
            fields.get(n).ok_or_else(|| FormatError {
                path: path.into(),
                msg: format!("no '{n}' field"),
                text: text.into(),
            })
        };
        let (ts, commit, data) = (get("timestamp")?, get("commit")?, get("data")?);
        if ts.size != 8 || !(commit.size == 4 || commit.size == 8) {
            return Err(FormatError {
                path: path.into(),
                msg: "unexpected timestamp/commit sizes".into(),
                text: text.into(),
            });
        }
        // The reader allocates a page of `page_size` bytes, so the numbers
        // of this (outside) file are bounded here: the header fields sit
        // before the data, the header is at most MAX_HEADER bytes, and the
        // data at most what the 27-bit length in `commit` can describe.
        // Unchecked, `size:18446744073709551615` overflowed the sum and
        // `size:1099511627776` asked for a 1 TiB buffer.
        let inside = |f: &Field| {
            f.offset
                .checked_add(f.size)
                .is_some_and(|e| e <= data.offset)
        };
        if data.offset > MAX_HEADER || !inside(ts) || !inside(commit) {
            return Err(FormatError {
                path: path.into(),
                msg: format!(
                    "timestamp and commit must lie within a header of at most {MAX_HEADER} \
                     bytes before data"
                ),
                text: text.into(),
            });
        }
        if data.size == 0 || data.size > MAX_DATA {
            return Err(FormatError {
                path: path.into(),
                msg: format!("data size must be 1 to {MAX_DATA} bytes"),
                text: text.into(),
            });
        }
        Ok(PageHeader {
            timestamp_offset: ts.offset,
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
            page_size: data.offset + data.size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `events/sched/sched_migrate_task/format` of Linux 6.x (x86-64).
    pub const MIGRATE_FORMAT: &str =
        include_str!("../../tests/fixtures/trace/format-sched_migrate_task.txt");

    #[test]
    fn parses_a_format_file() {
        let f = EventFormat::parse(MIGRATE_FORMAT, "x/format").unwrap();
        assert_eq!((f.name.as_str(), f.id), ("sched_migrate_task", 300));
        assert_eq!(f.fields.len(), 9);
        let comm = f.field("comm").unwrap();
        assert_eq!((comm.offset, comm.size), (8, 16));
        let d = f.field("dest_cpu").unwrap();
        assert_eq!((d.offset, d.size, d.signed), (36, 4, true));
        let mut rec = vec![0u8; 40];
        rec[36..40].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(d.int(&rec), Some(-1));
        assert_eq!(d.int(&rec[..38]), None);
    }

    #[test]
    fn bad_format_names_path_and_line() {
        let text = MIGRATE_FORMAT.replace("offset:32;", "offset:x;");
        let e = EventFormat::parse(&text, "events/sched/sched_migrate_task/format").unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("sched_migrate_task/format") && m.contains("orig_cpu"),
            "{m}"
        );
        assert!(EventFormat::parse("ID: 3\n", "p").is_err());
    }

    /// Found by tests/prop_trace_format.rs: a field at `offset:
    /// 18446744073709551615` overflowed `offset + size` in Field::int.
    #[test]
    fn field_offset_near_usize_max_reads_none_not_a_panic() {
        let f = Field {
            name: "x".into(),
            offset: usize::MAX,
            size: 4,
            signed: true,
        };
        assert_eq!(f.int(&[0; 64]), None);
    }

    #[test]
    fn parses_header_page() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;
";
        let h = PageHeader::parse(text, "header_page").unwrap();
        assert_eq!(
            PageHeader::parse(
                &text.replace("offset:8;\tsize:8", "offset:12;\tsize:8"),
                "h"
            )
            .unwrap_err()
            .msg,
            "timestamp and commit must lie within a header of at most 4096 bytes before data"
        );
        assert_eq!(
            h,
            PageHeader {
                timestamp_offset: 0,
                commit_offset: 8,
                commit_size: 8,
                data_offset: 16,
                page_size: 4096
            }
        );
    }
}
