//! Result tables, printed as aligned markdown or as CSV.

use super::super::text::{left, right};

/// A table of text cells with a header row.
pub struct Table {
    headers: Vec<&'static str>,
    /// Right-aligned (numeric) columns.
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns; a name starting with '>' is a right-aligned column.
    pub fn new(columns: &[&'static str]) -> Table {
        Table {
            headers: columns.iter().map(|c| c.trim_start_matches('>')).collect(),
            right: columns.iter().map(|c| c.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (one cell per column).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// Markdown with the columns padded, so it reads as well in a terminal as rendered.
    pub fn markdown(&self) -> String {
        let headers = self.headers.iter().map(|h| h.to_string()).collect();
        // A '|' inside a cell would end it.
        let rows: Vec<Vec<String>> = std::iter::once(headers)
            .chain(
                self.rows
                    .iter()
                    .map(|r| r.iter().map(|c| c.replace('|', "\\|")).collect()),
            )
            .collect();
        let mut width = vec![3; self.headers.len()];
        for r in &rows {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let rule = width
            .iter()
            .zip(&self.right)
            .map(|(&w, &right)| match right {
                true => format!("{}:", "-".repeat(w - 1)),
                false => "-".repeat(w),
            });
        let mut out = String::new();
        for (n, r) in rows.iter().enumerate() {
            let cells = r.iter().enumerate().map(|(i, c)| match self.right[i] {
                true => right(c, width[i]).to_string(),
                false => left(c, width[i]).to_string(),
            });
            out += &line(cells.collect());
            if n == 0 {
                out += &line(rule.clone().collect());
            }
        }
        out
    }

    /// CSV (RFC 4180 quoting).
    pub fn csv(&self) -> String {
        let quote = |c: &str| match c.contains([',', '"', '\n']) {
            true => format!("\"{}\"", c.replace('"', "\"\"")),
            false => c.to_string(),
        };
        let mut out = String::new();
        let headers = self.headers.iter().map(|h| h.to_string());
        for r in std::iter::once(headers.collect::<Vec<_>>()).chain(self.rows.iter().cloned()) {
            out += &r.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",");
            out += "\n";
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_aligns_and_csv_quotes() {
        let mut t = Table::new(&["name", ">value"]);
        t.row(vec!["a,b".into(), "1.5".into()]);
        t.row(vec!["say \"x\"".into(), "10".into()]);
        t.row(vec!["a|b".into(), "2".into()]);
        let md = t.markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "| name    | value |");
        assert_eq!(lines[1], "| ------- | ----: |");
        assert_eq!(lines[2], "| a,b     |   1.5 |");
        assert_eq!(lines[4], "| a\\|b    |     2 |");
        assert_eq!(
            t.csv(),
            "name,value\n\"a,b\",1.5\n\"say \"\"x\"\"\",10\na|b,2\n"
        );
    }
}
