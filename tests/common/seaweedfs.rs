//! An S3-compatible object store a test starts, stops, kills and brings
//! back: one `weed server -s3` process of SeaweedFS (`ANYPATH_WEED`, set by
//! `cargo xtask test`), its master, volume server, filer and S3 gateway
//! together on free loopback ports, over one data directory. Started
//! without an IAM configuration, so its S3 gateway takes any caller, signed
//! or not.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Credentials the hosts sign with: any pair does, since the store checks
/// none, but a client refuses to sign without one.
const ACCESS_KEY_ID: &str = "anypath-test";
const SECRET_ACCESS_KEY: &str = "anypath-test-secret";

/// Long enough for a loaded machine: a first start takes a few seconds, a
/// start over existing data longer (the volume server reports its volumes).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The ports of the four servers in the process: HTTP and gRPC each.
#[derive(Clone, Copy, Debug)]
struct Ports {
    master: u16,
    master_grpc: u16,
    volume: u16,
    volume_grpc: u16,
    filer: u16,
    filer_grpc: u16,
    s3: u16,
    s3_grpc: u16,
}

impl Ports {
    /// Eight distinct free ports: every one named, since weed's defaults
    /// (9333, 8080, ..., and each gRPC port at HTTP + 10000) would collide
    /// between tests or fall past 65535.
    fn free() -> Self {
        let listeners: Vec<std::net::TcpListener> = (0..8).map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port")).collect();
        let port = |i: usize| listeners[i].local_addr().expect("its address").port();
        Self {
            master: port(0),
            master_grpc: port(1),
            volume: port(2),
            volume_grpc: port(3),
            filer: port(4),
            filer_grpc: port(5),
            s3: port(6),
            s3_grpc: port(7),
        }
    }
}

/// One SeaweedFS process over one data directory and set of ports.
pub struct SeaweedFs {
    child: Option<Child>,
    ports: Ports,
    dir: PathBuf,
}

fn binary() -> PathBuf {
    std::env::var_os("ANYPATH_WEED").map(PathBuf::from).expect("ANYPATH_WEED names a SeaweedFS weed binary (cargo xtask test installs one)")
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().expect("an HTTP client")
}

impl SeaweedFs {
    /// Starts the store keeping its data in `dir` (its log is `dir/weed.log`).
    pub fn start(dir: &Path) -> Self {
        std::fs::create_dir_all(dir.join("data")).expect("the store's data directory");
        // A free port may be taken by another test before weed binds it:
        // then weed exits, and other ports are tried.
        for _ in 0..5 {
            let mut store = Self { child: None, ports: Ports::free(), dir: dir.to_owned() };
            if store.try_resume() {
                return store;
            }
        }
        panic!("SeaweedFS could not bind free ports in five tries; its log:\n{}", log_tail(dir));
    }

    /// Starts the store again on the same ports and data (after `stop` or `kill`).
    pub fn resume(&mut self) {
        assert!(self.try_resume(), "SeaweedFS starts again on its ports {:?}; its log:\n{}", self.ports, log_tail(&self.dir));
    }

    /// Starts weed and waits until it serves: false when it exited first
    /// (one of its ports was taken).
    fn try_resume(&mut self) -> bool {
        assert!(self.child.is_none(), "the store is running");
        let log = OpenOptions::new().create(true).append(true).open(self.dir.join("weed.log")).expect("the store's log file");
        let p = self.ports;
        let mut command = Command::new(binary());
        command
            // To stderr only: by default glog also writes files into /tmp.
            .arg("-logtostderr")
            .arg("server")
            .arg(format!("-dir={}", self.dir.join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-master.port={}", p.master))
            .arg(format!("-master.port.grpc={}", p.master_grpc))
            .arg(format!("-volume.port={}", p.volume))
            .arg(format!("-volume.port.grpc={}", p.volume_grpc))
            .arg("-filer")
            .arg(format!("-filer.port={}", p.filer))
            .arg(format!("-filer.port.grpc={}", p.filer_grpc))
            .arg("-s3")
            .arg(format!("-s3.port={}", p.s3))
            .arg(format!("-s3.port.grpc={}", p.s3_grpc))
            // Its Iceberg and Lance catalogs would take fixed ports (8181, 9101).
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false"])
            // Nothing leaves the machine.
            .arg("-master.telemetry=false")
            // A master with its raft state resumed waits through an election
            // (some twenty seconds) after a kill; a single master loses
            // nothing by starting afresh, as the volume server reports
            // every volume to it.
            .arg("-master.resumeState=false")
            // Small volumes, grown on demand: a bucket starts with seven.
            .args(["-master.volumeSizeLimitMB=64", "-volume.max=64", "-volume.preStopSeconds=0"])
            // With AWS credentials in its environment the gateway would
            // require them; without, it takes any caller.
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            // Where weed looks for its configuration files (none is wanted).
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log file"))
            .stderr(log);
        // The store goes with the test thread that started it, even when the
        // test binary ends without dropping it.
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command.spawn().expect("weed starts");
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.serves() {
            if child.try_wait().ok().flatten().is_some() {
                return false;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("SeaweedFS did not serve within {START_TIMEOUT:?}; its log:\n{}", log_tail(&self.dir));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // A port it could not bind ends it, maybe only after the others answered.
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        self.child = Some(child);
        true
    }

    /// Whether the S3 gateway answers and the master knows our volume server
    /// with every volume in the data directory: before that, a write finds
    /// no volume to grow and a read no volume holding its chunks.
    fn serves(&self) -> bool {
        let client = client();
        let s3 = client.get(self.endpoint()).send().is_ok_and(|r| r.status().is_success());
        if !s3 {
            return false;
        }
        let Ok(status) = client.get(format!("http://127.0.0.1:{}/dir/status", self.ports.master)).send().and_then(|r| r.json::<Value>()) else {
            return false;
        };
        let ours = format!("127.0.0.1:{}", self.ports.volume);
        let volumes = status["Topology"]["DataCenters"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|dc| dc["Racks"].as_array().into_iter().flatten())
            .flat_map(|rack| rack["DataNodes"].as_array().into_iter().flatten())
            .find(|node| node["Url"] == ours.as_str())
            .and_then(|node| node["Volumes"].as_u64());
        volumes.is_some_and(|known| known >= self.volume_files())
    }

    /// The volumes in the data directory (one `.dat` file each).
    fn volume_files(&self) -> u64 {
        let entries = std::fs::read_dir(self.dir.join("data")).into_iter().flatten().flatten();
        entries.filter(|e| e.path().extension().is_some_and(|x| x == "dat")).count() as u64
    }

    /// The S3 endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.s3)
    }

    /// Creates a bucket (`PUT /<name>`, unsigned); panics unless it is new.
    pub fn create_bucket(&self, name: &str) {
        let response = client().put(format!("{}/{name}", self.endpoint())).send().unwrap_or_else(|e| panic!("PUT /{name} sent: {e}"));
        let status = response.status();
        let body = response.text().unwrap_or_default();
        assert!(status.is_success(), "bucket {name} created: {status} {body}");
    }

    /// The environment that puts an anypath host's S3 client on this store:
    /// the standard AWS variables, with a plain-HTTP endpoint.
    pub fn env(&self) -> Vec<(String, String)> {
        Self::env_for(&self.endpoint())
    }

    /// The same environment for the store at `endpoint` (one the test run
    /// started, for instance).
    pub fn env_for(endpoint: &str) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", endpoint),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
            ("AWS_ALLOW_HTTP", "true"),
            // The credentials are given: no client goes looking for others
            // on the cloud's metadata address.
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// SIGTERM, and waits for weed to stop (SIGKILL after a minute).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on our own child's pid; it touches no memory of ours.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.wait();
    }

    /// SIGKILL: no chance to flush anything it had not written.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The last lines of the store's log, for a failure's message.
fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("weed.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
