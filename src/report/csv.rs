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

pub fn render(stats: &[RowStats]) -> String {
    let mut out = String::from(
        "row,pnid,nb,mem,cpu,migration_cost_ns,n,avg_s,max_s,min_s,stdv_s,ci95_s,cv,cross_node_mean,kernel_migrations_mean,on_mem_node_pct_mean,noisy,skipped\n",
    );
    let f = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
    for s in stats {
        let t = s.time.as_ref();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
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
            q(s.row.skip.as_deref().unwrap_or(""))
        );
    }
    out
}
