//! Replicated services in the store: one JSON record per service, keyed by its id
//! (big-endian), written when the service changes and flushed with the next flush.
//!
//! Owns: that tree's layout. Does not own what a service is (`gantry_api::model::service_set`)
//! nor its replicas (`host/controller/src/service_sets.rs`).

use crate::state::{KvOp, Scan, Table};
use crate::{Store, StoreError, decode, encode};
use gantry_api::model::ServiceRecord;

impl Store {
    /// Writes `service` (replacing its earlier version).
    pub fn put_service(&self, service: &ServiceRecord) -> Result<(), StoreError> {
        let op = KvOp::Put(
            Table::Services,
            service.id.to_be_bytes().to_vec(),
            encode(service),
        );
        self.state.apply(None, vec![op])?;
        Ok(())
    }

    /// Every service, by id.
    pub fn services(&self) -> Result<Vec<ServiceRecord>, StoreError> {
        self.state
            .scan(&Scan::prefix(Table::Services, b"", usize::MAX))?
            .iter()
            .map(|(_, v)| decode("services", v))
            .collect()
    }
}
