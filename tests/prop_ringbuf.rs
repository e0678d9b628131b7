//! Property tests for the binary ring buffer pages of `trace_pipe_raw`
//! ([`ringbuf::decode_page`]) and the records in them ([`Decoder::decode`]).
//!
//! Pages are built here the way the kernel writes them (short and long
//! records, time extends, absolute stamps, discarded records, the end
//! padding) and must decode back to the same records and times. Arbitrary
//! bytes, arbitrary page headers and mutated real pages (flipped bytes,
//! lengths of 4 GiB, commits past the page) must give `Ok` or `Err`, quickly,
//! with no more records than the page has room for.

mod prop_common;

use numalab::trace::decode::Decoder;
use numalab::trace::format::{EventFormat, PageHeader};
use numalab::trace::ringbuf::{decode_page, RawRecord};
use prop_common::{apply_bytes, config, edits, within};
use proptest::prelude::*;
use std::time::Duration;

/// x86-64: 8-byte timestamp at 0, 8-byte commit at 8, data at 16.
const HDR: PageHeader = PageHeader {
    timestamp_offset: 0,
    commit_offset: 8,
    commit_size: 8,
    data_offset: 16,
    page_size: 4096,
};

/// 32-bit kernels: a 4-byte commit and data at 12.
const HDR32: PageHeader = PageHeader {
    timestamp_offset: 0,
    commit_offset: 8,
    commit_size: 4,
    data_offset: 12,
    page_size: 4096,
};

const MASK27: u32 = (1 << 27) - 1;

/// What the kernel writes into a page, one entry at a time.
#[derive(Debug, Clone)]
enum Entry {
    /// A record after `delta` ns; `long` forces the length word.
    Record {
        delta: u64,
        data: Vec<u8>,
        long: bool,
    },
    /// A discarded record of `len` bytes (length word included).
    Discarded { delta: u32, len: u32 },
    /// An absolute time stamp (the low 59 bits).
    Stamp { abs: u64 },
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        6 => (
            prop_oneof![0u64..1000, 0u64..(1 << 27), 0u64..(1 << 40)],
            prop::collection::vec(any::<u8>(), 1..200),
            any::<bool>(),
        )
            .prop_map(|(delta, data, long)| Entry::Record { delta, data, long }),
        1 => (1u32..(1 << 27), (2u32..40).prop_map(|w| w * 4))
            .prop_map(|(delta, len)| Entry::Discarded { delta, len }),
        1 => (0u64..(1 << 59)).prop_map(|abs| Entry::Stamp { abs }),
    ]
}

/// Builds a page of `page_size` bytes under `hdr` and the records a
/// correct decoder finds in it: (time, bytes as stored, padded to 4).
fn build(
    hdr: &PageHeader,
    ts0: u64,
    entries: &[Entry],
    missed: bool,
) -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
    let mut d: Vec<u8> = Vec::new();
    let word = |d: &mut Vec<u8>, w: u32| d.extend_from_slice(&w.to_ne_bytes());
    let mut ts = ts0;
    let mut want = Vec::new();
    for e in entries {
        match e {
            Entry::Record { delta, data, long } => {
                let mut delta = *delta;
                if delta > MASK27 as u64 {
                    // Time extend: low 27 bits in the header, the rest next.
                    word(&mut d, 30 | ((delta as u32 & MASK27) << 5));
                    word(&mut d, (delta >> 27) as u32);
                    ts = ts.wrapping_add(delta);
                    delta = 0;
                }
                let padded = data.len().div_ceil(4) * 4;
                if *long || padded > 112 {
                    word(&mut d, (delta as u32) << 5);
                    word(&mut d, padded as u32 + 4);
                } else {
                    word(&mut d, (padded / 4) as u32 | ((delta as u32) << 5));
                }
                ts = ts.wrapping_add(delta);
                let mut bytes = data.clone();
                bytes.resize(padded, 0);
                d.extend_from_slice(&bytes);
                want.push((ts, bytes));
            }
            Entry::Discarded { delta, len } => {
                word(&mut d, 29 | (delta << 5));
                word(&mut d, *len);
                d.resize(d.len() + *len as usize - 4, 0xee);
                ts = ts.wrapping_add(*delta as u64);
            }
            Entry::Stamp { abs } => {
                word(&mut d, 31 | ((*abs as u32 & MASK27) << 5));
                word(&mut d, (abs >> 27) as u32);
                ts = abs | (ts & !((1u64 << 59) - 1));
            }
        }
    }
    let mut page = vec![0u8; hdr.data_offset];
    page[hdr.timestamp_offset..hdr.timestamp_offset + 8].copy_from_slice(&ts0.to_ne_bytes());
    let commit = d.len() as u64 | if missed { 1 << 31 } else { 0 };
    let c = hdr.commit_offset;
    if hdr.commit_size == 8 {
        page[c..c + 8].copy_from_slice(&commit.to_ne_bytes());
    } else {
        page[c..c + 4].copy_from_slice(&(commit as u32).to_ne_bytes());
    }
    page.extend_from_slice(&d);
    // The rest of the sub-buffer: zeroes, as after the end padding.
    page.resize(page.len().max(hdr.page_size), 0);
    (page, want)
}

/// Decoding must end quickly and find no more records than fit: each takes
/// at least 8 bytes (a header word and one data word).
fn check_decode(hdr: &PageHeader, page: &[u8]) {
    let r = within(Duration::from_secs(2), "decode_page", || {
        decode_page(hdr, page)
    });
    if let Ok(p) = r {
        assert!(
            p.records.len() <= page.len() / 8,
            "{} records",
            p.records.len()
        );
        for rec in &p.records {
            let start = rec.data.as_ptr() as usize - page.as_ptr() as usize;
            assert!(start + rec.data.len() <= page.len());
        }
    } else if let Err(e) = r {
        assert!(!e.0.is_empty());
    }
}

fn header() -> impl Strategy<Value = PageHeader> {
    let off = prop_oneof![
        0usize..64,
        Just(usize::MAX),
        Just(usize::MAX - 3),
        any::<usize>()
    ];
    (
        off.clone(),
        off.clone(),
        prop::sample::select(&[4usize, 8][..]),
        off,
    )
        .prop_map(|(t, c, cs, d)| PageHeader {
            timestamp_offset: t,
            commit_offset: c,
            commit_size: cs,
            data_offset: d,
            page_size: d.saturating_add(4080),
        })
}

fn formats() -> Vec<EventFormat> {
    let f = |name: &str, id: u16, fields: &[(&str, usize, usize)]| {
        let mut t = format!(
            "name: {name}\nID: {id}\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
        );
        for (n, o, s) in fields {
            t.push_str(&format!(
                "\tfield:int {n};\toffset:{o};\tsize:{s};\tsigned:1;\n"
            ));
        }
        EventFormat::parse(&t, "format").unwrap()
    };
    vec![
        f(
            "sched_migrate_task",
            300,
            &[("pid", 24, 4), ("orig_cpu", 32, 4), ("dest_cpu", 36, 4)],
        ),
        f(
            "sched_switch",
            316,
            &[
                ("prev_pid", 24, 4),
                ("prev_state", 32, 8),
                ("next_pid", 56, 4),
            ],
        ),
        f("sched_process_exit", 320, &[("pid", 24, 4)]),
        f(
            "sched_process_fork",
            321,
            &[("parent_pid", 24, 4), ("child_pid", 44, 4)],
        ),
        f(
            "sched_move_numa",
            330,
            &[
                ("pid", 8, 4),
                ("src_cpu", 20, 4),
                ("src_nid", 24, 4),
                ("dst_cpu", 28, 4),
                ("dst_nid", 4000, 4),
            ],
        ),
    ]
}

proptest! {
    #![proptest_config(config("prop_ringbuf"))]

    #[test]
    fn pages_built_like_the_kernel_decode_back(
        ts0 in prop_oneof![0u64..1_000_000, any::<u64>().prop_map(|t| t >> 8)],
        entries in prop::collection::vec(entry(), 0..30),
        missed in any::<bool>(),
        narrow in any::<bool>(),
    ) {
        let hdr = if narrow { HDR32 } else { HDR };
        let (page, want) = build(&hdr, ts0, &entries, missed);
        prop_assume!(page.len() <= 16384);
        let p = decode_page(&hdr, &page).unwrap();
        prop_assert_eq!(p.missed_events, missed);
        let got: Vec<(u64, Vec<u8>)> = p.records.iter().map(|r| (r.ts_ns, r.data.to_vec())).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        page in prop::collection::vec(any::<u8>(), 0..4200), narrow in any::<bool>(),
    ) {
        check_decode(if narrow { &HDR32 } else { &HDR }, &page);
    }

    #[test]
    fn arbitrary_headers_never_panic(hdr in header(), page in prop::collection::vec(any::<u8>(), 0..256)) {
        check_decode(&hdr, &page);
    }

    #[test]
    fn mutated_pages_never_panic(
        entries in prop::collection::vec(entry(), 1..12),
        e in edits(),
        pokes in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(&[
            0u32, 1, 3, 4, 28, 29, 30, 31, 0x1f, 0xffff_ffff, 0x8000_0000, 0x7fff_ffff, 4096, 4097,
            (1 << 27) - 1, 1 << 27, 0xffff_ffe0, 0xffff_ffdd,
        ][..])), 0..4),
    ) {
        let (mut page, _) = build(&HDR, 1000, &entries, false);
        // Absurd words where the kernel puts lengths, types and commits.
        for (at, v) in &pokes {
            let words = page.len() / 4;
            let i = at.index(words) * 4;
            page[i..i + 4].copy_from_slice(&v.to_ne_bytes());
        }
        let page = apply_bytes(&page, &e);
        check_decode(&HDR, &page);
    }

    #[test]
    fn records_of_any_bytes_decode_or_skip(
        id in prop_oneof![prop::sample::select(&[300u16, 316, 320, 321, 330][..]), any::<u16>()],
        body in prop::collection::vec(any::<u8>(), 0..80),
        cpu in any::<u32>(), ts in any::<u64>(),
    ) {
        let d = Decoder::new(&formats()).unwrap();
        let mut data = id.to_ne_bytes().to_vec();
        data.extend_from_slice(&body);
        if let Some(ev) = d.decode(cpu, &RawRecord { ts_ns: ts, data: &data }) {
            prop_assert_eq!((ev.ts_ns, ev.cpu), (ts, cpu));
        }
        // Shorter than common_type: nothing.
        let short = RawRecord { ts_ns: ts, data: &data[..1] };
        prop_assert!(d.decode(cpu, &short).is_none());
    }
}

/// A long record whose length word says 4 GiB in a page of 4 KiB: an error
/// at once, no allocation, no read past the page.
#[test]
fn ringbuf_length_beyond_page_is_an_error_not_a_panic() {
    let (mut page, _) = build(
        &HDR,
        0,
        &[Entry::Record {
            delta: 1,
            data: vec![1; 8],
            long: true,
        }],
        false,
    );
    page[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    let e = within(Duration::from_secs(1), "decode", || {
        decode_page(&HDR, &page)
    })
    .unwrap_err();
    assert!(e.0.contains("overruns"), "{e}");
    // The same for a discarded record: it skips past the commit and ends.
    page[16..20].copy_from_slice(&(29u32 | (1 << 5)).to_ne_bytes());
    let p = within(Duration::from_secs(1), "decode", || {
        decode_page(&HDR, &page)
    })
    .unwrap();
    assert!(p.records.is_empty());
}

/// Deltas that push the page time past 2^64: the kernel's clock wraps, the
/// decoder must not panic.
#[test]
fn ringbuf_time_overflow_wraps_not_a_panic() {
    let (page, _) = build(
        &HDR,
        u64::MAX - 5,
        &[Entry::Record {
            delta: 100,
            data: vec![1; 4],
            long: false,
        }],
        false,
    );
    let p = decode_page(&HDR, &page).unwrap();
    assert_eq!(p.records[0].ts_ns, 94);
}

/// A header (built by hand, or from an odd header_page) whose data offset
/// is near usize::MAX: `data_offset + len` overflowed.
#[test]
fn ringbuf_data_offset_near_usize_max_is_an_error_not_a_panic() {
    let hdr = PageHeader {
        data_offset: usize::MAX - 3,
        ..HDR
    };
    let mut page = vec![0u8; 64];
    page[8..16].copy_from_slice(&40u64.to_ne_bytes());
    assert!(decode_page(&hdr, &page).is_err());
}
