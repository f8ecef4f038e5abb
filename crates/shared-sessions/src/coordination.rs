//! The hosts' coordination on Redis: one lease per session (who holds it
//! live), a token per lease that only grows, each session's record (its
//! metadata, its newest image and file list), fenced by the lease, and a
//! channel per host on which others ask it to hand a session over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc::UnboundedSender;

use crate::error::SharedStoreError;

/// Takes the lease when it is free (or already this host's): a new token
/// for a new holder. Returns {1, token} or {0, holder}.
const CLAIM: &str = r"
local held = redis.call('GET', KEYS[1])
if held then
  local host, token = string.match(held, '^(%S+) (%d+)$')
  if host == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, token}
  end
  return {0, held}
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'PX', ARGV[2])
return {1, tostring(token)}
";

/// Extends the lease when it is still this holder's, or takes it back
/// when it lapsed and no host claimed the session since (the token is
/// still this holder's): Redis was away longer than the lease, and this
/// host's live state is still the session's newest.
const RENEW: &str = r"
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not held and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
";

/// Lets go of the lease when it is still this holder's.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Sets fields of the session's record, only for the lease's holder.
const FENCED_SET: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1
";

/// Removes the session's record, only for the lease's holder.
const FENCED_DELETE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
";

/// Marks packs as named by a manifest being written now (score: the time,
/// in ms) unless the sweep removes or removed them (score: minus the time
/// it did). Returns those.
const REFER: &str = r"
local doomed = {}
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) < 0 then
    table.insert(doomed, ARGV[i])
  else
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i])
  end
end
return doomed
";

/// Marks for removal the packs no manifest named since the cutoff (or
/// never), atomically against [`REFER`]: their score becomes minus now,
/// kept a week so a host that still remembers one never names it again.
/// Returns those marked.
const DOOM: &str = r"
local doomed = {}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (-(tonumber(ARGV[2]) - 604800000)))
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if (not score) or tonumber(score) < tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], -tonumber(ARGV[2]), ARGV[i])
    table.insert(doomed, ARGV[i])
  end
end
return doomed
";

/// Leads a message on a host's channel that asks it to interrupt a run
/// (the others ask it to hand a session over).
const INTERRUPT: &str = "interrupt\n";


/// How often a host that waits for a session asks its holder again.
const ASK_AGAIN: Duration = Duration::from_secs(1);

/// How often a host that waits for a session looks at its lease: a
/// hand-over takes tens of milliseconds, and a look is one Redis call.
const LOOK_EVERY: Duration = Duration::from_millis(2);

/// A session's lease as this host holds it.
#[derive(Debug, Clone)]
struct Held {
    /// The lease's value on Redis: this host's name and the lease's token.
    value: String,
    token: u64,
    /// Until when this host may act on it without hearing from Redis again.
    valid_until: Instant,
}

/// This host's side of the coordination.
pub(crate) struct Coordination {
    client: redis::Client,
    connection: ConnectionManager,
    /// Key prefix of this fleet's records.
    namespace: String,
    /// This host's name in leases and its hand-over channel.
    host: String,
    lease: Duration,
    held: Mutex<HashMap<(String, String), Held>>,
}

impl Coordination {
    /// Connects to Redis at `url`, as host `host`.
    pub(crate) async fn connect(url: &str, namespace: String, host: String, lease: Duration) -> Result<Arc<Self>, SharedStoreError> {
        let client = redis::Client::open(url)?;
        let connection = client.get_connection_manager().await?;
        Ok(Arc::new(Self { client, connection, namespace, host, lease, held: Mutex::new(HashMap::new()) }))
    }

    fn key(&self, kind: &str, tenant: &str, session_id: &str) -> String {
        format!("{}:{kind}:{tenant}:{session_id}", self.namespace)
    }

    fn channel(&self, host: &str) -> String {
        format!("{}:handover:{host}", self.namespace)
    }

    fn lease_ms(&self) -> u64 {
        self.lease.as_millis() as u64
    }

    /// How long this host trusts a lease it just took or renewed: less than
    /// its length, so it stops acting on it before Redis lets it go.
    fn trusted_for(&self) -> Duration {
        self.lease.mul_f64(0.8)
    }

    /// Takes the session's lease, asking its holder to hand it over and
    /// waiting (until its lease could have lapsed twice) while another host
    /// holds it. Returns the lease's token.
    pub(crate) async fn claim(&self, tenant: &str, session_id: &str) -> Result<u64, SharedStoreError> {
        let (lease_key, token_key) = (self.key("lease", tenant, session_id), self.key("token", tenant, session_id));
        let deadline = Instant::now() + self.lease * 2 + Duration::from_secs(1);
        let mut asked: Option<(String, Instant)> = None;
        loop {
            let started = Instant::now();
            let mut connection = self.connection.clone();
            let (won, said): (u8, String) = redis::Script::new(CLAIM)
                .key(&lease_key)
                .key(&token_key)
                .arg(&self.host)
                .arg(self.lease_ms())
                .invoke_async(&mut connection)
                .await?;
            if won == 1 {
                let token = said.parse().unwrap_or(0);
                let held = Held { value: format!("{} {token}", self.host), token, valid_until: started + self.trusted_for() };
                self.held.lock().unwrap_or_else(PoisonError::into_inner).insert((tenant.to_owned(), session_id.to_owned()), held);
                return Ok(token);
            }
            let holder = said.split(' ').next().unwrap_or_default().to_owned();
            let due = asked.as_ref().is_none_or(|(host, at)| *host != holder || at.elapsed() >= ASK_AGAIN);
            if due {
                let message = format!("{tenant}\n{session_id}");
                let _: i64 = connection.publish(self.channel(&holder), message).await?;
                asked = Some((holder, Instant::now()));
            }
            if Instant::now() >= deadline {
                return Err(SharedStoreError::HeldElsewhere);
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// Whether this host holds the session's lease and may still act on it.
    pub(crate) fn holds(&self, tenant: &str, session_id: &str) -> bool {
        self.token(tenant, session_id).is_some()
    }

    /// The token of the lease this host holds on the session, while it may act on it.
    pub(crate) fn token(&self, tenant: &str, session_id: &str) -> Option<u64> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&(tenant.to_owned(), session_id.to_owned())).filter(|h| Instant::now() < h.valid_until).map(|h| h.token)
    }

    fn value(&self, tenant: &str, session_id: &str) -> Result<String, SharedStoreError> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&(tenant.to_owned(), session_id.to_owned())).filter(|h| Instant::now() < h.valid_until).map(|h| h.value.clone()).ok_or(SharedStoreError::LeaseLost)
    }

    /// Lets go of the session's lease (when still this host's).
    pub(crate) async fn release(&self, tenant: &str, session_id: &str) -> Result<(), SharedStoreError> {
        let removed = self.held.lock().unwrap_or_else(PoisonError::into_inner).remove(&(tenant.to_owned(), session_id.to_owned()));
        let Some(held) = removed else { return Ok(()) };
        let mut connection = self.connection.clone();
        let _: i64 = redis::Script::new(RELEASE).key(self.key("lease", tenant, session_id)).arg(&held.value).invoke_async(&mut connection).await?;
        Ok(())
    }

    /// Renews every lease this host holds; a lease found taken is dropped
    /// (the host was paused or cut off past it).
    pub(crate) async fn renew_all(&self) {
        let held: Vec<((String, String), Held)> = self.held.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for ((tenant, session_id), lease) in held {
            // Redis away: the lease lapses here on its own unless a renewal gets through.
            if let Err(error) = self.renew(&tenant, &session_id, &lease).await {
                tracing::warn!(%error, "a session's lease could not be renewed");
            }
        }
    }

    /// Renews the lease this host held on the session, even when this host
    /// stopped trusting it (Redis was away): true when it is this host's
    /// again, and nobody held it meanwhile. False when another host took
    /// it (the lease is dropped here) or this host never held it.
    pub(crate) async fn reclaim(&self, tenant: &str, session_id: &str) -> Result<bool, SharedStoreError> {
        let lease = self.held.lock().unwrap_or_else(PoisonError::into_inner).get(&(tenant.to_owned(), session_id.to_owned())).cloned();
        match lease {
            Some(lease) => self.renew(tenant, session_id, &lease).await,
            None => Ok(false),
        }
    }

    async fn renew(&self, tenant: &str, session_id: &str, lease: &Held) -> Result<bool, SharedStoreError> {
        let started = Instant::now();
        let mut connection = self.connection.clone();
        let renewed: i64 = redis::Script::new(RENEW)
            .key(self.key("lease", tenant, session_id))
            .key(self.key("token", tenant, session_id))
            .arg(&lease.value)
            .arg(self.lease_ms())
            .arg(lease.token)
            .invoke_async(&mut connection)
            .await?;
        let mut table = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (tenant.to_owned(), session_id.to_owned());
        if renewed == 1 {
            if let Some(entry) = table.get_mut(&key).filter(|e| e.value == lease.value) {
                entry.valid_until = started + self.trusted_for();
            }
            return Ok(true);
        }
        tracing::warn!(%tenant, session = %session_id, "a session's lease was found taken by another host");
        if table.get(&key).is_some_and(|e| e.value == lease.value) {
            table.remove(&key);
        }
        Ok(false)
    }

    /// The sorted set of packs and file contents by when a save last
    /// named them (see [`REFER`]).
    fn packs_key(&self) -> String {
        format!("{}:named", self.namespace)
    }

    /// Forgets the marks of file contents the sweep removed: their names
    /// (their hashes) may be written again.
    pub(crate) async fn forget_named(&self, names: &[String]) -> Result<(), SharedStoreError> {
        if names.is_empty() {
            return Ok(());
        }
        let mut connection = self.connection.clone();
        let _: i64 = connection.zrem(self.packs_key(), names).await?;
        Ok(())
    }

    /// The SHA-256 of every live artifact's content.
    pub(crate) async fn artifact_contents(&self) -> Result<Vec<String>, SharedStoreError> {
        let keys = self.scan_keys(&format!("{}:artifact:*", self.namespace)).await?;
        let mut connection = self.connection.clone();
        let mut contents = Vec::with_capacity(keys.len());
        for key in keys {
            let json: Option<String> = connection.get(&key).await?;
            if let Some(sha) = json.and_then(|j| serde_json::from_str::<serde_json::Value>(&j).ok()).and_then(|v| v.get("sha256").and_then(|s| s.as_str()).map(str::to_owned)) {
                contents.push(sha);
            }
        }
        Ok(contents)
    }

    /// Notes that a manifest about to be written names `packs`; returns
    /// those the sweep is removing (the manifest must not name them).
    pub(crate) async fn refer_packs(&self, packs: &[String]) -> Result<Vec<String>, SharedStoreError> {
        if packs.is_empty() {
            return Ok(Vec::new());
        }
        self.on_packs(REFER, &[unix_ms()], packs).await
    }

    /// Marks for removal those of `packs` no manifest has named since
    /// `cutoff_ms`; returns them.
    pub(crate) async fn doom_packs(&self, cutoff_ms: i64, packs: &[String]) -> Result<Vec<String>, SharedStoreError> {
        if packs.is_empty() {
            return Ok(Vec::new());
        }
        self.on_packs(DOOM, &[cutoff_ms, unix_ms()], packs).await
    }

    /// Runs `script` on the set of named packs with `leading` then `packs`
    /// as its arguments: the packs it returns.
    async fn on_packs(&self, script: &str, leading: &[i64], packs: &[String]) -> Result<Vec<String>, SharedStoreError> {
        let script = redis::Script::new(script);
        let mut invocation = script.key(self.packs_key());
        invocation.arg(leading).arg(packs);
        let mut connection = self.connection.clone();
        Ok(invocation.invoke_async(&mut connection).await?)
    }

    /// Every key matching `pattern`, scanned (never `KEYS`).
    async fn scan_keys(&self, pattern: &str) -> Result<Vec<String>, SharedStoreError> {
        let mut connection = self.connection.clone();
        let mut found = Vec::new();
        let mut iter: redis::AsyncIter<String> = connection.scan_match(pattern).await?;
        while let Some(key) = iter.next_item().await {
            found.push(key?);
        }
        Ok(found)
    }

    /// Every session record of the fleet, as (tenant, session id, fields),
    /// and whether a host holds its lease now.
    pub(crate) async fn all_records(&self) -> Result<Vec<(String, String, HashMap<String, String>, bool)>, SharedStoreError> {
        let keys = self.scan_keys(&format!("{}:record:*", self.namespace)).await?;
        let mut connection = self.connection.clone();
        let prefix = format!("{}:record:", self.namespace);
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let Some((tenant, session)) = key.strip_prefix(&prefix).and_then(|rest| rest.split_once(':')) else { continue };
            let (tenant, session) = (tenant.to_owned(), session.to_owned());
            let fields: HashMap<String, String> = connection.hgetall(&key).await?;
            let held: bool = connection.exists(self.key("lease", &tenant, &session)).await?;
            out.push((tenant, session, fields, held));
        }
        Ok(out)
    }

    /// Removes the record of a session no host holds, unless a host has
    /// claimed it meanwhile; true when removed.
    pub(crate) async fn remove_unheld_record(&self, tenant: &str, session_id: &str) -> Result<bool, SharedStoreError> {
        let script = redis::Script::new(
            r"
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
return redis.call('DEL', KEYS[2])
",
        );
        let mut connection = self.connection.clone();
        let removed: i64 = script.key(self.key("lease", tenant, session_id)).key(self.key("record", tenant, session_id)).invoke_async(&mut connection).await?;
        Ok(removed == 1)
    }

    /// Takes the fleet's sweep for `length` unless another host has it.
    pub(crate) async fn take_sweep(&self, length: Duration) -> Result<bool, SharedStoreError> {
        let mut connection = self.connection.clone();
        let taken: Option<String> = redis::cmd("SET")
            .arg(format!("{}:sweep", self.namespace))
            .arg(&self.host)
            .arg("NX")
            .arg("PX")
            .arg(length.as_millis() as u64)
            .query_async(&mut connection)
            .await?;
        Ok(taken.is_some())
    }

    /// The session's record (empty when it has none).
    pub(crate) async fn record(&self, tenant: &str, session_id: &str) -> Result<HashMap<String, String>, SharedStoreError> {
        let mut connection = self.connection.clone();
        Ok(connection.hgetall(self.key("record", tenant, session_id)).await?)
    }

    /// Sets fields of the session's record, as its lease's holder.
    pub(crate) async fn set_record(&self, tenant: &str, session_id: &str, fields: &[(&str, &str)]) -> Result<(), SharedStoreError> {
        let value = self.value(tenant, session_id)?;
        let fenced = redis::Script::new(FENCED_SET);
        let mut script = fenced.prepare_invoke();
        script.key(self.key("lease", tenant, session_id)).key(self.key("record", tenant, session_id)).arg(&value);
        for (field, content) in fields {
            script.arg(*field).arg(*content);
        }
        let mut connection = self.connection.clone();
        let set: i64 = script.invoke_async(&mut connection).await?;
        if set == 1 { Ok(()) } else { Err(SharedStoreError::LeaseLost) }
    }

    /// Removes the session's record, as its lease's holder.
    pub(crate) async fn delete_record(&self, tenant: &str, session_id: &str) -> Result<(), SharedStoreError> {
        let value = self.value(tenant, session_id)?;
        let mut connection = self.connection.clone();
        let deleted: i64 = redis::Script::new(FENCED_DELETE)
            .key(self.key("lease", tenant, session_id))
            .key(self.key("record", tenant, session_id))
            .arg(&value)
            .invoke_async(&mut connection)
            .await?;
        if deleted == 1 { Ok(()) } else { Err(SharedStoreError::LeaseLost) }
    }

    /// Publishes an artifact's record (`json`) under its id and in its
    /// session's set, both kept until the artifact expires.
    pub(crate) async fn publish_artifact(&self, tenant: &str, session_id: &str, id: &str, json: &str, expires_unix: u64) -> Result<(), SharedStoreError> {
        let (record, listed) = (format!("{}:artifact:{id}", self.namespace), self.key("artifacts", tenant, session_id));
        let mut connection = self.connection.clone();
        let expires = i64::try_from(expires_unix).unwrap_or(i64::MAX);
        redis::pipe()
            .atomic()
            .set(&record, json)
            .expire_at(&record, expires)
            .sadd(&listed, id)
            // The set lives as long as its newest artifact (every artifact is
            // kept equally long, so the newest expires last).
            .expire_at(&listed, expires)
            .query_async::<()>(&mut connection)
            .await?;
        Ok(())
    }

    /// The record of the artifact `id`, while it lives.
    pub(crate) async fn artifact(&self, id: &str) -> Result<Option<String>, SharedStoreError> {
        let mut connection = self.connection.clone();
        Ok(connection.get(format!("{}:artifact:{id}", self.namespace)).await?)
    }

    /// The records of the session's live artifacts.
    pub(crate) async fn session_artifacts(&self, tenant: &str, session_id: &str) -> Result<Vec<String>, SharedStoreError> {
        let mut connection = self.connection.clone();
        let ids: Vec<String> = connection.smembers(self.key("artifacts", tenant, session_id)).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| format!("{}:artifact:{id}", self.namespace)).collect();
        let records: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query_async(&mut connection).await?;
        Ok(records.into_iter().flatten().collect())
    }

    fn shared_record_key(&self, kind: &str, id: &str) -> String {
        format!("{}:shared:{kind}:{id}", self.namespace)
    }

    fn shared_index_key(&self, kind: &str) -> String {
        format!("{}:shared:{kind}", self.namespace)
    }

    /// Sets `fields` of the shared record `id` of `kind`, and lists it.
    pub(crate) async fn write_shared(&self, kind: &str, id: &str, fields: &[(String, String)]) -> Result<(), SharedStoreError> {
        let mut connection = self.connection.clone();
        let mut pipe = redis::pipe();
        pipe.atomic().sadd(self.shared_index_key(kind), id);
        if !fields.is_empty() {
            pipe.hset_multiple(self.shared_record_key(kind, id), fields);
        }
        pipe.query_async::<()>(&mut connection).await?;
        Ok(())
    }

    /// The shared record `id` of `kind` (empty when there is none).
    pub(crate) async fn read_shared(&self, kind: &str, id: &str) -> Result<HashMap<String, String>, SharedStoreError> {
        let mut connection = self.connection.clone();
        Ok(connection.hgetall(self.shared_record_key(kind, id)).await?)
    }

    /// Removes the shared record `id` of `kind`.
    pub(crate) async fn remove_shared(&self, kind: &str, id: &str) -> Result<(), SharedStoreError> {
        let mut connection = self.connection.clone();
        redis::pipe().atomic().del(self.shared_record_key(kind, id)).srem(self.shared_index_key(kind), id).query_async::<()>(&mut connection).await?;
        Ok(())
    }

    /// Every shared record of `kind`, by id (one round trip for the list,
    /// one for the records).
    pub(crate) async fn list_shared(&self, kind: &str) -> Result<Vec<(String, HashMap<String, String>)>, SharedStoreError> {
        let mut connection = self.connection.clone();
        let ids: Vec<String> = connection.smembers(self.shared_index_key(kind)).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.hgetall(self.shared_record_key(kind, id));
        }
        let records: Vec<HashMap<String, String>> = pipe.query_async(&mut connection).await?;
        Ok(ids.into_iter().zip(records).filter(|(_, fields)| !fields.is_empty()).collect())
    }

    /// Sends each session other hosts ask this one to hand over to `to`,
    /// subscribing again after a lost connection, until `to` is closed.
    /// Asks the host that holds the session (another than this one) to
    /// interrupt its run there (`run_id`'s only, when given); true when a
    /// host was listening.
    pub(crate) async fn ask_interrupt(&self, tenant: &str, session_id: &str, run_id: Option<&str>) -> Result<bool, SharedStoreError> {
        let mut connection = self.connection.clone();
        let held: Option<String> = connection.get(self.key("lease", tenant, session_id)).await?;
        let Some(holder) = held.and_then(|h| h.split(' ').next().map(str::to_owned)).filter(|h| *h != self.host) else { return Ok(false) };
        let message = format!("{INTERRUPT}{tenant}\n{session_id}\n{}", run_id.unwrap_or_default());
        let listening: i64 = connection.publish(self.channel(&holder), message).await?;
        Ok(listening > 0)
    }

    pub(crate) async fn listen_for_handovers(self: Arc<Self>, to: UnboundedSender<(String, String)>, interrupts: UnboundedSender<anypath_interpreter::InterruptRequest>) {
        let channel = self.channel(&self.host);
        while !to.is_closed() {
            let subscribed = async {
                let mut pubsub = self.client.get_async_pubsub().await?;
                pubsub.subscribe(&channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            }
            .await;
            let mut pubsub = match subscribed {
                Ok(pubsub) => pubsub,
                Err(error) => {
                    tracing::warn!(%error, "the hand-over channel could not be subscribed; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            let mut messages = pubsub.on_message();
            while let Some(message) = messages.next().await {
                let Ok(text) = message.get_payload::<String>() else { continue };
                if let Some(asked) = text.strip_prefix(INTERRUPT) {
                    let mut parts = asked.splitn(3, '\n');
                    if let (Some(tenant), Some(session_id), Some(run_id)) = (parts.next(), parts.next(), parts.next()) {
                        let run_id = (!run_id.is_empty()).then(|| run_id.to_owned());
                        let _ = interrupts.send((tenant.to_owned(), session_id.to_owned(), run_id));
                    }
                    continue;
                }
                if let Some((tenant, session_id)) = text.split_once('\n')
                    && to.send((tenant.to_owned(), session_id.to_owned())).is_err()
                {
                    return;
                }
            }
        }
    }
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
