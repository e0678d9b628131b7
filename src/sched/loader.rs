//! Loading numalab's scheduler into the kernel, homing tasks through its
//! maps, reading its account, and unloading it.
//!
//! Unloading: the scheduler is attached through a BPF link, and the kernel
//! unregisters a struct_ops scheduler when the last reference to its link
//! goes. [`Scheduler`] holds the link, so dropping it (normal end, error,
//! panic unwinding, a signal that ends the command through its drop) unloads
//! it, and so does the process's death, however it dies: SIGKILL leaves the
//! kernel to close the link's descriptor. Nothing needs a journal.

use super::Config;
use crate::sched::account::{Account, ExitInfo};
use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder, PrintLevel};
use numalab_sched_bpf::{c_str, NodeAcct, Stats, TaskAcct, OBJECT};
use std::sync::Mutex;

/// libbpf's messages of the current load (the verifier's log on a refusal).
static LOG: Mutex<String> = Mutex::new(String::new());

fn capture_log(level: PrintLevel, msg: String) {
    if level == PrintLevel::Debug {
        return;
    }
    if let Ok(mut l) = LOG.lock() {
        // Keep the tail: a verifier log can run to megabytes.
        if l.len() > 64 * 1024 {
            let cut = l.len() - 32 * 1024;
            let cut = (cut..l.len()).find(|&i| l.is_char_boundary(i)).unwrap_or(0);
            l.drain(..cut);
        }
        l.push_str(&msg);
    }
}

fn log_tail(lines: usize) -> String {
    let l = LOG.lock().map(|l| l.clone()).unwrap_or_default();
    let v: Vec<&str> = l.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// The loaded scheduler. Dropping it unloads it.
pub struct Scheduler {
    // Declared first, dropped first: the links go before the object.
    ops_link: Option<Link>,
    exec_link: Option<Link>,
    obj: Object,
    nr_nodes: u32,
}

fn map<'a>(obj: &'a Object, suffix: &str) -> anyhow::Result<libbpf_rs::Map<'a>> {
    obj.maps()
        .find(|m| m.name().to_string_lossy().ends_with(suffix))
        .ok_or_else(|| anyhow::anyhow!("the scheduler's BPF object has no map {suffix}"))
}

impl Scheduler {
    /// Opens the embedded object, writes `cfg` into its read-only data,
    /// loads it (the verifier checks every program here) and attaches it:
    /// from here on the scheduler runs every task of the system.
    /// `exec_hook`: also attach the exec tracepoint (node policy `exec`).
    pub fn load(cfg: &Config, exec_hook: bool) -> anyhow::Result<Scheduler> {
        LOG.lock().map(|mut l| l.clear()).ok();
        libbpf_rs::set_print(Some((PrintLevel::Info, capture_log)));
        let mut open = ObjectBuilder::default()
            .name("numalab")?
            .open_memory(OBJECT)
            .map_err(|e| anyhow::anyhow!("opening the scheduler's BPF object: {e}"))?;
        let mut rodata_done = false;
        for mut m in open.maps_mut() {
            if m.name().to_string_lossy().ends_with(".rodata") {
                let want = std::mem::size_of::<Config>();
                let v = m.initial_value_mut().ok_or_else(|| {
                    anyhow::anyhow!("the scheduler's .rodata has no initial value")
                })?;
                anyhow::ensure!(
                    v.len() == want,
                    "the scheduler's .rodata is {} bytes, numalab's Config {want}: \
                     sched-bpf/src/lib.rs and abi.h disagree",
                    v.len()
                );
                v.copy_from_slice(bytemuck::bytes_of(cfg));
                rodata_done = true;
            }
        }
        anyhow::ensure!(rodata_done, "the scheduler's BPF object has no .rodata");
        for mut p in open.progs_mut() {
            if p.name().to_string_lossy() == "nl_exec" {
                p.set_autoload(exec_hook);
            }
        }
        let obj = open.load().map_err(|e| {
            anyhow::anyhow!(
                "the kernel refused numalab's scheduler ({e}); libbpf said:\n{}",
                log_tail(40)
            )
        })?;
        let mut s = Scheduler {
            ops_link: None,
            exec_link: None,
            obj,
            nr_nodes: cfg.nr_nodes,
        };
        // Check the shared layouts before anything runs with them.
        s.check_sizes()?;
        if exec_hook {
            let link = s
                .obj
                .progs_mut()
                .find(|p| p.name().to_string_lossy() == "nl_exec")
                .ok_or_else(|| anyhow::anyhow!("the scheduler's object has no nl_exec"))?
                .attach_trace()
                .map_err(|e| anyhow::anyhow!("attaching the exec hook: {e}"))?;
            s.exec_link = Some(link);
        }
        let mut ops = s
            .obj
            .maps_mut()
            .find(|m| m.name().to_string_lossy() == "numalab_ops")
            .ok_or_else(|| anyhow::anyhow!("the scheduler's object has no numalab_ops"))?;
        let link = ops.attach_struct_ops().map_err(|e| {
            anyhow::anyhow!(
                "the kernel refused to switch to numalab's scheduler ({e}); libbpf said:\n{}",
                log_tail(20)
            )
        })?;
        s.ops_link = Some(link);
        Ok(s)
    }

    fn check_sizes(&self) -> anyhow::Result<()> {
        let sizes = [
            (
                ".bss",
                map(&self.obj, ".bss")?.value_size() as usize,
                std::mem::size_of::<Stats>(),
            ),
            (
                "node_acct",
                map(&self.obj, "node_acct")?.value_size() as usize,
                std::mem::size_of::<NodeAcct>(),
            ),
            (
                "task_acct",
                map(&self.obj, "task_acct")?.value_size() as usize,
                std::mem::size_of::<TaskAcct>(),
            ),
        ];
        for (name, bpf, rust) in sizes {
            anyhow::ensure!(
                bpf == rust,
                "the scheduler's {name} holds {bpf} bytes, numalab's mirror {rust}: \
                 sched-bpf/src/lib.rs and abi.h disagree"
            );
        }
        Ok(())
    }

    /// Homes every thread of `tgid` (present and future, and the processes
    /// it forks) on `node`; `None` clears an explicit homenode.
    pub fn set_home(&self, tgid: u32, node: Option<u32>) -> anyhow::Result<()> {
        let homes = map(&self.obj, "homes")?;
        let key = tgid.to_ne_bytes();
        match node {
            Some(n) => homes.update(&key, &(n as i32).to_ne_bytes(), MapFlags::ANY)?,
            None => {
                let _ = homes.delete(&key);
            }
        }
        // Tasks compare this sequence with the one they last saw.
        let seq = map(&self.obj, "homes_seq")?;
        let zero = 0u32.to_ne_bytes();
        let cur = seq
            .lookup(&zero, MapFlags::ANY)?
            .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
            .unwrap_or(0);
        seq.update(&zero, &(cur + 1).to_ne_bytes(), MapFlags::ANY)?;
        Ok(())
    }

    fn stats(&self) -> anyhow::Result<Stats> {
        let v = map(&self.obj, ".bss")?
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .ok_or_else(|| anyhow::anyhow!("the scheduler's .bss is empty"))?;
        Ok(bytemuck::pod_read_unaligned(
            &v[..std::mem::size_of::<Stats>()],
        ))
    }

    /// Why the scheduler stopped, once it has (`None` while it runs).
    pub fn exit_info(&self) -> anyhow::Result<Option<ExitInfo>> {
        let s = self.stats()?;
        Ok((s.exit_kind != 0).then(|| ExitInfo {
            kind: s.exit_kind,
            code: s.exit_code,
            reason: c_str(&s.exit_reason),
            message: c_str(&s.exit_msg),
        }))
    }

    /// Everything the scheduler counted so far.
    pub fn account(&self) -> anyhow::Result<Account> {
        let nodes_map = map(&self.obj, "node_acct")?;
        let mut nodes = Vec::new();
        for n in 0..self.nr_nodes {
            let mut sum = NodeAcct::default();
            if let Some(per_cpu) = nodes_map.lookup_percpu(&n.to_ne_bytes(), MapFlags::ANY)? {
                for v in per_cpu {
                    sum.add(&bytemuck::pod_read_unaligned(
                        &v[..std::mem::size_of::<NodeAcct>()],
                    ));
                }
            }
            nodes.push(sum);
        }
        let tasks_map = map(&self.obj, "task_acct")?;
        let mut tasks = Vec::new();
        for k in tasks_map.keys() {
            if let Some(v) = tasks_map.lookup(&k, MapFlags::ANY)? {
                let pid = u32::from_ne_bytes(k[..4].try_into().unwrap());
                let t: TaskAcct =
                    bytemuck::pod_read_unaligned(&v[..std::mem::size_of::<TaskAcct>()]);
                tasks.push((pid, t));
            }
        }
        let stats = self.stats()?;
        Ok(Account::new(nodes, tasks, &stats))
    }

    /// Unloads now (what dropping does), keeping the maps so the caller can
    /// read the final account and the exit reason after.
    pub fn detach(&mut self) {
        self.ops_link.take();
        self.exec_link.take();
    }

    /// Unloads now, as [`Scheduler::detach`], and fails when sched_ext had
    /// stopped the scheduler on an error before (a stall, a BPF error):
    /// what ran under it then ran under the kernel's own scheduler.
    pub fn detach_checked(&mut self) -> anyhow::Result<()> {
        self.detach();
        if let Some(x) = self.exit_info()?.filter(|x| x.is_error()) {
            anyhow::bail!(
                "sched_ext stopped numalab's scheduler while it ran: {} {}",
                x.reason,
                x.message
            );
        }
        Ok(())
    }

    /// Whether the scheduler is still attached by us.
    pub fn attached(&self) -> bool {
        self.ops_link.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared structs' sizes as the compiled object's BTF gives them
    /// equal the Rust mirrors': a field added on one side only would shift
    /// every later field. Opening parses the ELF and BTF only; it needs no
    /// kernel support, so this runs everywhere.
    #[test]
    fn the_objects_maps_match_the_rust_mirrors() {
        let open = ObjectBuilder::default().open_memory(OBJECT).unwrap();
        let size = |suffix: &str| {
            open.maps()
                .find(|m| m.name().to_string_lossy().ends_with(suffix))
                .map(|m| m.value_size() as usize)
                .unwrap_or_else(|| panic!("no map {suffix}"))
        };
        assert_eq!(size(".rodata"), std::mem::size_of::<Config>());
        assert_eq!(size(".bss"), std::mem::size_of::<Stats>());
        assert_eq!(size("node_acct"), std::mem::size_of::<NodeAcct>());
        assert_eq!(size("task_acct"), std::mem::size_of::<TaskAcct>());
        assert!(open.maps().any(|m| m.name() == "numalab_ops"));
        assert!(open.progs().any(|p| p.name() == "nl_exec"));
    }
}
