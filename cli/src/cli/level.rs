//! zstd's and gzip's level flags, `-1` to `-9`, `--fast` and `--best`, mapped onto sc's two
//! modes. The last level given wins, as in zstd; `-m` that contradicts it is a usage error.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use sc::{Mode, SignModels};

/// The highest level that still means FAST: `-1` to `-5` (FAST, sc's default, decodes at copy
/// speed), `-6` to `-9` BEST (smaller, several times slower). BEST's sign models go where they
/// pay by default (`-7`, `-8`, `--best`); `-6` leaves them out (BEST's fastest decoding, and
/// archives for readers of format version 4), `-9` uses them wherever they code a block smaller
/// (smallest; such blocks decode about 1.4x slower).
const LAST_FAST: u8 = 5;

/// The ids of the level flags: `-1` ... `-9`, `--fast` and `--best`.
const IDS: [&str; 11] = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "fast", "best"];

/// The mode a level flag asks for.
fn mode_of(id: &str) -> Option<Mode> {
    match id {
        "fast" => Some(Mode::Fast),
        "best" => Some(Mode::Best),
        n => match n.parse::<u8>().ok()? {
            1..=LAST_FAST => Some(Mode::Fast),
            _ => Some(Mode::Best),
        },
    }
}

/// The level flags of `encode`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Level {
    /// The mode the last level flag asked for, if any was given, and how it was written.
    pub mode: Option<(Mode, char)>,
}

impl Level {
    /// The mode to code with: the level's, or `-m`'s, which must agree with it.
    pub fn resolve(&self, m: Option<Mode>) -> Result<Mode, String> {
        match (self.mode, m) {
            (Some((level, flag)), Some(m)) if level != m => Err(format!(
                "the level flag {} means -m {} and contradicts -m {}",
                flag_text(flag),
                level.name(),
                m.name()
            )),
            (Some((level, _)), _) => Ok(level),
            (None, m) => Ok(m.unwrap_or(Mode::Fast)),
        }
    }

    /// Where the level asks BEST to use its sign models: nowhere for `-6`, everywhere they
    /// code a block smaller for `-9`, else where they pay.
    pub fn sign_models(&self) -> SignModels {
        match self.mode {
            Some((_, '6')) => SignModels::Off,
            Some((_, '9')) => SignModels::Everywhere,
            _ => SignModels::Paying,
        }
    }
}

/// The mode and sign models that the flag `-N` asks for, for a level `n` of 1 to 9.
pub fn numbered(n: u8) -> Option<(Mode, SignModels)> {
    let flag = char::from_digit(n.into(), 10).filter(|&c| c != '0')?;
    let mode = mode_of(&n.to_string())?;
    let level = Level {
        mode: Some((mode, flag)),
    };
    Some((mode, level.sign_models()))
}

/// How the flag `c` (a digit, or `f`/`b` for `--fast`/`--best`) is written.
fn flag_text(c: char) -> String {
    match c {
        'f' => "--fast".into(),
        'b' => "--best".into(),
        d => format!("-{d}"),
    }
}

impl FromArgMatches for Level {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut level = Level::default();
        level.update_from_arg_matches(m)?;
        Ok(level)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        // The flags override each other, so at most one is still set.
        for id in IDS {
            if m.try_get_one::<bool>(id).ok().flatten() == Some(&true) {
                let flag = id.chars().next().unwrap_or('f');
                self.mode = mode_of(id).map(|mode| (mode, flag));
            }
        }
        Ok(())
    }
}

impl Args for Level {
    fn augment_args(cmd: Command) -> Command {
        let flag = |id: &'static str| {
            Arg::new(id)
                .action(ArgAction::SetTrue)
                .overrides_with_all(IDS)
        };
        let digits = IDS.iter().filter_map(|&id| {
            let short = id.chars().next().filter(char::is_ascii_digit)?;
            Some(flag(id).short(short).hide(true))
        });
        cmd.args(digits)
            .arg(flag("fast").long("fast").help(format!(
                "FAST mode (the default), as -m fast; so are -1 to -{LAST_FAST}"
            )))
            .arg(flag("best").long("best").help(format!(
                "BEST mode, as -m best; so are -{} to -9 (-6: no sign models, decodes faster; \
                 -9: sign models on every block they make smaller, smallest)",
                LAST_FAST + 1
            )))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Level::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_map_onto_modes() {
        assert_eq!(mode_of("1"), Some(Mode::Fast));
        assert_eq!(mode_of("5"), Some(Mode::Fast));
        assert_eq!(mode_of("6"), Some(Mode::Best));
        assert_eq!(mode_of("9"), Some(Mode::Best));
        assert_eq!(mode_of("best"), Some(Mode::Best));
        let nine = Level {
            mode: Some((Mode::Best, '9')),
        };
        assert_eq!(nine.resolve(Some(Mode::Best)), Ok(Mode::Best));
        assert_eq!(nine.sign_models(), SignModels::Everywhere);
        let six = Level {
            mode: Some((Mode::Best, '6')),
        };
        assert_eq!(six.sign_models(), SignModels::Off);
        let best = Level {
            mode: Some((Mode::Best, 'b')),
        };
        assert_eq!(best.sign_models(), SignModels::Paying);
        assert_eq!(Level::default().sign_models(), SignModels::Paying);
        assert!(nine.resolve(Some(Mode::Fast)).unwrap_err().contains("-9"));
        assert_eq!(Level::default().resolve(None), Ok(Mode::Fast));
    }

    #[test]
    fn numbered_levels_are_the_flags() {
        assert_eq!(numbered(1), Some((Mode::Fast, SignModels::Paying)));
        assert_eq!(numbered(5), Some((Mode::Fast, SignModels::Paying)));
        assert_eq!(numbered(6), Some((Mode::Best, SignModels::Off)));
        assert_eq!(numbered(7), Some((Mode::Best, SignModels::Paying)));
        assert_eq!(numbered(9), Some((Mode::Best, SignModels::Everywhere)));
        assert_eq!(numbered(0), None);
        assert_eq!(numbered(10), None);
    }
}
