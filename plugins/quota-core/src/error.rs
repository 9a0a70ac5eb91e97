//! Config errors of the `queues` map, each naming the offending key
//! (`queues.<name>`, `queues.<name>.<field>`, `queues.<name>.flavors.<model>.<field>`).
//!
//! Owns: the error type and its wording. Does not own the checks (`config` for one
//! queue, `quotas` for checks across queues).

/// Largest quantity accepted in the configuration, in GPUs (named by the error that refuses
/// a larger one).
pub const MAX_GPUS: f64 = 1.0e9;

/// A config error, naming the key.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// An entry does not parse (unknown or missing field, wrong type).
    Entry {
        /// `queues.<name>` or `queues.<name>.flavors.<model>`.
        key: String,
        /// What serde said.
        message: String,
    },
    /// A quantity is negative, not finite or too large.
    Quantity {
        /// The field's full key.
        key: String,
        /// The value given.
        value: f64,
    },
    /// A borrowing or lending limit on a queue without a cohort.
    NeedsCohort {
        /// The limit's full key.
        key: String,
    },
    /// A lending limit above the nominal quota.
    LendingAboveNominal {
        /// The `lending_limit_gpus` key.
        key: String,
        /// The lending limit, GPUs.
        lending: f64,
        /// The nominal quota, GPUs.
        nominal: f64,
    },
    /// An empty queue, cohort or flavor name.
    EmptyName {
        /// The key holding the empty name.
        key: String,
    },
    /// A queue with neither `nominal_gpus` nor `flavors`.
    NoQuota {
        /// `queues.<name>`.
        key: String,
    },
    /// A queue with both `flavors` and a queue-level quota field.
    BothModes {
        /// `queues.<name>`.
        key: String,
        /// The queue-level field given next to `flavors`.
        field: String,
    },
    /// `flavors` with no entry.
    NoFlavors {
        /// `queues.<name>.flavors`.
        key: String,
    },
    /// A cohort with queues of both kinds (totals and flavors).
    MixedCohort {
        /// `queues.<name>` of the later queue in name order.
        key: String,
        /// The cohort.
        cohort: String,
        /// A queue of the cohort with totals.
        totals_queue: String,
        /// A queue of the cohort with flavors.
        flavored_queue: String,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Entry { key, message } => write!(f, "invalid config: {key}: {message}"),
            Self::Quantity { key, value } => write!(
                f,
                "invalid config: {key}: must be a number of GPUs from 0 to {MAX_GPUS}, got {value}"
            ),
            Self::NeedsCohort { key } => write!(
                f,
                "invalid config: {key}: a queue without a cohort neither borrows nor lends; set the queue's `cohort` or drop the limit"
            ),
            Self::LendingAboveNominal {
                key,
                lending,
                nominal,
            } => write!(
                f,
                "invalid config: {key}: lending limit {lending} exceeds the nominal quota {nominal}"
            ),
            Self::EmptyName { key } => write!(f, "invalid config: {key}: name is empty"),
            Self::NoQuota { key } => write!(
                f,
                "invalid config: {key}: missing field `nominal_gpus` (or `flavors` for quotas per GPU model)"
            ),
            Self::BothModes { key, field } => write!(
                f,
                "invalid config: {key}: `{field}` and `flavors` given; a queue has either queue totals (`nominal_gpus`, `borrowing_limit_gpus`, `lending_limit_gpus`) or quotas per GPU model (`flavors`, each with its own `nominal_gpus` and limits), not both"
            ),
            Self::NoFlavors { key } => write!(
                f,
                "invalid config: {key}: no flavor given; name at least one GPU model, e.g. {{\"A100\": {{\"nominal_gpus\": 8}}}}"
            ),
            Self::MixedCohort {
                key,
                cohort,
                totals_queue,
                flavored_queue,
            } => write!(
                f,
                "invalid config: {key}: cohort {cohort} mixes queue totals (queue {totals_queue}) and quotas per GPU model (queue {flavored_queue}); queues of one cohort lend to each other only if all use `nominal_gpus` or all use `flavors`"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
