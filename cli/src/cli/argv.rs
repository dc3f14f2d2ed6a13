//! zstd's spellings, rewritten into sc's command line before clap reads it: a level is one
//! number (`-19` is a level above the highest, not `-1 -9`), `sc -t`/`--test` is `sc verify`,
//! `sc -l`/`--list` is `sc info`, and `sc FILE...` (or a level given before any command) is
//! `sc encode`. The levels sc has not (`-0`, `--ultra`, `--fast=N`) are refused with what the
//! levels are.

use super::level::HIGHEST;
use clap::Command;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What sc's levels are, for the errors about the levels it does not have.
const LEVELS: &str = "sc's levels are -1 to -5 (FAST, the default) and -6 to -9 (BEST); a \
                      higher one, such as -19, means -9";

/// The command a token before any other names, if it is one of zstd's spellings for it.
const ZSTD_COMMANDS: [(&str, &str); 4] = [
    ("-t", "verify"),
    ("--test", "verify"),
    ("-l", "info"),
    ("--list", "info"),
];

/// A spelling refused before clap reads the command line: the command it was given to, and why.
#[derive(Debug)]
pub struct Refusal {
    pub command: String,
    pub message: String,
}

/// The options of a command that take a value: their short and long names.
#[derive(Default)]
struct Valued {
    short: Vec<char>,
    long: Vec<String>,
}

impl Valued {
    fn of(cmd: Option<&Command>) -> Valued {
        let mut v = Valued::default();
        let args = cmd.into_iter().flat_map(Command::get_arguments);
        for a in args.filter(|a| a.get_action().takes_values() && !a.is_positional()) {
            v.short.extend(a.get_short());
            v.long.extend(a.get_long().map(String::from));
        }
        v
    }
}

/// `args` (the program name first) with zstd's spellings made sc's, for `cmd`.
pub fn rewrite(args: Vec<OsString>, cmd: &Command) -> Result<Vec<OsString>, Refusal> {
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    let rest: Vec<OsString> = args.collect();
    // Global flags and levels before the command.
    let mut levels = Vec::new();
    let mut i = 0;
    while let Some(t) = rest.get(i).and_then(|t| t.to_str()) {
        if is_global(t) {
            out.push(t.into());
        } else if is_level(t) {
            levels.push(OsString::from(t));
        } else {
            break;
        }
        i += 1;
    }
    let token = rest.get(i).map(OsString::as_os_str);
    let text = token.and_then(OsStr::to_str);
    let mut command = text
        .and_then(|t| cmd.find_subcommand(t))
        .map(|c| c.get_name());
    match text {
        _ if command.is_some() => {
            out.push(rest[i].clone());
            i += 1;
        }
        Some("--compress") | Some("--decompress") => {
            command = Some(if text == Some("--compress") {
                "encode"
            } else {
                "decode"
            });
            out.push(rest[i].clone());
            i += 1;
        }
        // `-z` may run on into encode's own short flags (`-z19`, `-zq`), as clap reads them.
        Some(t) if t.starts_with("-z") => {
            command = Some("encode");
            out.push("-z".into());
            if t.len() > 2 {
                levels.push(format!("-{}", &t[2..]).into());
            }
            i += 1;
        }
        Some(t) if t.starts_with("-d") && !t.starts_with("--") => {
            command = Some("decode");
            out.push(rest[i].clone());
            i += 1;
        }
        Some(t) if ZSTD_COMMANDS.iter().any(|(z, _)| *z == t) => {
            let (_, name) = ZSTD_COMMANDS
                .iter()
                .find(|(z, _)| *z == t)
                .unwrap_or(&("", ""));
            command = Some(name);
            out.push(name.into());
            i += 1;
        }
        // `sc FILE...` and `sc -` compress, as zstd and gzip do; so does a level given before
        // anything else (`sc -19 -f FILE`, `cat F | sc -19 > F.sc`) and an option of encode's
        // (`sc -c FILE > F.sc`, `sc -kf FILE`).
        _ if token.is_some_and(names_input)
            || !levels.is_empty()
            || text.is_some_and(|t| is_encode_option(t, cmd)) =>
        {
            command = Some("encode");
            out.push("encode".into());
        }
        _ => {}
    }
    let command = command.unwrap_or_default();
    if command != "encode" {
        let sub = cmd.find_subcommand(command);
        let given = levels.iter().chain(&rest[i..]);
        if let Some(flag) = sub.and_then(|sub| encode_only(given, sub)) {
            return Err(Refusal {
                command: command.into(),
                message: format!(
                    "{flag} applies to encode only: {command} takes no mode or level (an \
                     archive records how it was coded)"
                ),
            });
        }
        out.extend(levels);
        out.extend(rest[i..].iter().cloned());
        return Ok(out);
    }
    let valued = Valued::of(cmd.find_subcommand(command));
    let tokens: Vec<OsString> = levels
        .into_iter()
        .chain(rest[i..].iter().cloned())
        .collect();
    encode_args(&tokens, &valued, &mut out).map_err(|message| Refusal {
        command: command.into(),
        message,
    })?;
    Ok(out)
}

/// The first of `tokens` (a command's arguments) that is a mode or level flag of encode's and
/// not an option of `sub`'s own, values of `sub`'s options left alone.
fn encode_only<'a>(tokens: impl Iterator<Item = &'a OsString>, sub: &Command) -> Option<String> {
    let valued = Valued::of(Some(sub));
    let own = |long: &str| sub.get_arguments().any(|a| a.get_long() == Some(long));
    let own_m = sub.get_arguments().any(|a| a.get_short() == Some('m'));
    let mut tokens = tokens.filter_map(|t| t.to_str());
    while let Some(t) = tokens.next() {
        if t == "--" {
            return None;
        }
        let long = t
            .strip_prefix("--")
            .map(|l| l.split_once('=').map_or(l, |(n, _)| n));
        let mode = (t == "-m" && !own_m) || matches!(long, Some("mode" | "level"));
        if (is_level(t) || mode) && !long.is_some_and(own) {
            return Some(t.to_string());
        }
        let takes_next = match long {
            Some(l) => !t.contains('=') && valued.long.iter().any(|v| v == l),
            None => t.starts_with('-') && t.ends_with(|c| valued.short.contains(&c)),
        };
        if takes_next {
            tokens.next();
        }
    }
    None
}

/// Whether `t` is one of the flags every command takes: `-v`, `-q` and their long forms.
fn is_global(t: &str) -> bool {
    matches!(t, "--verbose" | "--quiet")
        || t.strip_prefix('-')
            .is_some_and(|f| !f.is_empty() && f.chars().all(|c| c == 'v' || c == 'q'))
}

/// Whether `t` is a level flag, or one of zstd's that sc refuses with what its levels are.
fn is_level(t: &str) -> bool {
    let digits = t.strip_prefix('-').filter(|d| !d.is_empty());
    digits.is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
        || matches!(t, "--fast" | "--best" | "--ultra")
        || t.starts_with("--fast=")
        || t.starts_with("--best=")
}

/// Whether `t` is an option of encode's and not one of sc's own (`-h`, `-V`): with no
/// command before it, it asks to compress, as zstd reads it.
fn is_encode_option(t: &str, cmd: &Command) -> bool {
    let own = |a: &clap::Arg, short: Option<char>, long: Option<&str>| {
        short.is_some_and(|c| a.get_short() == Some(c))
            || long.is_some_and(|l| a.get_long() == Some(l))
    };
    let (short, long) = match t.strip_prefix("--") {
        Some(l) => (None, Some(l.split_once('=').map_or(l, |(n, _)| n))),
        None => (t.strip_prefix('-').and_then(|f| f.chars().next()), None),
    };
    if short.is_none() && long.is_none_or(str::is_empty) {
        return false;
    }
    let top = cmd.get_arguments().any(|a| own(a, short, long))
        || matches!(
            (short, long),
            (Some('h' | 'V'), _) | (_, Some("help" | "version"))
        );
    let encode = cmd.find_subcommand("encode");
    !top && encode.is_some_and(|e| e.get_arguments().any(|a| own(a, short, long)))
}

/// Whether the token `t`, where a command is expected, is an input to compress: `-` (stdin)
/// or a path that exists.
fn names_input(t: &OsStr) -> bool {
    t == "-" || (!t.as_bytes().starts_with(b"-") && Path::new(t).symlink_metadata().is_ok())
}

/// Copies encode's arguments `tokens` into `out`, each level read as one number.
fn encode_args(
    tokens: &[OsString],
    valued: &Valued,
    out: &mut Vec<OsString>,
) -> Result<(), String> {
    let mut j = 0;
    while j < tokens.len() {
        let Some(t) = tokens[j].to_str() else {
            out.push(tokens[j].clone());
            j += 1;
            continue;
        };
        if t == "--" {
            out.extend(tokens[j..].iter().cloned());
            return Ok(());
        }
        let takes_next = match t.strip_prefix("--") {
            Some(long) => {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                match (name, value) {
                    ("ultra", _) => return Err(format!("--ultra is not needed: {LEVELS}")),
                    ("fast" | "best", Some(_)) => {
                        return Err(format!("--{name} takes no number: {LEVELS}"))
                    }
                    _ => {}
                }
                out.push(t.into());
                value.is_none() && valued.long.iter().any(|l| l == name)
            }
            None if t.len() > 1 && t.starts_with('-') => short_cluster(&t[1..], valued, out)?,
            None => {
                out.push(t.into());
                false
            }
        };
        j += 1;
        if takes_next {
            out.extend(tokens.get(j).cloned());
            j += 1;
        }
    }
    Ok(())
}

/// Copies the short flags `body` (a token without its `-`) into `out`, each run of digits as
/// one level; returns whether the last flag takes the next token as its value.
fn short_cluster(body: &str, valued: &Valued, out: &mut Vec<OsString>) -> Result<bool, String> {
    if !body.starts_with(|c: char| c.is_ascii_digit()) && !has_level_run(body, valued) {
        out.push(format!("-{body}").into());
        return Ok(body.ends_with(|c| valued.short.contains(&c)));
    }
    let mut flags = String::new();
    let flush = |flags: &mut String, out: &mut Vec<OsString>| {
        if !flags.is_empty() {
            out.push(format!("-{flags}").into());
            flags.clear();
        }
    };
    let mut rest = body;
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_digit() {
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            flush(&mut flags, out);
            out.push(level(&rest[..end])?.into());
            rest = &rest[end..];
        } else if valued.short.contains(&c) {
            // The rest of the token is the option's value, or the next token is.
            flags.push_str(rest);
            let takes_next = rest.len() == c.len_utf8();
            flush(&mut flags, out);
            return Ok(takes_next);
        } else {
            flags.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    flush(&mut flags, out);
    Ok(false)
}

/// Whether the flags `body` hold a digit as a flag of its own (not in an option's value).
fn has_level_run(body: &str, valued: &Valued) -> bool {
    for c in body.chars() {
        if c.is_ascii_digit() {
            return true;
        }
        if valued.short.contains(&c) {
            return false;
        }
    }
    false
}

/// The flag for the level `digits`: `-1` to `-9` as they are, a higher level as `--level N`
/// (which codes as the highest, with a note under `-v`).
fn level(digits: &str) -> Result<String, String> {
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Err(format!("-{digits} is not a level: {LEVELS}"));
    }
    let n: u32 = significant.parse().unwrap_or(u32::MAX);
    Ok(match n <= HIGHEST {
        true => format!("-{n}"),
        false => format!("--level={n}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(args: &[&str]) -> Result<Vec<String>, String> {
        let cmd = super::super::docs::command();
        let args = std::iter::once("sc")
            .chain(args.iter().copied())
            .map(OsString::from);
        rewrite(args.collect(), &cmd)
            .map(|v| {
                v[1..]
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect()
            })
            .map_err(|r| r.message)
    }

    #[test]
    fn levels_are_numbers() {
        assert_eq!(
            rewritten(&["-z", "-12", "f"]).unwrap(),
            ["-z", "--level=12", "f"]
        );
        assert_eq!(
            rewritten(&["-z19", "f"]).unwrap(),
            ["-z", "--level=19", "f"]
        );
        assert_eq!(
            rewritten(&["encode", "-9q", "f"]).unwrap(),
            ["encode", "-9", "-q", "f"]
        );
        assert_eq!(
            rewritten(&["encode", "-q19", "f"]).unwrap(),
            ["encode", "-q", "--level=19", "f"]
        );
        // Values of options are left alone: `-b 12`, `-T4`, `-o -12`.
        assert_eq!(
            rewritten(&["encode", "-T4", "-b", "12K", "-o", "-12", "f"]).unwrap(),
            ["encode", "-T4", "-b", "12K", "-o", "-12", "f"]
        );
        assert_eq!(
            rewritten(&["encode", "-qT", "12", "f"]).unwrap(),
            ["encode", "-qT", "12", "f"]
        );
        assert_eq!(
            rewritten(&["encode", "--", "-12"]).unwrap(),
            ["encode", "--", "-12"]
        );
        // Before the command, a level means encode.
        assert_eq!(
            rewritten(&["-v", "-19"]).unwrap(),
            ["-v", "encode", "--level=19"]
        );
        assert_eq!(
            rewritten(&["-19", "-z", "f"]).unwrap(),
            ["-z", "--level=19", "f"]
        );
        assert_eq!(
            rewritten(&["-12", "-f", "f"]).unwrap(),
            ["encode", "--level=12", "-f", "f"]
        );
        for refused in [
            &["-z", "-0", "f"][..],
            &["-z", "--ultra", "-22"],
            &["-z", "--fast=3"],
        ] {
            assert!(
                rewritten(refused).unwrap_err().contains("-1 to -5"),
                "{refused:?}"
            );
        }
        // Other commands are left to clap, but for encode's modes and levels.
        assert_eq!(
            rewritten(&["extract", "-t", "-12", "a.sc"]).unwrap(),
            ["extract", "-t", "-12", "a.sc"]
        );
        assert_eq!(
            rewritten(&["sweep", "--mode", "fast", "f"]).unwrap(),
            ["sweep", "--mode", "fast", "f"]
        );
        for (given, flag) in [
            (&["decode", "--best", "a.sc"][..], "--best"),
            (&["-d", "-9", "a.sc"], "-9"),
            (&["-19", "-d", "a.sc"], "-19"),
            (&["extract", "-o", "x", "--fast", "a.sc"], "--fast"),
            (&["verify", "-m", "best", "a.sc"], "-m"),
            (&["decode", "--mode=best", "a.sc"], "--mode=best"),
        ] {
            let said = rewritten(given).unwrap_err();
            assert!(
                said.starts_with(&format!("{flag} applies to encode only")),
                "{given:?}: {said}"
            );
        }
        assert_eq!(
            rewritten(&["decode", "--", "--best"]).unwrap(),
            ["decode", "--", "--best"]
        );
    }

    #[test]
    fn zstd_commands() {
        assert_eq!(rewritten(&["-t", "a.sc"]).unwrap(), ["verify", "a.sc"]);
        assert_eq!(
            rewritten(&["-q", "--list", "a.sc"]).unwrap(),
            ["-q", "info", "a.sc"]
        );
        assert_eq!(rewritten(&["-"]).unwrap(), ["encode", "-"]);
        assert_eq!(rewritten(&["-dc", "a.sc"]).unwrap(), ["-dc", "a.sc"]);
        assert_eq!(rewritten(&["no-such-file"]).unwrap(), ["no-such-file"]);
    }

    /// An option of encode's with no command before it compresses, as `zstd -c FILE` does;
    /// sc's own options and the other commands' spellings keep their meaning.
    #[test]
    fn encode_options_compress() {
        assert_eq!(rewritten(&["-c", "f"]).unwrap(), ["encode", "-c", "f"]);
        assert_eq!(rewritten(&["-kf", "f"]).unwrap(), ["encode", "-kf", "f"]);
        assert_eq!(
            rewritten(&["--force", "-o", "x.sc", "f"]).unwrap(),
            ["encode", "--force", "-o", "x.sc", "f"]
        );
        assert_eq!(rewritten(&["-h"]).unwrap(), ["-h"]);
        assert_eq!(rewritten(&["--version"]).unwrap(), ["--version"]);
        assert_eq!(rewritten(&["-dc", "a.sc"]).unwrap(), ["-dc", "a.sc"]);
        assert_eq!(rewritten(&["--no-such-flag"]).unwrap(), ["--no-such-flag"]);
    }
}
