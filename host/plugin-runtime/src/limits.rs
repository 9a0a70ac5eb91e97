//! Resource limits for one plugin instance: a cap on the *total* linear memory of all
//! its memories (wasmtime's `StoreLimits` caps each memory separately) and on tables.
//! Records whether the cap was hit, so a trap that follows is reported as
//! `memory-limit` rather than a generic trap.

/// Table elements a plugin may have per table.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Caps total linear memory across a store's memories.
#[derive(Debug)]
pub struct MemoryLimiter {
    cap_bytes: usize,
    used_bytes: usize,
    hit: bool,
}

impl MemoryLimiter {
    /// A limiter allowing `cap_bytes` in total.
    pub fn new(cap_bytes: usize) -> Self {
        Self {
            cap_bytes,
            used_bytes: 0,
            hit: false,
        }
    }

    /// Whether a growth was denied since the last [`MemoryLimiter::clear_hit`].
    pub fn hit(&self) -> bool {
        self.hit
    }

    /// Forgets a denied growth (called before each plugin call).
    pub fn clear_hit(&mut self) {
        self.hit = false;
    }

    /// Bytes of linear memory in use.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        if self.used_bytes.saturating_add(growth) > self.cap_bytes {
            self.hit = true;
            return Ok(false);
        }
        self.used_bytes += growth;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
