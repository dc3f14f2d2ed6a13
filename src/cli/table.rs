//! Result tables, printed as aligned markdown or as CSV.

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
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count()).max(3);
            }
        }
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let pad = |cells: &[String]| {
            let padded = cells.iter().enumerate().map(|(i, c)| match self.right[i] {
                true => format!("{c:>w$}", w = width[i]),
                false => format!("{c:<w$}", w = width[i]),
            });
            line(padded.collect())
        };
        let headers: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        let mut out = pad(&headers);
        out += &line(
            width
                .iter()
                .zip(&self.right)
                .map(|(&w, &r)| match r {
                    true => format!("{}:", "-".repeat(w - 1)),
                    false => "-".repeat(w),
                })
                .collect(),
        );
        for r in &self.rows {
            out += &pad(r);
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
        let md = t.markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[1], "|---------|------:|");
        assert_eq!(lines[2], "| a,b     |   1.5 |");
        assert_eq!(t.csv(), "name,value\n\"a,b\",1.5\n\"say \"\"x\"\"\",10\n");
    }
}
