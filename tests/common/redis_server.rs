//! A Redis server a test starts, stops and kills: `ANYPATH_REDIS_SERVER`
//! (set by `cargo xtask test`), with an append-only file fsynced on every
//! write, so a killed server comes back with every write it acknowledged.

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One `redis-server` process over one data directory and port.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
}

fn binary() -> PathBuf {
    std::env::var_os("ANYPATH_REDIS_SERVER")
        .map(PathBuf::from)
        .expect("ANYPATH_REDIS_SERVER names a redis-server binary (cargo xtask test installs one)")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl RedisServer {
    /// Starts a server keeping its data in `dir`.
    pub fn start(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        // A free port may be taken by another test before the server binds
        // it: then the server exits, and another port is tried.
        for _ in 0..5 {
            let mut server = Self { child: None, port: free_port(), dir: dir.to_owned() };
            if server.try_resume() {
                return server;
            }
        }
        panic!("redis-server could not bind a free port in five tries");
    }

    /// Starts the server again on the same port and data (after `stop` or `kill`).
    pub fn resume(&mut self) {
        assert!(self.try_resume(), "redis-server starts again on port {}", self.port);
    }

    /// Starts the server and waits until it answers PING on its port;
    /// false when it exited first (its port was taken).
    fn try_resume(&mut self) -> bool {
        assert!(self.child.is_none(), "the server is running");
        let mut command = Command::new(binary());
        command
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--save", "", "--appendonly", "yes"])
            .args(["--appendfsync", "always", "--dir"])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // The server goes with the test thread that started it, even when the
        // test binary ends without dropping it (a server kept in a static).
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command.spawn().expect("redis-server starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        // Our own server's answer, not only a connection or a PONG: another
        // test's server may hold the port.
        while !self.answers_as(child.id()) {
            if child.try_wait().ok().flatten().is_some() {
                return false;
            }
            assert!(Instant::now() < deadline, "redis-server answers on port {}", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child = Some(child);
        true
    }

    /// Whether the server on the port is the process `pid` (INFO) and has
    /// loaded its data (PING: INFO answers while it loads), on one connection.
    fn answers_as(&self, pid: u32) -> bool {
        let Ok(mut connection) = self.connection() else { return false };
        let ours = redis::cmd("INFO").arg("server").query::<String>(&mut connection).is_ok_and(|info| info.lines().any(|l| l.trim() == format!("process_id:{pid}")));
        ours && redis::cmd("PING").query::<String>(&mut connection).is_ok_and(|pong| pong == "PONG")
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The store's allowlist entry for this server.
    pub fn allowed(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A direct client, to look at what is stored.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// The app variables that put the store on this server.
    pub fn app_env(&self) -> Vec<(String, String)> {
        vec![
            ("SPIN_VARIABLE_STORE_BACKEND".into(), "redis".into()),
            ("SPIN_VARIABLE_REDIS_URL".into(), self.url()),
            ("SPIN_VARIABLE_REDIS_ALLOWED".into(), self.allowed()),
        ]
    }

    /// SIGKILL: no chance to flush anything beyond what was fsynced.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether this test run puts every `anypath up` on Redis
/// (`ANYPATH_TEST_STORE_BACKEND=redis`): the REST suites run unchanged on
/// each backend.
pub fn suite_on_redis() -> bool {
    std::env::var("ANYPATH_TEST_STORE_BACKEND").is_ok_and(|v| v == "redis")
}

/// The server for the app whose key-value file is `kv`: one per test's data
/// directory, kept for the whole test binary, so an app restarted over the
/// same directory finds its data again, as with the key-value file.
pub fn for_app(kv: &Path) -> Vec<(String, String)> {
    static SERVERS: OnceLock<Mutex<HashMap<PathBuf, RedisServer>>> = OnceLock::new();
    let dir = kv.parent().unwrap_or(kv).to_owned();
    let mut servers = SERVERS.get_or_init(Mutex::default).lock().unwrap();
    servers.entry(dir.clone()).or_insert_with(|| RedisServer::start(&dir.join("redis"))).app_env()
}
