//! Real servers on 127.0.0.1 for the tests of remote archives, started and stopped by the
//! tests: nginx serving a folder (with an access log to count requests), SeaweedFS's S3
//! gateway (`weed mini`) with a bucket, a proxy of our own in front of a server that
//! answers 500, flips a byte or drops the connection where it is told to, and a rogue server
//! of our own ([`Rogue`]: silent, bodies longer or shorter than asked, redirects, a header log).
//!
//! Where a server's program is missing the test passes without running, unless
//! `SC_REQUIRE_SERVERS=1` (CI), where it fails; the test binary then says how many did after
//! its summary. `SC_NGINX` and `SC_WEED` name the programs;
//! otherwise nginx is looked for in /usr/sbin and on PATH, weed on PATH and in the Python test
//! venvs (`~/.cache/sc-ci/venv-*/bin`).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The S3 credentials the tests' SeaweedFS accepts.
pub const ACCESS_KEY: &str = "sc-test";
pub const SECRET_KEY: &str = "sc-test-secret";
pub const BUCKET: &str = "sc-test";

/// Finds a server's program: `$var`, else the first of `places` that exists, else `name` on
/// PATH. `None` (with a note) when absent and not required.
fn program(var: &'static str, name: &'static str, places: &[PathBuf]) -> Option<PathBuf> {
    let found = std::env::var_os(var)
        .map(PathBuf::from)
        .or_else(|| places.iter().find(|p| p.is_file()).cloned())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        let required = std::env::var("SC_REQUIRE_SERVERS").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{name} not found and SC_REQUIRE_SERVERS=1 (set {var})"
        );
        eprintln!("note: {name} not found (set {var}): test skipped");
        skipped(name, var);
    }
    found
}

/// The programs missing in this run, each with its variable and the tests that skipped for it.
static SKIPPED: Mutex<Vec<(&str, &str, usize)>> = Mutex::new(Vec::new());

extern "C" {
    fn atexit(f: extern "C" fn()) -> std::os::raw::c_int;
}

/// Counts a test that passes without its server, to say so after the run's summary: libtest
/// captures what a passing test prints, and has no "skipped" of its own.
fn skipped(name: &'static str, var: &'static str) {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    let mut skipped = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    match skipped.iter_mut().find(|(n, _, _)| *n == name) {
        Some((_, _, count)) => *count += 1,
        None => skipped.push((name, var, 1)),
    }
    // SAFETY: registers a function of no arguments that only writes to stderr.
    AT_EXIT.call_once(|| unsafe {
        atexit(say_skipped);
    });
}

/// Prints, after the test binary's summary, which tests passed without running for want of a
/// server program. Written to stderr directly, which no test captures.
extern "C" fn say_skipped() {
    let Ok(skipped) = SKIPPED.try_lock() else {
        return;
    };
    let mut stderr = std::io::stderr();
    for (name, var, count) in skipped.iter() {
        let tests = if *count == 1 { "test" } else { "tests" };
        let _ = writeln!(
            stderr,
            "note: {count} {tests} above passed without running: {name} not found (set {var}; \
             SC_REQUIRE_SERVERS=1 makes it an error)"
        );
    }
}

/// A free port on 127.0.0.1 (free when asked: the server binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Waits until something listens on `port`.
fn wait_for(port: u16, child: &mut Child, what: &str) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited at start: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    /// Its files: configuration, logs, data.
    pub dir: tempfile::TempDir,
    program: PathBuf,
    args: Vec<String>,
}

impl Server {
    fn start(program: PathBuf, args: Vec<String>, port: u16, dir: tempfile::TempDir) -> Server {
        let mut child = Command::new(&program)
            .args(&args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .expect("start the server");
        wait_for(port, &mut child, &program.display().to_string());
        Server {
            child,
            port,
            dir,
            program,
            args,
        }
    }

    /// Kills the server (mid-transfer, if one is going).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again, on the same port with the same files.
    pub fn restart(&mut self) {
        self.kill();
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("restart the server");
        wait_for(self.port, &mut child, "the restarted server");
        self.child = child;
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// nginx's access log: one line per request, `METHOD URI RANGE STATUS BYTES`.
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// nginx serving the folder `root` on a free port, with `extra` added to its `server` block.
pub fn nginx(root: &Path, extra: &str) -> Option<Server> {
    let program = program("SC_NGINX", "nginx", &["/usr/sbin/nginx".into()])?;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let d = dir.path().display();
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  log_format plain '$request_method $uri $http_range $status $body_bytes_sent';\n\
           access_log {d}/access.log plain;\n  client_body_temp_path {d}/body;\n\
           proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
           uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           server {{\n    listen 127.0.0.1:{port};\n    root {};\n    {extra}\n  }}\n}}\n",
        root.display()
    );
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    let conf = dir.path().join("nginx.conf").display().to_string();
    let args = vec!["-p".into(), d.to_string(), "-c".into(), conf];
    Some(Server::start(program, args, port, dir))
}

/// One SeaweedFS at a time: the library reads the S3 endpoint from the environment, which the
/// tests of one process share.
static S3_LOCK: Mutex<()> = Mutex::new(());

/// SeaweedFS's S3 gateway on free ports, with the bucket [`BUCKET`] and the credentials above,
/// and the process environment pointing the library at it (`AWS_*`) while the guard lives.
pub struct S3 {
    pub server: Server,
    _env: MutexGuard<'static, ()>,
}

impl S3 {
    /// The environment a child process needs to reach this store.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
            (
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.server.port),
            ),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }
}

pub fn weed() -> Option<S3> {
    let venvs: Vec<PathBuf> = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/sc-ci"))
        .and_then(|d| std::fs::read_dir(d).ok())
        .map(|rd| rd.flatten().map(|e| e.path().join("bin/weed")).collect())
        .unwrap_or_default();
    let program = program("SC_WEED", "weed", &venvs)?;
    let guard = S3_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let config = serde_json::json!({
        "identities": [{
            "name": "sc-test",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]
        }]
    });
    std::fs::write(dir.path().join("s3.json"), config.to_string()).unwrap();
    let port = free_port();
    let mut args = vec![
        format!("-dir={}", dir.path().join("data").display()),
        "-ip=127.0.0.1".into(),
        "-ip.bind=127.0.0.1".into(),
        format!("-s3.port={port}"),
        format!("-s3.config={}", dir.path().join("s3.json").display()),
        "-admin.ui=false".into(),
        "-webdav=false".into(),
        format!("-bucket={BUCKET}"),
    ];
    for flag in [
        "master.port",
        "master.port.grpc",
        "volume.port",
        "volume.port.grpc",
        "filer.port",
        "filer.port.grpc",
        "s3.port.grpc",
        "s3.port.iceberg",
        "admin.port",
        "admin.port.grpc",
        "metricsPort",
        "s3.metricsPort",
    ] {
        args.push(format!("-{flag}={}", free_port()));
    }
    std::fs::create_dir(dir.path().join("data")).unwrap();
    args.insert(0, "mini".into());
    let server = Server::start(program, args, port, dir);
    let s3 = S3 {
        server,
        _env: guard,
    };
    for (k, v) in s3.env() {
        std::env::set_var(k, v);
    }
    // The gateway listens before its bucket and volumes are ready: an upload tells.
    let start = Instant::now();
    loop {
        let probe = sc::remote::Upload::create(
            &format!("s3://{BUCKET}/probe"),
            &sc::remote::RemoteOptions::default(),
        )
        .and_then(|mut u| {
            u.write_all(b"probe")?;
            u.finish()
        });
        match probe {
            Ok(_) => break,
            Err(e) if start.elapsed() > Duration::from_secs(60) => panic!("weed not ready: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    Some(s3)
}

/// What the proxy does to the requests it passes on, counted from 0 in arrival order.
#[derive(Default)]
pub struct Faults {
    /// Requests answered 500 without asking the server.
    pub fail: Vec<usize>,
    /// Requests whose answer has a byte of its body flipped.
    pub flip: Vec<usize>,
    /// Requests whose answer is cut after half its body.
    pub cut: Vec<usize>,
    /// Every request from this one on has a byte flipped.
    pub flip_from: Option<usize>,
}

/// A proxy on a free port in front of `upstream`'s port, applying `faults`; runs until the
/// test ends. Each answer closes its connection.
pub struct Proxy {
    pub port: u16,
    pub seen: Arc<AtomicUsize>,
}

impl Proxy {
    pub fn start(upstream: u16, faults: Faults) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(AtomicUsize::new(0));
        let (counter, faults) = (seen.clone(), Arc::new(faults));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (counter, faults) = (counter.clone(), faults.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream, &counter, &faults);
                });
            }
        });
        Proxy { port, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }
}

/// Reads an HTTP head (up to the blank line) from `s`.
fn read_head(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    Ok(head)
}

/// Passes one request (a GET, without a body) on to `upstream` and its answer back, faults
/// applied.
fn serve(
    mut client: TcpStream,
    upstream: u16,
    counter: &AtomicUsize,
    faults: &Faults,
) -> std::io::Result<()> {
    let head = read_head(&mut client)?;
    let n = counter.fetch_add(1, Ordering::SeqCst);
    if faults.fail.contains(&n) {
        return client.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    let text = String::from_utf8_lossy(&head).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
    server.write_all(text.replace("Connection: keep-alive\r\n", "").as_bytes())?;
    let answer = read_head(&mut server)?;
    let mut body = Vec::new();
    server.read_to_end(&mut body)?;
    let answer =
        String::from_utf8_lossy(&answer).replace("Connection: keep-alive", "Connection: close");
    if faults.flip.contains(&n) || faults.flip_from.is_some_and(|f| n >= f) {
        let middle = body.len() / 2;
        if let Some(b) = body.get_mut(middle) {
            *b ^= 0x5A;
        }
    }
    if faults.cut.contains(&n) {
        client.write_all(answer.as_bytes())?;
        client.write_all(&body[..body.len() / 2])?;
        return client.shutdown(std::net::Shutdown::Both);
    }
    client.write_all(answer.as_bytes())?;
    client.write_all(&body)
}

/// A safetensors file of four U8 tensors (`layer0.weight` to `layer3.weight`) of `bytes`
/// random bytes each: its archive stores every block as it is, so that the archives of two
/// seeds have one layout and length.
pub fn random_checkpoint(seed: u64, bytes: usize) -> Vec<u8> {
    let mut rng = crate::common::Rng(seed);
    let tensors: Vec<(String, Vec<u8>)> = (0..4)
        .map(|k| (format!("layer{k}.weight"), rng.bytes(bytes)))
        .collect();
    let tensors: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, b)| (name.as_str(), "U8", vec![b.len() as u64], b.clone()))
        .collect();
    crate::common::safetensors(&tensors, 0, "{}")
}

/// Replaces the file `path` with `bytes` (by a rename), dated a minute after the file it
/// replaces: nginx's ETag is made of a file's length and date, in seconds.
pub fn replace_later(path: &Path, bytes: &[u8]) {
    let was = std::fs::metadata(path).unwrap().modified().unwrap();
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, bytes).unwrap();
    let f = std::fs::File::options().write(true).open(&tmp).unwrap();
    f.set_modified(was + Duration::from_secs(60)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// What a [`Rogue`] server does with each request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Misdeed {
    /// Accepts the connection, reads the request and says nothing until the test ends.
    Silent,
    /// Answers a range of an object of [`ROGUE_LEN`] bytes with a body of 64 MiB.
    LongBody,
    /// Answers a range of an object of [`ROGUE_LEN`] bytes with half the body asked for,
    /// its Content-Length saying so.
    ShortBody,
    /// Answers a range with its headers, then drips its body a byte every 100 ms.
    Drip,
    /// Answers 302, sending the client to the same path on 127.0.0.1 at this port.
    Redirect(u16),
    /// Answers 404 (after its headers are logged).
    NotFound,
}

/// The length of the object a [`Rogue`] server says it serves.
pub const ROGUE_LEN: u64 = 1 << 20;

/// A server of the tests' own on 127.0.0.1 that misbehaves as told, logging each request's
/// head; it serves at most 64 connections, each for at most 60 seconds, on a thread of its own.
pub struct Rogue {
    pub port: u16,
    /// The heads of the requests received, lower-cased.
    pub heads: Arc<Mutex<Vec<String>>>,
}

impl Rogue {
    pub fn start(misdeed: Misdeed) -> Rogue {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let log = heads.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().take(64).flatten() {
                let log = log.clone();
                std::thread::spawn(move || {
                    let _ = misbehave(conn, misdeed, &log);
                });
            }
        });
        Rogue { port, heads }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// The heads of the requests received so far.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The byte range a request's `Range` header asks of an object of `len` bytes.
fn asked(head: &str, len: u64) -> Option<std::ops::Range<u64>> {
    let spec = head
        .lines()
        .find_map(|l| l.strip_prefix("range: bytes="))?
        .trim();
    let (a, b) = spec.split_once('-')?;
    match a.is_empty() {
        true => Some(len.saturating_sub(b.parse().ok()?)..len),
        false => Some(a.parse().ok()?..(b.parse::<u64>().ok()? + 1).min(len)),
    }
}

/// Answers the requests of one connection as `misdeed` says, for at most 60 seconds.
fn misbehave(
    mut conn: TcpStream,
    misdeed: Misdeed,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let until = Instant::now() + Duration::from_secs(60);
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    conn.set_write_timeout(Some(Duration::from_secs(60)))?;
    while Instant::now() < until {
        let head = String::from_utf8_lossy(&read_head(&mut conn)?).to_lowercase();
        log.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(head.clone());
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        let range = asked(&head, ROGUE_LEN).unwrap_or(0..ROGUE_LEN);
        let partial = |body: u64| {
            format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {}-{}/{ROGUE_LEN}\r\n\
                 Content-Length: {body}\r\nETag: \"rogue\"\r\n\r\n",
                range.start,
                range.end - 1
            )
        };
        match misdeed {
            Misdeed::Silent => {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
                return Ok(());
            }
            Misdeed::LongBody => {
                let body = 64u64 << 20;
                conn.write_all(partial(body).as_bytes())?;
                let chunk = vec![0u8; 1 << 20];
                for _ in 0..64 {
                    conn.write_all(&chunk)?;
                }
            }
            Misdeed::Drip => {
                conn.write_all(partial(range.end - range.start).as_bytes())?;
                while Instant::now() < until {
                    conn.write_all(&[0])?;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            Misdeed::ShortBody => {
                let body = (range.end - range.start) / 2;
                conn.write_all(partial(body).as_bytes())?;
                conn.write_all(&vec![0u8; body as usize])?;
            }
            Misdeed::Redirect(port) => {
                let answer = format!(
                    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{port}{path}\r\n\
                     Content-Length: 0\r\n\r\n"
                );
                conn.write_all(answer.as_bytes())?;
            }
            Misdeed::NotFound => {
                conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            }
        }
    }
    Ok(())
}

/// The note after the summary, in a run of this test binary that lacks SeaweedFS.
#[cfg(test)]
mod skip_note {
    use std::process::Command;

    /// Asks for SeaweedFS in the run `said_after_the_summary` makes, and does nothing in others.
    #[test]
    fn probe() {
        if std::env::var_os("SC_SERVERS_PROBE").is_some() {
            assert!(super::weed().is_none(), "weed found");
        }
    }

    #[test]
    fn said_after_the_summary() {
        let empty = tempfile::tempdir().unwrap();
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "servers::skip_note::probe"])
            .env("SC_SERVERS_PROBE", "1")
            .env("HOME", empty.path())
            .env("PATH", empty.path())
            .env_remove("SC_WEED")
            .env_remove("SC_REQUIRE_SERVERS")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}{stderr}");
        assert!(stdout.contains("test result: ok. 1 passed"), "{stdout}");
        assert_eq!(
            stderr.trim_end().lines().last(),
            Some(
                "note: 1 test above passed without running: weed not found (set SC_WEED; \
                 SC_REQUIRE_SERVERS=1 makes it an error)"
            ),
            "{stderr}"
        );
    }
}
