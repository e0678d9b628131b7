//! The simulator's side of `numalab sim fit`: each pinned row of the runs
//! simulated again, without the machine's noise, to find what the model
//! itself makes of its time per access on a CPU under that row's load
//! ([`crate::sim::fit::Observation::speed_factor`]: chiefly the busy SMT
//! siblings of the staggered load), so the fitted profile reproduces the
//! rows it was fitted on when the simulator runs them.

use super::Sim;
use crate::probe::record::ProbeRecord;
use crate::run::fit::{sample_point, FitInput, Point};
use crate::run::spec::{ExperimentSpec, Row};
use crate::sim::Profile;

/// Samples per row the factors are measured on.
pub const FACTOR_SAMPLES: u32 = 4;

impl Sim {
    /// `row` of `spec` simulated `samples` times, as probe records.
    pub fn simulate_row(
        &self,
        row: &Row,
        spec: &ExperimentSpec,
        samples: u32,
    ) -> anyhow::Result<Vec<ProbeRecord>> {
        let specs = (0..samples)
            .map(|i| self.sample_spec(row, spec, i))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let results = self.sim.samples(&specs, self.threads);
        specs
            .iter()
            .zip(&results)
            .map(|(ss, res)| Ok(self.records(row, spec, ss, res)?.probe))
            .collect()
    }
}

/// Sets every observation's speed factor from the simulator under
/// `profile` (its noise left out).
pub fn speed_factors(input: &mut FitInput, profile: &Profile) -> anyhow::Result<()> {
    let mut quiet = profile.clone();
    quiet.noise.sample_cv = 0.0;
    // One simulated machine per run, shared by its rows: building one
    // is the costly part on a big machine.
    let mut sims: Vec<Option<Sim>> = (0..input.runs.len()).map(|_| None).collect();
    for (o, (k, row)) in input.obs.iter_mut().zip(&input.rows) {
        let (meta, topo) = &input.runs[*k];
        let sim = match &mut sims[*k] {
            Some(s) => s,
            slot => {
                let load = meta.spec.load_spec(topo, topo.online_cpus());
                slot.insert(Sim::new(topo, "sim fit", quiet.clone(), &load)?)
            }
        };
        let recs = sim.simulate_row(row, &meta.spec, FACTOR_SAMPLES)?;
        let points: Vec<Point> = recs.iter().filter_map(|r| sample_point(topo, r)).collect();
        o.speed_factor = crate::sim::fit::speed_factor(&quiet, &points).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: the simulator gave no time per access for the row",
                o.label
            )
        })?;
    }
    Ok(())
}
