//! Statistics as pure functions over a [`Sample`], a non-empty list of finite
//! values (the type enforces it, so no function here meets NaN or an empty
//! input).
//!
//! Formulas:
//! - mean x̄ = Σx/n; sample standard deviation s = sqrt(Σ(x-x̄)²/(n-1))
//!   (0 for n = 1). The RFC's table prints this as `stdv`.
//! - 95% confidence interval of the mean: x̄ ± t(0.975, n-1)·s/√n, with the
//!   Student t quantile found by bisection on its CDF, which is the
//!   regularized incomplete beta function I_x(a, b) evaluated with Lentz's
//!   continued fraction (Numerical Recipes, 3rd ed., §6.4; Abramowitz &
//!   Stegun 26.5.8 and 26.7.1).
//! - Welch's unequal-variance t test (Welch 1947) for comparing two rows:
//!   t = (x̄₁-x̄₂)/√(s₁²/n₁+s₂²/n₂), degrees of freedom by Welch–Satterthwaite,
//!   two-sided p = I_{ν/(ν+t²)}(ν/2, 1/2).
//! - Pearson's correlation r = Σ(x-x̄)(y-ȳ)/√(Σ(x-x̄)²Σ(y-ȳ)²).
//! - Coefficient of variation s/x̄, used to flag noisy rows.
//! - Hedges' g effect size of b against a: g = J·(x̄_b−x̄_a)/s_p with the
//!   pooled s_p = √(((n_a−1)s_a²+(n_b−1)s_b²)/(n_a+n_b−2)) and the
//!   small-sample correction J = 1 − 3/(4(n_a+n_b)−9) (Hedges 1981; Hedges &
//!   Olkin 1985, eq. 5.10).
//! - Holm–Bonferroni (Holm 1979) over m p-values at level α: sort them
//!   ascending, reject while p_(i) ≤ α/(m−i+1) (i = 1..m), stop at the first
//!   that is not; the rest are not rejected.
//! - Geometric mean exp(Σ ln x / n) of positive values, for ratios.

use serde::{Deserialize, Serialize};

/// A non-empty sample of finite values.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample(Vec<f64>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    #[error("a sample needs at least one value")]
    Empty,
    #[error("value #{0} is not finite")]
    NotFinite(usize),
}

impl Sample {
    pub fn new(values: Vec<f64>) -> Result<Sample, SampleError> {
        if values.is_empty() {
            return Err(SampleError::Empty);
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(SampleError::NotFinite(i));
        }
        Ok(Sample(values))
    }
    pub fn values(&self) -> &[f64] {
        &self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn mean(&self) -> f64 {
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }
    pub fn min(&self) -> f64 {
        self.0.iter().copied().fold(f64::INFINITY, f64::min)
    }
    pub fn max(&self) -> f64 {
        self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }
    /// Sample standard deviation (n-1); 0 for a single value.
    pub fn stddev(&self) -> f64 {
        let n = self.0.len();
        if n < 2 {
            return 0.0;
        }
        let m = self.mean();
        (self.0.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    }
    /// Coefficient of variation s/x̄ (0 when the mean is 0).
    pub fn cv(&self) -> f64 {
        let m = self.mean();
        if m == 0.0 {
            0.0
        } else {
            self.stddev() / m.abs()
        }
    }
    /// Half-width of the 95% confidence interval of the mean; `None` for n = 1.
    pub fn ci95_half_width(&self) -> Option<f64> {
        let n = self.0.len();
        (n >= 2).then(|| t_quantile(0.975, (n - 1) as f64) * self.stddev() / (n as f64).sqrt())
    }
    pub fn summary(&self) -> Summary {
        Summary {
            n: self.len(),
            mean: self.mean(),
            min: self.min(),
            max: self.max(),
            stddev: self.stddev(),
            ci95: self.ci95_half_width(),
            cv: self.cv(),
        }
    }
}

/// The numbers a report prints for one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub stddev: f64,
    /// Half-width of the 95% CI of the mean.
    pub ci95: Option<f64>,
    pub cv: f64,
}

/// Result of Welch's t test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    pub t: f64,
    pub df: f64,
    pub p_two_sided: f64,
    /// mean(a) - mean(b)
    pub diff: f64,
}

/// Welch's t test of `a` against `b`; `None` when either has one value or
/// both have zero variance.
pub fn welch(a: &Sample, b: &Sample) -> Option<Welch> {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    if na < 2.0 || nb < 2.0 {
        return None;
    }
    let (va, vb) = (a.stddev().powi(2) / na, b.stddev().powi(2) / nb);
    if va + vb == 0.0 {
        return None;
    }
    let diff = a.mean() - b.mean();
    let t = diff / (va + vb).sqrt();
    let df = (va + vb).powi(2) / (va.powi(2) / (na - 1.0) + vb.powi(2) / (nb - 1.0));
    let p = incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    Some(Welch {
        t,
        df,
        p_two_sided: p.clamp(0.0, 1.0),
        diff,
    })
}

/// Hedges' g of `b` against `a` (positive when b's mean is larger); `None`
/// when either has one value or the pooled standard deviation is 0.
pub fn hedges_g(a: &Sample, b: &Sample) -> Option<f64> {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    if na < 2.0 || nb < 2.0 {
        return None;
    }
    let pooled = (((na - 1.0) * a.stddev().powi(2) + (nb - 1.0) * b.stddev().powi(2))
        / (na + nb - 2.0))
        .sqrt();
    if pooled == 0.0 {
        return None;
    }
    let j = 1.0 - 3.0 / (4.0 * (na + nb) - 9.0);
    Some(j * (b.mean() - a.mean()) / pooled)
}

/// Holm's per-test thresholds: the p-value ranked i-th smallest (1-based,
/// ties in input order) gets α/(m−i+1).
pub fn holm_thresholds(pvalues: &[f64], alpha: f64) -> Vec<f64> {
    let m = pvalues.len();
    let mut out = vec![0.0; m];
    for (rank, &i) in holm_order(pvalues).iter().enumerate() {
        out[i] = alpha / (m - rank) as f64;
    }
    out
}

/// Indices of `pvalues` in ascending order (stable; NaN sorts last).
fn holm_order(pvalues: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..pvalues.len()).collect();
    idx.sort_by(|&x, &y| pvalues[x].total_cmp(&pvalues[y]));
    idx
}

/// Holm–Bonferroni step-down: which hypotheses are rejected at family-wise
/// level `alpha`, in input order. A NaN p is never rejected, nor is any p
/// ranked after the first that misses its threshold.
pub fn holm(pvalues: &[f64], alpha: f64) -> Vec<bool> {
    let thr = holm_thresholds(pvalues, alpha);
    let mut out = vec![false; pvalues.len()];
    for i in holm_order(pvalues) {
        if pvalues[i] <= thr[i] {
            out[i] = true;
        } else {
            break;
        }
    }
    out
}

/// Geometric mean of positive values; `None` when empty or any value is not
/// positive and finite.
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !(*v > 0.0 && v.is_finite())) {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// Pearson correlation of paired values; `None` for fewer than 3 pairs or a
/// constant side.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    if n < 3 {
        return None;
    }
    let mx = x[..n].iter().sum::<f64>() / n as f64;
    let my = y[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (dx, dy) = (x[i] - mx, y[i] - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// Pearson's r with its two-sided p-value for "no correlation":
/// t = r·√((n−2)/(1−r²)) has Student's t distribution with n−2 degrees of
/// freedom when the true correlation is 0 (normal data).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Correlation {
    pub r: f64,
    pub n: usize,
    pub p: f64,
}

/// [`pearson`] with its p-value; `None` under 3 pairs or with a constant.
pub fn correlation(x: &[f64], y: &[f64]) -> Option<Correlation> {
    let r = pearson(x, y)?;
    let n = x.len().min(y.len());
    let df = (n - 2) as f64;
    let p = if r.abs() >= 1.0 {
        0.0
    } else {
        let t = r * (df / (1.0 - r * r)).sqrt();
        (2.0 * (1.0 - t_cdf(t.abs(), df))).clamp(0.0, 1.0)
    };
    Some(Correlation { r, n, p })
}

/// CDF of Student's t with `df` degrees of freedom.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `p` quantile of Student's t (0 < p < 1), by bisection on [`t_cdf`].
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (-1e3, 1e3);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation (g = 7, n = 9), accurate to ~1e-15.
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Regularized incomplete beta I_x(a, b).
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// Continued fraction for the incomplete beta (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    // One Lentz update: folds the coefficient `aa` into d and c, returns d·c.
    let mut step = |aa: f64| {
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        d * c
    };
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        h *= step(m * (b - m) * x / ((qam + m2) * (a + m2)));
        let del = step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)));
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correlation_p_values() {
        // x = 1..10, y = pairs swapped: r = 31/33, t = 7.75 with 8 df;
        // two-sided p = 5.484e-5 (Simpson's rule on the t density).
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        let y = [2.0, 1.0, 4.0, 3.0, 6.0, 5.0, 8.0, 7.0, 10.0, 9.0];
        let c = correlation(&x, &y).unwrap();
        assert!((c.r - 31.0 / 33.0).abs() < 1e-12);
        assert!((c.p - 5.484053e-5).abs() < 1e-9, "{c:?}");
        assert_eq!(c.n, 10);
        assert!(correlation(&[1.0, 2.0], &[1.0, 2.0]).is_none());
        assert!(correlation(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_none());
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn sample_rejects_empty_and_nan() {
        assert_eq!(Sample::new(vec![]), Err(SampleError::Empty));
        assert_eq!(
            Sample::new(vec![1.0, f64::NAN]),
            Err(SampleError::NotFinite(1))
        );
    }

    #[test]
    fn moments() {
        let s = Sample::new(vec![2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean(), 5.0);
        assert!(close(s.stddev(), (32.0f64 / 7.0).sqrt(), 1e-12));
        assert_eq!((s.min(), s.max()), (2.0, 9.0));
        assert_eq!(Sample::new(vec![3.0]).unwrap().stddev(), 0.0);
        assert_eq!(Sample::new(vec![3.0]).unwrap().ci95_half_width(), None);
    }

    #[test]
    fn t_quantiles_match_tables() {
        // Standard two-sided 95% critical values.
        for (df, t) in [
            (1.0, 12.7062),
            (2.0, 4.3027),
            (5.0, 2.5706),
            (10.0, 2.2281),
            (30.0, 2.0423),
            (63.0, 1.9983),
            (1000.0, 1.9623),
        ] {
            assert!(
                close(t_quantile(0.975, df), t, 1e-3),
                "df {df}: {}",
                t_quantile(0.975, df)
            );
        }
    }

    #[test]
    fn welch_matches_a_known_example() {
        // Reference values computed independently in Python: t and df from
        // the statistics module, p by Simpson integration of the t density
        // (200000 intervals): t = -2.225512, df = 24.5246, p = 0.0354845.
        let a = Sample::new(vec![
            19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0,
        ])
        .unwrap();
        let b = Sample::new(vec![
            28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7, 23.2, 17.5, 20.6, 18.0,
            23.9, 21.6, 24.3, 20.4, 23.9, 13.3,
        ])
        .unwrap();
        let w = welch(&a, &b).unwrap();
        assert!(close(w.t, -2.225512, 1e-5), "{w:?}");
        assert!(close(w.df, 24.524635, 1e-5), "{w:?}");
        assert!(close(w.p_two_sided, 0.0354845, 1e-6), "{w:?}");
    }

    #[test]
    fn hedges_g_and_welch_by_hand() {
        // a = [1,2,3], b = [4,5,6]: means 2 and 5, s² = 1 each, so the
        // pooled s_p = √((2·1+2·1)/4) = 1 and d = (5−2)/1 = 3;
        // J = 1 − 3/(4·6−9) = 1 − 3/15 = 0.8, g = 2.4.
        let a = Sample::new(vec![1.0, 2.0, 3.0]).unwrap();
        let b = Sample::new(vec![4.0, 5.0, 6.0]).unwrap();
        assert!(close(hedges_g(&a, &b).unwrap(), 2.4, 1e-12));
        assert!(close(hedges_g(&b, &a).unwrap(), -2.4, 1e-12));
        // Welch: t = (2−5)/√(1/3+1/3) = −3/√(2/3) = −3.674235, df =
        // (2/3)²/((1/3)²/2·2) = 4. For 4 df the t CDF is closed-form,
        // F(t) = 1/2 + (3/4)w − (1/4)w³ with w = t/√(4+t²), so two-sided
        // p = 1 − 1.5w + 0.5w³; t² = 13.5, w = √(13.5/17.5) = 0.8783101,
        // p = 1 − 1.3174651 + 0.3387767 = 0.0213116.
        let w = welch(&a, &b).unwrap();
        assert!(close(w.t, -3.674235, 1e-6), "{w:?}");
        assert!(close(w.df, 4.0, 1e-12), "{w:?}");
        assert!(close(w.p_two_sided, 0.0213116, 1e-6), "{w:?}");
        // Unequal sizes: a = [1,3] (s² = 2), b = [2,4,6] (s² = 4):
        // s_p = √((1·2+2·4)/3) = √(10/3) = 1.825742, d = 2/1.825742 =
        // 1.095445, J = 1 − 3/11 = 0.727273, g = 0.796687.
        let a = Sample::new(vec![1.0, 3.0]).unwrap();
        let b = Sample::new(vec![2.0, 4.0, 6.0]).unwrap();
        assert!(close(hedges_g(&a, &b).unwrap(), 0.796687, 1e-6));
        let one = Sample::new(vec![1.0]).unwrap();
        assert_eq!(hedges_g(&one, &b), None);
        let flat = Sample::new(vec![2.0, 2.0]).unwrap();
        assert_eq!(hedges_g(&flat, &flat), None);
    }

    #[test]
    fn holm_worked_example() {
        // m = 4 at α = 0.05, sorted: 0.005 ≤ 0.05/4 = 0.0125 rejected;
        // 0.01 ≤ 0.05/3 = 0.01667 rejected; 0.03 > 0.05/2 = 0.025: stop, so
        // 0.03 and 0.04 (≤ 0.05/1 on its own) are not rejected.
        let p = [0.01, 0.04, 0.03, 0.005];
        assert_eq!(holm(&p, 0.05), [true, false, false, true]);
        let t = holm_thresholds(&p, 0.05);
        let want = [0.05 / 3.0, 0.05, 0.025, 0.0125];
        for (g, w) in t.iter().zip(want) {
            assert!(close(*g, w, 1e-15), "{t:?}");
        }
        // Plain Bonferroni would reject only p ≤ 0.0125; Holm rejects all
        // of [0.01, 0.02, 0.03] (0.01 ≤ 0.0167, 0.02 ≤ 0.025, 0.03 ≤ 0.05).
        assert_eq!(holm(&[0.03, 0.01, 0.02], 0.05), [true, true, true]);
        assert!(holm(&[], 0.05).is_empty());
        assert_eq!(holm(&[f64::NAN, 0.001], 0.05), [false, true]);
    }

    #[test]
    fn geometric_means() {
        // √(2·8) = 4; ∛(1·2·4) = 2.
        assert!(close(geometric_mean(&[2.0, 8.0]).unwrap(), 4.0, 1e-12));
        assert!(close(geometric_mean(&[1.0, 2.0, 4.0]).unwrap(), 2.0, 1e-12));
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(geometric_mean(&[1.0, 0.0]), None);
    }

    #[test]
    fn pearson_extremes() {
        let x = [1.0, 2.0, 3.0, 4.0];
        assert!(close(
            pearson(&x, &[2.0, 4.0, 6.0, 8.0]).unwrap(),
            1.0,
            1e-12
        ));
        assert!(close(
            pearson(&x, &[8.0, 6.0, 4.0, 2.0]).unwrap(),
            -1.0,
            1e-12
        ));
        assert_eq!(pearson(&x, &[1.0, 1.0, 1.0, 1.0]), None);
    }
}
