//! Property tests for the tracefs format files: event `format` files
//! ([`EventFormat::parse`]), `events/header_page` ([`PageHeader::parse`]),
//! reading a field from a record ([`Field::int`]), and the record decoder
//! built from parsed formats ([`Decoder::new`]).
//!
//! Properties: no panic on arbitrary or mutated real files; errors carry
//! the path and the offending line (or text); a header never describes a
//! page larger than the ring buffer can (so the reader's page buffer stays
//! small); formats printed the way the kernel prints them parse back.

mod prop_common;

use numalab::trace::decode::Decoder;
use numalab::trace::format::{EventFormat, Field, PageHeader};
use numalab::trace::ringbuf::RawRecord;
use prop_common::{apply, config, edits, noisy_text, NASTY_NUMBERS};
use proptest::prelude::*;

/// `events/sched/sched_migrate_task/format` of Linux 6.x (x86-64).
const MIGRATE: &str = include_str!("fixtures/trace/format-sched_migrate_task.txt");

/// `events/sched/sched_switch/format`, with its `__data_loc`-free layout.
const SWITCH: &str = "name: sched_switch
ID: 316
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm
";

/// `events/header_page` of x86-64.
const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;
";

const PATH: &str = "/sys/kernel/tracing/events/sched/x/format";

/// The largest page a header may describe: the data length lives in the
/// low 27 bits of `commit`, after a header of at most a page.
const MAX_PAGE: usize = 4096 + (1 << 27);

fn check_format(text: &str) {
    match EventFormat::parse(text, PATH) {
        Ok(f) => {
            assert!(!f.fields.is_empty());
            assert!(f.fields.iter().all(|x| !x.name.is_empty()));
            // Any record, any field: an integer or None, never a panic.
            let rec = [0xa5u8; 64];
            for x in &f.fields {
                let _ = x.int(&rec);
                let _ = x.int(&rec[..3]);
            }
            // A decoder built from it decodes or skips any record.
            match Decoder::new(std::slice::from_ref(&f)) {
                Ok(d) => {
                    let mut r = rec.to_vec();
                    r[..2].copy_from_slice(&f.id.to_ne_bytes());
                    for data in [&r[..], &r[..2], &r[..1], &[][..]] {
                        let _ = d.decode(0, &RawRecord { ts_ns: 1, data });
                    }
                }
                Err(e) => assert!(e.contains(&f.name) || e.contains("event"), "{e}"),
            }
        }
        Err(e) => {
            assert_eq!(e.path, PATH);
            assert!(text.contains(&e.text), "{e}");
            assert!(e.to_string().contains(PATH), "{e}");
        }
    }
}

fn check_header(text: &str) {
    match PageHeader::parse(text, "events/header_page") {
        Ok(h) => {
            assert!(h.page_size <= MAX_PAGE, "{h:?} from {text:?}");
            assert!(h.data_offset <= h.page_size);
            assert!(h.timestamp_offset + 8 <= h.data_offset, "{h:?}");
            assert!(h.commit_offset + h.commit_size <= h.data_offset, "{h:?}");
        }
        Err(e) => {
            assert_eq!(e.path, "events/header_page");
            assert!(text.contains(e.text.trim()), "{e}");
        }
    }
}

fn field_line(ty: &str, name: &str, offset: usize, size: usize, signed: bool) -> String {
    format!(
        "\tfield:{ty} {name};\toffset:{offset};\tsize:{size};\tsigned:{};\n",
        signed as u8
    )
}

proptest! {
    #![proptest_config(config("prop_trace_format"))]

    #[test]
    fn format_parse_never_panics(text in noisy_text()) {
        check_format(&text);
        check_header(&text);
    }

    #[test]
    fn mutated_format_files(seed in prop::sample::select(&[MIGRATE, SWITCH][..]), e in edits()) {
        check_format(&apply(seed, &e));
    }

    #[test]
    fn mutated_header_page(e in edits()) {
        check_header(&apply(HEADER_PAGE, &e));
    }

    #[test]
    fn header_page_with_nasty_numbers(
        vals in prop::collection::vec(prop_oneof![
            prop::sample::select(NASTY_NUMBERS).prop_map(str::to_string),
            (0u64..20000).prop_map(|v| v.to_string()),
        ], 8),
    ) {
        let v = |i: usize| vals[i].as_str();
        let text = format!(
            "\tfield: u64 timestamp;\toffset:{};\tsize:{};\tsigned:0;\n\
             \tfield: local_t commit;\toffset:{};\tsize:{};\tsigned:1;\n\
             \tfield: int overwrite;\toffset:{};\tsize:{};\tsigned:1;\n\
             \tfield: char data;\toffset:{};\tsize:{};\tsigned:1;\n",
            v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7)
        );
        check_header(&text);
    }

    #[test]
    fn format_round_trip(
        name in "[a-z_]{1,30}",
        id in any::<u16>(),
        fields in prop::collection::vec(
            ("[a-z_][a-z0-9_]{0,20}", prop::sample::select(&["int", "unsigned short", "pid_t", "long", "u64", "char"][..]),
             any::<usize>(), any::<usize>(), any::<bool>(), 0usize..3),
            1..12,
        ),
    ) {
        let mut text = format!("name: {name}\nID: {id}\nformat:\n");
        let mut want = Vec::new();
        for (fname, ty, offset, size, signed, array) in &fields {
            // Arrays (`char comm[16]`) and pointers keep the bare name.
            let decl = match array {
                0 => fname.clone(),
                1 => format!("{fname}[16]"),
                _ => format!("*{fname}"),
            };
            text.push_str(&field_line(ty, &decl, *offset, *size, *signed));
            want.push(Field { name: fname.clone(), offset: *offset, size: *size, signed: *signed });
        }
        text.push_str("\nprint fmt: \"x=%d\", REC->x\n");
        let f = EventFormat::parse(&text, PATH).unwrap();
        prop_assert_eq!(f.name, name);
        prop_assert_eq!(f.id, id);
        prop_assert_eq!(&f.fields, &want);
        // Reading any of them from any record never panics, even with
        // offsets near usize::MAX.
        let rec = vec![1u8; 80];
        for x in &f.fields {
            let r = x.int(&rec);
            let fits = x.offset.checked_add(x.size).is_some_and(|e| e <= rec.len());
            prop_assert!(r.is_none() || (fits && [1, 2, 4, 8].contains(&x.size)));
        }
    }

    #[test]
    fn field_int_is_the_bytes_it_names(
        offset in 0usize..64, size in prop::sample::select(&[1usize, 2, 4, 8][..]),
        signed in any::<bool>(), rec in prop::collection::vec(any::<u8>(), 0..72),
    ) {
        let f = Field { name: "x".into(), offset, size, signed };
        match rec.get(offset..offset + size) {
            None => prop_assert_eq!(f.int(&rec), None),
            Some(b) => {
                let mut w = [0u8; 8];
                w[..size].copy_from_slice(b);
                let u = u64::from_ne_bytes(w);
                // Host order; sign-extend from the field's width.
                let (u, sh) = if cfg!(target_endian = "little") { (u, 64 - 8 * size as u32) } else { (u >> (64 - 8 * size as u32), 64 - 8 * size as u32) };
                let v = if signed || size == 8 { ((u << sh) as i64) >> sh } else { u as i64 };
                prop_assert_eq!(f.int(&rec), Some(v));
            }
        }
    }
}

/// A header whose data field claims 2^64-1 bytes: the reader would have
/// allocated a page buffer of that size (and `offset + size` overflowed).
#[test]
fn header_page_absurd_data_size_is_an_error_not_a_huge_page() {
    for (off, size) in [
        ("16", "18446744073709551615"),
        ("18446744073709551615", "1"),
        ("16", "1099511627776"),
    ] {
        let text = HEADER_PAGE.replace(
            "offset:16;\tsize:4080",
            &format!("offset:{off};\tsize:{size}"),
        );
        let e = PageHeader::parse(&text, "events/header_page").unwrap_err();
        assert!(e.to_string().contains("header_page"), "{e}");
        assert!(e.text.contains(size), "{e}");
    }
}
