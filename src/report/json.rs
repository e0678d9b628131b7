//! The report as one JSON document.

use super::{header, RowStats};
use crate::run::record::{RunMeta, SampleRecord};

pub fn render(
    meta: &RunMeta,
    samples: &[SampleRecord],
    stats: &[RowStats],
    notes: &[String],
) -> String {
    let head: serde_json::Map<String, serde_json::Value> = header(meta)
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
        .collect();
    let doc = serde_json::json!({
        "schema": "numalab.report/1",
        "header": head,
        "node_a": meta.node_a,
        "node_b": meta.node_b,
        "backend": meta.backend,
        "samples_recorded": samples.len(),
        "samples_planned": meta.planned_samples,
        "precision": meta.spec.precision,
        "complete": meta.end_unix_s.is_some(),
        "warnings": notes,
        "rows": stats,
    });
    serde_json::to_string_pretty(&doc).expect("report serializes") + "\n"
}
