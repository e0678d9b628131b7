//! Tests of the text trace parser: hand-written lines for every variant and
//! event, and the real excerpts in tests/fixtures/trace/ (see the README
//! there for the commands that produced them).

use super::*;

fn parse_ok(text: &str) -> Parsed {
    parse(text, "t.txt").unwrap_or_else(|e| panic!("{e}"))
}

/// The single event of a one-line trace.
fn one(line: &str) -> Event {
    let p = parse_ok(line);
    assert_eq!(p.events.len(), 1, "{line}");
    p.events[0].clone()
}

fn kind(line: &str) -> Kind {
    one(line).kind
}

fn err(text: &str) -> String {
    parse(text, "t.txt").unwrap_err().to_string()
}

fn ev(ts_ns: u64, cpu: u32, kind: Kind) -> Event {
    Event { ts_ns, cpu, kind }
}

fn migrate(pid: u32, orig_cpu: u32, dest_cpu: u32) -> Kind {
    Kind::Migrate {
        pid,
        orig_cpu,
        dest_cpu,
    }
}

fn switch(prev_pid: u32, prev_runnable: bool, next_pid: u32) -> Kind {
    Kind::Switch {
        prev_pid,
        prev_runnable,
        next_pid,
    }
}

#[test]
fn trace_cmd_default_lines() {
    let text = "\
cpus=4
version = 6
CPU 3 is empty
  numalab-123   [002]  1234.567890: sched_migrate_task:   comm=numalab pid=123 prio=120 orig_cpu=2 dest_cpu=0
kworker/0:1-mm_percpu_wq-45 [000]  1234.567891: sched_switch: kworker/0:1:45 [120] W ==> Web Content:1234 [120]
 Web Content-1234 [000]  1234.567892: sched_process_exit: comm=Web Content pid=1234 prio=120 group_dead=true
";
    let p = parse_ok(text);
    assert_eq!(p.format, Format::TraceCmd);
    assert_eq!((p.lines, p.other_events), (6, 0));
    assert_eq!(
        p.events,
        vec![
            ev(1_234_567_890_000, 2, migrate(123, 2, 0)),
            ev(1_234_567_891_000, 0, switch(45, false, 1234)),
            ev(1_234_567_892_000, 0, Kind::Exit { pid: 1234 }),
        ]
    );
}

#[test]
fn trace_cmd_latency_ns_ts_diff_and_instance_prefix() {
    // -l: CPU glued to the flags; -t: 9 decimals; --ts-diff; -B instance.
    let e = one("nltext: migratio-21      1d..3.  9811.290025704: sched_migrate_task:   comm=trace-cmd pid=20550 prio=120 orig_cpu=1 dest_cpu=0");
    assert_eq!(e, ev(9_811_290_025_704, 1, migrate(20550, 1, 0)));
    let e = one("   sh-7   12.....  5.000000001: sched_process_fork: comm=sh pid=7 child_comm=sh child_pid=8");
    assert_eq!(e.cpu, 12);
    assert_eq!(e.ts_ns, 5_000_000_001);
    let e = one("nltext:      migration/1-21    [001]  9811.290026: (+34)    sched_migrate_task:   comm=x pid=5 prio=120 orig_cpu=1 dest_cpu=0");
    assert_eq!(e, ev(9_811_290_026_000, 1, migrate(5, 1, 0)));
}

#[test]
fn perf_script_lines() {
    let text = "\
# ========
# captured on    : Sat Nov 21 14:54:25 2026
# ========
#
         numalab   123 [002]  1234.567890: sched:sched_migrate_task: comm=numalab pid=123 prio=120 orig_cpu=2 dest_cpu=0
     Web Content 4242/4243 [001]  1234.567891000:       sched:sched_switch: prev_comm=Web Content prev_pid=4243 prev_prio=120 prev_state=R+ ==> next_comm=kworker/1:1-mm next_pid=99 next_prio=120
            perf 20914 [000]  1234.567892: sched:sched_wakeup: comm=x pid=1 prio=120 target_cpu=000
";
    let p = parse_ok(text);
    assert_eq!(p.format, Format::PerfScript);
    assert_eq!((p.lines, p.other_events), (7, 1));
    assert_eq!(
        p.events,
        vec![
            ev(1_234_567_890_000, 2, migrate(123, 2, 0)),
            ev(1_234_567_891_000, 1, switch(4243, true, 99)),
        ]
    );
}

#[test]
fn tracefs_lines() {
    let text = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
            bash-21213   [000] d..2.  9835.088995: sched_switch: prev_comm=bash prev_pid=21213 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=21216 next_prio=120
            bash-22397   (  22397) [001] .....  9881.410493: sched_process_fork: comm=bash pid=22397 child_comm=bash child_pid=22406
          <idle>-0       [000] dNs4  9835.089691: sched_migrate_task: comm=rcu_preempt pid=15 prio=120 orig_cpu=1 dest_cpu=0
            bash-21213   [003]   9835.2: sched_process_exit: comm=bash pid=21213 prio=120
";
    let p = parse_ok(text);
    assert_eq!(p.format, Format::Tracefs);
    assert_eq!(
        p.events,
        vec![
            ev(9_835_088_995_000, 0, switch(21213, false, 21216)),
            ev(9_835_089_691_000, 0, migrate(15, 1, 0)),
            ev(9_835_200_000_000, 3, Kind::Exit { pid: 21213 }),
            ev(
                9_881_410_493_000,
                1,
                Kind::Fork {
                    parent_pid: 22397,
                    child_pid: 22406
                }
            ),
        ]
    );
}

#[test]
fn mixed_formats_in_one_file() {
    let text = "\
  a-1 [000] 1.000001: sched_process_exit: comm=a pid=1 prio=120
  b 2 [001] 1.000002: sched:sched_process_exit: comm=b pid=2 prio=120
";
    assert_eq!(parse_ok(text).format, Format::Mixed);
}

#[test]
fn timestamps_are_exact() {
    assert_eq!(ts_ns("1234.567890"), Ok(1_234_567_890_000));
    assert_eq!(ts_ns("1234.567890123"), Ok(1_234_567_890_123));
    assert_eq!(ts_ns("0.5"), Ok(500_000_000));
    assert_eq!(ts_ns("1.1234567899"), Ok(1_123_456_789)); // truncated
    assert_eq!(ts_ns("18446744073.709551615"), Ok(u64::MAX));
    assert!(ts_ns("18446744074.0").unwrap_err().contains("out of range"));
    assert!(ts_ns("12345").unwrap_err().contains("no fractional part"));
    assert!(ts_ns("1.2.3").unwrap_err().contains("bad timestamp"));
    // 9876543210.123456789 s is not representable exactly as f64
    assert_eq!(ts_ns("9876543210.123456789"), Ok(9_876_543_210_123_456_789));
}

#[test]
fn switch_states() {
    let line = |state: &str| {
        format!("  a-1 [000] 1.0: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state={state} ==> next_comm=b next_pid=2 next_prio=120")
    };
    for (state, runnable) in [
        ("R", true),
        ("R+", true),
        ("S", false),
        ("D", false),
        ("I", false),
        ("X", false),
        ("Z", false),
        ("D|K", false),
        ("T", false),
    ] {
        assert_eq!(kind(&line(state)), switch(1, runnable, 2), "{state}");
    }
    // trace-cmd report -R: raw numbers, no `==>`.
    let raw = |state: i64| {
        format!("  a-1 [000] 1.0: sched_switch:  prev_comm=a prev_pid=1 prev_prio=120 prev_state={state} next_comm=b next_pid=2 next_prio=120")
    };
    assert_eq!(kind(&raw(256)), switch(1, true, 2));
    assert_eq!(kind(&raw(0)), switch(1, true, 2));
    assert_eq!(kind(&raw(1)), switch(1, false, 2));
    assert_eq!(kind(&raw(0x80)), switch(1, false, 2));
    // libtraceevent's plugin: W is TASK_IDLE, `S|W` combinations.
    let plugin =
        |state: &str| format!("  a-1 [000] 1.0: sched_switch: a:1 [120] {state} ==> b:2 [120]");
    assert_eq!(kind(&plugin("R")), switch(1, true, 2));
    assert_eq!(kind(&plugin("R+")), switch(1, true, 2));
    assert_eq!(kind(&plugin("W")), switch(1, false, 2));
    assert_eq!(kind(&plugin("S|W")), switch(1, false, 2));
}

#[test]
fn comms_with_spaces_colons_dashes_and_keys() {
    let k = kind("  x-1 [000] 1.0: sched_switch: prev_comm=Web Content prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=kworker/0:1-mm_percpu_wq next_pid=45 next_prio=120");
    assert_eq!(k, switch(7, false, 45));
    // A comm that looks like fields cannot shift them.
    let k = kind("  x-1 [000] 1.0: sched_switch: prev_comm=a prev_pid=5 b prev_pid=77 prev_prio=120 prev_state=R ==> next_comm= ==> next_pid=3 next_pid=88 next_prio=120");
    assert_eq!(k, switch(77, true, 88));
    let k = kind(
        "  x-1 [000] 1.0: sched_migrate_task: comm= pid=1 x pid=9 prio=120 orig_cpu=3 dest_cpu=1",
    );
    assert_eq!(k, migrate(9, 3, 1));
    let k = kind("  x-1 [000] 1.0: sched_process_fork: comm=sh pid=2 c pid=1 child_comm=a child_pid=x child_pid=4");
    assert_eq!(
        k,
        Kind::Fork {
            parent_pid: 1,
            child_pid: 4
        }
    );
    // Plugin format: comms with colons and spaces.
    let k = kind(
        "  x-1 [000] 1.0: sched_switch: memfd:sealed-91:23937 [120] S ==> kw/0:1-mm wq:22102 [120]",
    );
    assert_eq!(k, switch(23937, false, 22102));
    let k = kind("  x-1 [000] 1.0: sched_switch: a:1 S ==> b:2"); // no prio
    assert_eq!(k, switch(1, false, 2));
}

#[test]
fn numa_events() {
    let k = kind("  x-1 [001] 1.0: sched_move_numa: pid=10 tgid=10 ngid=0 src_cpu=1 src_nid=0 dst_cpu=5 dst_nid=1");
    assert_eq!(
        k,
        Kind::MoveNuma {
            pid: 10,
            src_cpu: 1,
            src_nid: 0,
            dst_cpu: 5,
            dst_nid: 1
        }
    );
    let k = kind("  x-1 [001] 1.0: sched_swap_numa: src_pid=10 src_tgid=10 src_ngid=0 src_cpu=1 src_nid=0 dst_pid=20 dst_tgid=20 dst_ngid=0 dst_cpu=5 dst_nid=1");
    assert_eq!(
        k,
        Kind::SwapNuma {
            src_pid: 10,
            src_cpu: 1,
            src_nid: 0,
            dst_pid: 20,
            dst_cpu: 5,
            dst_nid: 1
        }
    );
    // Linux >= 5.7: pair format, no destination found.
    let k = kind("  x 1 [001] 1.0: sched:sched_stick_numa: src_pid=10 src_tgid=10 src_ngid=0 src_cpu=1 src_nid=0 dst_pid=0 dst_tgid=0 dst_ngid=0 dst_cpu=-1 dst_nid=-1");
    let none = Kind::StickNuma {
        pid: 10,
        src_cpu: 1,
        src_nid: 0,
        dst_cpu: -1,
        dst_nid: -1,
    };
    assert_eq!(k, none);
    // Linux < 5.7: move_numa's fields.
    let k = kind("  x-1 [001] d..2. 1.0: sched_stick_numa: pid=10 tgid=10 ngid=0 src_cpu=1 src_nid=0 dst_cpu=-1 dst_nid=-1");
    assert_eq!(k, none);
}

#[test]
fn fork_and_exit_variants() {
    let fork = Kind::Fork {
        parent_pid: 1,
        child_pid: 2,
    };
    assert_eq!(
        kind("  a-1 [000] 1.0: sched_process_fork: comm=a pid=1 child_comm=a child_pid=2"),
        fork
    );
    // trace-cmd report -R
    assert_eq!(kind("  a-1 [000] 1.0: sched_process_fork:    parent_comm=a parent_pid=1 child_comm=a child_pid=2"), fork);
    assert_eq!(
        kind("  a-1 [000] 1.0: sched_process_exit: comm=a pid=1 prio=120"),
        Kind::Exit { pid: 1 }
    );
    assert_eq!(
        kind("  a-1 [000] 1.0: sched_process_exit: comm=a pid=1 prio=120 group_dead=1"),
        Kind::Exit { pid: 1 }
    );
}

#[test]
fn other_events_are_counted_and_skipped() {
    let text = "\
  a-1 [000] 1.0: sched_wakeup: comm=a pid=1 prio=120 target_cpu=000
  a-1 [000] 1.1: irq:irq_handler_entry: irq=1 name=x
  a 1 [000] 1.2: irq:sched_switch: not the scheduler's
  a-1 [000] 1.3: print: tracing_mark_write: sched_switch: user text
  a-1 [000] 1.4: sched_process_exit: comm=a pid=1 prio=120
";
    let p = parse_ok(text);
    assert_eq!((p.lines, p.other_events, p.events.len()), (5, 4, 1));
}

#[test]
fn sorted_by_time_stable() {
    let text = "\
  a-1 [001] 2.0: sched_process_exit: comm=a pid=3 prio=120
  a-1 [000] 1.0: sched_process_exit: comm=a pid=1 prio=120
  a-1 [001] 1.0: sched_process_exit: comm=a pid=2 prio=120
";
    let pids: Vec<u32> = parse_ok(text)
        .events
        .iter()
        .map(|e| match e.kind {
            Kind::Exit { pid } => pid,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(pids, [1, 2, 3]);
}

#[test]
fn malformed_lines_are_errors_with_context() {
    let e = err("cpus=1\n  a-1 [000] 1.0: sched_migrate_task: comm=a pid=1 prio=120 orig_cpu=2\n");
    assert_eq!(
        e,
        "t.txt:2: sched_migrate_task: missing field `dest_cpu`: a-1 [000] 1.0: sched_migrate_task: comm=a pid=1 prio=120 orig_cpu=2"
    );
    let e =
        err("  a-1 [000] 1.0: sched_migrate_task: comm=a pid=x1 prio=120 orig_cpu=2 dest_cpu=1");
    assert!(
        e.starts_with("t.txt:1: sched_migrate_task: bad number `pid=x1`: "),
        "{e}"
    );
    let e = err("  a-1 [000] 1.0: sched_process_exit: comm=a pid=-1 prio=120");
    assert!(e.contains("`pid=-1` out of range"), "{e}");
    let e = err("  a-1 [000] 1.0: sched_switch: a:1 [120] S b:2 [120]");
    assert!(e.contains("sched_switch: no `==>`"), "{e}");
    let e = err("  a-1 [000] 1234: sched_process_exit: comm=a pid=1 prio=120");
    assert!(e.contains("no fractional part"), "{e}");
    let e = err(" 1.0: sched:sched_process_exit: comm=a pid=1 prio=120");
    assert!(e.contains("no CPU column"), "{e}");
    let e = err("  a-1 [000] 1x0: sched_switch: prev_comm=a prev_pid=1");
    assert!(
        e.contains("t.txt:1: sched_switch: unrecognised layout"),
        "{e}"
    );
    let e = err(
        "  a-1 [000] 1.0: sched_move_numa: pid=10 tgid=10 src_cpu=1 src_nid=0 dst_cpu=5 dst_nid=1",
    );
    assert!(e.contains("missing field `ngid`"), "{e}");
    let long = format!(
        "  a-1 [000] 1.0: sched_process_exit: comm={} pid=",
        "x".repeat(1000)
    );
    assert!(err(&long).len() < 450);
}

#[test]
fn no_events_is_an_error() {
    for text in ["", "\n\n", "cpus=2\nCPU 0 is empty\n", "hello world\n"] {
        let e = err(text);
        assert!(e.starts_with("no sched events found in t.txt"), "{e}");
    }
    let e = err("  a-1 [000] 1.0: sched_wakeup: comm=a pid=1 prio=120 target_cpu=000\n");
    assert!(e.contains("(1 lines, 1 other event lines)"), "{e}");
}

#[test]
fn fast_enough() {
    let line = "  kworker/0:1-mm_percpu_wq-45 [002] d..2.  1234.567890123: sched_switch: prev_comm=kworker/0:1 prev_pid=45 prev_prio=120 prev_state=R+ ==> next_comm=Web Content next_pid=1234 next_prio=120\n";
    let n = if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    let text = line.repeat(n);
    let t = std::time::Instant::now();
    let p = parse_ok(&text);
    let took = t.elapsed();
    assert_eq!(p.events.len(), n);
    if !cfg!(debug_assertions) {
        assert!(took.as_secs_f64() < 1.0, "{n} lines took {took:?}");
    }
}

// ---- real excerpts -------------------------------------------------------

/// ns → µs, rounded as trace-cmd prints them.
fn us(ns: u64) -> u64 {
    (ns + 500) / 1000
}

fn fixture(name: &str) -> Parsed {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/trace")
        .join(name);
    parse_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Events per kind, in [Migrate, Switch, Fork, Exit] order.
fn census(p: &Parsed) -> [usize; 4] {
    let mut n = [0; 4];
    for e in &p.events {
        match e.kind {
            Kind::Migrate { .. } => n[0] += 1,
            Kind::Switch { .. } => n[1] += 1,
            Kind::Fork { .. } => n[2] += 1,
            Kind::Exit { .. } => n[3] += 1,
            _ => panic!("unexpected {e:?}"),
        }
    }
    n
}

#[test]
fn fixture_trace_cmd_report() {
    let p = fixture("trace-cmd-report.txt");
    assert_eq!(p.format, Format::TraceCmd);
    assert_eq!((p.lines, p.other_events), (45, 0));
    assert_eq!(census(&p), [1, 34, 4, 5]);
    assert_eq!(
        p.events[0],
        ev(9_870_627_478_000, 1, switch(22100, true, 21))
    );
    assert_eq!(p.events[1], ev(9_870_627_484_000, 1, migrate(22100, 1, 0)));
    let last = &p.events[p.events.len() - 1];
    assert_eq!(*last, ev(9_870_691_185_000, 0, switch(22100, false, 22083)));
    assert!(p
        .events
        .contains(&ev(9_870_690_442_000, 0, Kind::Exit { pid: 22102 })));
}

#[test]
fn fixture_trace_cmd_report_variants_agree() {
    // The same recording printed with -l -t, -N, -R and --ts-diff: the
    // same events (to the µs the default rounds to).
    let base = fixture("trace-cmd-report.txt").events;
    for (name, n) in [
        ("trace-cmd-report-lt.txt", 29),
        ("trace-cmd-report-N.txt", 29),
        ("trace-cmd-report-R.txt", 24),
        ("trace-cmd-report-ts-diff.txt", 14),
    ] {
        let p = fixture(name);
        assert_eq!(p.format, Format::TraceCmd, "{name}");
        assert_eq!(p.events.len(), n, "{name}");
        for (e, b) in p.events.iter().zip(&base) {
            assert_eq!(
                (us(e.ts_ns), e.cpu, &e.kind),
                (us(b.ts_ns), b.cpu, &b.kind),
                "{name}"
            );
        }
    }
    let lt = fixture("trace-cmd-report-lt.txt");
    assert_eq!(lt.events[1], ev(9_870_627_483_908, 1, migrate(22100, 1, 0)));
}

#[test]
fn fixture_perf_script() {
    let p = fixture("perf-script.txt");
    assert_eq!(p.format, Format::PerfScript);
    assert_eq!((p.lines, p.other_events), (52, 0));
    assert_eq!(census(&p), [2, 29, 4, 5]);
    assert_eq!(
        p.events[0],
        ev(9_876_410_596_000, 0, switch(22250, false, 18))
    );
    assert_eq!(p.events[1], ev(9_876_410_601_000, 0, migrate(22250, 0, 1)));
    // `Web Content` (a comm with a space) forks, sleeps and exits.
    assert!(p
        .events
        .contains(&ev(9_876_413_244_000, 0, switch(22261, false, 22262))));
    assert!(p
        .events
        .contains(&ev(9_876_426_400_000, 0, Kind::Exit { pid: 22261 })));
    assert!(p
        .events
        .contains(&ev(9_876_412_282_000, 0, switch(22255, true, 22261))));

    let ns = fixture("perf-script-ns-pid.txt");
    assert_eq!(ns.format, Format::PerfScript);
    assert_eq!(ns.events.len(), 30);
    for (e, b) in ns.events.iter().zip(&p.events) {
        // perf truncates to µs where trace-cmd rounds.
        assert_eq!(
            (e.ts_ns / 1000, e.cpu, &e.kind),
            (b.ts_ns / 1000, b.cpu, &b.kind)
        );
    }
    assert!(ns.events.iter().any(|e| e.ts_ns % 1000 != 0));
}

#[test]
fn fixture_tracefs() {
    let p = fixture("tracefs-trace.txt");
    assert_eq!(p.format, Format::Tracefs);
    assert_eq!((p.lines, p.other_events), (50, 0));
    assert_eq!(census(&p), [6, 22, 5, 5]);
    let t = fixture("tracefs-trace-tgid.txt");
    assert_eq!(t.format, Format::Tracefs);
    assert_eq!(
        t.events[0],
        ev(
            9_881_410_493_000,
            1,
            Kind::Fork {
                parent_pid: 22397,
                child_pid: 22406
            }
        )
    );
    assert!(t
        .events
        .contains(&ev(9_881_413_405_000, 0, switch(22408, true, 18))));
    assert!(t
        .events
        .contains(&ev(9_881_413_411_000, 0, migrate(22408, 0, 1))));
}

/// Found by tests/prop_trace_text.rs: a comm that looks like a timestamp
/// and an event name (`0: a: `, any name set with PR_SET_NAME) in the line
/// prefix was taken as the anchor, and the real sched_migrate_task was
/// counted as an unknown event `a` and dropped.
#[test]
fn comm_that_looks_like_a_timestamp_does_not_hide_the_event() {
    for line in [
        "          0: a: -4242    [000] d..2. 0.000000: sched_migrate_task: comm=0: a:  pid=7 prio=0 orig_cpu=0 dest_cpu=1",
        "      1.5: b: x-4242  [001] 12.500000: sched_process_exit: comm=1.5: b: x pid=7 prio=120",
    ] {
        let e = one(line);
        assert!(matches!(e.kind, Kind::Migrate { pid: 7, .. } | Kind::Exit { pid: 7 }), "{e:?}");
    }
    // An unknown event stays unknown, whatever its comm looks like.
    let p = parse(
        "  1.5: a: b-1 [000] 2.000000: sched_wakeup: comm=x pid=1\n\
                   x-1 [000] 3.000000: sched_process_exit: comm=x pid=1 prio=120\n",
        "t",
    )
    .unwrap();
    assert_eq!((p.events.len(), p.other_events), (1, 1));
}
