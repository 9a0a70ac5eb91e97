//! The typed calls of [`Client`]: one method per route the CLI uses, each naming its path
//! once and reading the answer into this crate's types (jobs, nodes, accounting, plugins).
//! Routes whose answers are only shown as they are (policy, plugins list, replay) have their
//! methods in `policy_routes.rs`.
//!
//! Owns the paths and answer types of those calls. Does not own the transport or errors
//! (`client`).

use super::{Client, Result, percent_encode};
use crate::accounting::AccountingReport;
use crate::model::{JobRecord, ServiceView, StartForecast};
use crate::views::{NodeView, PluginInfo, Submitted};
use serde::Serialize;
use serde_json::json;
use std::io::Read;

impl Client {
    /// `POST /v1/jobs`: submits a job spec (a `JobSpec` or its JSON).
    pub fn submit<B: Serialize + ?Sized>(&self, spec: &B) -> Result<Submitted> {
        self.post("/v1/jobs", spec)
    }

    /// `POST /v1/jobs/forecast`: when a job of `spec` (a `JobSpec` or its JSON) would start,
    /// in place of the pending job `replaces` if given; nothing is submitted.
    pub fn what_if(
        &self,
        spec: &serde_json::Value,
        replaces: Option<u64>,
    ) -> Result<StartForecast> {
        self.post(
            "/v1/jobs/forecast",
            &json!({"spec": spec, "replaces": replaces}),
        )
    }

    /// `GET /v1/jobs?{query}`: jobs matching the query (`state=...&user=...`, as given).
    pub fn jobs(&self, query: &str) -> Result<Vec<JobRecord>> {
        self.get(&format!("/v1/jobs?{query}"))
    }

    /// `GET /v1/jobs?{query}`, one page: the jobs and the `after` of the next page
    /// (`X-Next-After`) when there may be more.
    pub fn jobs_page(&self, query: &str) -> Result<(Vec<JobRecord>, Option<u64>)> {
        let path = format!("/v1/jobs?{query}");
        let (v, next) = self.get_json_with_header(&path, "x-next-after")?;
        Ok((Self::decode(&path, v)?, next.and_then(|n| n.parse().ok())))
    }

    /// `POST /v1/admin/gc?max_batches=N`: one step of the retention collector (admin).
    pub fn admin_gc(&self, max_batches: u64) -> Result<serde_json::Value> {
        self.post_json(
            &format!("/v1/admin/gc?max_batches={max_batches}"),
            &json!({}),
        )
    }

    /// `GET /v1/jobs/{id}`.
    pub fn job(&self, id: u64) -> Result<JobRecord> {
        self.get(&format!("/v1/jobs/{id}"))
    }

    /// `POST /v1/jobs/{id}/cancel`: the job as it is after the request.
    pub fn cancel(&self, id: u64) -> Result<JobRecord> {
        self.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
    }

    /// `POST /v1/jobs/{id}/hold`: the pending job, held.
    pub fn hold(&self, id: u64) -> Result<JobRecord> {
        self.post(&format!("/v1/jobs/{id}/hold"), &json!({}))
    }

    /// `POST /v1/jobs/{id}/release`: the held job, released.
    pub fn release(&self, id: u64) -> Result<JobRecord> {
        self.post(&format!("/v1/jobs/{id}/release"), &json!({}))
    }

    /// `POST /v1/jobs/{id}/requeue`: the running job, stopping to run again (as `scontrol
    /// requeue`).
    pub fn requeue(&self, id: u64) -> Result<JobRecord> {
        self.post(&format!("/v1/jobs/{id}/requeue"), &json!({}))
    }

    /// `PATCH /v1/jobs/{id}`: a pending job's new time limit or dependencies (`update`: a
    /// JSON object with `time_limit_s` and/or `dependencies`).
    pub fn update(&self, id: u64, update: &serde_json::Value) -> Result<JobRecord> {
        self.patch(&format!("/v1/jobs/{id}"), update)
    }

    /// `POST /v1/jobs/{id}/signal`: sends `signal` (a name such as `INT`) to its tasks.
    pub fn signal(&self, id: u64, signal: &str) -> Result<()> {
        self.post_json(
            &format!("/v1/jobs/{id}/signal"),
            &json!({ "signal": signal }),
        )
        .map(drop)
    }

    /// `POST /v1/jobs/{id}/input`: input for an interactive job (`{"data": BASE64, "resize":
    /// {"rows": R, "cols": C}, "eof": BOOL}`); how many bytes of data it took.
    pub fn input(&self, id: u64, body: &serde_json::Value) -> Result<usize> {
        let answer = self.post_json(&format!("/v1/jobs/{id}/input"), body)?;
        Ok(answer["accepted"]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0))
    }

    /// `GET /v1/jobs/{id}/logs?task={task}`: the task's output.
    pub fn logs(&self, id: u64, task: usize) -> Result<String> {
        self.get_text(&format!("/v1/jobs/{id}/logs?task={task}"))
    }

    /// `GET /v1/jobs/{id}/logs?task=&offset=`: the log's bytes from `offset` on, and the
    /// offset to ask from next (`X-Log-Next`), to follow a log as it grows.
    pub fn logs_from(&self, id: u64, task: usize, offset: u64) -> Result<(String, u64)> {
        let path = format!("/v1/jobs/{id}/logs?task={task}&offset={offset}");
        let (value, next) = self.get_json_with_header(&path, "x-log-next")?;
        let text = match value {
            serde_json::Value::String(s) => s,
            v => v.to_string(),
        };
        let next = next
            .and_then(|n| n.parse().ok())
            .unwrap_or(offset + text.len() as u64);
        Ok((text, next))
    }

    /// `GET /v1/jobs/{id}/attach`: the job's frames (`views::AttachFrame`, one JSON object a
    /// line) as they come.
    pub fn attach(&self, id: u64) -> Result<Box<dyn Read + Send>> {
        self.stream(&format!("/v1/jobs/{id}/attach"))
    }

    /// `GET /v1/nodes`.
    pub fn nodes(&self) -> Result<Vec<NodeView>> {
        self.get("/v1/nodes")
    }

    /// `POST /v1/services`: a replicated service made from `spec` (kind `service`,
    /// `service.replicas` copies).
    pub fn create_service(&self, spec: &crate::model::JobSpec) -> Result<ServiceView> {
        self.post("/v1/services", spec)
    }

    /// `GET /v1/services`.
    pub fn services(&self) -> Result<Vec<ServiceView>> {
        self.get("/v1/services")
    }

    /// `GET /v1/services/{id}`.
    pub fn service(&self, id: u64) -> Result<ServiceView> {
        self.get(&format!("/v1/services/{id}"))
    }

    /// `POST /v1/services/{id}/scale`: the service after the change.
    pub fn scale_service(&self, id: u64, replicas: u32) -> Result<ServiceView> {
        self.post(
            &format!("/v1/services/{id}/scale"),
            &json!({ "replicas": replicas }),
        )
    }

    /// `GET /v1/services/{id}/events`: its events, oldest first, as JSON.
    pub fn service_events(&self, id: u64) -> Result<serde_json::Value> {
        self.get(&format!("/v1/services/{id}/events"))
    }

    /// `POST /v1/services/{id}/update`: the service after the change.
    pub fn update_service(
        &self,
        id: u64,
        request: &crate::model::UpdateRequest,
    ) -> Result<ServiceView> {
        self.post(&format!("/v1/services/{id}/update"), request)
    }

    /// `POST /v1/services/{id}/rollback`: the service after the change.
    pub fn rollback_service(&self, id: u64, revision: Option<u32>) -> Result<ServiceView> {
        self.post(
            &format!("/v1/services/{id}/rollback"),
            &json!({ "revision": revision }),
        )
    }

    /// `DELETE /v1/services/{id}`: the service, stopped.
    pub fn stop_service(&self, id: u64) -> Result<ServiceView> {
        let path = format!("/v1/services/{id}");
        let value = self.delete_json(&path)?;
        Self::decode(&path, value)
    }

    /// `GET /v1/images`: the container images in the node's cache, as JSON.
    pub fn images(&self) -> Result<serde_json::Value> {
        self.get("/v1/images")
    }

    /// `POST /v1/nodes/{node}/drain`: the node as it is after the drain.
    pub fn drain(&self, node: &str, reason: &str) -> Result<NodeView> {
        let path = format!("/v1/nodes/{}/drain", percent_encode(node));
        self.post(&path, &json!({ "reason": reason }))
    }

    /// `POST /v1/nodes/{node}/resume`: the node as it is after the resume.
    pub fn resume(&self, node: &str) -> Result<NodeView> {
        let path = format!("/v1/nodes/{}/resume", percent_encode(node));
        self.post(&path, &json!({}))
    }

    /// `DELETE /v1/nodes/{node}`: forgets a node.
    pub fn remove_node(&self, node: &str) -> Result<()> {
        let path = format!("/v1/nodes/{}", percent_encode(node));
        self.delete_json(&path).map(drop)
    }

    /// `POST /v1/plugins`: uploads a plugin's bytes.
    pub fn upload_plugin(&self, bytes: &[u8]) -> Result<PluginInfo> {
        let path = "/v1/plugins";
        Self::decode(path, self.post_bytes_json(path, bytes)?)
    }

    /// `GET /v1/accounting?{query}` (the query as the CLI's `accounting_cli::query` builds it).
    pub fn accounting(&self, query: &str) -> Result<AccountingReport> {
        self.get(&format!("/v1/accounting?{query}"))
    }

    /// `GET /v1/accounting?{query}` as JSON, as the daemon wrote it (`--json`).
    pub fn accounting_json(&self, query: &str) -> Result<serde_json::Value> {
        self.get_json(&format!("/v1/accounting?{query}"))
    }

    /// `POST /v1/join-tokens`: a join token valid `ttl_s` seconds for `uses` nodes.
    pub fn create_join_token(
        &self,
        ttl_s: u64,
        uses: u32,
    ) -> Result<crate::cluster_join::JoinTokenCreated> {
        self.post("/v1/join-tokens", &json!({ "ttl_s": ttl_s, "uses": uses }))
    }

    /// `GET /v1/join-tokens`: every join token (no secrets).
    pub fn join_tokens(&self) -> Result<Vec<crate::cluster_join::JoinTokenView>> {
        self.get("/v1/join-tokens")
    }

    /// `DELETE /v1/join-tokens/{id}`: revokes a join token.
    pub fn revoke_join_token(&self, id: &str) -> Result<()> {
        let path = format!("/v1/join-tokens/{}", percent_encode(id));
        self.delete_json(&path).map(drop)
    }
}
