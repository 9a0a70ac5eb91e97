//! Multi-node: what controller and agents share. The wire protocol (`proto`), the `[cluster]`
//! settings (`config`) and the controller's HTTP client for agents (`agent_client`).
//!
//! Owns: the contract between the two sides. Does not own the controller's node table and
//! reactions (`scheduler::members`, `scheduler::remote`), its HTTP routes (`api::cluster`) or
//! the agent process (`agent`).

pub mod agent_client;
pub mod config;
pub mod proto;
pub mod term;

pub use config::ClusterConfig;
