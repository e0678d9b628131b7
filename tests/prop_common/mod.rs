//! Shared support for the property tests (`tests/prop_*.rs`): the run
//! length, and structure-aware mutations of real inputs.
//!
//! Run length: `NUMALAB_PROPTEST_CASES` cases per property, by default
//! [`DEFAULT_CASES`] (1024 in release builds, 256 in debug builds: well
//! under a second per property either way, a few seconds per file). A long
//! run, with overflow checks as in debug builds (most bugs these tests
//! found were arithmetic overflows, which release builds wrap silently):
//! `NUMALAB_PROPTEST_CASES=100000 CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
//! cargo test --release --test 'prop_*'`.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};

/// Cases per property unless `NUMALAB_PROPTEST_CASES` says otherwise.
pub const DEFAULT_CASES: u32 = if cfg!(debug_assertions) { 256 } else { 1024 };

/// Cases per property: `NUMALAB_PROPTEST_CASES`, else [`DEFAULT_CASES`],
/// scaled by `per_mille` (for properties whose cases are expensive).
pub fn cases_scaled(per_mille: u32) -> u32 {
    let n = std::env::var("NUMALAB_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(DEFAULT_CASES);
    (n as u64 * per_mille as u64 / 1000).max(1) as u32
}

/// The configuration every property of test file `name` uses: the case
/// count above, failures persisted in `proptest-regressions/NAME.txt`
/// (kept in git, replayed first on every run), shrinking bounded so a
/// failure is reported in seconds.
pub fn config(name: &str) -> Config {
    config_scaled(name, 1000)
}

/// [`config`] with the case count scaled by `per_mille`.
pub fn config_scaled(name: &str, per_mille: u32) -> Config {
    let path: &'static str = Box::leak(format!("proptest-regressions/{name}.txt").into_boxed_str());
    Config {
        cases: cases_scaled(per_mille),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(path))),
        max_shrink_time: 20_000,
        ..Config::default()
    }
}

/// A runner with [`config_scaled`], for properties that need set-up outside
/// the `proptest!` macro (a fixture tree copied once).
pub fn runner(name: &str, per_mille: u32) -> TestRunner {
    TestRunner::new(config_scaled(name, per_mille))
}

/// Numbers that break naive parsers: overflow edges, negatives, empty.
pub const NASTY_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "+1",
    "1.5",
    "",
    "127",
    "128",
    "255",
    "256",
    "32767",
    "65535",
    "65536",
    "65537",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18014398509481984",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999",
    "0x10",
    "1e9",
];

/// Short strings that mean something to one parser or another.
pub const NASTY_TOKENS: &[&str] = &[
    "\n", " ", "\t", ":", ";", "=", ",", "-", "/", ".", "[", "]", "(", ")", "#", "==>", ": ",
    "\u{0}", "\u{fffd}", "é", "all", "kB", "field:", "offset:", "size:", "node=", "N0=",
];

/// One edit of an input.
#[derive(Debug, Clone)]
pub enum Edit {
    /// Cut the input at this byte.
    Truncate(prop::sample::Index),
    /// Replace one byte.
    Flip(prop::sample::Index, u8),
    /// Replace one decimal number by a nasty one.
    Number(prop::sample::Index, prop::sample::Index),
    /// Insert a token at a byte position.
    Insert(prop::sample::Index, String),
    /// Repeat one line.
    DupLine(prop::sample::Index, u8),
    /// Drop one line.
    DelLine(prop::sample::Index),
    /// Exchange two lines.
    SwapLines(prop::sample::Index, prop::sample::Index),
    /// Drop one whitespace-separated word (a missing field).
    DelWord(prop::sample::Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    let token = prop_oneof![
        prop::sample::select(NASTY_TOKENS).prop_map(str::to_string),
        prop::sample::select(NASTY_NUMBERS).prop_map(str::to_string),
        ".{0,8}",
    ];
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Edit::Truncate),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(i, n)| Edit::Number(i, n)),
        (any::<prop::sample::Index>(), token).prop_map(|(i, t)| Edit::Insert(i, t)),
        (any::<prop::sample::Index>(), 1u8..8).prop_map(|(i, n)| Edit::DupLine(i, n)),
        any::<prop::sample::Index>().prop_map(Edit::DelLine),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(a, b)| Edit::SwapLines(a, b)),
        any::<prop::sample::Index>().prop_map(Edit::DelWord),
    ]
}

/// 1 to 4 edits.
pub fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit(), 1..=4)
}

/// Byte ranges of lines, each with its newline.
fn line_spans(b: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'\n' {
            spans.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < b.len() {
        spans.push((start, b.len()));
    }
    spans
}

/// Spans of `pred` runs.
fn runs(b: &[u8], pred: impl Fn(u8) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if pred(b[i]) {
            let s = i;
            while i < b.len() && pred(b[i]) {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

/// Applies edits to bytes (binary inputs use this too).
pub fn apply_bytes(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for e in edits {
        match e {
            Edit::Truncate(i) => {
                let at = i.index(b.len() + 1);
                b.truncate(at);
            }
            Edit::Flip(i, v) => {
                if !b.is_empty() {
                    let at = i.index(b.len());
                    b[at] = *v;
                }
            }
            Edit::Number(i, n) => {
                let nums = runs(&b, |c| c.is_ascii_digit());
                if !nums.is_empty() {
                    let (s, e) = nums[i.index(nums.len())];
                    let new = *n.get(NASTY_NUMBERS);
                    b.splice(s..e, new.bytes());
                }
            }
            Edit::Insert(i, t) => {
                let at = i.index(b.len() + 1);
                b.splice(at..at, t.bytes());
            }
            Edit::DupLine(i, n) => {
                let lines = line_spans(&b);
                if !lines.is_empty() {
                    let (s, e) = lines[i.index(lines.len())];
                    let mut line = b[s..e].to_vec();
                    if line.last() != Some(&b'\n') {
                        line.push(b'\n');
                    }
                    let copies: Vec<u8> = line.repeat(*n as usize);
                    b.splice(s..s, copies);
                }
            }
            Edit::DelLine(i) => {
                let lines = line_spans(&b);
                if !lines.is_empty() {
                    let (s, e) = lines[i.index(lines.len())];
                    b.drain(s..e);
                }
            }
            Edit::SwapLines(x, y) => {
                let lines = line_spans(&b);
                if lines.len() >= 2 {
                    let (a, c) = (x.index(lines.len()), y.index(lines.len()));
                    let (a, c) = (a.min(c), a.max(c));
                    if a != c {
                        let mut text: Vec<Vec<u8>> =
                            lines.iter().map(|&(s, e)| b[s..e].to_vec()).collect();
                        text.swap(a, c);
                        b = text.concat();
                    }
                }
            }
            Edit::DelWord(i) => {
                let words = runs(&b, |c| !c.is_ascii_whitespace());
                if !words.is_empty() {
                    let (s, e) = words[i.index(words.len())];
                    b.drain(s..e);
                }
            }
        }
    }
    b
}

/// Applies edits to a text; invalid UTF-8 from a flipped byte becomes U+FFFD
/// (what the tool's readers do with raw bytes).
pub fn apply(seed: &str, edits: &[Edit]) -> String {
    String::from_utf8_lossy(&apply_bytes(seed.as_bytes(), edits)).into_owned()
}

/// Arbitrary text biased towards the characters parsers split on.
pub fn noisy_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9a-z:;=,. /\\[\\]()#>\\-\t\n]{0,200}",
        prop::collection::vec(
            prop_oneof![
                prop::sample::select(NASTY_TOKENS).prop_map(str::to_string),
                prop::sample::select(NASTY_NUMBERS).prop_map(str::to_string),
                "[a-z_]{1,12}",
            ],
            0..40
        )
        .prop_map(|v| v.concat()),
    ]
}

/// Runs `f` and fails when it takes longer than `limit`: a parser must not
/// spend time the input does not justify.
pub fn within<T>(limit: std::time::Duration, what: &str, f: impl FnOnce() -> T) -> T {
    let t = std::time::Instant::now();
    let out = f();
    let took = t.elapsed();
    assert!(took <= limit, "{what} took {took:?} (limit {limit:?})");
    out
}
