//! The two shapes of every `onelog admin` answer: aligned text tables for people, and one JSON
//! value with stable field names for scripts (`--json`).
//!
//! Hand-written rather than a table crate: left-aligned columns separated by two spaces, as
//! `kafka-consumer-groups.sh` prints them, are a dozen lines.

use serde_json::Value;

/// A text table: a header row and rows of cells, each column as wide as its widest cell.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self { header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = (0..columns)
                .map(|i| {
                    let cell = cells.get(i).map_or("", String::as_str);
                    format!("{cell:<width$}", width = widths[i])
                })
                .collect();
            padded.join("  ").trim_end().to_string()
        };
        let mut out = line(&self.header);
        for row in &self.rows {
            out.push('\n');
            out.push_str(&line(row));
        }
        out
    }
}

/// What a command prints: `text` (lines and tables) by default, `json` with `--json`.
#[derive(Debug, Clone)]
pub struct Report {
    pub text: String,
    pub json: Value,
}

impl Report {
    pub fn new(text: impl Into<String>, json: Value) -> Self {
        Self { text: text.into(), json }
    }
}

/// A cell for a value that may be absent (`-`).
pub fn cell<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Ids as `1, 2, 3`, or `-` for none.
pub fn id_list<T: ToString>(ids: &[T]) -> String {
    if ids.is_empty() {
        return "-".to_string();
    }
    ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut table = Table::new(&["ID", "ROLE"]);
        table.row(vec!["1".into(), "leader".into()]);
        table.row(vec!["100".into(), "follower".into()]);
        assert_eq!(table.render(), "ID   ROLE\n1    leader\n100  follower");
    }
}
