//! Process-wide setup: fatal signals remove unfinished outputs, a file-size limit is an I/O
//! error rather than a kill, and a standard stream closed at start is noticed instead of
//! silently reading nothing or swallowing the output.

use std::io::{self, Write};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Signals after which `sc` removes its temporary outputs and exits with 128 + the signal.
const FATAL: [(libc::c_int, &str); 3] = [
    (libc::SIGINT, "interrupted"),
    (libc::SIGTERM, "terminated"),
    (libc::SIGHUP, "hung up"),
];

/// Whether `-v` was given: what the remote readers' notes ask.
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Records whether `-v` was given.
pub fn set_verbose(verbose: bool) {
    VERBOSE.store(verbose, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `-v` was given.
pub fn verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The stop flags of the hosted runs in progress ([`watch`]).
static STOPS: Mutex<Vec<Arc<AtomicBool>>> = Mutex::new(Vec::new());

fn stops() -> MutexGuard<'static, Vec<Arc<AtomicBool>>> {
    STOPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stop flag watched while it lives: see [`watch`].
pub struct Watching(Arc<AtomicBool>);

/// Watches `stop` until the guard is dropped: while any watched flag is set, [`stopped`] says
/// so, and outputs and folder runs stop.
pub fn watch(stop: Arc<AtomicBool>) -> Watching {
    stops().push(stop.clone());
    Watching(stop)
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut all = stops();
        if let Some(at) = all.iter().position(|s| Arc::ptr_eq(s, &self.0)) {
            all.swap_remove(at);
        }
    }
}

/// Whether the host asked the runs in progress to stop.
pub fn stopped() -> bool {
    stops().iter().any(|s| s.load(Ordering::Relaxed))
}

/// A token set while [`stopped`] says so, for the library's runs: they stop at their next
/// block, or within 50 ms of a wait for the network.
pub fn cancel() -> sc::Cancel {
    sc::Cancel::when(stopped)
}

/// Write end of the pipe the signal handler reports signals on.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

/// Standard input, output and error, closed when `sc` started.
static CLOSED: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];

/// Sets up the process; call first, before any thread is started.
pub fn setup() {
    // SAFETY: setting a signal's disposition to "ignore" has no other effect. SIGXFSZ then
    // makes a write past `ulimit -f` fail with EFBIG, an I/O error that removes the unfinished
    // output like any other; SIGPIPE (already ignored by Rust's runtime) likewise makes a
    // closed pipe an EPIPE error.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    // Failing to install only loses the cleanup; compression still works.
    let _ = install_cleanup();
}

/// Whether standard input was closed when `sc` started.
pub fn stdin_closed() -> bool {
    CLOSED[0].load(Ordering::Relaxed)
}

/// Whether standard output was closed when `sc` started.
pub fn stdout_closed() -> bool {
    CLOSED[1].load(Ordering::Relaxed)
}

/// Notes which standard streams are closed when the program starts. This runs from
/// `.init_array`, before Rust's runtime opens `/dev/null` in their place (which keeps later
/// files off their numbers, but would make a closed stdout swallow the output unnoticed).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STREAMS: extern "C" fn() = note_closed_streams;

#[cfg(target_os = "linux")]
extern "C" fn note_closed_streams() {
    for (fd, closed) in CLOSED.iter().enumerate() {
        // SAFETY: F_GETFD only queries the descriptor.
        if unsafe { libc::fcntl(fd as RawFd, libc::F_GETFD) } == -1 {
            closed.store(true, Ordering::Relaxed);
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    let byte = signal as u8;
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    // SAFETY: write(2) is async-signal-safe; a failed write only loses the cleanup.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
}

/// Handles INT, TERM and HUP (unless they were ignored when `sc` started, as under `nohup`):
/// the handler writes the signal to a pipe, and a thread reading it removes the unfinished
/// outputs, aborts the uploads in progress (their parts deleted at the store) and exits with
/// 128 + the signal.
fn install_cleanup() -> io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    SIGNAL_PIPE.store(fds[1], Ordering::Relaxed);
    let read_fd = fds[0];
    std::thread::Builder::new()
        .name("sc-signals".into())
        .spawn(move || loop {
            let mut byte = 0u8;
            // SAFETY: reads one byte into `byte`.
            let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
                let signal = byte as libc::c_int;
                sc::output::remove_unfinished();
                sc::remote::abort_unfinished();
                let what = FATAL
                    .iter()
                    .find(|(s, _)| *s == signal)
                    .map_or("killed", |f| f.1);
                let _ = writeln!(io::stderr(), "sc: {what}");
                std::process::exit(128 + signal);
            }
            if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        })?;
    for (signal, _) in FATAL {
        // SAFETY: queries the disposition, then installs `on_signal`, which only calls
        // write(2), for a signal that is not ignored.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    Ok(())
}
