//! One CSV line per row.

use super::RowStats;
use std::fmt::Write;

fn q(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The traced columns (empty without `run --trace`).
fn traced(t: Option<&super::traced::TracedRow>) -> String {
    let Some(t) = t else {
        return ",,,,,,,,,,,".into();
    };
    let c = |c: &Option<crate::stats::Correlation>| match c {
        Some(c) => format!("{},{}", c.r, c.p),
        None => ",".into(),
    };
    format!(
        "{},{},{},{},{},{},{},{},{},{}",
        t.n,
        t.same_core,
        t.same_llc,
        t.same_node,
        t.cross_node,
        t.to_mem_node,
        t.from_mem_node,
        t.away_pct.map(|a| a.to_string()).unwrap_or_default(),
        c(&t.r_cross_time),
        c(&t.r_away_time)
    )
}

pub fn render(stats: &[RowStats]) -> String {
    let mut out = String::from(
        "row,pnid,nb,mem,cpu,migration_cost_ns,n,avg_s,max_s,min_s,stdv_s,ci95_s,cv,cross_node_mean,kernel_migrations_mean,on_mem_node_pct_mean,noisy,knobs_changed,skipped,traced_n,traced_same_core,traced_same_llc,traced_same_node,traced_cross_node,traced_to_mem_node,traced_from_mem_node,traced_away_pct,r_cross_time,p_cross_time,r_away_time,p_away_time\n",
    );
    let f = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
    for s in stats {
        let t = s.time.as_ref();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.row.id,
            s.row.pnid,
            s.row.nb,
            q(&s.row.mem_label()),
            s.row.cpu_label(),
            s.row
                .migration_cost_ns
                .map(|c| c.to_string())
                .unwrap_or_default(),
            s.n,
            f(t.map(|t| t.mean)),
            f(t.map(|t| t.max)),
            f(t.map(|t| t.min)),
            f(t.map(|t| t.stddev)),
            f(t.and_then(|t| t.ci95)),
            f(t.map(|t| t.cv)),
            f(s.cross_node_mean),
            f(s.kernel_migrations_mean),
            f(s.on_mem_node_pct_mean),
            s.noisy,
            s.knobs_changed,
            q(s.row.skip.as_deref().unwrap_or("")),
            traced(s.traced.as_ref())
        );
    }
    out
}
