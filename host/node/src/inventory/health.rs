//! GPU health decisions: one reading of a GPU's health signals in, the reason it must
//! stop taking new tasks (or none) out. Pure, so every rule is unit-tested without a
//! driver; `nvml.rs` fills [`HealthReading`] from NVML.
//!
//! Fatal: the device is lost (fallen off the bus, `GpuIsLost`), uncorrected volatile
//! ECC errors since the driver loaded, retired pages pending (the GPU needs a reset
//! before the retirement takes effect), and a critical Xid that is not one of the
//! Xids a user's program causes on its own (13, 31, 43, 45, 68, 109: graphics engine
//! exception, MMU fault, GPU stopped processing, preemptive cleanup, video processor
//! exception, context switch timeout), the same exclusion NVIDIA's Kubernetes device
//! plugin makes. A signal the GPU cannot report (`None`) never marks it unhealthy.
//!
//! Owns: the rules. Does not own reading the driver (`nvml.rs`) or what an unhealthy
//! GPU means for scheduling (`scheduler::nodes`).

/// Critical Xids that a user's program causes without a hardware fault; they are
/// logged but leave the GPU healthy.
pub const APPLICATION_XIDS: [u64; 6] = [13, 31, 43, 45, 68, 109];

/// The Xid NVML reports when it cannot tell which Xid happened.
pub const UNKNOWN_XID: u64 = 999;

/// What one poll saw of a GPU. `None`: the GPU or driver does not report it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthReading {
    /// The device handle is gone or NVML answered `GpuIsLost`.
    pub lost: bool,
    /// Uncorrected volatile ECC errors (since the driver loaded).
    pub uncorrected_volatile_ecc: Option<u64>,
    /// Pages waiting for retirement at the next reset.
    pub retired_pages_pending: Option<bool>,
    /// Critical Xid events seen since the previous poll.
    pub critical_xids: Vec<u64>,
}

/// Why a GPU with `reading` must take no new tasks, or `None` when it may.
pub fn verdict(reading: &HealthReading) -> Option<String> {
    let mut reasons: Vec<String> = Vec::new();
    if reading.lost {
        reasons.push("the GPU is lost (fallen off the bus or not answering: GpuIsLost)".into());
    }
    if let Some(n) = reading.uncorrected_volatile_ecc.filter(|&n| n > 0) {
        reasons.push(format!("{n} uncorrected volatile ECC error(s)"));
    }
    if reading.retired_pages_pending == Some(true) {
        reasons.push("retired memory pages pending (the GPU needs a reset)".into());
    }
    let mut fatal: Vec<u64> = reading
        .critical_xids
        .iter()
        .copied()
        .filter(|x| !APPLICATION_XIDS.contains(x))
        .collect();
    fatal.sort_unstable();
    fatal.dedup();
    if !fatal.is_empty() {
        let list: Vec<String> = fatal
            .iter()
            .map(|&x| match x {
                UNKNOWN_XID => "unknown".to_string(),
                x => x.to_string(),
            })
            .collect();
        reasons.push(format!("critical Xid error {}", list.join(", ")));
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// Whether a critical Xid is one a user's program causes (logged, not fatal).
pub fn is_application_xid(xid: u64) -> bool {
    APPLICATION_XIDS.contains(&xid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_or_silent_gpu_is_healthy() {
        assert_eq!(verdict(&HealthReading::default()), None);
        let clean = HealthReading {
            lost: false,
            uncorrected_volatile_ecc: Some(0),
            retired_pages_pending: Some(false),
            critical_xids: Vec::new(),
        };
        assert_eq!(verdict(&clean), None);
    }

    #[test]
    fn each_fatal_signal_gives_its_reason() {
        let lost = HealthReading {
            lost: true,
            ..Default::default()
        };
        assert!(verdict(&lost).unwrap_or_default().contains("GpuIsLost"));
        let ecc = HealthReading {
            uncorrected_volatile_ecc: Some(3),
            ..Default::default()
        };
        assert_eq!(
            verdict(&ecc).as_deref(),
            Some("3 uncorrected volatile ECC error(s)")
        );
        let pages = HealthReading {
            retired_pages_pending: Some(true),
            ..Default::default()
        };
        assert!(verdict(&pages).unwrap_or_default().contains("retired"));
        let xid = HealthReading {
            critical_xids: vec![79, 48, 79],
            ..Default::default()
        };
        assert_eq!(verdict(&xid).as_deref(), Some("critical Xid error 48, 79"));
    }

    #[test]
    fn application_xids_alone_leave_the_gpu_healthy() {
        let app = HealthReading {
            critical_xids: vec![13, 31, 43],
            ..Default::default()
        };
        assert_eq!(verdict(&app), None);
        assert!(is_application_xid(43) && !is_application_xid(79));
        let mixed = HealthReading {
            critical_xids: vec![13, UNKNOWN_XID],
            uncorrected_volatile_ecc: Some(1),
            ..Default::default()
        };
        assert_eq!(
            verdict(&mixed).as_deref(),
            Some("1 uncorrected volatile ECC error(s); critical Xid error unknown")
        );
    }
}
