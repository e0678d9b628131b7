//! `numalab sim fit`: a hardware profile fitted from a machine's own pinned
//! rows, so that `run --backend sim --profile` predicts the rest of the
//! matrix for that machine.
//!
//! What is fitted, and why only that: a pinned row's time per access on
//! the CPU (the timed loop's run time over its accesses, so waiting behind
//! the load is left to the model) is, in the profile's cache model
//! ([`Profile::access_ns`]), linear in the unknowns:
//!
//! ```text
//! t / smt = cpu_ns + exposed * cache(ws) + exposed * miss(ws) * sum_d share_d * dram_d
//! ```
//!
//! with `cache(ws)` the L2 and LLC hits' latency, `miss(ws)` the share of
//! accesses that go to DRAM for a buffer of `ws` bytes, `share_d` the share
//! of the sample's memory at SLIT distance d from the CPU it ran on (read
//! from the record's pages per node and time per node, not from the row's
//! labels), and `smt` the slow-down of sharing a core with a busy sibling
//! for the share of time one is busy. So a weighted least-squares fit over
//! the rows' means (weights from their standard errors) gives `cpu_ns` and
//! one DRAM latency per distance measured, with standard errors. One probe
//! size cannot tell `cpu_ns` from the local latency (both add to every
//! row), so the local latency is fitted only from rows of two sizes or
//! more and kept from the base profile otherwise. The machine's spread
//! (`noise.sample_cv`) is the root mean square of the rows' coefficients
//! of variation. Cache sizes and latencies, `exposed`, `smt_share` and the
//! kernel's costs are the base profile's (the probe's time does not
//! separate them); the model has no bandwidth term (the probe is latency
//! bound), so none is fitted.
//!
//! Pure: observations in, a [`Fit`] (the profile, each parameter with its
//! error, each row's residual) or the reason there is none out.

use super::profile::Profile;
use crate::stats::Sample;
use crate::topology::Relation;
use std::collections::BTreeMap;

/// A row's mean is a DRAM-distance share only above this.
const SHARE_MIN: f64 = 0.01;

/// One pinned row of a run, as the fit reads it.
#[derive(Debug, Clone)]
pub struct Observation {
    /// How the output names the row (run and row).
    pub label: String,
    /// The probe's buffer, bytes.
    pub ws: u64,
    /// Per sample: nanoseconds on a CPU per access in the timed loop.
    pub ns_per_access: Sample,
    /// Mean share of the samples' memory at each SLIT distance from the
    /// CPU (10: local); sums to 1.
    pub dist_share: BTreeMap<u32, f64>,
    /// The row's time per access on a CPU over the model's
    /// ([`model_ns`]) in the simulator itself, without the machine's noise:
    /// what sharing a core with the load's busy SMT siblings costs under
    /// this load's shape, which no closed form gives (the staggered load
    /// puts a sibling's busy part where the probe's own CPU is free).
    /// Set by the caller ([`speed_factor`] from simulated samples); 1 when
    /// nothing slows the probe.
    pub speed_factor: f64,
    /// The timed loop's moves per access: within an LLC (an L2 refill),
    /// and to another LLC (both caches refilled from DRAM).
    pub llc_moves: f64,
    pub node_moves: f64,
}

/// A profile value after the fit.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Param {
    pub value: f64,
    /// Standard error, for fitted values; `None`: kept from the base.
    pub se: Option<f64>,
}

/// One row: measured against the fitted model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RowFit {
    pub label: String,
    pub n: usize,
    /// Mean on-CPU ns per access and its 95% half-width.
    pub measured: f64,
    pub ci95: Option<f64>,
    pub predicted: f64,
    /// (predicted - measured) / measured, %.
    pub error_pct: f64,
    pub dist_share: BTreeMap<u32, f64>,
}

/// A DRAM latency at one distance, with its ratio to local.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Remote {
    pub distance: u32,
    pub ns: Param,
    pub ratio: f64,
    pub ratio_se: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Fit {
    pub profile: Profile,
    pub cpu_ns: Param,
    pub local_ns: Param,
    pub remote: Vec<Remote>,
    pub sample_cv: f64,
    pub rows: Vec<RowFit>,
    /// chi-square per degree of freedom of the rows about the fit, when
    /// there are more rows than unknowns; the errors are scaled up by its
    /// root when it is above 1.
    pub chi2_dof: Option<f64>,
    pub notes: Vec<String>,
}

/// The model's time per access for `o`'s row at a mean DRAM latency
/// `dram`, before SMT: the cache model's access time and the refills of
/// the moves the row made, per access. Each move is taken to pay its whole
/// refill ([`Profile::refill_ns`]), which the engine charges only to a
/// stay long enough to refill the caches ([`crate::sim::cold`]): a pinned
/// row's moves are far enough apart for that, and the model's own factor
/// per row ([`Observation::speed_factor`]) carries what is not.
fn model_ns(p: &Profile, o: &Observation, dram: f64) -> f64 {
    p.access_ns(o.ws, dram)
        + o.llc_moves * p.refill_ns(Relation::SameLlc, o.ws, dram)
        + o.node_moves * p.refill_ns(Relation::SameNode, o.ws, dram)
}

/// The model for `o` as `cpu_ns + hits + dram_share * dram`: the part the
/// fit does not solve for (cache hits, refills' fixed part) and the
/// weight of the mean DRAM latency, read off the model itself at two
/// latencies (it is linear above the LLC's latency), so the fit and the
/// engine never differ.
fn cache_terms(p: &Profile, o: &Observation) -> (f64, f64) {
    let zero = Profile {
        memory: super::profile::Memory {
            cpu_ns: 0.0,
            ..p.memory.clone()
        },
        ..p.clone()
    };
    let (d1, d2) = (1000.0, 2000.0);
    let (m1, m2) = (model_ns(&zero, o, d1), model_ns(&zero, o, d2));
    let slope = (m2 - m1) / (d2 - d1);
    (m1 - slope * d1, slope)
}

/// [`Observation::speed_factor`] from the simulator's own samples of the
/// row (`sim`: each sample's on-CPU ns per access, and the observation it
/// makes), under `p`: their mean time over the model's.
pub fn speed_factor(p: &Profile, sim: &[(f64, Observation)]) -> Option<f64> {
    let ratios: Vec<f64> = sim
        .iter()
        .map(|(t, o)| {
            let dram = mean_dram(p, o);
            t / model_ns(p, o, dram)
        })
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64)
}

/// The mean DRAM latency `o`'s memory is at, under `p`.
fn mean_dram(p: &Profile, o: &Observation) -> f64 {
    o.dist_share
        .iter()
        .map(|(d, sh)| sh * p.dram_ns(*d))
        .sum::<f64>()
        / o.dist_share.values().sum::<f64>().max(f64::MIN_POSITIVE)
}

/// Fits `obs` on top of `base`; the profile is named `name`, its sources
/// say `origin`. An error says why nothing could be fitted.
pub fn fit(base: &Profile, obs: &[Observation], name: &str, origin: &str) -> Result<Fit, String> {
    let obs: Vec<&Observation> = obs.iter().collect();
    if obs.is_empty() {
        return Err(
            "no pinned row to fit: the run(s) need rows with the CPU bound to a node \
                    (CPU A or B, not F) and two samples or more each"
                .into(),
        );
    }
    if !obs
        .iter()
        .any(|o| o.dist_share.get(&10).copied().unwrap_or(0.0) >= 0.5)
    {
        return Err(
            "no pinned row has its memory on its CPU's node (local): the fit needs \
                    one (e.g. Mem A with CPU A) to measure remote memory against"
                .into(),
        );
    }
    let terms: Vec<(f64, f64)> = obs.iter().map(|o| cache_terms(base, o)).collect();
    if obs
        .iter()
        .all(|o| base.access_ns(o.ws, 2000.0) - base.access_ns(o.ws, 1000.0) <= 1e-9)
    {
        let ws = obs.iter().map(|o| o.ws).max().unwrap_or(0);
        return Err(format!(
            "the probe's buffer ({}) fits in the caches (LLC {}): its time does not depend \
             on where memory is, so no latency can be fitted; run with a --size several \
             times the LLC",
            crate::units::fmt_size(ws),
            crate::units::fmt_size(base.caches.llc_bytes)
        ));
    }
    // Distances measured: those with a share somewhere, local first.
    let mut dists: Vec<u32> = obs
        .iter()
        .flat_map(|o| o.dist_share.iter())
        .filter(|(_, s)| **s > SHARE_MIN)
        .map(|(d, _)| *d)
        .collect();
    dists.sort_unstable();
    dists.dedup();
    // Local latency apart from cpu_ns: two buffer sizes with different
    // DRAM shares among the rows with local memory.
    let mut local_miss: Vec<f64> = obs
        .iter()
        .zip(&terms)
        .filter(|(o, _)| o.dist_share.get(&10).copied().unwrap_or(0.0) > SHARE_MIN)
        .map(|(_, t)| t.1)
        .collect();
    local_miss.sort_by(f64::total_cmp);
    let fit_local = local_miss
        .last()
        .zip(local_miss.first())
        .is_some_and(|(hi, lo)| hi - lo > 0.02 * hi);
    for o in &obs {
        if o.ns_per_access.len() < 2 {
            return Err(format!(
                "{}: one sample; the fit needs two or more a row",
                o.label
            ));
        }
    }
    // Unknowns: cpu_ns, then the DRAM latency at each distance fitted.
    let mut cols: Vec<Col> = vec![Col::Cpu];
    cols.extend(
        dists
            .iter()
            .filter(|&&d| d != 10 || fit_local)
            .map(|&d| Col::Dram(d)),
    );
    let mut solved = solve(&obs, &terms, &cols, 0.0, base.memory.local_ns)?;
    let mut notes = Vec::new();
    if !fit_local && solved.value(Col::Cpu).is_some_and(|v| v < 0.0) {
        // One size cannot split the time between cpu_ns and the local
        // latency, and the base's local latency leaves cpu_ns below 0:
        // this machine's memory is faster than the base says. Put all of
        // it in the latencies instead (cpu_ns 0), the one split that keeps
        // both physical.
        cols[0] = Col::Dram(10);
        solved = solve(&obs, &terms, &cols, 0.0, base.memory.local_ns)?;
        notes.push(format!(
            "with {}'s local latency ({} ns) the time outside memory came out below 0: \
             cpu_ns set to 0 and the local latency fitted (one buffer size cannot split \
             the two; add a run at another --size)",
            base.name, base.memory.local_ns
        ));
    }
    let (beta, cov, scale, chi2_dof) = (&solved.beta, &solved.cov, solved.scale, solved.chi2_dof);
    let at = |c: Col| cols.iter().position(|x| *x == c);
    let cpu_ns = match at(Col::Cpu) {
        Some(i) => Param {
            value: beta[i],
            se: Some((cov[i][i] * scale).max(0.0).sqrt()),
        },
        None => Param {
            value: 0.0,
            se: None,
        },
    };
    if !(cpu_ns.value.is_finite() && cpu_ns.value >= 0.0) {
        return Err(format!(
            "unfit: the rows give a time per access outside memory of {:.1} ns, below 0: \
             the measured times are faster than the base profile's caches and `exposed` \
             allow; give a --base profile whose cache latencies fit this machine",
            cpu_ns.value
        ));
    }
    let idx10 = at(Col::Dram(10));
    let local_ns = match idx10 {
        Some(i) => Param {
            value: beta[i],
            se: Some((cov[i][i] * scale).max(0.0).sqrt()),
        },
        None => Param {
            value: base.memory.local_ns,
            se: None,
        },
    };
    if !(local_ns.value.is_finite() && local_ns.value > 0.0) {
        return Err(format!(
            "unfit: local DRAM latency came out {:.1} ns",
            local_ns.value
        ));
    }
    let mut remote = Vec::new();
    for (j, c) in cols.iter().enumerate() {
        let d = match c {
            Col::Dram(d) if *d != 10 => *d,
            _ => continue,
        };
        let v = beta[j];
        if !(v.is_finite() && v > 0.0) {
            return Err(format!(
                "unfit: DRAM latency at distance {d} came out {v:.1} ns"
            ));
        }
        let var_d = cov[j][j] * scale;
        let l = local_ns.value;
        let ratio = v / l;
        let ratio_var = match idx10 {
            None => var_d / (l * l),
            Some(i) => {
                var_d / (l * l) + (v / (l * l)).powi(2) * cov[i][i] * scale
                    - 2.0 * v / (l * l * l) * cov[j][i] * scale
            }
        };
        remote.push(Remote {
            distance: d,
            ns: Param {
                value: v,
                se: Some(var_d.max(0.0).sqrt()),
            },
            ratio,
            ratio_se: ratio_var.max(0.0).sqrt(),
        });
    }
    // The machine's spread: root mean square of the rows' CVs.
    let cvs: Vec<f64> = obs.iter().map(|o| o.ns_per_access.cv()).collect();
    let sample_cv = (cvs.iter().map(|c| c * c).sum::<f64>() / cvs.len() as f64).sqrt();
    if sample_cv >= 0.5 {
        return Err(format!(
            "unfit: the samples of a row spread by {:.0}% (coefficient of variation); a \
             profile's noise must be under 50%: the machine was not quiet",
            sample_cv * 100.0
        ));
    }
    let mut p = base.clone();
    p.name = name.to_string();
    p.memory.cpu_ns = cpu_ns.value;
    p.memory.local_ns = local_ns.value;
    p.memory.remote_ns = remote
        .iter()
        .map(|r| (r.distance.to_string(), r.ns.value))
        .collect();
    p.noise.sample_cv = sample_cv;
    let base_note = |field: &str| {
        base.sources
            .get(field)
            .map(|s| format!(" ({s})"))
            .unwrap_or_default()
    };
    let fmt_se = |q: &Param| match q.se {
        Some(s) => format!("{:.2} ± {:.2} (SE)", q.value, s),
        None => format!("{:.2}", q.value),
    };
    p.sources.insert(
        "memory.cpu_ns".into(),
        format!(
            "fitted by numalab sim fit from {origin}: {}",
            fmt_se(&cpu_ns)
        ),
    );
    if local_ns.se.is_some() {
        p.sources.insert(
            "memory.local_ns".into(),
            format!(
                "fitted by numalab sim fit from {origin}: {}",
                fmt_se(&local_ns)
            ),
        );
    } else {
        p.sources.insert(
            "memory.local_ns".into(),
            format!(
                "kept from profile {}{}: one buffer size cannot tell it from cpu_ns",
                base.name,
                base_note("memory.local_ns")
            ),
        );
        notes.push(format!(
            "local latency kept from {} ({} ns): rows of one buffer size cannot tell it \
             from cpu_ns; add a run at another --size to fit it",
            base.name, base.memory.local_ns
        ));
    }
    p.sources.insert(
        "memory.remote_ns".into(),
        if remote.is_empty() {
            "no remote row measured: local x distance / 10, the SLIT's meaning".into()
        } else {
            format!(
                "fitted by numalab sim fit from {origin}: {}; other distances interpolated, \
                 beyond the largest scaled by distance",
                remote
                    .iter()
                    .map(|r| format!("{}: {}", r.distance, fmt_se(&r.ns)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    );
    if remote.is_empty() {
        notes.push(
            "no pinned row had its memory on another node: remote latencies are local x \
             distance / 10 (run rows such as Mem A with CPU B to fit them)"
                .into(),
        );
    }
    p.sources.insert(
        "noise.sample_cv".into(),
        format!(
            "fitted by numalab sim fit from {origin}: root mean square of {} rows' sd/mean \
             of the time per access on a CPU",
            cvs.len()
        ),
    );
    for field in ["caches", "memory.exposed", "cpu.smt_share", "kernel"] {
        p.sources
            .entry(field.into())
            .or_insert_with(|| format!("kept from profile {}", base.name));
    }
    p.description = format!(
        "fitted by numalab sim fit from {origin}, on profile {}",
        base.name
    );
    p.check().map_err(|e| format!("unfit: {e}"))?;
    let rows = obs
        .iter()
        .zip(&terms)
        .map(|(o, _)| {
            let predicted = model_ns(&p, o, mean_dram(&p, o)) * o.speed_factor;
            let measured = o.ns_per_access.mean();
            RowFit {
                label: o.label.clone(),
                n: o.ns_per_access.len(),
                measured,
                ci95: o.ns_per_access.ci95_half_width(),
                predicted,
                error_pct: (predicted - measured) / measured * 100.0,
                dist_share: o.dist_share.clone(),
            }
        })
        .collect();
    Ok(Fit {
        profile: p,
        cpu_ns,
        local_ns,
        remote,
        sample_cv,
        rows,
        chi2_dof,
        notes,
    })
}

/// An unknown of the fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Cpu,
    Dram(u32),
}

/// A weighted least-squares solution over `cols`.
struct Solved {
    cols: Vec<Col>,
    beta: Vec<f64>,
    cov: Vec<Vec<f64>>,
    /// chi2/dof when above 1, else 1: what the covariance is scaled by.
    scale: f64,
    chi2_dof: Option<f64>,
}

impl Solved {
    fn value(&self, c: Col) -> Option<f64> {
        self.cols.iter().position(|x| *x == c).map(|i| self.beta[i])
    }
}

/// Solves for `cols`; what is not among them is known: cpu_ns `cpu`, DRAM
/// at any distance not listed `local` (only local is ever left out).
fn solve(
    obs: &[&Observation],
    terms: &[(f64, f64)],
    cols: &[Col],
    cpu: f64,
    local: f64,
) -> Result<Solved, String> {
    let (mut xs, mut ys, mut ws) = (Vec::new(), Vec::new(), Vec::new());
    for (o, (hits, miss)) in obs.iter().zip(terms) {
        let s = o.speed_factor;
        let n = o.ns_per_access.len();
        let y = o.ns_per_access.mean() / s;
        let sd = o.ns_per_access.stddev() / s;
        let var = ((sd * sd) / n as f64).max((1e-6 * y).powi(2));
        let mut x = vec![0.0; cols.len()];
        let mut known = *hits;
        match cols.iter().position(|c| *c == Col::Cpu) {
            Some(i) => x[i] = 1.0,
            None => known += cpu,
        }
        for (d, share) in &o.dist_share {
            let coef = *miss * share;
            match cols.iter().position(|c| *c == Col::Dram(*d)) {
                Some(j) => x[j] += coef,
                None => known += coef * local,
            }
        }
        xs.push(x);
        ys.push(y - known);
        ws.push(1.0 / var);
    }
    let (beta, cov) = wls(&xs, &ys, &ws).ok_or_else(|| {
        "the rows do not determine the latencies (each distance needs a pinned row with \
         most of its memory there)"
            .to_string()
    })?;
    // Goodness of fit: the errors are scaled up when the rows scatter
    // about the fit more than their own errors say.
    let dof = obs.len() as i64 - cols.len() as i64;
    let chi2: f64 = xs
        .iter()
        .zip(&ys)
        .zip(&ws)
        .map(|((x, y), w)| (y - dot(x, &beta)).powi(2) * w)
        .sum();
    let chi2_dof = (dof > 0).then(|| chi2 / dof as f64);
    Ok(Solved {
        cols: cols.to_vec(),
        beta,
        cov,
        scale: chi2_dof.map(|c| c.max(1.0)).unwrap_or(1.0),
        chi2_dof,
    })
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Weighted least squares: beta and (X'WX)^-1, or `None` when X'WX is
/// singular (an unknown no row determines).
fn wls(x: &[Vec<f64>], y: &[f64], w: &[f64]) -> Option<(Vec<f64>, Vec<Vec<f64>>)> {
    let k = x.first()?.len();
    let mut a = vec![vec![0.0; k]; k];
    let mut b = vec![0.0; k];
    for ((xi, yi), wi) in x.iter().zip(y).zip(w) {
        for r in 0..k {
            b[r] += wi * xi[r] * yi;
            for c in 0..k {
                a[r][c] += wi * xi[r] * xi[c];
            }
        }
    }
    let inv = invert(a)?;
    let beta = (0..k).map(|r| dot(&inv[r], &b)).collect();
    Some((beta, inv))
}

/// Gauss-Jordan inverse with partial pivoting; `None` when singular. The
/// matrices are a few unknowns across, so nothing heavier is needed.
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let k = a.len();
    let scale = a
        .iter()
        .flatten()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let mut inv: Vec<Vec<f64>> = (0..k)
        .map(|r| (0..k).map(|c| if r == c { 1.0 } else { 0.0 }).collect())
        .collect();
    for col in 0..k {
        let piv = (col..k).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(col, piv);
        inv.swap(col, piv);
        let d = a[col][col];
        for c in 0..k {
            a[col][c] /= d;
            inv[col][c] /= d;
        }
        for r in 0..k {
            if r != col {
                let f = a[r][col];
                if f != 0.0 {
                    for c in 0..k {
                        a[r][c] -= f * a[col][c];
                        inv[r][c] -= f * inv[col][c];
                    }
                }
            }
        }
    }
    Some(inv)
}

/// Whether a kernel release (`6.12.117+deb13-amd64`) has group_smt_balance
/// (Linux 6.6, commit fee1759e4f04); `None` when the release does not parse.
pub fn has_smt_balance(release: &str) -> Option<bool> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = it.next()?.parse().ok()?;
    let minor: u32 = it.next()?.parse().ok()?;
    Some((major, minor) >= (6, 6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(
        p: &Profile,
        label: &str,
        ws: u64,
        share: &[(u32, f64)],
        cv: f64,
        n: usize,
    ) -> Observation {
        let dram: f64 = share.iter().map(|(d, s)| s * p.dram_ns(*d)).sum();
        let t = p.access_ns(ws, dram);
        // (no moves: the refills are checked in their own test)
        // A deterministic spread of the given cv about t.
        let vals: Vec<f64> = (0..n)
            .map(|i| t * (1.0 + cv * if i % 2 == 0 { 1.0 } else { -1.0 }))
            .collect();
        Observation {
            label: label.into(),
            ws,
            ns_per_access: Sample::new(vals).unwrap(),
            dist_share: share.iter().copied().collect(),
            speed_factor: 1.0,
            llc_moves: 0.0,
            node_moves: 0.0,
        }
    }

    /// Rows made by the model from a known profile give that profile back.
    #[test]
    fn the_model_s_own_rows_give_its_values_back() {
        let truth = Profile::load("epyc-7551").unwrap();
        let base = Profile::load("generic").unwrap();
        let base = Profile {
            caches: truth.caches.clone(),
            ..base
        };
        let ws = 256 << 20;
        let o = vec![
            obs(&truth, "local", ws, &[(10, 1.0)], 0.02, 8),
            obs(&truth, "local 64M", 64 << 20, &[(10, 1.0)], 0.02, 8),
            obs(&truth, "d16", ws, &[(16, 1.0)], 0.02, 8),
            obs(&truth, "d32", ws, &[(32, 1.0)], 0.02, 8),
            obs(&truth, "half", ws, &[(10, 0.5), (32, 0.5)], 0.02, 8),
        ];
        let f = fit(&base, &o, "mine", "test").unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.max(1.0);
        assert!(close(f.cpu_ns.value, truth.memory.cpu_ns), "{:?}", f.cpu_ns);
        assert!(
            close(f.local_ns.value, truth.memory.local_ns),
            "{:?}",
            f.local_ns
        );
        for r in &f.remote {
            assert!(close(r.ns.value, truth.dram_ns(r.distance)), "{r:?}");
        }
        assert!(f.rows.iter().all(|r| r.error_pct.abs() < 1e-6));
        // The cv of the spread given, in every row.
        let want = 0.02 * (8.0f64 / 7.0).sqrt();
        assert!((f.sample_cv - want).abs() < 1e-3, "{}", f.sample_cv);
    }

    /// With one buffer size the local latency stays the base's, and the
    /// remote ones come out as ratios to it.
    #[test]
    fn one_size_keeps_local_and_fits_the_ratio() {
        // A loop with time of its own (the preset's calibration has none),
        // so the fitted cpu_ns is not at its bound.
        let mut truth = Profile::load("xeon-8167m").unwrap();
        truth.memory.cpu_ns = 24.1;
        let mut base = truth.clone();
        base.memory.cpu_ns = 5.0;
        base.memory.remote_ns.clear();
        let ws = 66 << 20;
        let o = vec![
            obs(&truth, "[00]", ws, &[(10, 1.0)], 0.01, 16),
            obs(&truth, "[01]", ws, &[(21, 1.0)], 0.01, 16),
        ];
        let f = fit(&base, &o, "x", "t").unwrap();
        assert!(f.local_ns.se.is_none());
        assert!(
            (f.remote[0].ratio - 139.0 / 89.0).abs() < 1e-6,
            "{:?}",
            f.remote
        );
        assert!((f.cpu_ns.value - truth.memory.cpu_ns).abs() < 1e-6);
        assert!(f.notes.iter().any(|n| n.contains("local latency kept")));
    }

    /// Uniform memory (the lab): every distance comes out at the local
    /// latency.
    #[test]
    fn uniform_memory_fits_ratio_one() {
        let base = Profile::load("generic").unwrap();
        let mut truth = base.clone();
        truth.memory.remote_ns = [("20".into(), 90.0), ("40".into(), 90.0)].into();
        let ws = 256 << 20;
        let o = vec![
            obs(&truth, "l", ws, &[(10, 1.0)], 0.03, 6),
            obs(&truth, "r", ws, &[(20, 1.0)], 0.03, 6),
            obs(&truth, "rr", ws, &[(40, 1.0)], 0.03, 6),
        ];
        let f = fit(&base, &o, "lab", "t").unwrap();
        for r in &f.remote {
            assert!((r.ratio - 1.0).abs() < 1e-6, "{r:?}");
        }
    }

    #[test]
    fn what_cannot_be_fitted_says_why() {
        let p = Profile::load("generic").unwrap();
        let e = fit(&p, &[], "x", "t").unwrap_err();
        assert!(e.contains("no pinned row"), "{e}");
        let remote_only = vec![obs(&p, "r", 256 << 20, &[(20, 1.0)], 0.01, 4)];
        let e = fit(&p, &remote_only, "x", "t").unwrap_err();
        assert!(e.contains("local"), "{e}");
        let small = vec![obs(&p, "l", 1 << 20, &[(10, 1.0)], 0.01, 4)];
        let e = fit(&p, &small, "x", "t").unwrap_err();
        assert!(e.contains("fits in the caches"), "{e}");
        let one = vec![obs(&p, "l", 256 << 20, &[(10, 1.0)], 0.01, 1)];
        let e = fit(&p, &one, "x", "t").unwrap_err();
        assert!(e.contains("one sample"), "{e}");
        // Faster than the caches allow: cpu_ns would be negative.
        let mut fast = obs(&p, "l", 256 << 20, &[(10, 1.0)], 0.01, 4);
        fast.ns_per_access = Sample::new(vec![1.0, 1.1, 0.9, 1.0]).unwrap();
        let e = fit(&p, &[fast], "x", "t").unwrap_err();
        assert!(e.contains("unfit"), "{e}");
    }

    #[test]
    fn kernel_releases_say_whether_they_have_smt_balance() {
        assert_eq!(has_smt_balance("6.12.117+deb13-amd64"), Some(true));
        assert_eq!(has_smt_balance("6.1.0-56-amd64"), Some(false));
        assert_eq!(has_smt_balance("6.6.0"), Some(true));
        assert_eq!(has_smt_balance("7.0"), Some(true));
        assert_eq!(has_smt_balance("sim model 6"), None);
    }
}
