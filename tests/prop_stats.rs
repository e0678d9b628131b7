//! Property tests for the comparison statistics ([`stats::holm`],
//! [`stats::hedges_g`], [`stats::geometric_mean`]) against their
//! definitions.
//!
//! Holm is checked against a naive model of the step-down rule and against
//! the bounds every correction must keep: it rejects at least what plain
//! Bonferroni (p <= alpha/m) rejects, at most what the uncorrected test
//! (p <= alpha) rejects, and a rejected p rejects every smaller one.

mod prop_common;

use numalab::stats::{self, Sample};
use prop_common::config;
use proptest::prelude::*;

/// Holm by the book: walk the sorted p-values, reject while
/// p_(i) <= alpha/(m-i+1) (i 1-based), map back to input order.
fn naive_holm(p: &[f64], alpha: f64) -> Vec<bool> {
    let m = p.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|a, b| p[*a].partial_cmp(&p[*b]).unwrap());
    let mut out = vec![false; m];
    for (i, &j) in idx.iter().enumerate() {
        if p[j] <= alpha / (m - i) as f64 {
            out[j] = true;
        } else {
            break;
        }
    }
    out
}

proptest! {
    #![proptest_config(config("prop_stats"))]

    #[test]
    fn holm_keeps_its_bounds(p in prop::collection::vec(0.0f64..=1.0, 0..40)) {
        let alpha = 0.05;
        let got = stats::holm(&p, alpha);
        prop_assert_eq!(&got, &naive_holm(&p, alpha));
        let m = p.len() as f64;
        for (i, &r) in got.iter().enumerate() {
            if p[i] <= alpha / m {
                prop_assert!(r, "Bonferroni rejects {} but Holm does not", p[i]);
            }
            if r {
                prop_assert!(p[i] <= alpha);
                for (j, &q) in p.iter().enumerate() {
                    if q <= p[i] {
                        prop_assert!(got[j], "{} rejected but smaller {} not", p[i], q);
                    }
                }
            }
        }
    }

    #[test]
    fn hedges_g_is_antisymmetric_and_scale_free(
        a in prop::collection::vec(-1e3f64..1e3, 2..20),
        b in prop::collection::vec(-1e3f64..1e3, 2..20),
        k in 0.01f64..100.0,
    ) {
        let (sa, sb) = (Sample::new(a.clone()).unwrap(), Sample::new(b.clone()).unwrap());
        let Some(g) = stats::hedges_g(&sa, &sb) else { return Ok(()) };
        let back = stats::hedges_g(&sb, &sa).unwrap();
        prop_assert!((g + back).abs() <= 1e-9 * g.abs().max(1.0));
        let scale = |v: &[f64]| Sample::new(v.iter().map(|x| x * k).collect()).unwrap();
        let scaled = stats::hedges_g(&scale(&a), &scale(&b)).unwrap();
        prop_assert!((g - scaled).abs() <= 1e-6 * g.abs().max(1.0), "{g} vs {scaled}");
    }

    #[test]
    fn geometric_mean_lies_between_min_and_max(v in prop::collection::vec(1e-3f64..1e3, 1..30)) {
        let g = stats::geometric_mean(&v).unwrap();
        let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
        prop_assert!(g >= lo * (1.0 - 1e-12) && g <= hi * (1.0 + 1e-12));
        // Of reciprocals: the reciprocal (ratios OTHER/BASE vs BASE/OTHER).
        let inv: Vec<f64> = v.iter().map(|x| 1.0 / x).collect();
        prop_assert!((stats::geometric_mean(&inv).unwrap() * g - 1.0).abs() < 1e-9);
    }
}
