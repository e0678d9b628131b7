//! Saved *text* traces → [`Event`]s, so `numalab trace --from FILE` can
//! analyse traces recorded on another machine (or kernel) without its tracefs.
//!
//! Accepted, detected line by line (one file may mix them):
//! - `trace-cmd report` output: the default, `-l` (latency columns: the CPU
//!   glued to the flags, `1d..2.`), `-t` (ns timestamps), `-N` (the kernel's
//!   print formats), `-R` (raw fields, numeric `prev_state`), `--ts-diff`
//!   (`(+34)` after the time), and the `instance: ` prefix of `-B` buffers.
//!   sched_switch comes in libtraceevent's plugin form
//!   (`prev:pid [prio] S ==> next:pid [prio]`) or the kernel's
//!   (`prev_comm=.. prev_pid=.. .. ==> next_comm=..`); both are read.
//! - `perf script` output of the `sched:` tracepoints (`comm tid`,
//!   `comm pid/tid`, `--ns`).
//! - tracefs `trace` / `trace_pipe` text (flags column, `(tgid)` column).
//!
//! Every event line has the shape `PREFIX [CPU] FLAGS? SECS.FRACTION: EVENT:
//! FIELDS`. The parser anchors on the first `SECS.FRACTION: NAME:` (the
//! prefix holds a comm, which may contain anything), takes the CPU from the
//! token(s) just before the time, and reads the fields by their known key
//! names in the kernel's print order, so comms with spaces, dashes, colons
//! or `=` are fine. No regex: plain string scanning, about 10^6 lines a
//! second or better.
//!
//! Events other than the seven numalab decodes are counted and skipped, as
//! are non-event lines (headers, `cpus=2`, `CPU 0 is empty`, `# ...`). One
//! of the seven that cannot be decoded is an error naming file, line, what
//! is wrong and the text: a silently skipped switch would corrupt residency.

use super::event::{self, Event, Kind};
use std::path::Path;
use std::str::FromStr;

/// Which tool wrote the text (informational; parsing does not depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    TraceCmd,
    PerfScript,
    Tracefs,
    /// Event lines of more than one kind.
    Mixed,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::TraceCmd => "trace-cmd report",
            Format::PerfScript => "perf script",
            Format::Tracefs => "tracefs trace",
            Format::Mixed => "mixed text",
        }
    }
}

/// A parsed text trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Decoded events, sorted by time ([`event::sort`]).
    pub events: Vec<Event>,
    /// Lines read, of any kind.
    pub lines: u64,
    /// Event lines of other events (sched_wakeup, irq:..., ...), skipped.
    pub other_events: u64,
    pub format: Format,
}

#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// A line that is one of the decoded events but cannot be read.
    #[error("{path}:{line}: {msg}: {text}")]
    Line {
        path: String,
        line: u64,
        msg: String,
        text: String,
    },
    #[error(
        "no sched events found in {path} ({lines} lines, {other_events} other event lines); \
         expected `trace-cmd report`, `perf script` or tracefs `trace` text with \
         sched_switch, sched_migrate_task, sched_process_fork/exit or sched_*_numa events"
    )]
    NoEvents {
        path: String,
        lines: u64,
        other_events: u64,
    },
    /// Unreadable, not a regular file, or too large (bounded read).
    #[error(transparent)]
    Read(#[from] crate::input::InputError),
}

/// Reads and parses a text trace file. Invalid UTF-8 (comms are raw bytes)
/// is replaced, not an error.
pub fn parse_file(path: &Path) -> Result<Parsed, TextError> {
    let shown = path.display().to_string();
    let bytes = crate::input::read_input(path, "trace", crate::input::STREAM_LIMIT)?;
    parse(&String::from_utf8_lossy(&bytes), &shown)
}

/// Parses a text trace; `path` only names it in errors.
pub fn parse(text: &str, path: &str) -> Result<Parsed, TextError> {
    let mut events = Vec::new();
    let mut lines = 0u64;
    let mut other_events = 0u64;
    let mut styles = [0u64; 4];
    let mut tracer_header = false;
    for raw in text.lines() {
        lines += 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            tracer_header |= line.starts_with("# tracer:");
            continue;
        }
        let err = |msg: String| TextError::Line {
            path: path.to_string(),
            line: lines,
            msg,
            text: shorten(line),
        };
        let Some(h) = header(line) else {
            if let Some(name) = mentions_event(line) {
                return Err(err(format!(
                    "{name}: unrecognised layout, expected `[CPU] SECONDS.FRACTION: {name}: FIELDS`"
                )));
            }
            continue;
        };
        let decoded = match h.system {
            Some(s) if s != "sched" => None,
            _ => decode(h.name, h.body),
        };
        let Some(kind) = decoded else {
            other_events += 1;
            continue;
        };
        let in_event = |m: String| err(format!("{}: {m}", h.name));
        let kind = kind.map_err(in_event)?;
        let ts_ns = ts_ns(h.ts).map_err(in_event)?;
        let cpu = h.cpu.ok_or_else(|| {
            in_event("no CPU column like `[002]` (perf script: keep the `cpu` field)".into())
        })?;
        styles[h.style as usize] += 1;
        events.push(Event { ts_ns, cpu, kind });
    }
    if events.is_empty() {
        return Err(TextError::NoEvents {
            path: path.to_string(),
            lines,
            other_events,
        });
    }
    event::sort(&mut events);
    Ok(Parsed {
        events,
        lines,
        other_events,
        format: format_of(styles, tracer_header),
    })
}

/// How a line's prefix looked, as far as it tells the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// `[CPU]` after `comm-pid`: trace-cmd, or tracefs without irq-info.
    Plain = 0,
    /// `comm pid [CPU]` or a `sys:event` name.
    Perf = 1,
    /// `[CPU] d..2.`: tracefs.
    Tracefs = 2,
    /// `1d..2.`: trace-cmd report -l.
    TraceCmdLatency = 3,
}

fn format_of(styles: [u64; 4], tracer_header: bool) -> Format {
    let plain = styles[Style::Plain as usize] > 0;
    let found = [
        (
            Format::TraceCmd,
            styles[Style::TraceCmdLatency as usize] > 0 || plain && !tracer_header,
        ),
        (Format::PerfScript, styles[Style::Perf as usize] > 0),
        (
            Format::Tracefs,
            styles[Style::Tracefs as usize] > 0 || plain && tracer_header,
        ),
    ];
    let mut kinds = found.iter().filter(|(_, seen)| *seen).map(|(f, _)| *f);
    match (kinds.next(), kinds.next()) {
        (Some(f), None) => f,
        _ => Format::Mixed,
    }
}

/// The parts of an event line.
#[derive(Debug)]
struct Header<'a> {
    cpu: Option<u32>,
    ts: &'a str,
    system: Option<&'a str>,
    name: &'a str,
    body: &'a str,
    style: Style,
}

/// Finds `SECS.FRACTION: [(+DELTA)] [SYS:]NAME:` and the CPU before it.
/// None when the line is not an event line.
///
/// The first such anchor naming one of the decoded events wins, else the
/// first anchor: a comm in the prefix may itself look like an anchor
/// (`1.5: a: b`, set with prctl(PR_SET_NAME)), and taking it silently
/// dropped the real event as an "other" one. A decoded event's anchor
/// (`0: sched_exit:` and longer) cannot fit in a 15-byte comm, so a fake
/// one never wins over the real one.
fn header(line: &str) -> Option<Header<'_>> {
    let mut first = None;
    let mut from = 0;
    while let Some((h, next)) = anchor(line, from) {
        let decoded = h.system.is_none_or(|s| s == "sched") && DECODED.contains(&h.name);
        if decoded {
            return Some(h);
        }
        first.get_or_insert(h);
        from = next;
    }
    first
}

/// The first anchor at or after byte `from`, and where to look for the next.
fn anchor(line: &str, from: usize) -> Option<(Header<'_>, usize)> {
    let b = line.as_bytes();
    let mut from = from;
    while let Some(off) = line[from..].find(": ") {
        let colon = from + off;
        from = colon + 1;
        let start = b[..colon]
            .iter()
            .rposition(|c| !(c.is_ascii_digit() || *c == b'.'))
            .map_or(0, |i| i + 1);
        if start == colon || !b[start].is_ascii_digit() {
            continue;
        }
        if start > 0 && !b[start - 1].is_ascii_whitespace() {
            continue;
        }
        let mut rest = line[colon + 2..].trim_start();
        if rest.starts_with("(+") {
            // trace-cmd report --ts-diff
            let Some(p) = rest.find(')') else { continue };
            rest = rest[p + 1..].trim_start();
        }
        let end = rest.find(' ').unwrap_or(rest.len());
        let Some(full) = rest[..end].strip_suffix(':') else {
            continue;
        };
        let name_chars = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b':' | b'-');
        if full.is_empty() || !full.bytes().all(name_chars) {
            continue;
        }
        let (system, name) = match full.split_once(':') {
            Some((s, n)) => (Some(s), n),
            None => (None, full),
        };
        let (cpu, style) = cpu_column(&line[..start]);
        let h = Header {
            cpu,
            ts: &line[start..colon],
            system,
            name,
            body: rest[end..].trim(),
            style: if system.is_some() { Style::Perf } else { style },
        };
        return Some((h, from));
    }
    None
}

/// The CPU from the text before the timestamp: `... [002]`,
/// `... [002] d..2.` (tracefs) or `... 2d..2.` (trace-cmd -l).
fn cpu_column(prefix: &str) -> (Option<u32>, Style) {
    let mut toks = prefix.split_ascii_whitespace().rev();
    let Some(last) = toks.next() else {
        return (None, Style::Plain);
    };
    if let Some(cpu) = bracketed(last) {
        let perf = toks.next().is_some_and(is_pid_token);
        return (Some(cpu), if perf { Style::Perf } else { Style::Plain });
    }
    let digits = last.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && is_flags(&last[digits..]) {
        return (last[..digits].parse().ok(), Style::TraceCmdLatency);
    }
    if is_flags(last) {
        if let Some(cpu) = toks.next().and_then(bracketed) {
            return (Some(cpu), Style::Tracefs);
        }
    }
    let perf = is_pid_token(last);
    (None, if perf { Style::Perf } else { Style::Plain })
}

/// `[002]` → 2.
fn bracketed(tok: &str) -> Option<u32> {
    let inner = tok.strip_prefix('[')?.strip_suffix(']')?;
    if inner.is_empty() || !inner.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    inner.parse().ok()
}

/// perf's `tid` or `pid/tid` column.
fn is_pid_token(tok: &str) -> bool {
    !tok.is_empty() && tok.bytes().all(|c| c.is_ascii_digit() || c == b'/')
}

/// The irqs-off/need-resched/hardirq/preempt(/migrate) column, `d..2.`.
fn is_flags(tok: &str) -> bool {
    (3..=6).contains(&tok.len()) && tok.bytes().all(|c| c == b'.' || c.is_ascii_alphanumeric())
}

/// The events [`decode`] reads.
const DECODED: [&str; 7] = [
    event::MIGRATE,
    event::SWITCH,
    event::MOVE_NUMA,
    event::SWAP_NUMA,
    event::STICK_NUMA,
    event::FORK,
    event::EXIT,
];

/// For a line without the event-line shape: the decoded event it names as
/// `NAME:`, if any (such a line is malformed rather than something else).
fn mentions_event(line: &str) -> Option<&'static str> {
    DECODED.into_iter().find(|name| {
        line.match_indices(name)
            .any(|(i, _)| line[i + name.len()..].starts_with(':'))
    })
}

/// `1234.567890` → 1234567890000 ns, exactly (the fraction is padded or
/// truncated to 9 digits).
fn ts_ns(ts: &str) -> Result<u64, String> {
    let Some((secs, frac)) = ts.split_once('.') else {
        return Err(format!(
            "timestamp `{ts}` has no fractional part (trace clock not in seconds? \
             record with the default `local` clock)"
        ));
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if !digits(secs) || !digits(frac) {
        return Err(format!("bad timestamp `{ts}`"));
    }
    let ns = (frac.bytes().chain(std::iter::repeat(b'0')).take(9))
        .fold(0u64, |n, c| n * 10 + u64::from(c - b'0'));
    secs.parse::<u64>()
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000))
        .and_then(|s| s.checked_add(ns))
        .ok_or_else(|| format!("timestamp `{ts}` out of range"))
}

/// How a field's value is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    /// `-?[0-9]+`
    Int,
    /// One token (`R+`, `D|K`).
    Word,
    /// Anything, spaces included, up to the next key (a comm).
    Text,
}

use Val::{Int, Text, Word};

type Spec = [(&'static str, Val)];

// The kernel's print formats (include/trace/events/sched.h), in order.
#[rustfmt::skip]
const MIGRATE: &Spec = &[("comm", Text), ("pid", Int), ("prio", Int), ("orig_cpu", Int), ("dest_cpu", Int)];
#[rustfmt::skip]
const SWITCH: &Spec = &[("prev_comm", Text), ("prev_pid", Int), ("prev_prio", Int), ("prev_state", Word),
    ("next_comm", Text), ("next_pid", Int), ("next_prio", Int)];
#[rustfmt::skip]
const MOVE: &Spec = &[("pid", Int), ("tgid", Int), ("ngid", Int), ("src_cpu", Int), ("src_nid", Int),
    ("dst_cpu", Int), ("dst_nid", Int)];
#[rustfmt::skip]
const PAIR: &Spec = &[("src_pid", Int), ("src_tgid", Int), ("src_ngid", Int), ("src_cpu", Int), ("src_nid", Int),
    ("dst_pid", Int), ("dst_tgid", Int), ("dst_ngid", Int), ("dst_cpu", Int), ("dst_nid", Int)];
#[rustfmt::skip]
const FORK: &Spec = &[("comm", Text), ("pid", Int), ("child_comm", Text), ("child_pid", Int)];
/// trace-cmd report -R names the fork fields after the struct.
#[rustfmt::skip]
const FORK_RAW: &Spec = &[("parent_comm", Text), ("parent_pid", Int), ("child_comm", Text), ("child_pid", Int)];
/// Newer kernels append `group_dead=`; trailing fields are allowed.
const EXIT: &Spec = &[("comm", Text), ("pid", Int), ("prio", Int)];

/// Decodes one of the seven events; None for any other name.
fn decode(name: &str, body: &str) -> Option<Result<Kind, String>> {
    Some(match name {
        event::MIGRATE => Fields::read(body, MIGRATE).and_then(|f| {
            Ok(Kind::Migrate {
                pid: f.get("pid")?,
                orig_cpu: f.get("orig_cpu")?,
                dest_cpu: f.get("dest_cpu")?,
            })
        }),
        event::SWITCH => switch(body),
        event::MOVE_NUMA => Fields::read(body, MOVE).and_then(|f| {
            Ok(Kind::MoveNuma {
                pid: f.get("pid")?,
                src_cpu: f.get("src_cpu")?,
                src_nid: f.get("src_nid")?,
                dst_cpu: f.get("dst_cpu")?,
                dst_nid: f.get("dst_nid")?,
            })
        }),
        event::SWAP_NUMA => Fields::read(body, PAIR).and_then(|f| {
            Ok(Kind::SwapNuma {
                src_pid: f.get("src_pid")?,
                src_cpu: f.get("src_cpu")?,
                src_nid: f.get("src_nid")?,
                dst_pid: f.get("dst_pid")?,
                dst_cpu: f.get("dst_cpu")?,
                dst_nid: f.get("dst_nid")?,
            })
        }),
        event::STICK_NUMA => stick(body),
        event::FORK => {
            let spec = if body.starts_with("parent_comm=") {
                FORK_RAW
            } else {
                FORK
            };
            Fields::read(body, spec).and_then(|f| {
                Ok(Kind::Fork {
                    parent_pid: f.get(spec[1].0)?,
                    child_pid: f.get("child_pid")?,
                })
            })
        }
        event::EXIT => Fields::read(body, EXIT).and_then(|f| Ok(Kind::Exit { pid: f.get("pid")? })),
        _ => return None,
    })
}

/// sched_stick_numa: since Linux 5.7 a src/dst pair (dst_pid 0 and dst_cpu
/// -1 when no destination was found); before, the move_numa fields.
fn stick(body: &str) -> Result<Kind, String> {
    let pair = body.starts_with("src_pid=");
    let f = Fields::read(body, if pair { PAIR } else { MOVE })?;
    let pid = if pair { "src_pid" } else { "pid" };
    Ok(Kind::StickNuma {
        pid: f.get(pid)?,
        src_cpu: f.get("src_cpu")?,
        src_nid: f.get("src_nid")?,
        dst_cpu: f.get("dst_cpu")?,
        dst_nid: f.get("dst_nid")?,
    })
}

/// sched_switch in the kernel's format (also trace-cmd -N/-R and perf) or
/// in libtraceevent's plugin format (trace-cmd's default).
fn switch(body: &str) -> Result<Kind, String> {
    if body.starts_with("prev_comm=") {
        let f = Fields::read(body, SWITCH)?;
        return Ok(Kind::Switch {
            prev_pid: f.get("prev_pid")?,
            prev_runnable: runnable(f.value("prev_state")),
            next_pid: f.get("next_pid")?,
        });
    }
    let bad = |what: &str| {
        format!("{what} (expected `prev_comm=...` or `COMM:PID [PRIO] STATE ==> COMM:PID [PRIO]`)")
    };
    let (prev, next) = body.split_once(" ==> ").ok_or_else(|| bad("no `==>`"))?;
    let (prev, state) = prev
        .trim_end()
        .rsplit_once(' ')
        .ok_or_else(|| bad("no prev_state"))?;
    Ok(Kind::Switch {
        prev_pid: comm_pid(prev).ok_or_else(|| bad("no previous `COMM:PID`"))?,
        prev_runnable: runnable(state),
        next_pid: comm_pid(next).ok_or_else(|| bad("no next `COMM:PID`"))?,
    })
}

/// The pid of `COMM:PID [PRIO]...`: the first `:digits` followed by ` [` or
/// the end (comms may contain `:`, as in `kworker/0:1`).
fn comm_pid(s: &str) -> Option<u32> {
    let s = s.trim();
    s.match_indices(':').find_map(|(i, _)| {
        let tail = &s[i + 1..];
        let n = tail.bytes().take_while(u8::is_ascii_digit).count();
        let after = &tail[n..];
        if n > 0 && (after.is_empty() || after.starts_with(" [")) {
            tail[..n].parse().ok()
        } else {
            None
        }
    })
}

/// `prev_state` as letters (`R`, `R+`, `S`, `D|K`, plugin `W`) or, from
/// trace-cmd report -R, the raw number.
fn runnable(state: &str) -> bool {
    match state.parse::<i64>() {
        Ok(raw) => event::prev_state_runnable(raw),
        Err(_) => event::prev_state_letters_runnable(state),
    }
}

/// Field values of one event body, matched against a spec.
struct Fields<'a> {
    spec: &'static Spec,
    vals: [&'a str; 10],
}

impl<'a> Fields<'a> {
    /// Matches `key=value` fields in spec order, separated by a space (or
    /// ` ==> `). A Text value ends where the rest of the spec matches, so a
    /// comm containing ` pid=` cannot shift the fields. Trailing fields
    /// after the spec (e.g. exit's `group_dead=`) are ignored.
    fn read(body: &'a str, spec: &'static Spec) -> Result<Self, String> {
        let mut vals = [""; 10];
        if match_from(body, 0, spec, &mut vals[..spec.len()]) {
            Ok(Fields { spec, vals })
        } else {
            Err(diagnose(body, spec))
        }
    }

    fn value(&self, key: &str) -> &'a str {
        let i = self.spec.iter().position(|(k, _)| *k == key);
        i.map_or("", |i| self.vals[i])
    }

    fn get<T: FromStr>(&self, key: &str) -> Result<T, String> {
        let v = self.value(key);
        v.parse().map_err(|_| format!("`{key}={v}` out of range"))
    }
}

fn match_from<'a>(body: &'a str, pos: usize, spec: &Spec, out: &mut [&'a str]) -> bool {
    let Some(&(key, val)) = spec.first() else {
        return true;
    };
    let rest = &body[pos..];
    if !(rest.starts_with(key) && rest[key.len()..].starts_with('=')) {
        return false;
    }
    let vstart = pos + key.len() + 1;
    if val == Text && spec.len() > 1 {
        let next = spec[1].0;
        let mut from = vstart;
        while let Some(off) = body[from..].find(next) {
            let p = from + off;
            from = p + 1;
            let head = &body[vstart..p];
            let Some(v) = head
                .strip_suffix(" ==> ")
                .or_else(|| head.strip_suffix(' '))
            else {
                continue;
            };
            if match_from(body, p, &spec[1..], &mut out[1..]) {
                out[0] = v;
                return true;
            }
        }
        return false;
    }
    let vend = body[vstart..].find(' ').map_or(body.len(), |o| vstart + o);
    let v = &body[vstart..vend];
    if val == Int && !is_int(v) {
        return false;
    }
    out[0] = v;
    if spec.len() == 1 {
        return true;
    }
    let after = &body[vend..];
    let next = if after.starts_with(" ==> ") {
        vend + 5
    } else if after.starts_with(' ') {
        vend + 1
    } else {
        return false;
    };
    match_from(body, next, &spec[1..], &mut out[1..])
}

fn is_int(v: &str) -> bool {
    let d = v.strip_prefix('-').unwrap_or(v);
    !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
}

/// Why `body` does not match `spec`, for the error message.
fn diagnose(body: &str, spec: &Spec) -> String {
    for &(key, val) in spec {
        let found = body.match_indices(key).find_map(|(i, _)| {
            let at_start = i == 0 || body.as_bytes()[i - 1] == b' ';
            let v = body[i + key.len()..].strip_prefix('=')?;
            at_start.then(|| v.split(' ').next().unwrap_or(""))
        });
        match found {
            None => return format!("missing field `{key}`"),
            Some(v) if val == Int && !is_int(v) => return format!("bad number `{key}={v}`"),
            _ => {}
        }
    }
    let keys: Vec<&str> = spec.iter().map(|(k, _)| *k).collect();
    format!("fields not in the expected order ({})", keys.join(" "))
}

/// The line for an error message, cut to a sane length.
fn shorten(line: &str) -> String {
    const MAX: usize = 300;
    if line.len() <= MAX {
        return line.to_string();
    }
    let mut end = MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
