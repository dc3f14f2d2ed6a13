//! [`Cancel`]: how a caller stops a long run (an encode, a decode, a remote read) from another
//! thread, such as one that watches for Ctrl-C.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A token that stops the runs it is given to ([`EncodeOptions::cancel`](crate::EncodeOptions::cancel),
/// [`DecodeOptions::cancel`](crate::DecodeOptions::cancel),
/// `RemoteOptions::cancel`) once it is set: they poll
/// it before each block is read, coded and written, and while they wait for a remote answer,
/// and end with [`Error::Cancelled`]. Blocks being coded at that moment finish; no block is
/// written after it. Clones share one state.
#[derive(Clone, Default)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    /// Another condition that also cancels (a host's own stop flags).
    also: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
}

impl Cancel {
    /// A token not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// A token that is set whenever `flag` is.
    pub fn from_flag(flag: Arc<AtomicBool>) -> Cancel {
        Cancel { flag, also: None }
    }

    /// A token that is set whenever `when` returns true (and when [`Cancel::cancel`] is
    /// called). `when` is called once per block and every 50 ms of a wait for the network, so
    /// it should be cheap.
    pub fn when(when: impl Fn() -> bool + Send + Sync + 'static) -> Cancel {
        Cancel {
            flag: Arc::default(),
            also: Some(Arc::new(when)),
        }
    }

    /// Sets the token: the runs given it stop.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether the token is set.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || self.also.as_ref().is_some_and(|f| f())
    }

    /// [`Error::Cancelled`] once the token is set.
    pub fn check(&self) -> Result<()> {
        match self.is_cancelled() {
            true => Err(Error::Cancelled),
            false => Ok(()),
        }
    }
}

/// [`Cancel::check`] of a token that may be absent.
pub(crate) fn check(cancel: Option<&Cancel>) -> Result<()> {
    cancel.map_or(Ok(()), Cancel::check)
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_set_by_itself_its_clones_its_flag_or_its_condition() {
        let t = Cancel::new();
        assert!(t.check().is_ok());
        t.clone().cancel();
        assert!(matches!(t.check(), Err(Error::Cancelled)));
        let flag = Arc::new(AtomicBool::new(false));
        let t = Cancel::from_flag(flag.clone());
        assert!(!t.is_cancelled());
        flag.store(true, Ordering::Relaxed);
        assert!(t.is_cancelled());
        let t = Cancel::when(move || flag.load(Ordering::Relaxed));
        assert!(t.is_cancelled());
        assert!(check(None).is_ok());
    }
}
