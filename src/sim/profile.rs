//! Hardware profiles: what the simulator needs to know about a machine that
//! the topology does not say (cache sizes and latencies, DRAM latency by
//! SLIT distance, SMT sharing, kernel costs), each value with its source.
//!
//! A profile is a TOML file (format in docs/sim.md, "Hardware profiles"); the built-in ones live
//! in `profiles/*.toml` and are compiled in. The probe's time per access and
//! the cost of a migration are both derived from these numbers by one cache
//! model ([`Profile::access_ns`] here, the refill in [`super::cold`]), so a
//! migration costs the misses of re-warming the caches it left, for the
//! probe's buffer size, rather than a constant fitted per level. What the model derives
//! none of, the machine's own spread between samples, a profile states
//! (`noise.sample_cv`, drawn by [`Profile::speed_factor`]).

use crate::error::usage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bump when the model's behaviour changes: recorded in every sim run.
pub const MODEL_VERSION: u32 = 12;

/// Bytes per cache line.
pub(super) const LINE: f64 = 64.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub caches: Caches,
    pub memory: Memory,
    pub cpu: CpuModel,
    pub kernel: KernelCosts,
    /// What varies from one probe process to the next on this machine.
    /// Left out of the profile's record when there is none.
    #[serde(default, skip_serializing_if = "Noise::is_none")]
    pub noise: Noise,
    /// What an emulator does that hardware does not (the lab's profile).
    /// Left out of the profile's record when there is none.
    #[serde(default, skip_serializing_if = "Emulator::is_none")]
    pub emulator: Emulator,
    /// Field -> where its value comes from (a URL, the seed, "assumed").
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caches {
    /// Private (per core) L2 size, bytes, and its load latency, ns.
    pub l2_bytes: u64,
    pub l2_ns: f64,
    /// Last-level cache size per LLC, bytes, and its latency, ns.
    pub llc_bytes: u64,
    pub llc_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// Idle DRAM latency on the local node, ns.
    pub local_ns: f64,
    /// DRAM latency by SLIT distance ("21" = 139.0); distances between
    /// listed ones are interpolated, beyond the largest scaled by distance.
    pub remote_ns: BTreeMap<String, f64>,
    /// Share of a load's latency the probe really waits for (the rest is
    /// hidden by overlapping misses), 0-1. Calibrated (see docs/sim-validation.md, "Calibration: the RFC's Intel table").
    pub exposed: f64,
    /// Time per access that does not depend on where memory is, ns
    /// (address generation, TLB walks of local page tables, the store).
    pub cpu_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuModel {
    /// The probe's speed while its SMT sibling runs another task, relative
    /// to running alone on the core (0-1].
    pub smt_share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelCosts {
    /// Scheduler tick rate (CONFIG_HZ).
    pub hz: u32,
    /// Mean delay of a timer wake-up (load workers), µs: spreads events
    /// that would otherwise land on the exact phase.
    pub wakeup_jitter_us: f64,
    /// One NUMA hinting fault, µs, and one 4 KiB page migrated by it, µs.
    pub hint_fault_us: f64,
    pub page_migrate_us: f64,
    /// The probe's memory outside its buffer (stack, heap), pages: always
    /// migratable, so NUMA balancing sees it even when the buffer is bound.
    pub other_pages: u32,
    /// Pages the probe's warm-up touches per µs (first-touch faults).
    pub touch_pages_per_us: f64,
    /// The kernel's NI_RANDOM scheduler feature (proportional newidle
    /// balancing: a domain's newly-idle balance runs with a probability
    /// that follows its recent success rate). Debian's 6.12 and 6.1.192
    /// (backported) have it; mainline 6.7 (the RFC's kernel) did not.
    #[serde(default)]
    pub ni_random: bool,
    /// How the load balancer picks its busiest group: Linux 6.6 and later
    /// (true) classify an SMT core with two or more tasks as
    /// group_smt_balance and keep the first such core met, and let a later
    /// fully busy group of other kinds win a tie; 6.1 (false) has neither.
    #[serde(default = "yes")]
    pub smt_balance: bool,
    /// Model the flag a balance attempt that failed for affinity leaves on
    /// its parent domain's local group (`sgc->imbalance`, then
    /// group_imbalanced). Every kernel has it; the model keeps it off by
    /// default while its calibration is open (docs/sim-validation.md, "The group
    /// imbalance flag"). Left out of the profile's record when off.
    #[serde(default, skip_serializing_if = "is_false")]
    pub group_imbalance: bool,
    /// Each sched domain's `max_newidle_lb_cost` (the gate of newly-idle
    /// balancing), ms per CPU of the machine, as evenly spaced quantiles
    /// of its distribution (the least first, the greatest last): each
    /// domain draws its own per sample ([`super::multi_gate`]). Empty (the
    /// default): nil, the gate always open, as on hardware, where an
    /// attempt costs microseconds. Left out of the profile's record when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub newidle_cost_ms_per_cpu: Vec<f64>,
}

/// What an emulator does to the machine it runs: under single-threaded
/// TCG one host thread runs the vCPUs in turn, so the guest's own load
/// keeps a shape that is not its plan ([`super::load::Reshape`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Emulator {
    /// The load's lateness per guest size: vCPU count ("4", "8") ->
    /// quantiles. A machine takes the size nearest its CPU count (the
    /// smaller at a tie). Empty (the default): the plan, as on hardware.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub load: BTreeMap<String, LoadLateness>,
}

/// How late `numalab load`'s workers are, as evenly spaced quantiles (the
/// least first, the greatest last), ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadLateness {
    /// How long past its busy part's planned end a worker goes on
    /// spinning; as long as the idle part or longer, it spins on through
    /// the next period's busy part (no idle part that period).
    pub stop_late_ms: Vec<f64>,
    /// How long past its period's start a worker that slept wakes.
    pub wake_late_ms: Vec<f64>,
}

impl Emulator {
    pub fn is_none(&self) -> bool {
        self.load.is_empty()
    }

    /// The load's reshaping on a machine of `cpus` CPUs: the nearest
    /// guest size's (None: no emulator).
    pub fn reshape(&self, cpus: usize) -> Option<super::load::Reshape> {
        let (_, l) = self
            .load
            .iter()
            .filter_map(|(k, l)| k.parse::<usize>().ok().map(|n| (n, l)))
            .min_by_key(|&(n, _)| (n.abs_diff(cpus), n))?;
        let ns = |v: &[f64]| v.iter().map(|ms| ms * 1e6).collect();
        Some(super::load::Reshape {
            stop_late_ns: ns(&l.stop_late_ms),
            wake_late_ns: ns(&l.wake_late_ms),
            seed: 0,
        })
    }
}

/// The machine's own sample-to-sample spread: what makes two runs of the
/// same pinned probe on the same CPUs take different times (which physical
/// pages and huge pages the buffer got, clock frequency, interrupts). The
/// model derives none of it, so a profile states it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Noise {
    /// Coefficient of variation (sd / mean) of the probe's time per
    /// access, drawn once per sample (per job for `jobs`) from a
    /// log-normal of mean 1; 0 (the default) makes every sample's speed
    /// the model's.
    #[serde(default)]
    pub sample_cv: f64,
}

impl Noise {
    pub fn is_none(&self) -> bool {
        self.sample_cv == 0.0
    }
}

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Built-in profiles: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("xeon-8167m", include_str!("../../profiles/xeon-8167m.toml")),
    ("epyc-7551", include_str!("../../profiles/epyc-7551.toml")),
    ("lab-tcg", include_str!("../../profiles/lab-tcg.toml")),
    ("generic", include_str!("../../profiles/generic.toml")),
];

/// The profile a topology preset is simulated with by default.
pub fn default_for_preset(preset: &str) -> &'static str {
    match preset {
        "xeon-8167m-2n" => "xeon-8167m",
        "epyc-7551-8n" => "epyc-7551",
        _ => "generic",
    }
}

impl Profile {
    /// A built-in profile by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> anyhow::Result<Profile> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::from_toml(text, name_or_path);
        }
        let p = std::path::Path::new(name_or_path);
        if !p.exists() {
            return Err(usage(format!(
                "unknown hardware profile {name_or_path:?}: not a built-in ({}) and no such file",
                BUILTIN.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
            )));
        }
        let text = crate::input::read_input_text(p, "profile", crate::input::DOC_LIMIT)?;
        Profile::from_toml(&text, name_or_path)
    }

    pub fn from_toml(text: &str, origin: &str) -> anyhow::Result<Profile> {
        let p: Profile =
            toml::from_str(text).map_err(|e| usage(format!("profile {origin}: {e}")))?;
        p.check()
            .map_err(|e| usage(format!("profile {origin}: {e}")))?;
        Ok(p)
    }

    /// Every value in its range, so the model never divides by zero or
    /// runs time backwards.
    pub fn check(&self) -> Result<(), String> {
        let pos = |v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{what} must be a positive number, not {v}"))
            }
        };
        let nonneg = |v: f64, what: &str| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!("{what} must be 0 or more, not {v}"))
            }
        };
        pos(self.caches.l2_ns, "caches.l2_ns")?;
        pos(self.caches.llc_ns, "caches.llc_ns")?;
        if self.caches.l2_bytes == 0 || self.caches.llc_bytes == 0 {
            return Err("cache sizes must be above 0".into());
        }
        pos(self.memory.local_ns, "memory.local_ns")?;
        nonneg(self.memory.cpu_ns, "memory.cpu_ns")?;
        if !(self.memory.exposed > 0.0 && self.memory.exposed <= 1.0) {
            return Err(format!(
                "memory.exposed must be in (0, 1], not {}",
                self.memory.exposed
            ));
        }
        for (d, ns) in &self.memory.remote_ns {
            let dist: u32 = d
                .parse()
                .map_err(|_| format!("memory.remote_ns key {d:?} is not a SLIT distance"))?;
            if dist <= 10 {
                return Err(format!(
                    "memory.remote_ns: distance {dist} is not remote (> 10)"
                ));
            }
            pos(*ns, &format!("memory.remote_ns.{d}"))?;
        }
        if !(self.cpu.smt_share > 0.0 && self.cpu.smt_share <= 1.0) {
            return Err(format!(
                "cpu.smt_share must be in (0, 1], not {}",
                self.cpu.smt_share
            ));
        }
        if !(100..=10_000).contains(&self.kernel.hz) {
            return Err(format!(
                "kernel.hz {} is not a kernel tick rate",
                self.kernel.hz
            ));
        }
        nonneg(self.kernel.wakeup_jitter_us, "kernel.wakeup_jitter_us")?;
        nonneg(self.kernel.hint_fault_us, "kernel.hint_fault_us")?;
        nonneg(self.kernel.page_migrate_us, "kernel.page_migrate_us")?;
        pos(self.kernel.touch_pages_per_us, "kernel.touch_pages_per_us")?;
        // Quantiles, as [`super::rng::quantile`] draws from them: each 0 or
        // more, the least first.
        let quantiles = |q: &[f64], what: &str| {
            for (i, &ms) in q.iter().enumerate() {
                nonneg(ms, &format!("{what}[{i}]"))?;
            }
            if q.windows(2).any(|w| w[1] < w[0]) {
                return Err(format!("{what} must be quantiles, least first: {q:?}"));
            }
            Ok(())
        };
        quantiles(
            &self.kernel.newidle_cost_ms_per_cpu,
            "kernel.newidle_cost_ms_per_cpu",
        )?;
        for (size, l) in &self.emulator.load {
            if !size.parse::<usize>().is_ok_and(|n| n > 0) {
                return Err(format!("emulator.load key {size:?} is not a vCPU count"));
            }
            for (name, q) in [
                ("stop_late_ms", &l.stop_late_ms),
                ("wake_late_ms", &l.wake_late_ms),
            ] {
                let what = format!("emulator.load.{size}.{name}");
                quantiles(q, &what)?;
                if q.is_empty() {
                    return Err(format!("{what} must be quantiles, least first: {q:?}"));
                }
            }
        }
        if !(self.noise.sample_cv.is_finite() && (0.0..0.5).contains(&self.noise.sample_cv)) {
            return Err(format!(
                "noise.sample_cv must be in [0, 0.5), not {}",
                self.noise.sample_cv
            ));
        }
        Ok(())
    }

    /// This sample's factor on the probe's time per access: log-normal with
    /// mean 1 and coefficient of variation `noise.sample_cv`, from the
    /// sample's seed and `stream` (the job, for `jobs`) alone, so it does
    /// not disturb the engine's own random numbers; exactly 1 without
    /// noise.
    pub fn speed_factor(&self, seed: u64, stream: u64) -> f64 {
        let cv = self.noise.sample_cv;
        if cv == 0.0 {
            return 1.0;
        }
        // Box-Muller from two stable uniforms; 1 - u keeps ln away from 0.
        let u1 = 1.0 - super::rng::hash3(seed ^ 0x4E01_5E5A_3F1E, stream, 1);
        let u2 = super::rng::hash3(seed ^ 0x4E01_5E5A_3F1E, stream, 2);
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let sigma2 = (1.0 + cv * cv).ln();
        (sigma2.sqrt() * z - sigma2 / 2.0).exp()
    }

    /// What one NUMA scan's hinting faults (counted in base pages, charged
    /// per page of `base_per_page` base pages) and page migrations cost the
    /// task, ns.
    pub fn scan_cost_ns(&self, out: &super::numa::ScanOutcome, base_per_page: u64) -> f64 {
        out.faults as f64 / base_per_page.max(1) as f64 * self.kernel.hint_fault_us * 1e3
            + out.migrated as f64 * self.kernel.page_migrate_us * 1e3
    }

    /// DRAM latency at SLIT distance `d` (10 = local), ns.
    pub fn dram_ns(&self, d: u32) -> f64 {
        if d <= 10 {
            return self.memory.local_ns;
        }
        let mut pts: Vec<(f64, f64)> = vec![(10.0, self.memory.local_ns)];
        let mut more: Vec<(f64, f64)> = self
            .memory
            .remote_ns
            .iter()
            .filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, *v)))
            .collect();
        more.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts.extend(more);
        let d = d as f64;
        for w in pts.windows(2) {
            let ((d0, n0), (d1, n1)) = (w[0], w[1]);
            if d <= d1 {
                return n0 + (n1 - n0) * (d - d0) / (d1 - d0);
            }
        }
        let (dl, nl) = *pts.last().expect("local point");
        // Beyond the table: latency grows with distance as SLIT says.
        nl * d / dl
    }

    /// Cache hit shares for a random walk over `ws` bytes: (L2, LLC).
    pub(super) fn hits(&self, ws: u64) -> (f64, f64) {
        let ws = ws.max(1) as f64;
        let h2 = (self.caches.l2_bytes as f64 / ws).min(1.0);
        let hl = (self.caches.llc_bytes as f64 / ws).min(1.0).max(h2);
        (h2, hl)
    }

    /// The probe's time per access, ns, over a working set of `ws` bytes
    /// whose DRAM part is at latency `dram` ns, with warm caches.
    pub fn access_ns(&self, ws: u64, dram: f64) -> f64 {
        let (h2, hl) = self.hits(ws);
        let lat = h2 * self.caches.l2_ns + (hl - h2) * self.caches.llc_ns + (1.0 - hl) * dram;
        self.memory.cpu_ns + self.memory.exposed * lat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_check() {
        for (name, text) in BUILTIN {
            let p = Profile::from_toml(text, name).unwrap();
            assert_eq!(&p.name, name);
            assert!(!p.sources.is_empty(), "{name} names its sources");
        }
    }

    #[test]
    fn dram_interpolates_and_extrapolates() {
        let p = Profile::load("epyc-7551").unwrap();
        assert_eq!(p.dram_ns(10), p.memory.local_ns);
        let (a, b) = (p.dram_ns(16), p.dram_ns(32));
        assert!(a > p.memory.local_ns && b > a);
        let mid = p.dram_ns(24);
        assert!(mid > a && mid < b);
        assert!((p.dram_ns(64) - b * 2.0).abs() < 1e-9);
    }

    #[test]
    fn bad_profiles_are_refused_with_the_field() {
        let (_, text) = BUILTIN[0];
        let bad = text.replace("exposed = ", "exposed = 7.0 #");
        let e = Profile::from_toml(&bad, "x").unwrap_err().to_string();
        assert!(e.contains("memory.exposed"), "{e}");
        let bad = text.replace("[cpu]", "[cpu]\nturbo = 1");
        assert!(Profile::from_toml(&bad, "x").is_err());
        let bad = text.replace("sample_cv = 0.023", "sample_cv = -0.1");
        let e = Profile::from_toml(&bad, "x").unwrap_err().to_string();
        assert!(e.contains("noise.sample_cv"), "{e}");
        for q in ["[1.0, -0.5]", "[2.0, 1.0]", "[1.0, nan]"] {
            let bad = text.replace(
                "[kernel]",
                &format!("[kernel]\nnewidle_cost_ms_per_cpu = {q}"),
            );
            let e = Profile::from_toml(&bad, "x").unwrap_err().to_string();
            assert!(e.contains("kernel.newidle_cost_ms_per_cpu"), "{q}: {e}");
        }
        let emulator = |size: &str, stop: &str| {
            format!("{text}\n[emulator.load.\"{size}\"]\nstop_late_ms = {stop}\nwake_late_ms = [0.0, 1.0]\n")
        };
        for (size, stop, field) in [
            ("four", "[0.0, 1.0]", "emulator.load key \"four\""),
            ("0", "[0.0, 1.0]", "emulator.load key \"0\""),
            ("4", "[1.0, 0.5]", "emulator.load.4.stop_late_ms"),
            ("4", "[-1.0, 0.5]", "emulator.load.4.stop_late_ms[0]"),
            ("4", "[]", "emulator.load.4.stop_late_ms"),
        ] {
            let e = Profile::from_toml(&emulator(size, stop), "x")
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{size} {stop}: {e}");
        }
        assert!(Profile::from_toml(&emulator("4", "[0.0, 1.0]"), "x").is_ok());
    }

    /// A machine takes the guest size nearest its CPU count, the smaller
    /// at a tie; a profile without an emulator reshapes nothing.
    #[test]
    fn the_emulator_reshapes_the_load_by_the_nearest_guest_size() {
        let mut e = Emulator::default();
        assert!(e.is_none() && e.reshape(4).is_none());
        for (size, ms) in [("4", 1.0), ("8", 2.0)] {
            e.load.insert(
                size.into(),
                LoadLateness {
                    stop_late_ms: vec![0.0, ms],
                    wake_late_ms: vec![ms],
                },
            );
        }
        let wake = |cpus| e.reshape(cpus).unwrap().wake_late_ns[0];
        assert_eq!(
            (wake(2), wake(4), wake(6), wake(7), wake(64)),
            (1e6, 1e6, 1e6, 2e6, 2e6)
        );
        assert_eq!(e.reshape(8).unwrap().stop_late_ns, vec![0.0, 2e6]);
        // The lab's own profile has one; the hardware ones have none.
        assert!(!Profile::load("lab-tcg").unwrap().emulator.is_none());
        for hw in ["xeon-8167m", "epyc-7551", "generic"] {
            assert!(Profile::load(hw).unwrap().emulator.is_none(), "{hw}");
        }
    }

    /// The factor has the stated mean and spread, is the same for the same
    /// sample, and is exactly 1 without noise.
    #[test]
    fn speed_factor_is_lognormal_with_mean_one_and_the_profiles_cv() {
        let mut p = Profile::load("generic").unwrap();
        p.noise.sample_cv = 0.0;
        assert!((0..100).all(|s| p.speed_factor(s, 0) == 1.0));
        p.noise.sample_cv = 0.05;
        let f: Vec<f64> = (0..20_000).map(|s| p.speed_factor(s, 3)).collect();
        let n = f.len() as f64;
        let mean = f.iter().sum::<f64>() / n;
        let sd = (f.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        assert!((mean - 1.0).abs() < 0.002, "mean {mean}");
        assert!((sd / mean - 0.05).abs() < 0.003, "cv {}", sd / mean);
        assert!(f.iter().all(|x| *x > 0.0));
        assert_eq!(p.speed_factor(7, 3), p.speed_factor(7, 3));
        assert_ne!(p.speed_factor(7, 3), p.speed_factor(7, 4));
    }
}
