//! Thin wrappers over the system calls numalab needs that std lacks:
//! CPU affinity, memory policy, page placement, prctl, and anonymous
//! buffers. rustix makes the calls it wraps safely (ids, affinity, clocks,
//! futex, timer slack, memfd, pipes, flock, mounts, page size); the rest are
//! hand-written here: mbind/move_pages/get_mempolicy/set_mempolicy, wait4
//! and getrusage (rustix has no rusage), raw prctl options, signals given as
//! raw numbers, mmap, and code run between fork and exec. Every `unsafe`
//! block outside the probe's access kernels lives under this module, but
//! for the `pre_exec` hook of `home::launch`, each with a `// SAFETY:` note.

pub mod affinity;
pub mod buffer;
pub mod numa;
pub mod signals;
pub mod state;
pub mod stop_page;

pub use buffer::Buffer;

use crate::idset::IdSet;
use std::io;

/// Blocks SIGPIPE for the calling thread only: its writes to a pipe whose
/// reader is gone fail with EPIPE instead of killing the process (numalab
/// restores SIGPIPE's default action for its output: [`default_sigpipe`]).
/// For a threaded probe's workers, whose pipe's reader is another process.
pub fn block_sigpipe_in_this_thread() -> io::Result<()> {
    // SAFETY: `set` is a local sigset_t initialised by sigemptyset before
    // use; pthread_sigmask changes only the calling thread's mask and the
    // old mask is not asked for (null).
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Restores the default SIGPIPE action, so `numalab topo | head` ends
/// quietly like other command-line tools instead of panicking on EPIPE.
pub fn default_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler code; it is called
    // once at start-up before any thread is spawned.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The CPU the calling thread runs on (glibc reads it from rseq or vDSO).
/// Not rustix's `sched_getcpu`, which makes the getcpu system call: the
/// probe asks between every two chunks of accesses (probe::observe), where
/// a system call would add its cost to the measured loop.
#[inline(always)]
pub fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments and touches no user memory.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as u32
}

/// CLOCK_MONOTONIC in nanoseconds: the clock tracefs calls `mono`, so probe
/// and kernel trace timestamps line up.
pub fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A procfs file opened once and read again and again into room taken at
/// open: a read makes no allocation. For the probe's timed loops, where a
/// call into the allocator reads its global parameters, a page every
/// thread of a threaded probe touches and so memory they share, to NUMA
/// balancing (see `probe::threads`). `/proc/thread-self/...` names the
/// thread that opens it.
pub struct ProcFile {
    file: Option<std::fs::File>,
    buf: Vec<u8>,
}

impl ProcFile {
    /// Opens `path` with room for `room` bytes; a file that cannot be
    /// opened reads as `None`.
    pub fn open(path: &str, room: usize) -> ProcFile {
        ProcFile {
            file: std::fs::File::open(path).ok(),
            buf: vec![0; room],
        }
    }

    /// The file's text now (pread from offset 0; cut at the room); `None`
    /// when it could not be opened or read. The raw syscall (rustix), not
    /// the C library's wrapper, which may read its globals.
    pub fn read(&mut self) -> Option<&str> {
        let f = self.file.as_ref()?;
        let mut at = 0;
        while at < self.buf.len() {
            match rustix::io::pread(f, &mut self.buf[at..], at as u64) {
                Ok(0) => break,
                Ok(k) => at += k,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        std::str::from_utf8(&self.buf[..at]).ok()
    }
}

/// This thread's /proc/thread-self/sched, opened for [`ProcFile::read`]
/// (its NUMA lines grow with the nodes: room for a thousand).
pub fn thread_sched_file() -> ProcFile {
    ProcFile::open("/proc/thread-self/sched", 1 << 17)
}

/// The kernel's count of a thread's migrations (`se.nr_migrations`) in its
/// /proc/PID/sched text.
pub fn nr_migrations_in(sched: &str) -> Option<u64> {
    sched_field(sched, "se.nr_migrations")
}

/// One `name : value` line of a /proc/PID/sched text (kernel/sched/debug.c
/// prints them as `%-45s:%21Ld`), trimmed: the one parser of that format,
/// used here and by `analysis::numastat`.
pub fn sched_pair(line: &str) -> Option<(&str, &str)> {
    let (k, v) = line.split_once(':')?;
    Some((k.trim(), v.trim()))
}

/// A numeric `name : value` field of a /proc/PID/sched text.
pub fn sched_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter_map(sched_pair)
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

/// The calling process id.
pub fn pid() -> i32 {
    rustix::process::getpid().as_raw_pid()
}

/// Thread `tid` as rustix takes it: `None` for 0 (the caller). A negative
/// id names no thread: ESRCH, as the kernel answers for one.
fn thread_id(tid: i32) -> io::Result<Option<rustix::process::Pid>> {
    if tid < 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(rustix::process::Pid::from_raw(tid))
}

/// Binds thread `tid` (0 = caller) to `cpus`.
pub fn set_affinity(tid: i32, cpus: &IdSet) -> io::Result<()> {
    use rustix::thread::CpuSet;
    let mut set = CpuSet::new();
    for c in cpus.iter() {
        // CpuSet::MAX_CPU is glibc's CPU_SETSIZE (1024), the name users know.
        if c as usize >= CpuSet::MAX_CPU {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c} beyond CPU_SETSIZE"),
            ));
        }
        set.set(c as usize);
    }
    Ok(rustix::thread::sched_setaffinity(thread_id(tid)?, &set)?)
}

/// The CPUs thread `tid` (0 = caller) may run on.
pub fn get_affinity(tid: i32) -> io::Result<IdSet> {
    use rustix::thread::CpuSet;
    let set = rustix::thread::sched_getaffinity(thread_id(tid)?)?;
    Ok((0..CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .map(|c| c as u32)
        .collect())
}

/// Asks the kernel to kill this process with `sig` when its parent dies
/// (PR_SET_PDEATHSIG), so helpers never outlive whoever started them.
pub fn die_with_parent(sig: i32) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and no pointers.
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's timer slack (PR_SET_TIMERSLACK), so sleeps end
/// on time; failure only costs precision and is ignored.
pub fn set_timer_slack_ns(ns: u64) {
    // 0 (None) restores the thread's default slack, as prctl's 0 does.
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(ns));
}

/// `s` as a C string; a NUL inside it is an InvalidInput error naming it
/// (checked here, not by rustix, so the message stays std's NulError).
fn c_string(s: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Mounts a pseudo filesystem (`debugfs`, `tracefs`) at `target`.
pub fn mount_fs(fstype: &str, target: &str) -> io::Result<()> {
    let (src, tgt, ty) = (c_string(fstype)?, c_string(target)?, c_string(fstype)?);
    Ok(rustix::mount::mount(
        src.as_c_str(),
        tgt.as_c_str(),
        ty.as_c_str(),
        rustix::mount::MountFlags::empty(),
        None,
    )?)
}

/// Unmounts `target`.
pub fn unmount(target: &str) -> io::Result<()> {
    let t = c_string(target)?;
    Ok(rustix::mount::unmount(
        t.as_c_str(),
        rustix::mount::UnmountFlags::empty(),
    )?)
}

/// Spawns `cmd` so the child gets SIGKILL when this process dies, however
/// it dies: probes never outlive their runner.
pub fn spawn_dying_with_parent(cmd: &mut std::process::Command) -> io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let parent = pid();
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit via kill).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            Ok(())
        })
    };
    cmd.spawn()
}

/// An anonymous in-memory file (memfd_create): a child's output goes there
/// and vanishes with this process, whatever kills it, so nothing is ever
/// left in /tmp.
pub fn memfd(name: &str) -> io::Result<std::fs::File> {
    let c = c_string(name)?;
    let fd = rustix::fs::memfd_create(c.as_c_str(), rustix::fs::MemfdFlags::CLOEXEC)?;
    Ok(std::fs::File::from(fd))
}

/// A raw prctl(2) with five word arguments; returns the result or errno.
pub fn prctl_raw(option: i32, a2: u64, a3: u64, a4: u64, a5: u64) -> io::Result<i64> {
    // SAFETY: callers pass either plain integers or a pointer to a live,
    // aligned i32 they own for the GET form; prctl writes at most 4 bytes.
    let rc = unsafe { libc::prctl(option, a2, a3, a4, a5) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as i64)
    }
}

/// Releases a child started by [`spawn_gated`].
pub struct Gate {
    fd: std::os::fd::OwnedFd,
}

impl Gate {
    /// Lets the child go on to exec its program.
    pub fn open(self) -> io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::from(self.fd);
        f.write_all(b"g")
    }
}

/// The environment variable that hands the gate's descriptor to
/// [`wait_at_gate_and_exec`].
pub const GATE_FD_ENV: &str = "NUMALAB_GATE_FD";

/// Spawns `exe` (numalab's own executable) as a trampoline that waits for
/// [`Gate::open`] and then execs `command` in the same process, so a tracer
/// can be attached to its pid before the program runs an instruction.
/// (std's spawn waits for exec, so the wait cannot happen before exec.)
/// `setup` configures stdio and the environment. Dropping the gate
/// unopened makes the child exit with 127; the child is killed with
/// SIGKILL when this process dies.
pub fn spawn_gated(
    exe: &std::path::Path,
    command: &[std::ffi::OsString],
    setup: impl FnOnce(&mut std::process::Command),
) -> io::Result<(std::process::Child, Gate)> {
    spawn_gated_opts(exe, command, true, setup)
}

/// [`spawn_gated`], with the choice of tying the child's life to this
/// process (`die_with_parent`): `numalab home -- CMD` does not, so the
/// command outlives an agent that is killed (an unopened gate still ends
/// the trampoline, which reads end-of-file).
pub fn spawn_gated_opts(
    exe: &std::path::Path,
    command: &[std::ffi::OsString],
    die_with_parent: bool,
    setup: impl FnOnce(&mut std::process::Command),
) -> io::Result<(std::process::Child, Gate)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (rd, wr) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let r = rd.as_raw_fd();
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__gate").arg("--").args(command);
    cmd.env(GATE_FD_ENV, r.to_string());
    setup(&mut cmd);
    // SAFETY: runs between fork and exec; fcntl is async-signal-safe and
    // `r` is valid in the child. Clearing FD_CLOEXEC keeps only the read
    // end open across exec; the write end closes there.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(r, libc::F_SETFD, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let child = if die_with_parent {
        spawn_dying_with_parent(&mut cmd)?
    } else {
        cmd.spawn()?
    };
    drop(rd);
    Ok((child, Gate { fd: wr }))
}

/// The trampoline's side (`numalab __gate -- COMMAND...`): waits for the
/// gate, then replaces this process with `command`. Returns only on error.
pub fn wait_at_gate_and_exec(command: &[std::ffi::OsString]) -> io::Error {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::os::unix::process::CommandExt;
    let Some(fd) = std::env::var(GATE_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return io::Error::other(format!("{GATE_FD_ENV} is not set: not started by numalab"));
    };
    // SAFETY: the descriptor was inherited from spawn_gated for this
    // purpose and nothing else in this process owns it.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut b = [0u8; 1];
    match f.read(&mut b) {
        Ok(1) => {}
        _ => std::process::exit(127), // the tracer went away
    }
    drop(f);
    let Some((prog, args)) = command.split_first() else {
        return io::Error::other("no command");
    };
    std::process::Command::new(prog)
        .args(args)
        .env_remove(GATE_FD_ENV)
        .exec()
}

/// Sends `sig` to process `pid`.
pub fn signal(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill(2) takes two integers and no pointers.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A child's exit status and CPU times, from wait4(2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// The raw wait status (`WIFEXITED`...).
    pub status: i32,
    pub user_ns: u64,
    pub sys_ns: u64,
}

impl Reaped {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        libc::WIFEXITED(self.status) && libc::WEXITSTATUS(self.status) == 0
    }
    /// The exit code a shell would give: the code, or 128 + the signal.
    pub fn shell_code(&self) -> i32 {
        if libc::WIFEXITED(self.status) {
            libc::WEXITSTATUS(self.status)
        } else {
            128 + libc::WTERMSIG(self.status)
        }
    }
    /// "exit 3" or "signal 9".
    pub fn describe(&self) -> String {
        if libc::WIFEXITED(self.status) {
            format!("exit {}", libc::WEXITSTATUS(self.status))
        } else if libc::WIFSIGNALED(self.status) {
            format!("signal {}", libc::WTERMSIG(self.status))
        } else {
            format!("status {:#x}", self.status)
        }
    }
}

/// Reaps child `pid` if it has ended (WNOHANG), with its CPU times.
pub fn try_reap(pid: i32) -> io::Result<Option<Reaped>> {
    let mut status = 0i32;
    // SAFETY: rusage is plain data; zeroed is a valid value for it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals for the call's duration.
    let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    match rc {
        0 => Ok(None),
        r if r == pid => {
            let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
            Ok(Some(Reaped {
                status,
                user_ns: ns(ru.ru_utime),
                sys_ns: ns(ru.ru_stime),
            }))
        }
        _ => Err(io::Error::last_os_error()),
    }
}

/// CPU time (user + system) this process has used, in ns (getrusage).
pub fn self_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data; zeroed is a valid value for it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, writable rusage for the call's duration.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_beyond_cpu_setsize_is_refused_by_name() {
        let cpus: IdSet = [0, 1024].into_iter().collect();
        let e = set_affinity(0, &cpus).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "CPU 1024 beyond CPU_SETSIZE");
    }

    #[test]
    fn affinity_round_trips_and_a_negative_tid_is_no_thread() {
        let mine = get_affinity(0).unwrap();
        assert!(mine.iter().next().is_some());
        set_affinity(0, &mine).unwrap();
        assert_eq!(get_affinity(0).unwrap(), mine);
        assert_eq!(
            get_affinity(-2).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
    }

    #[test]
    fn memfd_and_names_with_a_nul() {
        use std::io::{Read, Seek, Write};
        let mut f = memfd("numalab-test").unwrap();
        f.write_all(b"x").unwrap();
        f.rewind().unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "x");
        let e = memfd("a\0b").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            unmount("a\0b").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
