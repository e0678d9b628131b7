//! One probe through the several-probe engine ([`super::multi`]): a
//! [`SampleSpec`] run as a jobs run of one job, its [`JobResult`] given
//! back as the [`SampleResult`] `run --backend sim` records.

use super::load::LoadModel;
use super::multi::{Job, JobResult, JobsSpec, Multi};
use super::{Machine, Profile, SampleResult, SampleSpec};

/// The jobs run of one job that `spec` describes.
pub fn jobs_spec(spec: &SampleSpec) -> JobsSpec {
    JobsSpec {
        jobs: vec![Job {
            allowed: spec.allowed.clone(),
            mem: spec.mem.clone(),
            forced: spec.forced,
            touch_first: spec.touch_first,
        }],
        numa: spec.numa.clone(),
        migration_cost_ns: spec.migration_cost_ns,
        scope: spec.scope,
        load_policy: spec.load_policy,
        buffer_bytes: spec.buffer_bytes,
        page_bytes: spec.page_bytes,
        accesses_per_iteration: spec.accesses_per_iteration,
        iterations: spec.iterations,
        seed: spec.seed,
        noise_seed: spec.noise_seed,
    }
}

/// One sample: the probe among the load, to its exit.
pub fn sample(m: &Machine, p: &Profile, load: &LoadModel, spec: &SampleSpec) -> SampleResult {
    let js = jobs_spec(spec);
    let res = Multi::new(m, p, load, &js).run();
    let job: JobResult = res.jobs.into_iter().next().unwrap_or_default();
    SampleResult {
        moves: job.moves,
        run_ns: job.run_ns,
        run_ns_loop: job.run_ns_loop,
        loop_start_cpu: job.loop_start_cpu,
        warm_up_ns: job.warm_up_ns,
        iterations_ns: job.iterations_ns,
        loop_start_ns: job.loop_start_ns,
        wall_ns: res.wall_ns,
        start_cpu: job.start_cpu,
        end_cpu: job.end_cpu,
        pages_after_warm_up: job.pages_after_warm_up,
        pages_at_end: job.pages_at_end,
        numa_scan_seq: job.numa_scan_seq,
        numa_pages_migrated: job.numa_pages_migrated,
        numa_faults: job.numa_faults,
        total_numa_faults: job.total_numa_faults,
        preferred: job.preferred,
        move_numa: job.move_numa,
        stick_numa: job.stick_numa,
        events: res.events,
        runaway: res.runaway,
        balance: job.balance,
    }
}
