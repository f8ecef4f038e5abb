//! Opens the backend the `store_backend` variable names: Spin key-value
//! (`kv`, the default) or the Redis server at `redis_url` (`redis`).

use crate::backend::Backend;
use crate::error::StoreError;
use crate::kv_backend::KvBackend;
use crate::redis_backend::RedisBackend;

/// The backend the `store_backend` variable names, its calls timed.
pub fn open() -> Result<Box<dyn Backend>, StoreError> {
    Ok(Box::new(crate::timed_backend::Timed(open_named()?)))
}

fn open_named() -> Result<Box<dyn Backend>, StoreError> {
    match variable("store_backend")?.trim() {
        "" | "kv" => Ok(Box::new(KvBackend::open()?)),
        "redis" => {
            let url = variable("redis_url")?;
            if url.trim().is_empty() {
                return Err(StoreError::Backend("store_backend is redis but redis_url is empty".into()));
            }
            Ok(Box::new(RedisBackend::open(url.trim())?))
        }
        other => Err(StoreError::Backend(format!("store_backend must be kv or redis, not {other:?}"))),
    }
}

/// The variable `name`; a manifest that does not hand the store it means the default (empty).
fn variable(name: &str) -> Result<String, StoreError> {
    match spin_sdk::variables::get(name) {
        Ok(value) => Ok(value),
        Err(spin_sdk::variables::Error::Undefined(_)) => Ok(String::new()),
        Err(e) => Err(StoreError::Backend(format!("variable {name}: {e:?}"))),
    }
}
