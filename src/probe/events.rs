//! How a threaded probe's workers report to the timeline process: one pipe,
//! a byte per finished pass and three bytes when a worker ends its loop.
//! Each message is one write(2) of at most PIPE_BUF bytes, so messages from
//! different workers never interleave; a reader may still get one cut
//! between two reads, which [`Events::feed`] carries over.

use std::time::Duration;

/// A pass finished.
pub const PASS: u8 = b'p';
/// A worker ended its loop; its index follows, u16 little-endian.
pub const DONE: u8 = b'd';

/// The message for worker `index` ending its loop.
pub fn done(index: usize) -> [u8; 3] {
    let i = (index as u16).to_le_bytes();
    [DONE, i[0], i[1]]
}

/// What the messages read so far say.
#[derive(Debug, Clone, Default)]
pub struct Events {
    /// Passes finished over every thread.
    pub passes: u64,
    /// `ended[i]`: worker i has ended its loop.
    pub ended: Vec<bool>,
    carry: Vec<u8>,
}

impl Events {
    pub fn new(threads: usize) -> Events {
        Events {
            ended: vec![false; threads],
            ..Events::default()
        }
    }

    /// Workers that have ended their loops.
    pub fn threads_done(&self) -> usize {
        self.ended.iter().filter(|&&e| e).count()
    }

    pub fn all_done(&self) -> bool {
        self.ended.iter().all(|&e| e)
    }

    /// Takes in bytes read from the pipe; an unknown message is a bug.
    pub fn feed(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.carry.extend_from_slice(bytes);
        let mut at = 0;
        while at < self.carry.len() {
            match self.carry[at] {
                PASS => {
                    self.passes += 1;
                    at += 1;
                }
                DONE if self.carry.len() - at >= 3 => {
                    let i = u16::from_le_bytes([self.carry[at + 1], self.carry[at + 2]]) as usize;
                    match self.ended.get_mut(i) {
                        Some(e) => *e = true,
                        None => anyhow::bail!("the probe threads' pipe named thread {i}: a bug"),
                    }
                    at += 3;
                }
                DONE => break,
                b => anyhow::bail!("the probe threads' pipe said {b:#x}: a bug"),
            }
        }
        self.carry.drain(..at);
        Ok(())
    }

    /// One progress line: passes and threads done, and an estimate of the
    /// time left (from `min_time_ns` when the run is timed, else from the
    /// passes' pace against `of` passes in all).
    pub fn progress_line(&self, elapsed: Duration, of: u64, min_time_ns: Option<u64>) -> String {
        let t = elapsed.as_secs_f64();
        let left = match min_time_ns {
            Some(ns) => Some((ns as f64 / 1e9 - t).max(0.0)),
            None if self.passes > 0 => {
                Some(t * of.saturating_sub(self.passes) as f64 / self.passes as f64)
            }
            None => None,
        };
        // Under --min-time the passes go on past `of`: a count, no total.
        let passes = match min_time_ns {
            Some(_) => format!("{} passes", self.passes),
            None => format!("{} of {of} passes", self.passes),
        };
        format!(
            "  {t:.1} s: {passes}, {} of {} threads done{}",
            self.threads_done(),
            self.ended.len(),
            left.map_or_else(String::new, |l| format!(", about {l:.0} s left"))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_cut_between_reads_are_carried_over() {
        let mut e = Events::new(3);
        let mut bytes = vec![PASS, PASS];
        bytes.extend(done(2));
        bytes.push(PASS);
        bytes.extend(done(0));
        // Fed one byte at a time: every cut there is.
        for b in &bytes {
            e.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(e.passes, 3);
        assert_eq!(e.ended, vec![true, false, true]);
        assert_eq!(e.threads_done(), 2);
        assert!(!e.all_done());
        e.feed(&done(1)).unwrap();
        assert!(e.all_done());
        assert!(e.feed(b"x").is_err());
        assert!(Events::new(1).feed(&done(7)).is_err(), "no thread 7");
    }

    #[test]
    fn the_progress_line_estimates_what_is_left() {
        let mut e = Events::new(2);
        e.feed(&[PASS, PASS]).unwrap();
        let l = e.progress_line(Duration::from_secs(2), 8, None);
        assert_eq!(
            l,
            "  2.0 s: 2 of 8 passes, 0 of 2 threads done, about 6 s left"
        );
        let l = e.progress_line(Duration::from_secs(2), 8, Some(5_000_000_000));
        assert_eq!(l, "  2.0 s: 2 passes, 0 of 2 threads done, about 3 s left");
        let l = Events::new(1).progress_line(Duration::ZERO, 4, None);
        assert_eq!(l, "  0.0 s: 0 of 4 passes, 0 of 1 threads done");
    }
}
