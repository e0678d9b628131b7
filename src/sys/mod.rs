//! Thin wrappers over the system calls numalab needs that std lacks.
//! Every `unsafe` block in the crate lives under this module, each with a
//! `// SAFETY:` note.

/// Restores the default SIGPIPE action, so `numalab topo | head` ends
/// quietly like other command-line tools instead of panicking on EPIPE.
pub fn default_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler code; it is called
    // once at start-up before any thread is spawned.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
