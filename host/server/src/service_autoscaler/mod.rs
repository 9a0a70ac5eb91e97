//! The autoscaler of replicated services (`service.autoscale`), as a Kubernetes HPA: every
//! `period_s` it reads the metric from each ready replica (`GET http://replica<path>`,
//! Prometheus text, bounded in time and size), adds the readings, lets `recommend.rs`
//! decide, and hands the decision to the service's owner, which records it as an event
//! with the values that caused it and makes or drains replicas at its next reconcile.
//! A service scaled to zero has nothing to read: its endpoint starts a replica when a
//! request comes (`service_endpoint/forward.rs`).
//!
//! Owns: the readings and the per-service recommenders (in memory: a restart begins its
//! windows again). Does not own the replicas (`gantry_controller`'s `service_sets.rs`).

mod metrics_text;
mod recommend;

use gantry_api::model::ScaleSample;
use gantry_controller::{Services, now_ms};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Bytes;
use recommend::{Reading, Recommender};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long one replica may take to answer a reading.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest metrics answer read.
const READ_MAX: usize = 4 << 20;

/// What the autoscaler keeps per service.
struct Tracked {
    last_read_ms: u64,
    first_seen_ms: u64,
    recommender: Recommender,
}

/// Starts the autoscaler on the current runtime.
pub fn start(s: &Services) {
    let s = s.clone();
    tokio::spawn(async move { run(s).await });
}

async fn run(s: Services) {
    let mut tracked: HashMap<u64, Tracked> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        let services: Vec<_> = s
            .list()
            .into_iter()
            .filter(|svc| !svc.stopped && svc.autoscale.is_some())
            .collect();
        tracked.retain(|id, _| services.iter().any(|svc| svc.id == *id));
        for service in services {
            let Some(spec) = service.autoscale.clone() else {
                continue;
            };
            let now = now_ms();
            let t = tracked.entry(service.id).or_insert_with(|| Tracked {
                last_read_ms: 0,
                first_seen_ms: now,
                recommender: Recommender::default(),
            });
            if now.saturating_sub(t.last_read_ms) < u64::from(spec.period_s) * 1000 {
                continue;
            }
            t.last_read_ms = now;
            let backends = s.backends(service.id);
            let mut reads = tokio::task::JoinSet::new();
            for (_, addr, _) in backends {
                let (path, metric) = (spec.path.clone(), spec.metric.clone());
                let id = service.id;
                reads.spawn(async move { read_metric(id, addr, &path, &metric).await });
            }
            let mut total = 0.0;
            let mut ready = 0u32;
            while let Some(read) = reads.join_next().await {
                match read {
                    Ok(Ok(v)) => {
                        total += v;
                        ready += 1;
                    }
                    Ok(Err(e)) => tracing::debug!(service = service.id, "metric not read: {e}"),
                    Err(e) => tracing::warn!(service = service.id, "metric read panicked: {e}"),
                }
            }
            if ready == 0 {
                // Nothing to read: replicas starting, or none (scaled to zero).
                continue;
            }
            let last_request = s.activity(service.id).load(Ordering::Relaxed);
            let reading = Reading {
                total,
                ready,
                idle_ms: now.saturating_sub(last_request.max(t.first_seen_ms)),
            };
            let (replicas, why) = t.recommender.decide(&spec, service.replicas, reading, now);
            let sample = ScaleSample {
                t_ms: now,
                value: total,
                ready,
                replicas,
            };
            s.autoscale(service.id, replicas, &why, sample);
        }
    }
}

/// The sum of `metric` in the answer of `GET http://addr<path>` (a replica of `service`).
async fn read_metric(
    service: u64,
    addr: SocketAddr,
    path: &str,
    metric: &str,
) -> Result<f64, String> {
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Either::Right(Full::new(Bytes::new())))
        .map_err(|e| e.to_string())?;
    let text = tokio::time::timeout(READ_TIMEOUT, async {
        let response = crate::service_endpoint::send(service, addr, request).await?;
        if !response.status().is_success() {
            return Err(format!("status {}", response.status()));
        }
        let body = Limited::new(response.into_body(), READ_MAX)
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
    })
    .await
    .map_err(|_| "timed out".to_string())??;
    metrics_text::sum_of(&text, metric).ok_or_else(|| format!("no sample of {metric}"))
}
