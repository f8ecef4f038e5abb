//! Redis as the store's backend, through Spin's outbound Redis interface
//! (`spin up`, SpinKube, hosted Spin and `anypath up` all provide it).
//!
//! A commit is one server-side script ([`COMMIT_SCRIPT`]): it checks that
//! every index the journal was applied to (and every index the block only
//! read) is still the stored value, then writes the document values, the new
//! indexes and removes superseded values, all atomically; otherwise it
//! changes nothing. All keys of a tenant share one hash slot (`{tenant}`), so
//! a journal over several of its collections is one script on Redis Cluster
//! too. Ids come from `INCRBY`; a collection's first index is written with
//! `SET ... NX` inside the script.

use anypath_rest::StoredIndex;
use anypath_rest::store_keys::{CollectionKeys, KeyStyle};
use spin_sdk::redis::{Connection, Error, RedisParameter, RedisResult};

use crate::backend::{Backend, Outcome, Part, decode_index};
use crate::codec::encode;
use crate::error::StoreError;

/// KEYS: the parts' index keys (n), then document keys (d), then superseded
/// document keys (x). ARGV: n, d, x; per part `present`, `expected`,
/// `writes`, `next` ('1'/'0' flags); then the d document values.
/// Answers 0 when committed, the 1-based part whose index changed otherwise.
const COMMIT_SCRIPT: &str = r#"
local n, d, x = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, n do
  local at = 4 + (i - 1) * 4
  local current = redis.call('GET', KEYS[i])
  if ARGV[at] == '1' then
    if current ~= ARGV[at + 1] then return i end
  elseif current then
    return i
  end
end
local values = 4 + n * 4
for j = 1, d do
  redis.call('SET', KEYS[n + j], ARGV[values + j - 1])
end
for i = 1, n do
  local at = 4 + (i - 1) * 4
  if ARGV[at + 2] == '1' then
    if ARGV[at] == '1' then
      redis.call('SET', KEYS[i], ARGV[at + 3])
    else
      redis.call('SET', KEYS[i], ARGV[at + 3], 'NX')
    end
  end
end
for j = 1, x do
  redis.call('DEL', KEYS[n + d + j])
end
return 0
"#;

/// A connection to the Redis server named by the `redis_url` variable.
pub struct RedisBackend {
    connection: Connection,
}

fn unavailable(what: &str, e: impl std::fmt::Debug) -> StoreError {
    StoreError::Unavailable(format!("redis {what}: {e:?}"))
}

fn binary(bytes: &[u8]) -> RedisParameter {
    RedisParameter::Binary(bytes.to_vec())
}

impl RedisBackend {
    pub fn open(url: &str) -> Result<Self, StoreError> {
        match Connection::open(url) {
            Ok(connection) => Ok(Self { connection }),
            // A setting to fix, not an outage to wait out.
            Err(Error::InvalidAddress) => Err(StoreError::Backend(
                "redis_url is not an address the store may reach: malformed, or outside its allowed_outbound_hosts (redis_allowed)".into(),
            )),
            Err(e) => Err(unavailable("connect", e)),
        }
    }

    fn execute(&self, command: &str, arguments: &[RedisParameter]) -> Result<Vec<RedisResult>, StoreError> {
        self.connection.execute(command, arguments).map_err(|e| unavailable(command, e))
    }
}

impl Backend for RedisBackend {
    fn key_style(&self) -> KeyStyle {
        KeyStyle::HashTagged
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.connection.get(key).map_err(|e| unavailable("GET", e))
    }

    fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let arguments: Vec<RedisParameter> = keys.iter().map(|k| binary(k.as_bytes())).collect();
        let values = self.execute("MGET", &arguments)?;
        if values.len() != keys.len() {
            return Err(StoreError::Backend(format!("redis MGET answered {} values for {} keys", values.len(), keys.len())));
        }
        values
            .into_iter()
            .map(|value| match value {
                RedisResult::Binary(bytes) => Ok(Some(bytes)),
                RedisResult::Nil => Ok(None),
                other => Err(StoreError::Backend(format!("redis MGET answered {other:?}"))),
            })
            .collect()
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.connection.set(key, value).map_err(|e| unavailable("SET", e))
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.connection.del(&[key.to_owned()]).map(|_| ()).map_err(|e| unavailable("DEL", e))
    }

    fn increment(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        match self.execute("INCRBY", &[binary(key.as_bytes()), RedisParameter::Int64(delta)])?.as_slice() {
            [RedisResult::Int64(value)] => Ok(*value),
            other => Err(StoreError::Backend(format!("redis INCRBY answered {other:?}"))),
        }
    }

    fn read_head(&self, keys: &CollectionKeys) -> Result<StoredIndex, StoreError> {
        Ok(self.snapshot_head(keys)?.1)
    }

    fn snapshot_head(&self, keys: &CollectionKeys) -> Result<(Option<Vec<u8>>, StoredIndex), StoreError> {
        Ok(match self.get(&keys.index())? {
            Some(bytes) => {
                let head = decode_index(&bytes)?;
                (Some(bytes), head)
            }
            None => (None, StoredIndex::default()),
        })
    }

    fn commit(&self, parts: &[Part<'_>]) -> Result<Outcome, StoreError> {
        let mut index_keys = Vec::with_capacity(parts.len());
        let mut document_keys = Vec::new();
        let mut superseded_keys = Vec::new();
        let mut flags = Vec::with_capacity(parts.len() * 4);
        let mut values = Vec::new();
        for part in parts {
            index_keys.push(binary(part.keys.index().as_bytes()));
            let present = part.snapshot.bytes.is_some();
            flags.push(binary(if present { b"1" } else { b"0" }));
            flags.push(binary(part.snapshot.bytes.as_deref().unwrap_or_default()));
            match &part.write {
                Some(write) => {
                    flags.push(binary(b"1"));
                    flags.push(binary(&encode(&write.next)?));
                    for (tag, bytes) in &write.documents {
                        document_keys.push(binary(part.keys.document(tag).as_bytes()));
                        values.push(binary(bytes));
                    }
                    superseded_keys.extend(write.superseded.iter().map(|tag| binary(part.keys.document(tag).as_bytes())));
                }
                None => {
                    flags.push(binary(b"0"));
                    flags.push(binary(b""));
                }
            }
        }
        let counts = [index_keys.len(), document_keys.len(), superseded_keys.len()];
        let mut arguments = vec![binary(COMMIT_SCRIPT.as_bytes())];
        arguments.push(RedisParameter::Int64((counts.iter().sum::<usize>()) as i64));
        arguments.extend(index_keys);
        arguments.extend(document_keys);
        arguments.extend(superseded_keys);
        arguments.extend(counts.iter().map(|c| RedisParameter::Int64(*c as i64)));
        arguments.extend(flags);
        arguments.extend(values);
        match self.execute("EVAL", &arguments)?.as_slice() {
            [RedisResult::Int64(0)] => Ok(Outcome::Committed),
            [RedisResult::Int64(_)] => Ok(Outcome::Changed),
            other => Err(StoreError::Backend(format!("redis commit script answered {other:?}"))),
        }
    }

    /// The script writes nothing unless it commits.
    fn discard(&self, _parts: &[Part<'_>]) {}
}
