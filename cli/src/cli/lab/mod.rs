//! The experiment commands: `models`, `analyze`, `sweep`, `bench` and `shuffle`, the
//! measurements behind the codec's design (timing in `measure.rs`, SVG charts in `plot.rs`,
//! tables in `table.rs`). `sc --help` lists them under a heading of their own.

pub mod analysis;
pub mod analyze;
pub mod bench;
mod measure;
pub mod models;
mod plot;
pub mod shuffle;
pub mod sweep;
mod table;

use super::text::left;
use clap::Command;
use std::fmt::Write as _;

/// `command` with its help listing the hidden subcommands, the experiments, under their own
/// heading between the everyday commands and the options.
pub fn with_heading(command: Command) -> Command {
    // The width clap gives the names of the other commands, flags included
    // (`decode, -d, --decompress`), so that both lists line up.
    let width = command
        .get_subcommands()
        .map(|c| {
            let short = c.get_short_flag().map_or(0, |_| ", -x".len());
            let long = c.get_long_flag().map_or(0, |l| ", --".len() + l.len());
            c.get_name().len() + short + long
        })
        .max()
        .unwrap_or(0);
    let styles = command.get_styles();
    let (heading, reset) = (
        styles.get_header().render(),
        styles.get_header().render_reset(),
    );
    let mut list = String::new();
    for sub in command.get_subcommands().filter(|c| c.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let _ = writeln!(list, "  {}  {about}", left(sub.get_name(), width));
    }
    let template = format!(
        "{{before-help}}{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n\
         {heading}Commands:{reset}\n{{subcommands}}\n\n\
         {heading}Experiment commands:{reset}\n{list}\n\
         {heading}Options:{reset}\n{{options}}{{after-help}}"
    );
    command.help_template(template)
}
