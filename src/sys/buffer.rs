//! An anonymous, page-aligned buffer of u64 words from mmap(2), so memory
//! policy and THP advice apply to exactly its pages and nothing is touched
//! before the caller decides where the pages should go.

use std::io;

/// Transparent huge page advice for a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thp {
    /// madvise(MADV_HUGEPAGE)
    On,
    /// madvise(MADV_NOHUGEPAGE)
    Off,
}

pub struct Buffer {
    ptr: *mut u64,
    words: usize,
}

// SAFETY: the buffer owns its mapping exclusively (a shared one is shared
// only with processes forked later, which have their own copy of this
// value); moving it between threads moves that ownership.
unsafe impl Send for Buffer {}

impl Buffer {
    /// Maps `bytes` (rounded up to whole words) of untouched anonymous memory.
    pub fn map(bytes: usize) -> io::Result<Buffer> {
        Buffer::map_flags(bytes, libc::MAP_PRIVATE)
    }

    /// Maps `bytes` of untouched *shared* anonymous memory (shmem, as
    /// MAP_SHARED|MAP_ANONYMOUS, a memfd or System V shared memory are):
    /// processes forked after the mapping share its pages, as a database's
    /// backends share its buffer pool.
    pub fn map_shmem(bytes: usize) -> io::Result<Buffer> {
        Buffer::map_flags(bytes, libc::MAP_SHARED)
    }

    fn map_flags(bytes: usize, sharing: libc::c_int) -> io::Result<Buffer> {
        let words = bytes.div_ceil(8).max(1);
        // SAFETY: a fresh anonymous mapping; no existing memory is affected
        // and the result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                words * 8,
                libc::PROT_READ | libc::PROT_WRITE,
                sharing | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Buffer {
            ptr: p as *mut u64,
            words,
        })
    }

    /// Maps `bytes` rounded up to a multiple of `align` (a power of two, at
    /// least a page), starting at a multiple of `align`: with `align` the
    /// huge page size, no transparent huge page can hold this buffer's
    /// words and another's (a huge page spanning two threads' buffers would
    /// be memory they share, to NUMA balancing).
    pub fn map_aligned(bytes: usize, align: usize) -> io::Result<Buffer> {
        assert!(align.is_power_of_two() && align >= 4096, "align {align}");
        let len = bytes.max(8).div_ceil(align) * align;
        let over = len + align;
        // SAFETY: a fresh private anonymous mapping, checked for MAP_FAILED;
        // the parts trimmed below are within it and no one else's.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let start = (p as usize).next_multiple_of(align);
            let head = start - p as usize;
            if head > 0 {
                libc::munmap(p, head);
            }
            let tail = over - head - len;
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
            Ok(Buffer {
                ptr: start as *mut u64,
                words: len / 8,
            })
        }
    }

    /// The first word, for code that shares the buffer between threads
    /// and so cannot hold a slice of it (see `probe::kernels`).
    pub fn as_ptr(&self) -> *mut u64 {
        self.ptr
    }

    pub fn words(&self) -> usize {
        self.words
    }
    pub fn bytes(&self) -> usize {
        self.words * 8
    }
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is `words` u64s long, readable and writable,
        // zero-filled on first touch, and exclusively borrowed here.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.words) }
    }
    pub fn as_slice(&self) -> &[u64] {
        // SAFETY: as above, shared borrow.
        unsafe { std::slice::from_raw_parts(self.ptr, self.words) }
    }

    /// Applies transparent huge page advice to the whole buffer.
    pub fn advise_thp(&self, thp: Thp) -> io::Result<()> {
        let advice = match thp {
            Thp::On => libc::MADV_HUGEPAGE,
            Thp::Off => libc::MADV_NOHUGEPAGE,
        };
        // SAFETY: the range is exactly this buffer's mapping.
        let rc = unsafe { libc::madvise(self.ptr as *mut libc::c_void, self.bytes(), advice) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this value owns.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.words * 8);
        }
    }
}
