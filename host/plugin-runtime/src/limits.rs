//! Resource limits for one plugin instance: a cap on the *total* memory of all its
//! linear memories and tables together (wasmtime's `StoreLimits` caps each memory
//! separately), tables counted at [`TABLE_ELEMENT_BYTES`] per element, plus a cap on the
//! elements of any one table. Records whether a cap was hit, so a trap that follows is
//! reported as `memory-limit` rather than a generic trap.

/// Table elements a plugin may have per table.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// What one table element is counted as against the memory cap: a host-side element
/// (a function reference or an externref slot) takes up to this much.
pub const TABLE_ELEMENT_BYTES: usize = 16;

/// Caps total linear memory and table memory across a store's memories and tables.
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

    /// Bytes of linear memory and tables in use.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Books `growth` more bytes if the total stays within the cap.
    fn grow(&mut self, growth: usize) -> bool {
        match self.used_bytes.checked_add(growth) {
            Some(total) if total <= self.cap_bytes => {
                self.used_bytes = total;
                true
            }
            _ => {
                self.hit = true;
                false
            }
        }
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(desired.saturating_sub(current)))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            self.hit = true;
            return Ok(false);
        }
        let elements = desired.saturating_sub(current);
        Ok(self.grow(elements.saturating_mul(TABLE_ELEMENT_BYTES)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    const MIB: usize = 1 << 20;

    #[test]
    fn tables_count_toward_the_memory_cap() {
        let mut l = MemoryLimiter::new(4 * MIB);
        assert!(l.memory_growing(0, 3 * MIB, None).expect("memory"));
        // 1 MiB is left: 65,536 elements of 16 bytes fit exactly, one more does not.
        let fits = MIB / TABLE_ELEMENT_BYTES;
        assert!(l.table_growing(0, fits, None).expect("table"));
        assert_eq!(l.used_bytes(), 4 * MIB);
        assert!(!l.hit());
        assert!(!l.table_growing(fits, fits + 1, None).expect("table"));
        assert!(l.hit(), "a denied table growth is a hit of the memory cap");
        // And the memory may not grow past the cap now that tables use it.
        l.clear_hit();
        assert!(
            !l.memory_growing(3 * MIB, 3 * MIB + 65_536, None)
                .expect("memory")
        );
        assert!(l.hit());
        assert_eq!(l.used_bytes(), 4 * MIB);
    }

    #[test]
    fn many_tables_cannot_exceed_the_cap_together() {
        let mut l = MemoryLimiter::new(MIB);
        let each = 16_384; // 256 KiB per table
        let granted = (0..8)
            .filter(|_| l.table_growing(0, each, None).expect("table"))
            .count();
        assert_eq!(granted, 4, "only 1 MiB worth of tables fits");
        assert!(l.used_bytes() <= MIB);
    }

    #[test]
    fn one_table_is_capped_in_elements_too() {
        let mut l = MemoryLimiter::new(usize::MAX);
        assert!(
            !l.table_growing(0, MAX_TABLE_ELEMENTS + 1, None)
                .expect("table")
        );
        assert!(l.hit());
        assert!(l.table_growing(0, MAX_TABLE_ELEMENTS, None).expect("table"));
    }

    #[test]
    fn overflowing_growth_is_denied() {
        let mut l = MemoryLimiter::new(usize::MAX);
        assert!(l.memory_growing(0, usize::MAX - 1, None).expect("memory"));
        assert!(!l.memory_growing(0, 2, None).expect("memory"));
        assert!(l.hit());
    }
}
