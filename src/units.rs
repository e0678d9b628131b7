//! Byte sizes as users write them: `4096`, `64K`, `256M`, `1G`, `1GiB`
//! (binary multiples; `KB`/`MB`/`GB` mean the same, as in numactl and dd's
//! traditional reading).

use serde::{Deserialize, Serialize};

/// A byte size, parsed once where it enters (command line, spec file) and
/// carried as a number from there on. Written back in the largest binary
/// unit that holds it exactly (`256M`, `4096`), so specs and records keep
/// reading as users wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        parse_size(s).map(Size)
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
            if b != 0 && b % (1u64 << shift) == 0 {
                return write!(f, "{}{unit}", b >> shift);
            }
        }
        write!(f, "{b}")
    }
}

impl Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Bytes(u64),
        }
        match Either::deserialize(d)? {
            Either::Text(t) => t.parse().map_err(serde::de::Error::custom),
            Either::Bytes(b) => Ok(Size(b)),
        }
    }
}

/// Serde for a [`Size`] kept as a plain byte count (`"size_bytes": 268435456`
/// in probe records), where the record's schema has a number:
/// `#[serde(with = "crate::units::as_bytes")]`.
pub mod as_bytes {
    use super::Size;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Size, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        u64::deserialize(d).map(Size)
    }
}

/// Parses a size; the error names the bad input.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("size {s:?}: expected a number with an optional K, M, G or T suffix")
    })?;
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        other => {
            return Err(format!(
                "size {s:?}: unknown unit {other:?} (use K, M, G or T)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// A size in the largest binary unit that keeps it readable: `256 MiB`.
pub fn fmt_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if (v - v.round()).abs() < 1e-9 {
        format!("{} {}", v.round() as u64, UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2gb"), Ok(2 << 30));
        assert!(parse_size("12Q").unwrap_err().contains("12Q"));
        assert!(parse_size("M").is_err());
        assert_eq!(fmt_size(256 << 20), "256 MiB");
        assert_eq!(fmt_size(1536), "1.5 KiB");
    }

    /// Regression: `--size 12Q` said "use K, M or G" though `1T` parses
    /// (the memory checks' own example, `probe --size 1T`).
    #[test]
    fn size_errors_list_every_unit_that_parses() {
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert!(parse_size("12Q").unwrap_err().contains("K, M, G or T"));
        assert!(parse_size("x").unwrap_err().contains("K, M, G or T"));
    }

    #[test]
    fn size_round_trips_in_its_largest_exact_unit() {
        for (text, shown) in [
            ("256M", "256M"),
            ("1GiB", "1G"),
            ("4096", "4K"),
            ("4097", "4097"),
        ] {
            let s: Size = text.parse().unwrap();
            assert_eq!(s.to_string(), shown);
            assert_eq!(shown.parse::<Size>().unwrap(), s);
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<Size>(&json).unwrap(), s);
        }
        assert_eq!(serde_json::from_str::<Size>("8192").unwrap(), Size(8192));
        assert!(serde_json::from_str::<Size>("\"1Q\"").is_err());
    }
}
