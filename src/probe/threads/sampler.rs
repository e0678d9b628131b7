//! The timeline process of a threaded probe: started before the workers
//! are let go (`numalab __timeline`, [`crate::probe::timeline`]), with the
//! workers' events pipe as its stdin and an anonymous memory file as its
//! stdout; waited for once every worker has ended its loop.

use crate::probe::timeline::{SamplerSpec, Timeline};
use anyhow::{anyhow, Context};
use std::fs::File;
use std::io::Read;

/// The timeline process and the memory file it writes its result to.
pub(super) struct RunningSampler {
    child: std::process::Child,
    out: std::fs::File,
}

/// Starts `numalab __timeline` ([`crate::probe::timeline::sampler_main`]) with the
/// workers' events pipe as its stdin and an anonymous memory file (no path,
/// nothing to clean up) as its stdout.
pub(super) fn start_sampler(spec: &SamplerSpec, events: File) -> anyhow::Result<RunningSampler> {
    let exe = std::env::current_exe().context("finding numalab's own executable")?;
    let fd = rustix::fs::memfd_create("numalab-timeline", rustix::fs::MemfdFlags::CLOEXEC)
        .context("memfd_create for the timeline")?;
    let out = std::fs::File::from(fd);
    let child = std::process::Command::new(&exe)
        .arg("__timeline")
        .arg(serde_json::to_string(spec)?)
        .stdin(std::process::Stdio::from(events))
        .stdout(std::process::Stdio::from(out.try_clone()?))
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {} __timeline", exe.display()))?;
    Ok(RunningSampler { child, out })
}

impl RunningSampler {
    /// Waits for the timeline process and reads its timeline, times made
    /// relative to `go_mono_ns`.
    pub(super) fn finish(mut self, go_mono_ns: u64) -> anyhow::Result<Option<Timeline>> {
        use std::io::Seek;
        let status = self
            .child
            .wait()
            .context("waiting for the timeline process")?;
        if !status.success() {
            return Err(anyhow!("the timeline process failed ({status})"));
        }
        let mut text = String::new();
        self.out.rewind()?;
        self.out.read_to_string(&mut text)?;
        let mut tl: Option<Timeline> = serde_json::from_str(&text).with_context(|| {
            format!(
                "the timeline process printed {} bytes of no timeline",
                text.len()
            )
        })?;
        if let Some(tl) = tl.as_mut() {
            for p in tl.points.iter_mut() {
                p.t_ns = p.t_ns.saturating_sub(go_mono_ns);
            }
        }
        Ok(tl)
    }
}
