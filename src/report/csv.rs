//! One CSV line per row: the serialized [`super::rows::ReportRow`]s.

use super::rows::rows;
use super::RowStats;

pub fn render(stats: &[RowStats]) -> String {
    crate::table::csv(rows(stats)).expect("report rows serialize to CSV")
}
