//! Spin's outbound Redis interface (`fermyon:spin/redis@2.0.0`) on the
//! `redis` crate, with Spin's semantics: an address outside the component's
//! `allowed_outbound_hosts` is refused as an invalid address; `execute`
//! flattens array replies into one list; a server error is `other`. One
//! multiplexed connection per server address is shared by every instance
//! (as in Spin), reconnecting by itself after the server comes back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::IntoConnectionInfo;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::TcpSettings;
use redis::{ConnectionAddr, Value};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use crate::outbound::AllowedHosts;

wasmtime::component::bindgen!({
    path: "../../wit/spin-host",
    world: "redis-host",
    imports: { default: async },
    with: {
        "fermyon:spin/redis.connection": RedisConnection,
    },
});

use fermyon::spin::redis::{self as outbound, Error, RedisParameter, RedisResult};

/// How long connecting to a server may take before a call fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one command may wait for its reply.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// An open connection, as a component holds it.
pub struct RedisConnection {
    manager: ConnectionManager,
}

/// The shared connections of one app, by address.
#[derive(Clone, Default)]
pub struct RedisPool {
    managers: Arc<Mutex<HashMap<String, ConnectionManager>>>,
}

impl RedisPool {
    fn manager(&self, client: redis::Client, address: &str) -> Result<ConnectionManager, Error> {
        let mut managers = self.managers.lock().map_err(|_| Error::Other("redis pool poisoned".into()))?;
        if let Some(manager) = managers.get(address) {
            return Ok(manager.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(1);
        let manager = ConnectionManager::new_lazy_with_config(client, config).map_err(other)?;
        managers.insert(address.to_owned(), manager.clone());
        Ok(manager)
    }
}

/// What the Redis interface needs from a component's store state.
pub struct RedisView<'a> {
    pub table: &'a mut ResourceTable,
    pub allowed: &'a AllowedHosts,
    pub pool: &'a RedisPool,
}

/// Adds the outbound Redis interface to `linker`.
pub fn add_to_linker<T: Send + 'static>(linker: &mut Linker<T>, view: fn(&mut T) -> RedisView<'_>) -> wasmtime::Result<()> {
    outbound::add_to_linker::<T, OutboundRedis>(linker, view)
}

struct OutboundRedis;

impl HasData for OutboundRedis {
    type Data<'a> = RedisView<'a>;
}

fn other(e: impl std::fmt::Display) -> Error {
    Error::Other(e.to_string())
}

impl RedisView<'_> {
    fn manager(&self, connection: &Resource<RedisConnection>) -> Result<ConnectionManager, Error> {
        Ok(self.table.get(connection).map_err(other)?.manager.clone())
    }

    /// Whether the component may reach the server `client` names.
    fn allows(&self, client: &redis::Client) -> bool {
        match client.get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) => self.allowed.allows("redis", host, Some(*port)),
            ConnectionAddr::TcpTls { host, port, .. } => self.allowed.allows("rediss", host, Some(*port)),
            _ => false,
        }
    }
}

async fn query<T: redis::FromRedisValue>(mut manager: ConnectionManager, command: redis::Cmd) -> Result<T, Error> {
    command.query_async(&mut manager).await.map_err(other)
}

impl outbound::Host for RedisView<'_> {}

impl outbound::HostConnection for RedisView<'_> {
    async fn open(&mut self, address: String) -> Result<Resource<RedisConnection>, Error> {
        let info = address.as_str().into_connection_info().map_err(|_| Error::InvalidAddress)?;
        // Without TCP_NODELAY, a command written while the previous one on
        // the shared connection is unacknowledged waits for the server's
        // delayed ACK: ~40 ms stalls under concurrent requests.
        let info = info.set_tcp_settings(TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info).map_err(|_| Error::InvalidAddress)?;
        if !self.allows(&client) {
            tracing::warn!("outbound Redis connection denied by allowed_outbound_hosts");
            return Err(Error::InvalidAddress);
        }
        let manager = self.pool.manager(client, &address)?;
        self.table.push(RedisConnection { manager }).map_err(|_| Error::TooManyConnections)
    }

    async fn publish(&mut self, connection: Resource<RedisConnection>, channel: String, payload: Vec<u8>) -> Result<(), Error> {
        query(self.manager(&connection)?, redis::cmd("PUBLISH").arg(channel).arg(payload).to_owned()).await
    }

    async fn get(&mut self, connection: Resource<RedisConnection>, key: String) -> Result<Option<Vec<u8>>, Error> {
        query(self.manager(&connection)?, redis::cmd("GET").arg(key).to_owned()).await
    }

    async fn set(&mut self, connection: Resource<RedisConnection>, key: String, value: Vec<u8>) -> Result<(), Error> {
        query(self.manager(&connection)?, redis::cmd("SET").arg(key).arg(value).to_owned()).await
    }

    async fn incr(&mut self, connection: Resource<RedisConnection>, key: String) -> Result<i64, Error> {
        query(self.manager(&connection)?, redis::cmd("INCR").arg(key).to_owned()).await
    }

    async fn del(&mut self, connection: Resource<RedisConnection>, keys: Vec<String>) -> Result<u32, Error> {
        query(self.manager(&connection)?, redis::cmd("DEL").arg(keys).to_owned()).await
    }

    async fn sadd(&mut self, connection: Resource<RedisConnection>, key: String, values: Vec<String>) -> Result<u32, Error> {
        query(self.manager(&connection)?, redis::cmd("SADD").arg(key).arg(values).to_owned()).await
    }

    async fn smembers(&mut self, connection: Resource<RedisConnection>, key: String) -> Result<Vec<String>, Error> {
        query(self.manager(&connection)?, redis::cmd("SMEMBERS").arg(key).to_owned()).await
    }

    async fn srem(&mut self, connection: Resource<RedisConnection>, key: String, values: Vec<String>) -> Result<u32, Error> {
        query(self.manager(&connection)?, redis::cmd("SREM").arg(key).arg(values).to_owned()).await
    }

    async fn execute(
        &mut self,
        connection: Resource<RedisConnection>,
        command: String,
        arguments: Vec<RedisParameter>,
    ) -> Result<Vec<RedisResult>, Error> {
        let mut cmd = redis::cmd(&command);
        for argument in arguments {
            match argument {
                RedisParameter::Int64(n) => cmd.arg(n),
                RedisParameter::Binary(bytes) => cmd.arg(bytes),
            };
        }
        let value: Value = query(self.manager(&connection)?, cmd).await?;
        let mut results = Vec::new();
        flatten(&mut results, value)?;
        Ok(results)
    }

    async fn drop(&mut self, connection: Resource<RedisConnection>) -> wasmtime::Result<()> {
        self.table.delete(connection)?;
        Ok(())
    }
}

/// Spin's reading of a reply: arrays and sets flattened in order.
fn flatten(results: &mut Vec<RedisResult>, value: Value) -> Result<(), Error> {
    match value {
        Value::Nil => results.push(RedisResult::Nil),
        Value::Int(n) => results.push(RedisResult::Int64(n)),
        Value::BulkString(bytes) => results.push(RedisResult::Binary(bytes)),
        Value::SimpleString(s) => results.push(RedisResult::Status(s)),
        Value::Okay => results.push(RedisResult::Status("OK".into())),
        Value::Double(d) => results.push(RedisResult::Binary(d.to_string().into_bytes())),
        Value::Array(values) | Value::Set(values) => {
            for value in values {
                flatten(results, value)?;
            }
        }
        Value::ServerError(e) => return Err(Error::Other(e.to_string())),
        other => return Err(Error::Other(format!("unsupported Redis reply {other:?}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_as_spin_reads_them() {
        let reply = Value::Array(vec![
            Value::Int(0),
            Value::Nil,
            Value::Array(vec![Value::BulkString(b"a".to_vec()), Value::Okay]),
            Value::SimpleString("QUEUED".into()),
        ]);
        let mut results = Vec::new();
        flatten(&mut results, reply).unwrap();
        let expected = [
            RedisResult::Int64(0),
            RedisResult::Nil,
            RedisResult::Binary(b"a".to_vec()),
            RedisResult::Status("OK".into()),
            RedisResult::Status("QUEUED".into()),
        ];
        assert_eq!(format!("{results:?}"), format!("{expected:?}"), "nested arrays flattened in order");
        assert!(flatten(&mut Vec::new(), Value::Map(vec![])).is_err(), "a map has no place in the interface");
    }
}
