//! zstd's and gzip's level flags, `-1` to `-9`, `--fast` and `--best`, mapped onto sc's two
//! modes. The last level given wins, as in zstd; `-m` that contradicts it is a usage error.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use sc::{Mode, SignModels};

/// The highest level: a higher one (zstd's `-19`, `-22`) means this one ([`sc::level`] says
/// what each means).
pub const HIGHEST: u32 = sc::HIGHEST_LEVEL;

/// The highest level that means FAST.
const LAST_FAST: u32 = sc::LAST_FAST_LEVEL;

/// The ids of the level flags: `-1` ... `-9`, `--level N` (what [`super::argv`] makes of `-N`
/// above 9), `--fast` and `--best`.
const IDS: [&str; 12] = [
    "1", "2", "3", "4", "5", "6", "7", "8", "9", "level", "fast", "best",
];

/// A level flag as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Given {
    /// `-N` (or `--level N`).
    Number(u32),
    /// `--fast`.
    Fast,
    /// `--best`.
    Best,
}

impl Given {
    /// The mode the flag asks for.
    fn mode(self) -> Mode {
        match self {
            Given::Fast => Mode::Fast,
            Given::Best => Mode::Best,
            Given::Number(n) => sc::level(n).map_or(Mode::Fast, |(mode, _)| mode),
        }
    }

    /// How the flag is written.
    fn text(self) -> String {
        match self {
            Given::Fast => "--fast".into(),
            Given::Best => "--best".into(),
            Given::Number(n) => format!("-{n}"),
        }
    }
}

/// The level flags of `encode`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Level {
    /// The last level flag given, if any.
    pub given: Option<Given>,
}

impl Level {
    /// The mode to code with: the level's, or `-m`'s, which must agree with it.
    pub fn resolve(&self, m: Option<Mode>) -> Result<Mode, String> {
        match (self.given.map(|g| (g.mode(), g)), m) {
            (Some((level, given)), Some(m)) if level != m => Err(format!(
                "the level flag {} means -m {} and contradicts -m {}",
                given.text(),
                level.name(),
                m.name()
            )),
            (Some((level, _)), _) => Ok(level),
            (None, m) => Ok(m.unwrap_or(Mode::Fast)),
        }
    }

    /// Where the level asks BEST to use its sign models: nowhere for `-6`, everywhere they
    /// code a block smaller for `-9` (and the levels above it), else where they pay.
    pub fn sign_models(&self) -> SignModels {
        match self.given {
            Some(Given::Number(n)) => sc::level(n).map_or(SignModels::Paying, |(_, signs)| signs),
            _ => SignModels::Paying,
        }
    }

    /// The note `-v` prints for a level above the highest, which codes as the highest.
    pub fn note(&self) -> Option<String> {
        match self.given {
            Some(Given::Number(n)) if n > HIGHEST => Some(format!(
                "sc: note: -{n} is above sc's highest level; coding with -{HIGHEST}"
            )),
            _ => None,
        }
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
            let set = m.try_get_one::<bool>(id).ok().flatten() == Some(&true);
            let given = match id {
                "level" => m
                    .try_get_one::<u32>(id)
                    .ok()
                    .flatten()
                    .map(|&n| Given::Number(n)),
                _ if !set => None,
                "fast" => Some(Given::Fast),
                "best" => Some(Given::Best),
                n => Some(Given::Number(n.parse().unwrap_or(HIGHEST))),
            };
            if given.is_some() {
                self.given = given;
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
        let above = Arg::new("level")
            .long("level")
            .value_name("N")
            .value_parser(clap::value_parser!(u32).range(1..))
            .overrides_with_all(IDS)
            .hide(true);
        cmd.args(digits)
            .arg(above)
            .arg(flag("fast").long("fast").help(format!(
                "FAST mode (the default), as -m fast; so are -1 to -{LAST_FAST}"
            )))
            .arg(flag("best").long("best").help(format!(
                "BEST mode, as -m best; so are -{} to -{HIGHEST} (-6: no sign models, decodes \
                 faster; -{HIGHEST}: sign models on every block they make smaller, smallest; \
                 higher levels such as -19 mean -{HIGHEST})",
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

    fn level(n: u32) -> Level {
        Level {
            given: Some(Given::Number(n)),
        }
    }

    #[test]
    fn levels_map_onto_modes() {
        assert_eq!(level(1).resolve(None), Ok(Mode::Fast));
        assert_eq!(level(5).resolve(None), Ok(Mode::Fast));
        assert_eq!(level(6).resolve(None), Ok(Mode::Best));
        assert_eq!(level(19).resolve(None), Ok(Mode::Best));
        assert_eq!(level(9).resolve(Some(Mode::Best)), Ok(Mode::Best));
        assert_eq!(level(9).sign_models(), SignModels::Everywhere);
        assert_eq!(level(22).sign_models(), SignModels::Everywhere);
        assert_eq!(level(6).sign_models(), SignModels::Off);
        let best = Level {
            given: Some(Given::Best),
        };
        assert_eq!(best.sign_models(), SignModels::Paying);
        assert_eq!(Level::default().sign_models(), SignModels::Paying);
        assert!(level(9)
            .resolve(Some(Mode::Fast))
            .unwrap_err()
            .contains("-9"));
        assert_eq!(Level::default().resolve(None), Ok(Mode::Fast));
        assert!(level(19).note().is_some_and(|n| n.contains("-19")));
        assert_eq!(level(9).note(), None);
    }
}
