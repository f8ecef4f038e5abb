//! The fleet's shared records (see `anypath_interpreter::shared_records`)
//! on Redis: one hash per record and one set per kind listing them.

use std::sync::Arc;

use anypath_interpreter::shared_records::{Fields, RecordCall, SharedRecords};

use crate::coordination::Coordination;

/// Shared records on the fleet's Redis.
pub(crate) struct RedisRecords {
    pub(crate) coordination: Arc<Coordination>,
}

impl SharedRecords for RedisRecords {
    fn write<'a>(&'a self, kind: &'a str, id: &'a str, fields: Fields) -> RecordCall<'a, ()> {
        Box::pin(async move {
            let fields: Vec<(String, String)> = fields.into_iter().collect();
            Ok(self.coordination.write_shared(kind, id, &fields).await?)
        })
    }

    fn read<'a>(&'a self, kind: &'a str, id: &'a str) -> RecordCall<'a, Option<Fields>> {
        Box::pin(async move {
            let fields = self.coordination.read_shared(kind, id).await?;
            Ok((!fields.is_empty()).then(|| fields.into_iter().collect()))
        })
    }

    fn remove<'a>(&'a self, kind: &'a str, id: &'a str) -> RecordCall<'a, ()> {
        Box::pin(async move { Ok(self.coordination.remove_shared(kind, id).await?) })
    }

    fn list<'a>(&'a self, kind: &'a str) -> RecordCall<'a, Vec<(String, Fields)>> {
        Box::pin(async move {
            let records = self.coordination.list_shared(kind).await?;
            Ok(records.into_iter().map(|(id, fields)| (id, fields.into_iter().collect())).collect())
        })
    }
}
