//! Decoding the kernel's ring buffer pages (`per_cpu/cpuN/trace_pipe_raw`).
//!
//! A page (sub-buffer) starts with a header ([`PageHeader`]: a 64-bit
//! timestamp and a `commit` word whose low 27 bits are the bytes of data
//! and whose top bits flag missed events), then a run of entries, each a
//! 32-bit word `type_len:5 | time_delta:27` (little-endian bit order):
//!
//! - `type_len` 1..=28: a record of `type_len * 4` bytes follows;
//! - 0: the record's length (+4) is in the next word, the record after it;
//! - 29 (padding): a discarded record whose length is in the next word, or,
//!   with `time_delta == 0`, the end of the page's data;
//! - 30 (time extend): the next word holds bits 27.. of the delta;
//! - 31 (time stamp): an absolute time, same encoding.
//!
//! Each entry's time is the page timestamp plus the deltas so far. This is
//! the layout `events/header_event` describes and libtraceevent's kbuffer
//! decodes (tools/lib/traceevent/kbuffer-parse.c). The buffer comes from
//! the running kernel, so integers are in the host's byte order.

use super::format::PageHeader;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
const COMMIT_MASK: u64 = (1 << 27) - 1;
/// Set in `commit` when events were lost before this page.
const MISSED_EVENTS: u64 = 1 << 31;

/// One record: its time and its bytes (starting with `common_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    pub ts_ns: u64,
    pub data: &'a [u8],
}

/// What a page held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page<'a> {
    pub records: Vec<RawRecord<'a>>,
    /// The kernel dropped events before this page (buffer full).
    pub missed_events: bool,
}

/// A page that does not decode: where and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("corrupt ring buffer page: {0}")]
pub struct PageError(pub String);

// Offsets come from the header_page file and lengths from the page itself:
// all arithmetic on them is checked (an overflow is a corrupt page, not a
// panic), and times wrap as the kernel's u64 clock does.

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Decodes one page as read from `trace_pipe_raw`.
pub fn decode_page<'a>(hdr: &PageHeader, page: &'a [u8]) -> Result<Page<'a>, PageError> {
    let bad = |m: String| PageError(m);
    let mut ts = u64_at(page, hdr.timestamp_offset).ok_or_else(|| bad("short header".into()))?;
    let commit = if hdr.commit_size == 8 {
        u64_at(page, hdr.commit_offset)
    } else {
        u32_at(page, hdr.commit_offset).map(u64::from)
    }
    .ok_or_else(|| bad("short header".into()))?;
    let len = (commit & COMMIT_MASK) as usize;
    let end = hdr.data_offset.saturating_add(len);
    if end > page.len() {
        return Err(bad(format!(
            "commit {len} bytes past the page's {} bytes",
            page.len()
        )));
    }
    let mut out = Page {
        records: Vec::new(),
        missed_events: commit & MISSED_EVENTS != 0,
    };
    let mut pos = hdr.data_offset;
    while end.saturating_sub(pos) >= 4 {
        let word = u32_at(page, pos).unwrap();
        let type_len = word & 0x1f;
        let delta = (word >> 5) as u64;
        pos += 4;
        match type_len {
            TYPE_PADDING => {
                if delta == 0 {
                    break; // the rest of the page is empty
                }
                let l = u32_at(page, pos).ok_or_else(|| bad(format!("padding at {pos}")))?;
                ts = ts.wrapping_add(delta);
                pos = pos.saturating_add(l as usize);
            }
            TYPE_TIME_EXTEND => {
                let ext = u32_at(page, pos).ok_or_else(|| bad(format!("extend at {pos}")))?;
                ts = ts.wrapping_add(((ext as u64) << TS_SHIFT) + delta);
                pos += 4;
            }
            TYPE_TIME_STAMP => {
                let ext = u32_at(page, pos).ok_or_else(|| bad(format!("stamp at {pos}")))?;
                let abs = ((ext as u64) << TS_SHIFT) | delta;
                // The stamp holds the low 59 bits; the rest come from the page.
                ts = abs | (ts & !((1u64 << 59) - 1));
                pos += 4;
            }
            n => {
                // A record: its length is in the word after the header
                // (long form, type 0) or is the type itself in words.
                let l = if n == 0 {
                    let l = u32_at(page, pos).ok_or_else(|| bad(format!("length at {pos}")))?;
                    pos += 4;
                    ((l as usize).saturating_sub(4) + 3) & !3
                } else {
                    n as usize * 4
                };
                ts = ts.wrapping_add(delta);
                let data = pos
                    .checked_add(l)
                    .filter(|&e| e <= end)
                    .and_then(|e| page.get(pos..e))
                    .ok_or_else(|| bad(format!("record of {l} bytes at {pos} overruns")))?;
                out.records.push(RawRecord { ts_ns: ts, data });
                pos += l; // within the page: checked above
            }
        }
    }
    Ok(out)
}

/// Builds pages the way the kernel writes them (for tests here and in
/// the analysis and tracer tests).
#[cfg(test)]
pub mod build {
    /// A page with 8-byte commit at 8 and data at 16 (x86-64 layout).
    pub struct PageBuilder {
        pub bytes: Vec<u8>,
    }

    impl PageBuilder {
        pub fn new(ts: u64) -> PageBuilder {
            let mut bytes = vec![0u8; 16];
            bytes[0..8].copy_from_slice(&ts.to_ne_bytes());
            PageBuilder { bytes }
        }
        fn word(&mut self, w: u32) {
            self.bytes.extend_from_slice(&w.to_ne_bytes());
        }
        /// A record after `delta` ns; uses the long form over 112 bytes
        /// or when `long` is set.
        pub fn record(&mut self, delta: u32, data: &[u8], long: bool) -> &mut Self {
            let padded = data.len().div_ceil(4) * 4;
            if delta >= 1 << 27 {
                self.word(30 | ((delta & ((1 << 27) - 1)) << 5));
                self.word(delta >> 27);
                return self.record(0, data, long);
            }
            if long || padded > 112 {
                self.word(delta << 5);
                self.word(padded as u32 + 4);
            } else {
                self.word((padded / 4) as u32 | (delta << 5));
            }
            self.bytes.extend_from_slice(data);
            self.bytes.resize(self.bytes.len() + padded - data.len(), 0);
            self
        }
        /// A discarded record (padding with a length).
        pub fn discarded(&mut self, delta: u32, len: u32) -> &mut Self {
            self.word(29 | (delta.max(1) << 5));
            self.word(len);
            self.bytes.resize(self.bytes.len() + len as usize - 4, 0xee);
            self
        }
        /// Finishes: sets commit (plus the missed flag) and pads to 4096.
        pub fn finish(&mut self, missed: bool) -> Vec<u8> {
            let len = (self.bytes.len() - 16) as u64 | if missed { 1 << 31 } else { 0 };
            self.bytes[8..16].copy_from_slice(&len.to_ne_bytes());
            let mut b = self.bytes.clone();
            b.resize(4096, 0);
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::build::PageBuilder;
    use super::*;

    const HDR: PageHeader = PageHeader {
        timestamp_offset: 0,
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
        page_size: 4096,
    };

    #[test]
    fn decodes_short_long_extended_and_discarded_records() {
        let big = vec![7u8; 200];
        let page = PageBuilder::new(1_000)
            .record(5, &[1, 2, 3, 4, 5, 6], false)
            .record(10, &[9; 8], true)
            .discarded(3, 16)
            .record(1 << 28, &big, false)
            .finish(true);
        let p = decode_page(&HDR, &page).unwrap();
        assert!(p.missed_events);
        let ts: Vec<u64> = p.records.iter().map(|r| r.ts_ns).collect();
        assert_eq!(ts, vec![1_005, 1_015, 1_018 + (1 << 28)]);
        assert_eq!(&p.records[0].data[..6], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(p.records[1].data, &[9; 8]);
        assert_eq!(p.records[2].data, &big[..]);
    }

    #[test]
    fn empty_and_corrupt_pages() {
        let page = PageBuilder::new(0).finish(false);
        assert_eq!(decode_page(&HDR, &page).unwrap(), Page::default());
        let mut page = PageBuilder::new(0).record(1, &[0; 8], false).finish(false);
        page[8..16].copy_from_slice(&5000u64.to_ne_bytes());
        assert!(decode_page(&HDR, &page)
            .unwrap_err()
            .0
            .contains("past the page"));
        // A record claiming more bytes than the commit holds.
        let mut page = PageBuilder::new(0).record(1, &[0; 8], false).finish(false);
        page[16..20].copy_from_slice(&(20u32).to_ne_bytes()); // type_len 20 = 80 bytes
        assert!(decode_page(&HDR, &page).unwrap_err().0.contains("overruns"));
    }
}
