//! CPU and node lists in the syntax Linux and numactl write them.
//!
//! One type, [`IdSet`], holds a set of CPU or node numbers. It parses the
//! kernel's list format (`Documentation/core-api/printk-formats.rst`, `%*pbl`,
//! and `bitmap_parselist()` in `lib/bitmap-str.c`): comma-separated items, each
//! `N`, `N-M`, or `N-M:used/group` (in every group of `group` ids starting at
//! `N`, the first `used`). `all` is accepted where the caller supplies the
//! universe. It prints the compressed form the kernel writes (`0-3,8-11`), so
//! lists look the same everywhere in the tool, and in the `%d %d ...` form of
//! `numactl --hardware`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// Largest id accepted in a list: far beyond any real machine (the kernel's
/// NR_CPUS tops out at 8192), small enough that a typo such as `0-99999999`
/// fails instead of allocating gigabytes.
pub const MAX_ID: u32 = 1 << 16;

/// A list that could not be parsed, naming the offending token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad list {input:?}: token {token:?}: {reason}")]
pub struct ListError {
    pub input: String,
    pub token: String,
    pub reason: String,
}

/// An ordered set of CPU or node ids.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdSet(BTreeSet<u32>);

impl IdSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a list; `all` is refused here (see [`IdSet::parse_in`]).
    pub fn parse(input: &str) -> Result<Self, ListError> {
        let err = |token: &str, reason: &str| ListError {
            input: input.to_string(),
            token: token.to_string(),
            reason: reason.to_string(),
        };
        // Ids are marked in a bitmap (at most MAX_ID + 1 entries) and put in
        // the set once at the end: inserting every id of every item into
        // the BTreeSet made 8 kB of repeated `0-65536,` items take seconds.
        let mut bits: Vec<bool> = Vec::new();
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Ok(Self(BTreeSet::new()));
        }
        for raw in trimmed.split(',') {
            let token = raw.trim();
            if token.is_empty() {
                return Err(err(raw, "empty item"));
            }
            let (range, stride) = match token.split_once(':') {
                Some((r, s)) => (r, Some(s)),
                None => (token, None),
            };
            let num = |s: &str| -> Result<u32, ListError> {
                let v: u64 = s
                    .trim()
                    .parse()
                    .map_err(|_| err(token, "not a non-negative number"))?;
                if v > MAX_ID as u64 {
                    return Err(err(token, &format!("id larger than {MAX_ID}")));
                }
                Ok(v as u32)
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    let v = num(range)?;
                    (v, v)
                }
            };
            if lo > hi {
                return Err(err(token, "range start is above its end"));
            }
            let (used, group) = match stride {
                None => (1, 1),
                Some(s) => {
                    let (u, g) = s
                        .split_once('/')
                        .ok_or_else(|| err(token, "stride must be used/group"))?;
                    let (u, g) = (num(u)?, num(g)?);
                    if u == 0 || g == 0 || u > g {
                        return Err(err(token, "stride needs 0 < used <= group"));
                    }
                    (u, g)
                }
            };
            if bits.len() <= hi as usize {
                bits.resize(hi as usize + 1, false);
            }
            let mut start = lo;
            while start <= hi {
                for id in start..start.saturating_add(used).min(hi.saturating_add(1)) {
                    bits[id as usize] = true;
                }
                match start.checked_add(group) {
                    Some(next) => start = next,
                    None => break,
                }
            }
        }
        let set = (0u32..)
            .zip(bits)
            .filter_map(|(id, on)| on.then_some(id))
            .collect();
        Ok(Self(set))
    }

    /// Parses a list where `all` means `universe`, and checks every id is in
    /// `universe`; `what` names the kind of id in the error ("CPU", "node").
    pub fn parse_in(input: &str, universe: &IdSet, what: &str) -> Result<Self, ListError> {
        if input.trim() == "all" {
            return Ok(universe.clone());
        }
        let set = Self::parse(input)?;
        if set.is_empty() {
            return Err(ListError {
                input: input.to_string(),
                token: input.to_string(),
                reason: format!("no {what} selected"),
            });
        }
        if let Some(bad) = set.iter().find(|id| !universe.contains(*id)) {
            return Err(ListError {
                input: input.to_string(),
                token: bad.to_string(),
                reason: format!("{what} {bad} does not exist here (have {universe})"),
            });
        }
        Ok(set)
    }

    pub fn insert(&mut self, id: u32) -> bool {
        self.0.insert(id)
    }
    pub fn contains(&self, id: u32) -> bool {
        self.0.contains(&id)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
    pub fn first(&self) -> Option<u32> {
        self.0.first().copied()
    }
    pub fn last(&self) -> Option<u32> {
        self.0.last().copied()
    }
    pub fn union(&self, other: &IdSet) -> IdSet {
        IdSet(self.0.union(&other.0).copied().collect())
    }
    pub fn intersection(&self, other: &IdSet) -> IdSet {
        IdSet(self.0.intersection(&other.0).copied().collect())
    }
    pub fn difference(&self, other: &IdSet) -> IdSet {
        IdSet(self.0.difference(&other.0).copied().collect())
    }
    pub fn is_subset(&self, other: &IdSet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// `numactl --hardware` style: each id preceded by a space (`" 0 1 2"`).
    pub fn spaced(&self) -> String {
        self.iter().map(|i| format!(" {i}")).collect()
    }
}

impl FromIterator<u32> for IdSet {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        IdSet(iter.into_iter().collect())
    }
}

impl fmt::Display for IdSet {
    /// The kernel's compressed list: `0-3,8,10-11`; empty prints nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi = it.next().unwrap_or(hi);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdSet({self})")
    }
}

impl FromStr for IdSet {
    type Err = ListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for IdSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for IdSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IdSet::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IdSet {
        IdSet::parse(s).unwrap()
    }

    #[test]
    fn parses_kernel_forms() {
        assert_eq!(p("0-3,8-11").to_string(), "0-3,8-11");
        assert_eq!(p("5").to_string(), "5");
        assert_eq!(p(" 0 , 2 ,4\n").to_string(), "0,2,4");
        assert_eq!(p("").len(), 0);
        assert_eq!(p("\n").len(), 0);
        assert_eq!(p("3,1,2").to_string(), "1-3");
        assert_eq!(p("0-1").to_string(), "0-1");
    }

    #[test]
    fn parses_strided_groups_like_bitmap_parselist() {
        // kernel docs: "0-1023:2/256" -> 0,1,256,257,512,513,768,769
        assert_eq!(p("0-1023:2/256").to_string(), "0-1,256-257,512-513,768-769");
        assert_eq!(p("0-7:1/2").to_string(), "0,2,4,6");
    }

    #[test]
    fn bad_lists_name_the_token() {
        for (input, token) in [
            ("0-x", "0-x"),
            ("3-1", "3-1"),
            ("0,,2", ""),
            ("-1", "-1"),
            ("0-7:0/2", "0-7:0/2"),
            ("0-7:3", "0-7:3"),
            ("99999999", "99999999"),
        ] {
            let e = IdSet::parse(input).unwrap_err();
            assert_eq!(e.token, token, "input {input}");
            assert!(e.to_string().contains(input), "{e}");
        }
    }

    /// Found by tests/prop_lists.rs: `0-65536,` repeated (8 kB) took 3.4 s
    /// in release (each item inserted 65537 ids into the BTreeSet again).
    #[test]
    fn idset_repeated_full_ranges_parse_quickly() {
        let input = "0-65536,".repeat(250) + "7";
        let t = std::time::Instant::now();
        assert_eq!(p(&input).len(), MAX_ID as usize + 1);
        // Generous for a loaded machine: ~0.1 s now, seconds before.
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn parse_in_checks_universe_and_all() {
        let u = p("0-3");
        assert_eq!(IdSet::parse_in("all", &u, "node").unwrap(), u);
        assert_eq!(IdSet::parse_in("1,3", &u, "node").unwrap(), p("1,3"));
        let e = IdSet::parse_in("1,7", &u, "node").unwrap_err();
        assert_eq!(e.token, "7");
        assert!(e.reason.contains("node 7 does not exist"), "{e}");
        assert!(IdSet::parse_in("", &u, "CPU").is_err());
    }

    #[test]
    fn spaced_form_matches_numactl() {
        assert_eq!(p("0-2,5").spaced(), " 0 1 2 5");
        assert_eq!(IdSet::new().spaced(), "");
    }

    #[test]
    fn json_round_trip() {
        let s = p("0-3,9");
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, "\"0-3,9\"");
        assert_eq!(serde_json::from_str::<IdSet>(&j).unwrap(), s);
    }
}
