//! WASI without waiting: replacements for the entry points of wasmtime-wasi's p2 sync
//! bindings that can block the calling host thread, which an epoch deadline cannot
//! interrupt (it only stops guest code).
//!
//! Owns: `wasi:clocks/monotonic-clock` (time frozen at 0; `subscribe-duration` and
//! `subscribe-instant` give a pollable that is ready at once, so a guest's sleep ends
//! immediately: its time does not pass anyway) and `wasi:io/poll` (`poll` and
//! `pollable.block` return only what is ready now; waiting on anything that is not is a
//! [`WouldBlock`] trap). They shadow wasmtime-wasi's versions in the linker.
//!
//! The other blocking calls of those bindings cannot wait in this sandbox: the stream
//! `blocking-*` calls only reach stdin (always closed) and stdout/stderr (an in-memory
//! pipe, always ready, which fails once full); there are no preopened directories, and
//! sockets and name lookups are refused before a socket exists. A guest that loops
//! around a no-op sleep, waiting for its clock to move, runs guest code between the
//! calls and so still hits its epoch deadline.

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::bindings::sync::io::poll;
use wasmtime_wasi::p2::{DynPollable, Pollable};

/// The monotonic clock every plugin sees: frozen at 0 ns.
pub(crate) const MONOTONIC_NOW_NS: u64 = 0;
/// Its resolution: one second, as nothing finer can be observed.
pub(crate) const MONOTONIC_RESOLUTION_NS: u64 = 1_000_000_000;

/// A plugin waited on a pollable that was not ready; in the sandbox nothing it could
/// wait for would ever become ready without blocking the host, so the call traps.
#[derive(Debug, thiserror::Error)]
#[error(
    "the plugin waited on {what} that is not ready; plugins may not block the host (sleeps end at once, time is frozen)"
)]
pub struct WouldBlock {
    what: &'static str,
}

/// Always ready: what a clock subscription becomes.
struct Ready;

#[wasmtime_wasi::async_trait]
impl Pollable for Ready {
    async fn ready(&mut self) {}
}

/// The host side of the replaced interfaces: the store's resource table.
pub(crate) struct NonBlocking<'a> {
    table: &'a mut ResourceTable,
}

impl<'a> NonBlocking<'a> {
    /// Wraps a store's resource table.
    pub(crate) fn new(table: &'a mut ResourceTable) -> Self {
        Self { table }
    }

    fn ready_now(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        let ready = self.table.push(Ready)?;
        wasmtime_wasi::p2::subscribe(self.table, ready)
    }

    fn is_ready(&mut self, pollable: &Resource<DynPollable>) -> wasmtime::Result<bool> {
        // The sync `ready` of wasmtime-wasi polls the pollable's future once, without
        // waiting; a borrow of the same handle keeps the caller's handle usable.
        let borrowed = Resource::new_borrow(pollable.rep());
        poll::HostPollable::ready(self.table, borrowed)
    }
}

/// Marks [`NonBlocking`] as the data the replaced interfaces' host functions get.
pub(crate) struct NonBlockingData;

impl HasData for NonBlockingData {
    type Data<'a> = NonBlocking<'a>;
}

impl monotonic_clock::Host for NonBlocking<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(MONOTONIC_NOW_NS)
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(MONOTONIC_RESOLUTION_NS)
    }

    fn subscribe_instant(
        &mut self,
        _when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready_now()
    }

    fn subscribe_duration(
        &mut self,
        _duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready_now()
    }
}

impl poll::Host for NonBlocking<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        let mut ready = Vec::new();
        for (index, pollable) in pollables.iter().enumerate() {
            if self.is_ready(pollable)? {
                ready.push(u32::try_from(index)?);
            }
        }
        if ready.is_empty() {
            let what = if pollables.is_empty() {
                "an empty poll list"
            } else {
                "pollables"
            };
            return Err(WouldBlock { what }.into());
        }
        Ok(ready)
    }
}

impl poll::HostPollable for NonBlocking<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        self.is_ready(&pollable)
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        if self.is_ready(&pollable)? {
            Ok(())
        } else {
            Err(WouldBlock { what: "a pollable" }.into())
        }
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        poll::HostPollable::drop(self.table, pollable)
    }
}

/// Replaces wasmtime-wasi's `monotonic-clock` and `poll` in `linker` (which must already
/// hold them) with the non-blocking versions; `table` gets the store's resource table.
pub(crate) fn shadow_blocking_wasi<T: Send + 'static>(
    linker: &mut Linker<T>,
    table: fn(&mut T) -> NonBlocking<'_>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let done = monotonic_clock::add_to_linker::<T, NonBlockingData>(linker, table)
        .and_then(|()| poll::add_to_linker::<T, NonBlockingData>(linker, table));
    linker.allow_shadowing(false);
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::ResourceTable;

    /// Never ready: stands for anything a guest could wait on forever.
    struct Never;

    #[wasmtime_wasi::async_trait]
    impl Pollable for Never {
        async fn ready(&mut self) {
            std::future::pending::<()>().await;
        }
    }

    fn never(table: &mut ResourceTable) -> Resource<DynPollable> {
        let r = table.push(Never).expect("push");
        wasmtime_wasi::p2::subscribe(table, r).expect("subscribe")
    }

    #[test]
    fn clock_subscriptions_are_ready_at_once() {
        let mut table = ResourceTable::new();
        let mut nb = NonBlocking::new(&mut table);
        let hour = monotonic_clock::Host::subscribe_duration(&mut nb, 3_600_000_000_000)
            .expect("subscribe");
        let forever =
            monotonic_clock::Host::subscribe_instant(&mut nb, u64::MAX).expect("subscribe");
        let start = std::time::Instant::now();
        poll::HostPollable::block(&mut nb, Resource::new_borrow(hour.rep())).expect("block");
        let both = poll::Host::poll(
            &mut nb,
            vec![
                Resource::new_borrow(hour.rep()),
                Resource::new_borrow(forever.rep()),
            ],
        )
        .expect("poll");
        assert_eq!(both, [0, 1]);
        assert!(start.elapsed().as_secs() < 30, "a clock wait blocked");
        assert_eq!(monotonic_clock::Host::now(&mut nb).expect("now"), 0);
    }

    #[test]
    fn waiting_on_what_is_not_ready_is_a_trap_not_a_block() {
        let mut table = ResourceTable::new();
        let stuck = never(&mut table);
        let mut nb = NonBlocking::new(&mut table);
        let err = poll::HostPollable::block(&mut nb, Resource::new_borrow(stuck.rep()))
            .expect_err("block must not wait");
        assert!(err.downcast_ref::<WouldBlock>().is_some(), "{err:#}");
        let err = poll::Host::poll(&mut nb, vec![Resource::new_borrow(stuck.rep())])
            .expect_err("poll must not wait");
        assert!(err.downcast_ref::<WouldBlock>().is_some(), "{err:#}");
        let err = poll::Host::poll(&mut nb, Vec::new()).expect_err("empty poll");
        assert!(err.downcast_ref::<WouldBlock>().is_some(), "{err:#}");
        assert!(
            !poll::HostPollable::ready(&mut nb, Resource::new_borrow(stuck.rep())).expect("ready")
        );
        // A ready pollable next to a stuck one: only the ready one is reported.
        let now = monotonic_clock::Host::subscribe_duration(&mut nb, 0).expect("subscribe");
        let ready = poll::Host::poll(
            &mut nb,
            vec![
                Resource::new_borrow(stuck.rep()),
                Resource::new_borrow(now.rep()),
            ],
        )
        .expect("poll");
        assert_eq!(ready, [1]);
    }
}
