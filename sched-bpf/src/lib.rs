//! numalab's node-affine scheduler for sched_ext: the BPF object (compiled
//! from `src/bpf/` by build.rs) and the Rust mirrors of the types it shares
//! with user space (`src/bpf/abi.h`).
//!
//! Why a crate of its own: it is the one part of numalab that needs clang to
//! build, and its C and the `#[repr(C)]` mirrors below must change together.
//! Loading, attaching and reading the account live in numalab's `sched`
//! module; this crate only says what the object is.
//!
//! Every mirror is plain old data (bytemuck) with no hidden padding, so it is
//! written into and read out of the object's maps as bytes. numalab's tests
//! hold each size equal to the one the object's BTF gives.

use bytemuck::{Pod, Zeroable};

/// The compiled scheduler (ELF with BTF), loaded by libbpf at run time.
pub const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/numalab_sched.bpf.o"));

/// `NL_MAX_CPUS`: CPU ids the scheduler can address.
pub const MAX_CPUS: usize = 1024;
/// `NL_MAX_NODES`: nodes the scheduler can address.
pub const MAX_NODES: usize = 16;
/// `NL_MAX_TASKS`: homed tasks whose account is kept.
pub const MAX_TASKS: usize = 16384;

/// The name the scheduler registers (`/sys/kernel/sched_ext/root/ops`).
pub const OPS_NAME: &str = "numalab";

/// `enum nl_node_policy`.
pub mod policy {
    pub const NONE: u32 = 0;
    pub const EXEC: u32 = 1;
    pub const FORK_MM: u32 = 2;
    pub const FORK: u32 = 3;
}

/// `enum nl_mechanism`: bits of [`Config::mechanisms`].
pub mod mech {
    pub const PLACE: u32 = 1 << 0;
    pub const QUEUE: u32 = 1 << 1;
    pub const REATTRACT: u32 = 1 << 2;
    pub const STEAL_DELAY: u32 = 1 << 3;
    pub const ALL: u32 = PLACE | QUEUE | REATTRACT | STEAL_DELAY;
}

/// `struct nl_config`: the object's `.rodata` (`const volatile cfg`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Config {
    pub nr_cpus: u32,
    pub nr_nodes: u32,
    pub node_policy: u32,
    pub mechanisms: u32,
    pub slice_ns: u64,
    pub timer_ns: u64,
    pub steal_delay_ns: [[u64; MAX_NODES]; MAX_NODES],
    pub steal_delay_busy_ns: [[u64; MAX_NODES]; MAX_NODES],
    pub cpu_node: [i32; MAX_CPUS],
    pub node_cpus: [i32; MAX_CPUS],
    pub distance: [[u32; MAX_NODES]; MAX_NODES],
    pub steal_order: [[u32; MAX_NODES]; MAX_NODES],
    pub node_first: [u32; MAX_NODES + 1],
    pub nr_online: u32,
}

/// `struct nl_node_acct`: one node's account, per CPU in the map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct NodeAcct {
    pub home_ns: u64,
    pub away_ns: u64,
    pub guest_ns: u64,
    pub free_ns: u64,
    pub runs_home: u64,
    pub runs_away: u64,
    pub placed_idle: u64,
    pub queued_home: u64,
    pub reattract_kicks: u64,
    pub reattracted: u64,
    pub stolen_from: u64,
    pub stole: u64,
    pub stole_free: u64,
    pub wait_ns: u64,
    pub waits: u64,
    pub wait_max_ns: u64,
    pub homed_at_exec: u64,
    pub homed_at_fork: u64,
    pub stolen_backlog: u64,
    pub guest_kept: u64,
}

impl NodeAcct {
    /// Adds another CPU's slot: sums, except the maximum.
    pub fn add(&mut self, o: &NodeAcct) {
        let max = self.wait_max_ns.max(o.wait_max_ns);
        let a: &mut [u64; 20] = bytemuck::cast_mut(self);
        let b: &[u64; 20] = bytemuck::cast_ref(o);
        for (x, y) in a.iter_mut().zip(b) {
            *x += y;
        }
        self.wait_max_ns = max;
    }
}

/// `struct nl_task_acct`: one homed thread's account.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct TaskAcct {
    pub tgid: i32,
    pub home: i32,
    pub comm: [u8; 16],
    pub node_ns: [u64; MAX_NODES],
    pub runs: u64,
    pub runs_home: u64,
    pub wait_ns: u64,
    pub waits: u64,
    pub wait_max_ns: u64,
    pub reattracted: u64,
    pub stolen: u64,
    pub placed_idle: u64,
    pub stolen_backlog: u64,
    pub guest_kept: u64,
}

/// `struct nl_stats`: the object's `.bss`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Stats {
    pub steals_by_distance: [u64; 256],
    pub tasks_untracked: u64,
    pub timer_runs: u64,
    pub exit_kind: u64,
    pub exit_code: i64,
    pub exit_reason: [u8; 128],
    pub exit_msg: [u8; 1024],
}

/// A NUL-terminated C string field as text.
pub fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_acct_add_sums_and_keeps_the_maximum() {
        let mut a = NodeAcct {
            home_ns: 5,
            wait_max_ns: 9,
            ..Default::default()
        };
        a.add(&NodeAcct {
            home_ns: 7,
            wait_max_ns: 4,
            waits: 2,
            ..Default::default()
        });
        assert_eq!((a.home_ns, a.wait_max_ns, a.waits), (12, 9, 2));
    }

    #[test]
    fn the_object_is_an_elf_bpf_file() {
        assert_eq!(&OBJECT[..4], b"\x7fELF");
        // e_machine 247 = EM_BPF.
        assert_eq!(u16::from_le_bytes([OBJECT[18], OBJECT[19]]), 247);
    }
}
