//! The host side of the accessors: resolved once per component, called on
//! an instance between runs.

use wasmtime::component::{Component, ComponentExportIndex, Instance, WasmList};
use wasmtime::{AsContextMut, Store};

use super::instrument::ACCESS_INSTANCE;
use super::layout::{GlobalKind, GlobalSlot, Layout};
use crate::guest::GuestState;

/// A global's value, by its bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GlobalValue(pub(crate) u64);

/// The accessor functions of one memory, resolved.
pub(crate) struct MemoryAccess {
    read: ComponentExportIndex,
    grow: ComponentExportIndex,
    seek: ComponentExportIndex,
    write: ComponentExportIndex,
}

/// The accessor functions of one global, resolved.
pub(crate) struct GlobalAccess {
    pub(crate) slot: GlobalSlot,
    get: ComponentExportIndex,
    set: ComponentExportIndex,
}

/// Every accessor of an instrumented component, resolved.
pub(crate) struct Access {
    pub(crate) memories: Vec<MemoryAccess>,
    pub(crate) globals: Vec<GlobalAccess>,
}

impl Access {
    /// Resolves `layout`'s accessors in `component`.
    pub(crate) fn resolve(component: &Component, layout: &Layout) -> wasmtime::Result<Self> {
        let (_, instance) = component
            .get_export(None, ACCESS_INSTANCE)
            .ok_or_else(|| wasmtime::format_err!("the component has no `{ACCESS_INSTANCE}` export"))?;
        let find = |name: &str| {
            component
                .get_export_index(Some(&instance), name)
                .ok_or_else(|| wasmtime::format_err!("the state accessor `{name}` is missing"))
        };
        let memories = layout
            .memories
            .iter()
            .map(|slot| {
                Ok(MemoryAccess { read: find(&slot.read)?, grow: find(&slot.grow)?, seek: find(&slot.seek)?, write: find(&slot.write)? })
            })
            .collect::<wasmtime::Result<_>>()?;
        let globals = layout
            .globals
            .iter()
            .map(|slot| Ok(GlobalAccess { get: find(&slot.get)?, set: find(&slot.set)?, slot: slot.clone() }))
            .collect::<wasmtime::Result<_>>()?;
        Ok(Self { memories, globals })
    }
}

impl MemoryAccess {
    /// The memory's whole contents, viewed in place: valid until the next
    /// call into the instance.
    pub(crate) async fn read<'s>(&self, store: &'s mut Store<GuestState>, instance: &Instance) -> wasmtime::Result<&'s [u8]> {
        let read = instance.get_typed_func::<(), (WasmList<u8>,)>(&mut *store, self.read)?;
        let (list,) = read.call_async(&mut *store, ()).await?;
        Ok(list.as_le_slice(&*store))
    }

    /// Grows the memory by `pages`; false when it cannot grow.
    pub(crate) async fn grow(&self, store: &mut Store<GuestState>, instance: &Instance, pages: u32) -> wasmtime::Result<bool> {
        let grow = instance.get_typed_func::<(u32,), (i32,)>(&mut *store, self.grow)?;
        let (previous,) = grow.call_async(&mut *store, (pages,)).await?;
        Ok(previous >= 0)
    }

    /// Writes `bytes` at `offset`.
    pub(crate) async fn write(&self, store: &mut Store<GuestState>, instance: &Instance, offset: u32, bytes: &[u8]) -> wasmtime::Result<()> {
        let seek = instance.get_typed_func::<(u32,), ()>(&mut *store, self.seek)?;
        seek.call_async(&mut *store, (offset,)).await?;
        let write = instance.get_typed_func::<(&[u8],), ()>(&mut *store, self.write)?;
        write.call_async(&mut *store, (bytes,)).await
    }
}

impl GlobalAccess {
    pub(crate) async fn get(&self, mut store: impl AsContextMut<Data = GuestState>, instance: &Instance) -> wasmtime::Result<GlobalValue> {
        let mut store = store.as_context_mut();
        Ok(GlobalValue(match self.slot.kind {
            GlobalKind::I32 => instance.get_typed_func::<(), (i32,)>(&mut store, self.get)?.call_async(&mut store, ()).await?.0 as u32 as u64,
            GlobalKind::I64 => instance.get_typed_func::<(), (i64,)>(&mut store, self.get)?.call_async(&mut store, ()).await?.0 as u64,
            GlobalKind::F32 => u64::from(instance.get_typed_func::<(), (f32,)>(&mut store, self.get)?.call_async(&mut store, ()).await?.0.to_bits()),
            GlobalKind::F64 => instance.get_typed_func::<(), (f64,)>(&mut store, self.get)?.call_async(&mut store, ()).await?.0.to_bits(),
        }))
    }

    pub(crate) async fn set(&self, mut store: impl AsContextMut<Data = GuestState>, instance: &Instance, value: GlobalValue) -> wasmtime::Result<()> {
        let mut store = store.as_context_mut();
        let bits = value.0;
        match self.slot.kind {
            GlobalKind::I32 => instance.get_typed_func::<(i32,), ()>(&mut store, self.set)?.call_async(&mut store, (bits as u32 as i32,)).await,
            GlobalKind::I64 => instance.get_typed_func::<(i64,), ()>(&mut store, self.set)?.call_async(&mut store, (bits as i64,)).await,
            GlobalKind::F32 => instance.get_typed_func::<(f32,), ()>(&mut store, self.set)?.call_async(&mut store, (f32::from_bits(bits as u32),)).await,
            GlobalKind::F64 => instance.get_typed_func::<(f64,), ()>(&mut store, self.set)?.call_async(&mut store, (f64::from_bits(bits),)).await,
        }
    }
}
