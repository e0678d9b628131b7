//! Turning raw ring buffer records into [`Event`]s through the format files.
//!
//! A record starts with `common_type`, the event's ID; the [`Decoder`]
//! knows, for each traced event, the fields it needs and where they are.
//! Records of other events (IDs it was not built with) are skipped.

use super::event::{self, Event, Kind};
use super::format::{EventFormat, Field};
use super::ringbuf::RawRecord;
use std::collections::HashMap;

#[derive(Debug, Clone)]
enum Layout {
    Migrate {
        pid: Field,
        orig: Field,
        dest: Field,
    },
    Switch {
        prev_pid: Field,
        prev_state: Field,
        next_pid: Field,
    },
    MoveNuma([Field; 5]),
    SwapNuma([Field; 6]),
    StickNuma([Field; 5]),
    Fork {
        parent: Field,
        child: Field,
    },
    Exit {
        pid: Field,
    },
}

/// Decodes the events numalab traces, by ID.
#[derive(Debug, Clone)]
pub struct Decoder {
    common_type: Field,
    by_id: HashMap<u16, Layout>,
}

impl Decoder {
    /// Builds a decoder from the formats of the events to decode; an error
    /// names an event that lacks a field numalab needs.
    pub fn new(formats: &[EventFormat]) -> Result<Decoder, String> {
        let mut by_id = HashMap::new();
        let mut common_type = None;
        for f in formats {
            let n = |name: &str| f.need(name).cloned();
            let layout = match f.name.as_str() {
                event::MIGRATE => Layout::Migrate {
                    pid: n("pid")?,
                    orig: n("orig_cpu")?,
                    dest: n("dest_cpu")?,
                },
                event::SWITCH => Layout::Switch {
                    prev_pid: n("prev_pid")?,
                    prev_state: n("prev_state")?,
                    next_pid: n("next_pid")?,
                },
                event::MOVE_NUMA => Layout::MoveNuma([
                    n("pid")?,
                    n("src_cpu")?,
                    n("src_nid")?,
                    n("dst_cpu")?,
                    n("dst_nid")?,
                ]),
                event::SWAP_NUMA => Layout::SwapNuma([
                    n("src_pid")?,
                    n("src_cpu")?,
                    n("src_nid")?,
                    n("dst_pid")?,
                    n("dst_cpu")?,
                    n("dst_nid")?,
                ]),
                // Linux 5.7 gave sched_stick_numa both tasks (src_pid...);
                // before, it had the move_numa fields (pid...).
                event::STICK_NUMA => Layout::StickNuma([
                    n("src_pid").or_else(|_| n("pid"))?,
                    n("src_cpu")?,
                    n("src_nid")?,
                    n("dst_cpu")?,
                    n("dst_nid")?,
                ]),
                event::FORK => Layout::Fork {
                    parent: n("parent_pid")?,
                    child: n("child_pid")?,
                },
                event::EXIT => Layout::Exit { pid: n("pid")? },
                other => return Err(format!("numalab does not decode event {other}")),
            };
            common_type.get_or_insert(n("common_type")?);
            by_id.insert(f.id, layout);
        }
        Ok(Decoder {
            common_type: common_type.ok_or("no event formats")?,
            by_id,
        })
    }

    /// Decodes one record recorded on `cpu`; `None` for other events and
    /// records too short for their fields.
    pub fn decode(&self, cpu: u32, rec: &RawRecord) -> Option<Event> {
        let id = self.common_type.int(rec.data)? as u16;
        let d = rec.data;
        let u = |f: &Field| f.int(d).map(|v| v as u32);
        let i = |f: &Field| f.int(d).map(|v| v as i32);
        let kind = match self.by_id.get(&id)? {
            Layout::Migrate { pid, orig, dest } => Kind::Migrate {
                pid: u(pid)?,
                orig_cpu: u(orig)?,
                dest_cpu: u(dest)?,
            },
            Layout::Switch {
                prev_pid,
                prev_state,
                next_pid,
            } => Kind::Switch {
                prev_pid: u(prev_pid)?,
                prev_runnable: event::prev_state_runnable(prev_state.int(d)?),
                next_pid: u(next_pid)?,
            },
            Layout::MoveNuma([p, sc, sn, dc, dn]) => Kind::MoveNuma {
                pid: u(p)?,
                src_cpu: i(sc)?,
                src_nid: i(sn)?,
                dst_cpu: i(dc)?,
                dst_nid: i(dn)?,
            },
            Layout::SwapNuma([sp, sc, sn, dp, dc, dn]) => Kind::SwapNuma {
                src_pid: u(sp)?,
                src_cpu: i(sc)?,
                src_nid: i(sn)?,
                dst_pid: u(dp)?,
                dst_cpu: i(dc)?,
                dst_nid: i(dn)?,
            },
            Layout::StickNuma([p, sc, sn, dc, dn]) => Kind::StickNuma {
                pid: u(p)?,
                src_cpu: i(sc)?,
                src_nid: i(sn)?,
                dst_cpu: i(dc)?,
                dst_nid: i(dn)?,
            },
            Layout::Fork { parent, child } => Kind::Fork {
                parent_pid: u(parent)?,
                child_pid: u(child)?,
            },
            Layout::Exit { pid } => Kind::Exit { pid: u(pid)? },
        };
        Some(Event {
            ts_ns: rec.ts_ns,
            cpu,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn fmt(name: &str, id: u16, fields: &[(&str, usize, usize, bool)]) -> EventFormat {
        let mut all = vec![Field {
            name: "common_type".into(),
            offset: 0,
            size: 2,
            signed: false,
        }];
        all.extend(fields.iter().map(|&(n, o, s, g)| Field {
            name: n.into(),
            offset: o,
            size: s,
            signed: g,
        }));
        EventFormat {
            name: name.into(),
            id,
            fields: all,
        }
    }

    fn put(rec: &mut [u8], off: usize, v: &[u8]) {
        rec[off..off + v.len()].copy_from_slice(v);
    }

    #[test]
    fn decodes_by_id_and_skips_others() {
        let mig = fmt(
            "sched_migrate_task",
            300,
            &[
                ("pid", 24, 4, true),
                ("orig_cpu", 32, 4, true),
                ("dest_cpu", 36, 4, true),
            ],
        );
        let sw = fmt(
            "sched_switch",
            372,
            &[
                ("prev_pid", 24, 4, true),
                ("prev_state", 32, 8, true),
                ("next_pid", 56, 4, true),
            ],
        );
        let stick_old = fmt(
            "sched_stick_numa",
            400,
            &[
                ("pid", 8, 4, true),
                ("src_cpu", 20, 4, true),
                ("src_nid", 24, 4, true),
                ("dst_cpu", 28, 4, true),
                ("dst_nid", 32, 4, true),
            ],
        );
        let d = Decoder::new(&[mig, sw, stick_old]).unwrap();

        let mut r = vec![0u8; 40];
        put(&mut r, 0, &300u16.to_ne_bytes());
        put(&mut r, 24, &77i32.to_ne_bytes());
        put(&mut r, 32, &3i32.to_ne_bytes());
        put(&mut r, 36, &1i32.to_ne_bytes());
        let e = d.decode(2, &RawRecord { ts_ns: 9, data: &r }).unwrap();
        assert_eq!(
            e,
            Event {
                ts_ns: 9,
                cpu: 2,
                kind: Kind::Migrate {
                    pid: 77,
                    orig_cpu: 3,
                    dest_cpu: 1
                }
            }
        );

        let mut r = vec![0u8; 64];
        put(&mut r, 0, &372u16.to_ne_bytes());
        put(&mut r, 24, &77i32.to_ne_bytes());
        put(&mut r, 32, &0x100i64.to_ne_bytes());
        put(&mut r, 56, &5i32.to_ne_bytes());
        let e = d.decode(1, &RawRecord { ts_ns: 1, data: &r }).unwrap();
        assert_eq!(
            e.kind,
            Kind::Switch {
                prev_pid: 77,
                prev_runnable: true,
                next_pid: 5
            }
        );

        let mut r = vec![0u8; 36];
        put(&mut r, 0, &400u16.to_ne_bytes());
        put(&mut r, 8, &77i32.to_ne_bytes());
        put(&mut r, 28, &(-1i32).to_ne_bytes());
        let e = d.decode(0, &RawRecord { ts_ns: 1, data: &r }).unwrap();
        assert!(matches!(
            e.kind,
            Kind::StickNuma {
                pid: 77,
                dst_cpu: -1,
                ..
            }
        ));

        put(&mut r, 0, &999u16.to_ne_bytes());
        assert!(d.decode(0, &RawRecord { ts_ns: 1, data: &r }).is_none());
        // Too short for its fields.
        let r = 300u16.to_ne_bytes();
        assert!(d.decode(0, &RawRecord { ts_ns: 1, data: &r }).is_none());
    }

    #[test]
    fn missing_field_is_named() {
        let bad = fmt("sched_migrate_task", 1, &[("pid", 8, 4, true)]);
        let e = Decoder::new(&[bad]).unwrap_err();
        assert!(
            e.contains("sched_migrate_task") && e.contains("orig_cpu"),
            "{e}"
        );
    }
}
