//! NUMA memory policy and page placement: mbind(2) and move_pages(2),
//! called through syscall(2) since glibc does not wrap them (libnuma does,
//! and numalab stays free of it to build statically).

use crate::idset::IdSet;
use std::io;

/// A memory policy for a range (numactl's spellings in comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// `--membind N`: MPOL_BIND
    Bind(IdSet),
    /// `--preferred N`: MPOL_PREFERRED
    Preferred(u32),
    /// `--interleave LIST`: MPOL_INTERLEAVE
    Interleave(IdSet),
    /// `--localalloc`: MPOL_LOCAL. Like the default policy it allocates on
    /// the node of the CPU that touches a page, but it is not
    /// migrate-on-fault: NUMA balancing scans no memory it covers.
    Local,
}

/// What a memory policy covers. The difference matters to NUMA balancing:
/// task_numa_work() scans only VMAs whose policy (the VMA's own, else the
/// task's) is migrate-on-fault, and an explicit policy never is, so a
/// process-wide one hides all of a task's memory from it (no hinting
/// faults, no preferred node of its own), while a buffer's hides only the
/// buffer.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum PolicyScope {
    /// mbind(2) on the buffer only.
    #[default]
    Buffer,
    /// set_mempolicy(2) for the whole task, as `numactl --membind` does.
    Process,
}

impl PolicyScope {
    pub fn is_buffer(&self) -> bool {
        *self == PolicyScope::Buffer
    }

    pub fn name(self) -> &'static str {
        match self {
            PolicyScope::Buffer => "buffer",
            PolicyScope::Process => "process",
        }
    }
}

const MPOL_DEFAULT: i32 = 0;
const MPOL_PREFERRED: i32 = 1;
const MPOL_BIND: i32 = 2;
const MPOL_INTERLEAVE: i32 = 3;
const MPOL_LOCAL: i32 = 4;

/// Bits in the node masks passed to the kernel (its MAX_NUMNODES is <= 1024).
const MASK_BITS: usize = 1024;

/// mbind(2)'s flag: also move the range's pages that the policy would
/// place elsewhere.
const MPOL_MF_MOVE: u32 = 1 << 1;

/// Applies `policy` to `[addr, addr+len)` before any page is touched.
pub fn mbind(addr: usize, len: usize, policy: &Policy) -> io::Result<()> {
    let (mode, mask) = mode_and_mask(policy)?;
    mbind_raw(addr, len, mode, &mask, 0)
}

/// The mode flag (Linux 5.12) that makes an MPOL_BIND policy one NUMA
/// balancing acts on: pages may move between the bound nodes to where
/// they are used (the kernel's MPOL_F_MOF and MPOL_F_MORON).
const MPOL_F_NUMA_BALANCING: i32 = 1 << 13;

/// Binds `[addr, addr+len)` to `nodes` with MPOL_F_NUMA_BALANCING, before
/// any page is touched. On shared memory this is the one way NUMA
/// balancing scans it at all: its scanner asks a shmem mapping's own
/// (shared) policy whether migrate-on-fault is on, and without one the
/// answer is no, whatever the tasks' policies say.
pub fn mbind_numa_balancing(addr: usize, len: usize, nodes: &IdSet) -> io::Result<()> {
    mbind_raw(
        addr,
        len,
        MPOL_BIND | MPOL_F_NUMA_BALANCING,
        &node_mask(nodes)?,
        0,
    )
}

/// Gives the calling thread's stack (the whole mapping glibc made for it
/// but the guard page: thread-local storage and the thread's descriptor
/// sit at its top) `policy` as a VMA policy, moving the pages it has
/// touched already to where the policy puts them; `None` removes any VMA
/// policy (MPOL_DEFAULT), which matters because glibc hands an exited
/// thread's stack, policy and all, to the next thread it creates. A VMA policy of its own
/// decides for NUMA balancing whichever thread of the process scans; the
/// thread policy of set_mempolicy(2) counts only when the scanning thread
/// is this one (vma_policy_mof() falls back to the *scanner's* policy).
pub fn mbind_own_stack(policy: Option<&Policy>) -> io::Result<()> {
    let (mode, mask) = match policy {
        Some(p) => mode_and_mask(p)?,
        None => (MPOL_DEFAULT, node_mask(&IdSet::default())?),
    };
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: pthread_getattr_np initialises `attr` for the calling thread
    // when it returns 0, and only then is it read and destroyed.
    let rc = unsafe { libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let (mut addr, mut size) = (std::ptr::null_mut::<libc::c_void>(), 0usize);
    // SAFETY: `attr` was initialised above; `addr` and `size` outlive the
    // call. The attribute object is destroyed exactly once.
    let rc = unsafe {
        let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        rc
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let page = page_size();
    let start = addr as usize / page * page;
    let end = (addr as usize + size).div_ceil(page) * page;
    mbind_raw(start, end - start, mode, &mask, MPOL_MF_MOVE)
}

fn mbind_raw(
    addr: usize,
    len: usize,
    mode: i32,
    mask: &[libc::c_ulong],
    flags: u32,
) -> io::Result<()> {
    // SAFETY: `mask` holds MASK_BITS bits and lives across the call; the
    // kernel only reads it. The range is the caller's own mapping.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len,
            mode,
            mask.as_ptr(),
            MASK_BITS as libc::c_ulong + 1,
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Where each page of `[addr, addr+len)` lives: move_pages(2) with a NULL
/// node list only queries. Returns per page the node, or a negative errno
/// (-ENOENT for a page never touched).
pub fn page_nodes(addr: usize, len: usize) -> io::Result<Vec<i32>> {
    page_nodes_of(0, addr, len)
}

/// [`page_nodes`] of process `pid`'s memory (0: this process); another
/// process's needs the rights to read it (the same user, as for ptrace).
pub fn page_nodes_of(pid: i32, addr: usize, len: usize) -> io::Result<Vec<i32>> {
    let page = page_size();
    let first = addr / page * page;
    let count = (addr + len).div_ceil(page) - first / page;
    let mut status = vec![0i32; count];
    const BATCH: usize = 1 << 16;
    for start in (0..count).step_by(BATCH) {
        let n = BATCH.min(count - start);
        let pages: Vec<*mut libc::c_void> = (start..start + n)
            .map(|i| (first + i * page) as *mut libc::c_void)
            .collect();
        // SAFETY: `pages` and the status slice hold `n` entries each and
        // outlive the call; a NULL node list makes this a pure query.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                pid,
                n as libc::c_ulong,
                pages.as_ptr(),
                std::ptr::null::<i32>(),
                status[start..].as_mut_ptr(),
                0,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(status)
}

pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// The mode and node mask of `policy` for mbind(2) and set_mempolicy(2).
fn mode_and_mask(policy: &Policy) -> io::Result<(i32, Vec<libc::c_ulong>)> {
    let (mode, nodes) = match policy {
        Policy::Bind(n) => (MPOL_BIND, n.clone()),
        Policy::Preferred(n) => (MPOL_PREFERRED, [*n].into_iter().collect()),
        Policy::Interleave(n) => (MPOL_INTERLEAVE, n.clone()),
        Policy::Local => (MPOL_LOCAL, IdSet::default()),
    };
    Ok((mode, node_mask(&nodes)?))
}

/// A node mask for the memory-policy system calls, with the bit count the
/// kernel is told (`maxnode`).
fn node_mask(nodes: &IdSet) -> io::Result<Vec<libc::c_ulong>> {
    let mut mask = vec![0 as libc::c_ulong; MASK_BITS / libc::c_ulong::BITS as usize];
    for n in nodes.iter() {
        let n = n as usize;
        if n >= MASK_BITS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "node id too large",
            ));
        }
        mask[n / libc::c_ulong::BITS as usize] |= 1 << (n % libc::c_ulong::BITS as usize);
    }
    Ok(mask)
}

/// A prepared set_mempolicy(2) call for the calling thread's future
/// allocations; the policy is kept across fork and exec, which is how
/// `numalab home -- CMD` gives the command its policy. The mask is built
/// before fork, so the child only makes the system call (no allocation
/// between fork and exec).
#[derive(Debug, Clone)]
pub struct PreparedPolicy {
    mode: i32,
    mask: Vec<libc::c_ulong>,
}

impl PreparedPolicy {
    pub fn new(policy: &Policy) -> io::Result<PreparedPolicy> {
        let (mode, mask) = mode_and_mask(policy)?;
        Ok(PreparedPolicy { mode, mask })
    }

    /// Applies it to the calling thread; async-signal-safe.
    pub fn apply(&self) -> io::Result<()> {
        set_mempolicy_raw(self.mode, &self.mask)
    }
}

/// set_mempolicy(2): `policy` for the calling thread's future allocations
/// and, for NUMA balancing, for every VMA of its own without a policy.
pub fn set_mempolicy(policy: &Policy) -> io::Result<()> {
    PreparedPolicy::new(policy)?.apply()
}

fn set_mempolicy_raw(mode: i32, mask: &[libc::c_ulong]) -> io::Result<()> {
    // SAFETY: `mask` holds MASK_BITS bits and lives across the call; the
    // kernel only reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            mode,
            mask.as_ptr(),
            MASK_BITS as libc::c_ulong + 1,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Moves the pages of process `pid` that are on `from` to `to`
/// (migrate_pages(2)); returns how many pages could not be moved. Another
/// user's process needs CAP_SYS_NICE.
pub fn migrate_pages(pid: i32, from: &IdSet, to: &IdSet) -> io::Result<u64> {
    let (old, new) = (node_mask(from)?, node_mask(to)?);
    // SAFETY: both masks hold MASK_BITS bits and live across the call; the
    // kernel only reads them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_migrate_pages,
            pid,
            MASK_BITS as libc::c_ulong + 1,
            old.as_ptr(),
            new.as_ptr(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's policy mode, from get_mempolicy(2).
    fn mode() -> i32 {
        let mut mode: i32 = -1;
        // SAFETY: `mode` outlives the call; a NULL mask with maxnode 0 asks
        // for the mode only.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut mode as *mut i32,
                std::ptr::null_mut::<libc::c_ulong>(),
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        mode
    }

    #[test]
    fn set_mempolicy_local_and_bind_read_back() {
        // A thread of its own: the policy is per thread.
        std::thread::spawn(|| {
            assert_eq!(mode(), 0, "MPOL_DEFAULT to begin with");
            set_mempolicy(&Policy::Local).unwrap();
            assert_eq!(mode(), MPOL_LOCAL);
            set_mempolicy(&Policy::Bind([0].into_iter().collect())).unwrap();
            assert_eq!(mode(), MPOL_BIND);
        })
        .join()
        .unwrap();
        assert_eq!(mode(), 0, "other threads keep theirs");
    }
}
