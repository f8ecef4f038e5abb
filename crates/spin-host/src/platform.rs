//! Host implementations of the Spin platform interfaces: `wasi:keyvalue`
//! (store, atomics and batch) and `fermyon:spin/variables`.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use crate::kv::{Bucket, Cas, KvAccess, KvError};

wasmtime::component::bindgen!({
    path: "../../wit/spin-host",
    world: "host",
    with: {
        "wasi:keyvalue/store.bucket": crate::kv::Bucket,
        "wasi:keyvalue/atomics.cas": crate::kv::Cas,
        "fermyon:spin/key-value.store": crate::kv::Bucket,
    },
});

use fermyon::spin::{key_value, variables};
use wasi::keyvalue::{atomics, batch, store};

/// What the platform interfaces need from a component's store state.
pub struct PlatformView<'a> {
    pub table: &'a mut ResourceTable,
    pub kv: &'a KvAccess,
    /// This component's resolved variables.
    pub variables: &'a Arc<BTreeMap<String, String>>,
}

/// Adds the platform interfaces to `linker`.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> PlatformView<'_>,
) -> wasmtime::Result<()> {
    store::add_to_linker::<T, Platform>(linker, view)?;
    atomics::add_to_linker::<T, Platform>(linker, view)?;
    batch::add_to_linker::<T, Platform>(linker, view)?;
    variables::add_to_linker::<T, Platform>(linker, view)?;
    key_value::add_to_linker::<T, Platform>(linker, view)?;
    Ok(())
}

struct Platform;

impl HasData for Platform {
    type Data<'a> = PlatformView<'a>;
}

fn store_error(e: KvError) -> store::Error {
    match e {
        KvError::NoSuchStore(_) => store::Error::NoSuchStore,
        KvError::AccessDenied(_) => store::Error::AccessDenied,
        other => store::Error::Other(other.to_string()),
    }
}

impl PlatformView<'_> {
    fn bucket(&self, handle: &Resource<Bucket>) -> Result<&Bucket, store::Error> {
        self.table.get(handle).map_err(|e| store::Error::Other(e.to_string()))
    }
}

impl store::Host for PlatformView<'_> {
    fn open(&mut self, identifier: String) -> Result<Resource<Bucket>, store::Error> {
        let db = self.kv.open(&identifier).map_err(store_error)?;
        self.table.push(Bucket { label: identifier, db }).map_err(|e| store::Error::Other(e.to_string()))
    }
}

impl store::HostBucket for PlatformView<'_> {
    fn get(&mut self, bucket: Resource<Bucket>, key: String) -> Result<Option<Vec<u8>>, store::Error> {
        let b = self.bucket(&bucket)?;
        b.db.get(&b.label, &key).map_err(store_error)
    }

    fn set(&mut self, bucket: Resource<Bucket>, key: String, value: Vec<u8>) -> Result<(), store::Error> {
        let b = self.bucket(&bucket)?;
        b.db.set(&b.label, &key, &value).map_err(store_error)
    }

    fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Result<(), store::Error> {
        let b = self.bucket(&bucket)?;
        b.db.delete(&b.label, &key).map_err(store_error)
    }

    fn exists(&mut self, bucket: Resource<Bucket>, key: String) -> Result<bool, store::Error> {
        let b = self.bucket(&bucket)?;
        b.db.get(&b.label, &key).map(|v| v.is_some()).map_err(store_error)
    }

    fn list_keys(&mut self, bucket: Resource<Bucket>, _cursor: Option<String>) -> Result<store::KeyResponse, store::Error> {
        let b = self.bucket(&bucket)?;
        let keys = b.db.keys(&b.label).map_err(store_error)?;
        Ok(store::KeyResponse { keys, cursor: None })
    }

    fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for PlatformView<'_> {
    fn increment(&mut self, bucket: Resource<Bucket>, key: String, delta: i64) -> Result<i64, store::Error> {
        let b = self.bucket(&bucket)?;
        b.db.increment(&b.label, &key, delta).map_err(store_error)
    }

    fn swap(&mut self, cas: Resource<Cas>, value: Vec<u8>) -> Result<(), atomics::CasError> {
        let handle = self.table.delete(cas).map_err(|e| atomics::CasError::StoreError(store::Error::Other(e.to_string())))?;
        match handle.db.swap_if(&handle.label, &handle.key, handle.seen.as_deref(), &value) {
            Ok(true) => Ok(()),
            Ok(false) => {
                // Spin hands back a fresh handle for a retry.
                let seen = handle.db.get(&handle.label, &handle.key).map_err(|e| atomics::CasError::StoreError(store_error(e)))?;
                let fresh = Cas { seen, ..handle };
                let resource = self.table.push(fresh).map_err(|e| atomics::CasError::StoreError(store::Error::Other(e.to_string())))?;
                Err(atomics::CasError::CasFailed(resource))
            }
            Err(e) => Err(atomics::CasError::StoreError(store_error(e))),
        }
    }
}

impl batch::Host for PlatformView<'_> {
    /// The values of `keys` in one read: a list's documents cost one host
    /// call and one read transaction, not one of each per document.
    fn get_many(&mut self, bucket: Resource<Bucket>, keys: Vec<String>) -> Result<Vec<(String, Option<Vec<u8>>)>, store::Error> {
        let b = self.bucket(&bucket)?;
        let values = b.db.get_many(&b.label, &keys).map_err(store_error)?;
        Ok(keys.into_iter().zip(values).collect())
    }

    fn set_many(&mut self, bucket: Resource<Bucket>, key_values: Vec<(String, Vec<u8>)>) -> Result<(), store::Error> {
        let b = self.bucket(&bucket)?;
        key_values.iter().try_for_each(|(key, value)| b.db.set(&b.label, key, value)).map_err(store_error)
    }

    fn delete_many(&mut self, bucket: Resource<Bucket>, keys: Vec<String>) -> Result<(), store::Error> {
        let b = self.bucket(&bucket)?;
        keys.iter().try_for_each(|key| b.db.delete(&b.label, key)).map_err(store_error)
    }
}

impl atomics::HostCas for PlatformView<'_> {
    fn new(&mut self, bucket: Resource<Bucket>, key: String) -> Result<Resource<Cas>, store::Error> {
        let b = self.bucket(&bucket)?;
        let (label, db) = (b.label.clone(), b.db.clone());
        let seen = db.get(&label, &key).map_err(store_error)?;
        self.table.push(Cas { label, key, db, seen }).map_err(|e| store::Error::Other(e.to_string()))
    }

    fn current(&mut self, cas: Resource<Cas>) -> Result<Option<Vec<u8>>, store::Error> {
        let handle = self.table.get(&cas).map_err(|e| store::Error::Other(e.to_string()))?;
        Ok(handle.seen.clone())
    }

    fn drop(&mut self, cas: Resource<Cas>) -> wasmtime::Result<()> {
        self.table.delete(cas)?;
        Ok(())
    }
}

impl variables::Host for PlatformView<'_> {
    fn get(&mut self, name: String) -> Result<String, variables::Error> {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            return Err(variables::Error::InvalidName(name));
        }
        self.variables.get(&name).cloned().ok_or(variables::Error::Undefined(name))
    }
}

fn spin_error(e: KvError) -> key_value::Error {
    match e {
        KvError::NoSuchStore(_) => key_value::Error::NoSuchStore,
        KvError::AccessDenied(_) => key_value::Error::AccessDenied,
        other => key_value::Error::Other(other.to_string()),
    }
}

impl PlatformView<'_> {
    fn spin_store(&self, handle: &Resource<Bucket>) -> Result<&Bucket, key_value::Error> {
        self.table.get(handle).map_err(|e| key_value::Error::Other(e.to_string()))
    }
}

impl key_value::Host for PlatformView<'_> {}

/// `fermyon:spin/key-value@2.0.0`, on the same database as `wasi:keyvalue`.
impl key_value::HostStore for PlatformView<'_> {
    fn open(&mut self, label: String) -> Result<Resource<Bucket>, key_value::Error> {
        let db = self.kv.open(&label).map_err(spin_error)?;
        self.table.push(Bucket { label, db }).map_err(|e| key_value::Error::Other(e.to_string()))
    }

    fn get(&mut self, store: Resource<Bucket>, key: String) -> Result<Option<Vec<u8>>, key_value::Error> {
        let b = self.spin_store(&store)?;
        b.db.get(&b.label, &key).map_err(spin_error)
    }

    fn set(&mut self, store: Resource<Bucket>, key: String, value: Vec<u8>) -> Result<(), key_value::Error> {
        let b = self.spin_store(&store)?;
        b.db.set(&b.label, &key, &value).map_err(spin_error)
    }

    fn delete(&mut self, store: Resource<Bucket>, key: String) -> Result<(), key_value::Error> {
        let b = self.spin_store(&store)?;
        b.db.delete(&b.label, &key).map_err(spin_error)
    }

    fn exists(&mut self, store: Resource<Bucket>, key: String) -> Result<bool, key_value::Error> {
        let b = self.spin_store(&store)?;
        b.db.get(&b.label, &key).map(|v| v.is_some()).map_err(spin_error)
    }

    fn get_keys(&mut self, store: Resource<Bucket>) -> Result<Vec<String>, key_value::Error> {
        let b = self.spin_store(&store)?;
        b.db.keys(&b.label).map_err(spin_error)
    }

    fn drop(&mut self, store: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(store)?;
        Ok(())
    }
}
