//! Serving the application: one fresh component instance per request, routed
//! as Spin routes, with service chaining and the outbound allowlist.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use anyhow::anyhow;
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::kv::{KvAccess, KvDatabase};
use crate::manifest::{Manifest, Route, Source};
use crate::redis::{self, RedisPool, RedisView};
use crate::runtime_config::{DEFAULT_STORE, RuntimeConfig, StoreLocation};
use crate::gate::RequestGate;
use crate::outbound::AllowedHosts;
use crate::platform::{self, PlatformView};
use crate::routes::{Matched, Router};
use crate::variables::Variables;

/// Suffix of the hosts that reach a component in process.
const INTERNAL_SUFFIX: &str = ".spin.internal";

/// How to run an application.
pub struct AppConfig {
    pub manifest: PathBuf,
    /// The runtime configuration file (`--runtime-config-file`), if any.
    pub runtime_config: Option<PathBuf>,
    /// SQLite file of the `default` key-value store, over the runtime
    /// configuration's (default: `.spin/sqlite_key_value.db` beside the manifest).
    pub kv_path: Option<PathBuf>,
    /// Variable values that win over the environment and defaults.
    pub variable_overrides: HashMap<String, String>,
    /// Services in this process, by `host:port`: an outbound request to one
    /// (still subject to `allowed_outbound_hosts`) is handed over without a socket.
    pub local_services: HashMap<String, LocalService>,
    /// Where the components' native code is cached (compiled on first use,
    /// then loaded in milliseconds); `None` compiles them at every load.
    pub native_cache: Option<PathBuf>,
    /// What every public request passes before its component runs (`None`:
    /// served as it comes, as `spin up` does).
    pub gate: Option<Arc<dyn RequestGate>>,
}

/// The response body a [`LocalService`] answers with.
pub type OutBody = UnsyncBoxBody<Bytes, HttpError>;
/// A service in this process that components reach by an ordinary URL.
pub type LocalService = Arc<
    dyn Fn(http::Request<WasiBody>) -> std::pin::Pin<Box<dyn Future<Output = http::Response<OutBody>> + Send>>
        + Send
        + Sync,
>;

/// An app that passed the checks `spin up` makes when it loads one.
pub struct CheckedApp {
    manifest: Manifest,
    runtime: RuntimeConfig,
    variables: Variables,
}

/// A loaded application, ready to serve requests.
#[derive(Clone)]
pub struct App {
    inner: Arc<AppInner>,
}

struct AppInner {
    components: HashMap<String, Loaded>,
    /// Outbound Redis connections, shared by every instance.
    redis: RedisPool,
    router: Router,
    local_services: HashMap<String, LocalService>,
    gate: Option<Arc<dyn RequestGate>>,
}

struct Loaded {
    pre: ProxyPre<ComponentState>,
    allowed: AllowedHosts,
    variables: Arc<BTreeMap<String, String>>,
    kv: KvAccess,
    private: bool,
    raw_route: String,
}

/// Per-request state of one component instance.
struct ComponentState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: Hooks,
    kv: KvAccess,
    variables: Arc<BTreeMap<String, String>>,
    redis: RedisPool,
}

/// Decides what a component's outbound requests may reach.
struct Hooks {
    app: Weak<AppInner>,
    allowed: AllowedHosts,
}

impl WasiView for ComponentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for ComponentState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}

type SendFuture = Box<
    dyn Future<Output = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), HttpError>> + Send>), HttpError>>
        + Send,
>;

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("http").to_owned();
        let host = uri.host().unwrap_or_default().to_owned();
        let port = uri.port_u16();
        if !self.allowed.allows(&scheme, &host, port) {
            // As in Spin: the component sees HttpRequestDenied.
            tracing::warn!(%scheme, %host, "outbound request denied by allowed_outbound_hosts");
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        if let Some(component) = host.strip_suffix(INTERNAL_SUFFIX) {
            let app = self.app.upgrade();
            let component = component.to_owned();
            return Box::new(async move {
                let app = app.ok_or(HttpError::DestinationUnavailable)?;
                let response = app
                    .dispatch(&component, request, None, "internal")
                    .await
                    .map_err(|e| HttpError::InternalError(Some(format!("{e:#}"))))?;
                let done: Box<dyn Future<Output = Result<(), HttpError>> + Send> = Box::new(async { Ok(()) });
                Ok((response, done))
            });
        }
        let authority = uri.authority().map(|a| a.as_str().to_owned()).unwrap_or_default();
        if let Some(service) = self.app.upgrade().and_then(|app| app.local_services.get(&authority).cloned()) {
            return Box::new(async move {
                let response = service(request).await;
                let done: Box<dyn Future<Output = Result<(), HttpError>> + Send> = Box::new(async { Ok(()) });
                Ok((response, done))
            });
        }
        Box::new(async move {
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> = Box::new(io);
            Ok((response.map(BodyExt::boxed_unsync), io))
        })
    }
}

impl CheckedApp {
    /// The value the app's variable `name` resolved to, if it has one.
    pub fn variable(&self, name: &str) -> Option<String> {
        self.variables.get(name)
    }
}

impl App {
    /// What `spin up` checks before it runs anything: the manifest, the
    /// runtime configuration's store labels, the variables' values. Cheap,
    /// so a caller can refuse a bad app before starting anything else.
    pub fn check(config: &AppConfig) -> anyhow::Result<CheckedApp> {
        let manifest = Manifest::load(&config.manifest)?;
        let mut runtime = RuntimeConfig::load(config.runtime_config.as_deref(), &manifest.dir)?;
        if let Some(path) = &config.kv_path {
            runtime.key_value_stores.insert(DEFAULT_STORE.to_owned(), StoreLocation::File(path.clone()));
        }
        // Spin checks the labels of every component, used by a trigger or not.
        for (id, decl) in &manifest.components {
            runtime.check_labels(id.as_str(), &decl.key_value_stores)?;
        }
        let overrides = &config.variable_overrides;
        let variables = Variables::resolve(&manifest.variables, |name| {
            let key = name.trim_start_matches("SPIN_VARIABLE_").to_lowercase();
            overrides.get(&key).cloned().or_else(|| std::env::var(name).ok())
        })?;
        Ok(CheckedApp { manifest, runtime, variables })
    }

    /// Checks the app (see [`App::check`]), then compiles every component.
    pub fn load(config: &AppConfig) -> anyhow::Result<Self> {
        let CheckedApp { manifest, runtime, variables } = Self::check(config)?;
        let stores = Arc::new(open_stores(&manifest, &runtime)?);

        let engine = Engine::new(&engine_config())?;
        let component_ids = manifest.component_ids();
        let mut components = HashMap::new();
        for trigger in &manifest.triggers {
            let decl = &manifest.components[trigger.component.as_str()];
            let Source::Local(path) = &decl.source else {
                anyhow::bail!("component {:?}: only a local source can be run", trigger.component);
            };
            let source = manifest.dir.join(path);
            let component = match &config.native_cache {
                Some(cache) => anypath_native_cache::load(&engine, &source, cache).map_err(|e| format!("{e}")),
                None => Component::from_file(&engine, &source).map_err(|e| format!("{e:#}")),
            }
            .map_err(|e| anyhow!("loading component {:?} from {}: {e}", trigger.component, source.display()))?;
            let mut linker: Linker<ComponentState> = Linker::new(&engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
            wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
            platform::add_to_linker(&mut linker, |s: &mut ComponentState| PlatformView {
                table: &mut s.table,
                kv: &s.kv,
                variables: &s.variables,
            })?;
            redis::add_to_linker(&mut linker, |s: &mut ComponentState| RedisView {
                table: &mut s.table,
                allowed: &s.hooks.allowed,
                pool: &s.redis,
            })?;
            let pre = ProxyPre::new(linker.instantiate_pre(&component)?)?;
            // As in Spin, an allowlist that does not parse with the values set
            // denies every outbound call of the component, service chaining too.
            let allowed = AllowedHosts::resolve(&decl.allowed_outbound_hosts, &variables, &component_ids).unwrap_or_else(|error| {
                tracing::error!(component = %trigger.component, %error, "Error parsing allowed outbound hosts: every outbound request of this component is denied");
                AllowedHosts::default()
            });
            let mut component_vars = BTreeMap::new();
            for (name, template) in &decl.variables {
                component_vars.insert(name.to_string(), variables.expand(template)?);
            }
            let kv = KvAccess { stores: stores.clone(), granted: Arc::new(decl.key_value_stores.clone()) };
            let (raw_route, private) = match &trigger.route {
                Route::Public(r) => (r.clone(), false),
                Route::Private => ("/...".to_owned(), true),
            };
            components.insert(
                trigger.component.clone(),
                Loaded { pre, allowed, variables: Arc::new(component_vars), kv, private, raw_route },
            );
        }
        let router = Router::new(&manifest.triggers);
        let local_services = config.local_services.clone();
        let gate = config.gate.clone();
        Ok(Self { inner: Arc::new(AppInner { components, redis: RedisPool::default(), router, local_services, gate }) })
    }

    /// Serves on `listener` until `shutdown` resolves.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let local = listener.local_addr()?;
        tokio::pin!(shutdown);
        loop {
            let (stream, client) = tokio::select! {
                accepted = listener.accept() => accepted?,
                () = &mut shutdown => return Ok(()),
            };
            self.spawn_connection(stream, client, local);
        }
    }

    /// Serves one accepted connection on a task of its own. A plain
    /// function, so hyper's generic server code compiles in this crate once
    /// rather than in every crate that awaits the generic [`App::serve`].
    fn spawn_connection(&self, stream: tokio::net::TcpStream, client: SocketAddr, local: SocketAddr) {
        // A response whose body follows its head in a second write would
        // otherwise wait for the client's delayed ACK (~40 ms).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY could not be set");
        }
        let app = self.inner.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let app = app.clone();
                async move { Ok::<_, std::convert::Infallible>(app.handle_public(request, client, local).await) }
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
}

fn plain(status: u16, message: &str) -> http::Response<OutBody> {
    let body = http_body_util::Full::new(Bytes::from(message.to_owned())).map_err(|never| match never {}).boxed_unsync();
    http::Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(body)
        .unwrap_or_else(|_| http::Response::new(http_body_util::Empty::new().map_err(|never| match never {}).boxed_unsync()))
}

impl AppInner {
    async fn handle_public(
        self: Arc<Self>,
        request: http::Request<hyper::body::Incoming>,
        client: SocketAddr,
        local: SocketAddr,
    ) -> http::Response<OutBody> {
        let path = request.uri().path().to_owned();
        let Some(matched) = self.router.route(&path) else {
            return plain(404, "Not Found");
        };
        let full_url = format!("http://{local}{}", request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/"));
        let headers = SpinHeaders { matched, full_url, client: client.to_string() };
        let request = request.map(|body| body.map_err(HttpError::Hyper).boxed_unsync());
        let component = headers.matched.component.clone();
        let (parts, body) = request.into_parts();
        let admitted = match &self.gate {
            Some(gate) => match gate.admit(&component, &parts).await {
                Ok(admitted) => Some(admitted),
                Err(refused) => return refused,
            },
            None => None,
        };
        let request = http::Request::from_parts(parts, body);
        let dispatched = self.dispatch(&component, request, Some(headers), "public").await;
        drop(admitted);
        match dispatched {
            Ok(response) => response,
            Err(error) => {
                tracing::error!(error = %format!("{error:#}"), component, "request failed");
                plain(500, "Internal Server Error")
            }
        }
    }

    /// Runs `component` on `request` in a fresh instance and returns its response.
    fn dispatch<'a>(
        self: &'a Arc<Self>,
        component: &'a str,
        mut request: http::Request<WasiBody>,
        headers: Option<SpinHeaders>,
        via: &'static str,
    ) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<http::Response<OutBody>>> + Send + 'a>> {
        Box::pin(async move {
            let loaded = self.components.get(component).ok_or_else(|| anyhow!("no component {component:?}"))?;
            if via == "public" && loaded.private {
                return Ok(plain(404, "Not Found"));
            }
            let headers = headers.unwrap_or_else(|| SpinHeaders::internal(component, &loaded.raw_route, request.uri()));
            headers.apply(request.headers_mut());
            let mut store = Store::new(
                loaded.pre.engine(),
                ComponentState {
                    wasi: WasiCtx::builder().inherit_stdout().inherit_stderr().build(),
                    http: WasiHttpCtx::new(),
                    table: ResourceTable::new(),
                    hooks: Hooks { app: Arc::downgrade(self), allowed: loaded.allowed.clone() },
                    kv: loaded.kv.clone(),
                    variables: loaded.variables.clone(),
                    redis: self.redis.clone(),
                },
            );
            let (sender, receiver) = tokio::sync::oneshot::channel();
            let incoming = store.data_mut().http().new_incoming_request(Scheme::Http, request)?;
            let out = store.data_mut().http().new_response_outparam(sender)?;
            let pre = loaded.pre.clone();
            let task = tokio::spawn(async move {
                let proxy = pre.instantiate_async(&mut store).await?;
                proxy.wasi_http_incoming_handler().call_handle(&mut store, incoming, out).await
            });
            match receiver.await {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(code)) => Err(anyhow!("component {component:?} answered with an error: {code:?}")),
                Err(_) => match task.await {
                    Ok(Ok(())) => Err(anyhow!("component {component:?} never set a response")),
                    Ok(Err(e)) => Err(anyhow!("component {component:?} failed: {e:#}")),
                    Err(e) => Err(anyhow!("component {component:?} task failed: {e}")),
                },
            }
        })
    }
}

/// Opens the database of every store label some component was granted,
/// each file once however many labels name it.
fn open_stores(manifest: &Manifest, runtime: &RuntimeConfig) -> anyhow::Result<BTreeMap<String, Arc<KvDatabase>>> {
    let used: std::collections::BTreeSet<&str> =
        manifest.components.values().flat_map(|c| c.key_value_stores.iter().map(String::as_str)).collect();
    let mut files: HashMap<PathBuf, Arc<KvDatabase>> = HashMap::new();
    let mut stores = BTreeMap::new();
    for label in used {
        let db = match &runtime.key_value_stores[label] {
            StoreLocation::InMemory => KvDatabase::in_memory()?,
            StoreLocation::File(path) => match files.get(path) {
                Some(db) => db.clone(),
                None => {
                    let db = KvDatabase::open(path)?;
                    files.insert(path.clone(), db.clone());
                    db
                }
            },
        };
        stores.insert(label.to_owned(), db);
    }
    Ok(stores)
}

/// Spin's engine settings: the pooling allocator with a small resident
/// slice per slot, so a fresh instance per request costs no new mappings.
fn engine_config() -> Config {
    const MB: usize = 1 << 20;
    const MAX_INSTANCES: u32 = 1_000;
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(MAX_INSTANCES)
        .total_memories(MAX_INSTANCES)
        .total_tables(2 * MAX_INSTANCES)
        .total_stacks(MAX_INSTANCES)
        .total_core_instances(4 * MAX_INSTANCES)
        .table_elements(100_000)
        .max_component_instance_size(10 * MB)
        .max_core_instance_size(10 * MB)
        .max_core_instances_per_component(200)
        .max_tables_per_component(64)
        .max_memories_per_component(32)
        .max_memory_size(4 << 30)
        .linear_memory_keep_resident(2 * MB)
        .table_keep_resident(MB / 2);
    let mut wasm = Config::new();
    wasm.wasm_component_model(true).allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    wasm
}

/// The request headers Spin adds for the component it routes to.
struct SpinHeaders {
    matched: Matched,
    full_url: String,
    client: String,
}

impl SpinHeaders {
    fn internal(component: &str, raw_route: &str, uri: &http::Uri) -> Self {
        let path = uri.path().to_owned();
        Self {
            matched: Matched {
                component: component.to_owned(),
                raw_route: raw_route.to_owned(),
                base: String::new(),
                path_info: path,
            },
            full_url: uri.to_string(),
            // As Spin gives a chained request: no TCP client has port 0.
            client: "0.0.0.0:0".to_owned(),
        }
    }

    fn apply(&self, headers: &mut http::HeaderMap) {
        let route = self.matched.raw_route.trim_end_matches("/...");
        let pairs = [
            ("spin-full-url", self.full_url.clone()),
            ("spin-path-info", self.matched.path_info.clone()),
            ("spin-matched-route", self.matched.raw_route.clone()),
            ("spin-base-path", "/".to_owned()),
            ("spin-raw-component-route", self.matched.raw_route.clone()),
            ("spin-component-route", route.to_owned()),
            ("spin-client-addr", self.client.clone()),
        ];
        for (name, value) in pairs {
            if let Ok(value) = http::HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
    }
}

