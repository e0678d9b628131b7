//! Property tests for saved text traces ([`text::parse`]): `trace-cmd
//! report`, `perf script` and tracefs `trace` text.
//!
//! Properties: no panic and a bounded time on arbitrary text and on the
//! real captures in tests/fixtures/trace mutated (lines cut, duplicated,
//! swapped, numbers made huge or negative, fields dropped); errors name
//! the file, a line number that exists, and that line's text; events
//! printed the way each tool prints them (comms with spaces, `/`, `:`, `-`
//! and `=`) parse back to the same events.

mod prop_common;

use numalab::trace::event::{Event, Kind};
use numalab::trace::text::{self, TextError};
use prop_common::{apply, config, config_scaled, edits, noisy_text, within};
use proptest::prelude::*;
use std::time::Duration;

const FIXTURES: &[&str] = &[
    include_str!("fixtures/trace/perf-script-ns-pid.txt"),
    include_str!("fixtures/trace/perf-script.txt"),
    include_str!("fixtures/trace/trace-cmd-report-N.txt"),
    include_str!("fixtures/trace/trace-cmd-report-R.txt"),
    include_str!("fixtures/trace/trace-cmd-report-lt.txt"),
    include_str!("fixtures/trace/trace-cmd-report-ts-diff.txt"),
    include_str!("fixtures/trace/trace-cmd-report.txt"),
    include_str!("fixtures/trace/tracefs-trace-tgid.txt"),
    include_str!("fixtures/trace/tracefs-trace.txt"),
];

const PATH: &str = "saved/trace.txt";

fn check(input: &str) {
    let r = within(Duration::from_secs(3), "text::parse", || {
        text::parse(input, PATH)
    });
    match r {
        Ok(p) => {
            assert!(!p.events.is_empty());
            assert!(p.events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
            assert!(p.lines >= p.other_events);
        }
        Err(TextError::Line {
            path,
            line,
            msg,
            text,
        }) => {
            assert_eq!(path, PATH);
            assert!(!msg.is_empty());
            let l = input
                .lines()
                .nth(line as usize - 1)
                .unwrap_or_else(|| panic!("line {line} of {input:?}"))
                .trim();
            let shown = text.strip_suffix("...").unwrap_or(&text);
            assert!(l.starts_with(shown), "{text:?} is not line {line}: {l:?}");
        }
        Err(TextError::NoEvents { path, lines, .. }) => {
            assert_eq!(path, PATH);
            assert_eq!(lines, input.lines().count() as u64);
        }
        Err(e @ TextError::Read { .. }) => panic!("{e}"),
    }
}

/// Comms as the kernel allows them (up to 15 bytes), with the characters
/// that make them hard to delimit, including timestamp-like `1.5: x: y`.
fn comm() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_/:. =-]{0,14}[a-zA-Z0-9_/.-]",
        "[0-9]{1,3}(\\.[0-9]{1,3})?: [a-z_]{1,4}: [a-z0-9]{0,2}",
    ]
    .prop_filter("no leading space", |c| !c.starts_with(' '))
}

const STATES: &[&str] = &["R", "R+", "S", "D", "D|K", "I", "X", "Z", "T", "t"];

/// A decoded event plus what only the text carries (comms, prio, state).
#[derive(Debug, Clone)]
struct Line {
    ev: Event,
    comms: (String, String),
    prio: (i32, i32),
    state: &'static str,
    old_stick: bool,
}

fn kind() -> impl Strategy<Value = (Kind, &'static str, bool)> {
    let pid = 0u32..=4_194_304;
    let cpu = 0u32..8192;
    let icpu = -1i32..8192;
    let nid = -1i32..1024;
    prop_oneof![
        (pid.clone(), cpu.clone(), cpu).prop_map(|(pid, o, d)| (
            Kind::Migrate {
                pid,
                orig_cpu: o,
                dest_cpu: d
            },
            "R",
            false
        )),
        (pid.clone(), prop::sample::select(STATES), pid.clone()).prop_map(|(a, s, b)| (
            Kind::Switch {
                prev_pid: a,
                prev_runnable: s == "R" || s == "R+",
                next_pid: b
            },
            s,
            false
        )),
        (
            pid.clone(),
            icpu.clone(),
            nid.clone(),
            icpu.clone(),
            nid.clone()
        )
            .prop_map(|(pid, sc, sn, dc, dn)| (
                Kind::MoveNuma {
                    pid,
                    src_cpu: sc,
                    src_nid: sn,
                    dst_cpu: dc,
                    dst_nid: dn
                },
                "R",
                false
            )),
        (
            pid.clone(),
            icpu.clone(),
            nid.clone(),
            pid.clone(),
            icpu.clone(),
            nid.clone()
        )
            .prop_map(|(sp, sc, sn, dp, dc, dn)| (
                Kind::SwapNuma {
                    src_pid: sp,
                    src_cpu: sc,
                    src_nid: sn,
                    dst_pid: dp,
                    dst_cpu: dc,
                    dst_nid: dn
                },
                "R",
                false
            )),
        (
            pid.clone(),
            icpu.clone(),
            nid.clone(),
            icpu,
            nid,
            any::<bool>()
        )
            .prop_map(|(pid, sc, sn, dc, dn, old)| (
                Kind::StickNuma {
                    pid,
                    src_cpu: sc,
                    src_nid: sn,
                    dst_cpu: dc,
                    dst_nid: dn
                },
                "R",
                old
            )),
        (pid.clone(), pid.clone()).prop_map(|(p, c)| (
            Kind::Fork {
                parent_pid: p,
                child_pid: c
            },
            "R",
            false
        )),
        pid.prop_map(|p| (Kind::Exit { pid: p }, "R", false)),
    ]
}

fn line() -> impl Strategy<Value = Line> {
    (
        kind(),
        0u32..4096,
        0u64..1_000_000_000_000,
        comm(),
        comm(),
        -1i32..140,
        -1i32..140,
    )
        .prop_map(|((kind, state, old_stick), cpu, us, c1, c2, p1, p2)| Line {
            ev: Event {
                ts_ns: us * 1000,
                cpu,
                kind,
            },
            comms: (c1, c2),
            prio: (p1, p2),
            state,
            old_stick,
        })
}

/// The event's fields as the kernel prints them (`plugin`: trace-cmd's
/// sched_switch form).
fn body(l: &Line, plugin: bool) -> String {
    let (c1, c2) = (&l.comms.0, &l.comms.1);
    let (p1, p2) = l.prio;
    match &l.ev.kind {
        Kind::Migrate {
            pid,
            orig_cpu,
            dest_cpu,
        } => {
            format!("comm={c1} pid={pid} prio={p1} orig_cpu={orig_cpu} dest_cpu={dest_cpu}")
        }
        Kind::Switch {
            prev_pid, next_pid, ..
        } if plugin => {
            format!(
                "{c1}:{prev_pid} [{p1}] {} ==> {c2}:{next_pid} [{p2}]",
                l.state
            )
        }
        Kind::Switch {
            prev_pid, next_pid, ..
        } => format!(
            "prev_comm={c1} prev_pid={prev_pid} prev_prio={p1} prev_state={} ==> \
             next_comm={c2} next_pid={next_pid} next_prio={p2}",
            l.state
        ),
        Kind::MoveNuma {
            pid,
            src_cpu,
            src_nid,
            dst_cpu,
            dst_nid,
        } => format!(
            "pid={pid} tgid={pid} ngid=0 src_cpu={src_cpu} src_nid={src_nid} \
             dst_cpu={dst_cpu} dst_nid={dst_nid}"
        ),
        Kind::StickNuma {
            pid,
            src_cpu,
            src_nid,
            dst_cpu,
            dst_nid,
        } if l.old_stick => format!(
            "pid={pid} tgid={pid} ngid=0 src_cpu={src_cpu} src_nid={src_nid} \
             dst_cpu={dst_cpu} dst_nid={dst_nid}"
        ),
        Kind::StickNuma {
            pid,
            src_cpu,
            src_nid,
            dst_cpu,
            dst_nid,
        } => format!(
            "src_pid={pid} src_tgid={pid} src_ngid=0 src_cpu={src_cpu} src_nid={src_nid} \
             dst_pid=0 dst_tgid=0 dst_ngid=0 dst_cpu={dst_cpu} dst_nid={dst_nid}"
        ),
        Kind::SwapNuma {
            src_pid,
            src_cpu,
            src_nid,
            dst_pid,
            dst_cpu,
            dst_nid,
        } => format!(
            "src_pid={src_pid} src_tgid={src_pid} src_ngid=0 src_cpu={src_cpu} \
             src_nid={src_nid} dst_pid={dst_pid} dst_tgid={dst_pid} dst_ngid=0 \
             dst_cpu={dst_cpu} dst_nid={dst_nid}"
        ),
        Kind::Fork {
            parent_pid,
            child_pid,
        } => {
            format!("comm={c1} pid={parent_pid} child_comm={c2} child_pid={child_pid}")
        }
        Kind::Exit { pid } => format!("comm={c1} pid={pid} prio={p1} group_dead=1"),
    }
}

/// One line in the layout of `tool` (0 tracefs, 1 trace-cmd, 2 perf).
fn render(l: &Line, tool: u8) -> String {
    let e = &l.ev;
    let ts = format!(
        "{}.{:06}",
        e.ts_ns / 1_000_000_000,
        e.ts_ns / 1000 % 1_000_000
    );
    let name = e.kind.name();
    let c = &l.comms.0;
    match tool {
        0 => format!(
            "{c:>16}-{:<7} [{:03}] d..2. {ts}: {name}: {}",
            4242,
            e.cpu,
            body(l, false)
        ),
        1 => format!(
            "{c:>16}-{:<5} [{:03}] {ts}: {name}: {:>8}{}",
            4242,
            e.cpu,
            "",
            body(l, true)
        ),
        _ => format!(
            "{c:>16} {:>6} [{:03}] {ts}: {:>12}sched:{name}: {}",
            4242,
            e.cpu,
            "",
            body(l, false)
        ),
    }
}

proptest! {
    #![proptest_config(config("prop_trace_text"))]

    #[test]
    fn arbitrary_text_never_panics(t in noisy_text()) {
        check(&t);
    }

    #[test]
    fn mutated_real_traces(seed in prop::sample::select(FIXTURES), e in edits()) {
        check(&apply(seed, &e));
    }

    #[test]
    fn events_printed_by_each_tool_parse_back(
        mut lines in prop::collection::vec(line(), 1..20), tool in 0u8..3,
    ) {
        lines.sort_by_key(|l| l.ev.ts_ns);
        let mut t = String::from("# tracer: nop\n#\n");
        if tool == 1 {
            t = String::from("cpus=4\n");
        }
        for l in &lines {
            t.push_str(&render(l, tool));
            t.push('\n');
        }
        let p = text::parse(&t, PATH).map_err(|e| TestCaseError::fail(format!("{e}\n{t}")))?;
        let want: Vec<Event> = lines.iter().map(|l| l.ev.clone()).collect();
        prop_assert_eq!(p.events, want, "{}", t);
    }
}

proptest! {
    #![proptest_config(config_scaled("prop_trace_text", 100))]

    /// Long lines: one event with a comm-like body repeated, and many keys:
    /// the backtracking field matcher must stay fast.
    #[test]
    fn long_lines_parse_in_bounded_time(
        rep in 1usize..400, chunk in prop::sample::select(&[
            " prev_pid=1 prev_prio=2 prev_state=R ==> next_comm=x",
            " pid=1 prio=2 orig_cpu=3",
            " child_comm=a",
            "1.5: a: ",
            "x:1 [2] ",
        ][..]),
        name in prop::sample::select(&["sched_switch", "sched_migrate_task", "sched_process_fork"][..]),
    ) {
        let key = if name == "sched_switch" { "prev_comm" } else { "comm" };
        let line = format!("a-1 [000] 1.000001: {name}: {key}=c{}\n", chunk.repeat(rep));
        check(&line);
    }
}
