//! The nodes as the API shows them (`GET /v1/nodes`, `gantry nodes`): state (`up`,
//! `down` with the reason, `awaiting` its agent after a controller restart, `draining`
//! while jobs still run on a drained node, `drained` once it is empty) with the drain's
//! reason, who and when; how it is reached (local or the agent's URL), its last heartbeat
//! and load; per GPU its identity, topology, health with the reason and time, MIG devices,
//! and who holds it (or each of its MIG slices).
//!
//! Owns: their assembly; the types are the API's (`gantry_api::views`, one definition
//! for the server and the client). Does not own the state they show
//! (`node_control.rs`, `members.rs`, `inventory`, the job table).

use super::members::{Liveness, Member};
use super::{Scheduler, lock};
use gantry_api::views::{GpuView, MigSliceView, NodeView};
use gantry_node::inventory::groups;

/// Said in the node view when a GPU has MIG devices.
pub const MIG_NOTE: &str = "a GPU in MIG mode is scheduled as its MIG slices, each asked for by its profile (e.g. --gpus 1g.10gb:1) and seen by its task as its MIG-... UUID";

/// The MIG slices of `g` as the scheduler places them, none held yet.
fn mig_slices(g: &gantry_node::inventory::GpuInfo) -> Vec<MigSliceView> {
    g.schedulable()
        .into_iter()
        .filter(|s| s.index != g.index)
        .map(|s| MigSliceView {
            index: s.index,
            profile: s.model,
            uuid: s.uuid.unwrap_or_default(),
            memory_mib: s.memory_mib,
            allocated_milli: 0,
            jobs: Vec::new(),
        })
        .collect()
}

impl Scheduler {
    /// Every node and who holds each GPU.
    pub(crate) fn nodes(&self) -> Vec<NodeView> {
        let members: Vec<Member> = lock(&self.inner.members)
            .all()
            .map(|(_, m)| m.clone())
            .collect();
        members.iter().map(|m| self.view_of(m)).collect()
    }

    /// The view of node `name`, if there is one.
    pub(crate) fn node_view(&self, name: &str) -> Option<NodeView> {
        let member = lock(&self.inner.members)
            .by_name(name)
            .map(|(_, m)| m.clone())?;
        Some(self.view_of(&member))
    }

    fn view_of(&self, m: &Member) -> NodeView {
        let n = &m.info;
        let (agent, load) = match m.agent() {
            None => ("local".to_string(), None),
            Some(client) => (client.url().to_string(), Some(m.load)),
        };
        let mut view = NodeView {
            name: n.name.clone(),
            state: "up".into(),
            down_reason: None,
            down_since_ms: None,
            agent,
            addr: m.addr.clone(),
            last_heartbeat_ms: (m.last_heartbeat_ms > 0).then_some(m.last_heartbeat_ms),
            load,
            drain: None,
            gpu_source: n.gpu_source.clone(),
            labels: n.labels.clone(),
            cpu_milli: n.cpu_milli,
            cpu_milli_allocated: 0,
            memory_mib: n.memory_mib,
            memory_mib_allocated: 0,
            gpus: n
                .gpus
                .iter()
                .map(|g| GpuView {
                    index: g.index,
                    model: g.model.clone(),
                    memory_mib: g.memory_mib,
                    healthy: g.healthy,
                    health: None,
                    uuid: g.uuid.clone(),
                    pci_bus_id: g.pci_bus_id.clone(),
                    nvlink_peers: groups::nvlink_peers(&n.gpus, g),
                    mig_enabled: g.mig_enabled,
                    mig_devices: g.mig_devices.clone(),
                    mig_slices: mig_slices(g),
                    allocated_milli: 0,
                    jobs: Vec::new(),
                })
                .collect(),
            notes: Vec::new(),
        };
        let mut running_here = 0usize;
        {
            let st = lock(&self.inner.state);
            for j in st.jobs.running() {
                if j.tasks.iter().any(|t| t.node == n.name) {
                    running_here += 1;
                }
                for t in j.tasks.iter().filter(|t| t.node == n.name) {
                    view.cpu_milli_allocated += t.cpu_milli;
                    view.memory_mib_allocated += t.memory_mib;
                    for s in &t.gpus {
                        let parent = gantry_api::mig::physical(s.index);
                        let Some(g) = view.gpus.iter_mut().find(|g| g.index == parent) else {
                            continue;
                        };
                        if let Some(slice) = g.mig_slices.iter_mut().find(|m| m.index == s.index) {
                            slice.allocated_milli += s.milli;
                            slice.jobs.push((j.id, s.milli));
                        } else if s.index == g.index {
                            g.allocated_milli += s.milli;
                            g.jobs.push((j.id, s.milli));
                        }
                    }
                }
            }
        }
        let ctl = &m.control;
        for g in &mut view.gpus {
            g.health = ctl.gpu_faults.get(&g.index).cloned();
            g.healthy = g.health.is_none();
        }
        if let Some(d) = ctl.drain.clone() {
            view.state = if running_here > 0 {
                "draining"
            } else {
                "drained"
            }
            .into();
            view.drain = Some(d);
        }
        match &m.liveness {
            Liveness::Up => {}
            Liveness::Awaiting { .. } => view.state = "awaiting".into(),
            Liveness::Down { since_ms, reason } => {
                view.state = "down".into();
                view.down_reason = Some(reason.clone());
                view.down_since_ms = Some(*since_ms);
            }
        }
        if m.unwanted > 0 {
            view.notes.push(format!(
                "stopping {} task(s) the controller no longer wants; no new task starts here until they are gone",
                m.unwanted
            ));
        }
        if view.gpus.iter().any(|g| !g.mig_devices.is_empty()) {
            view.notes.push(MIG_NOTE.into());
        }
        view
    }
}
