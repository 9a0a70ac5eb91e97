//! The load: keep-alive hyper clients, one request at a time each, their tallies and
//! percentiles.

use super::*;

// The clients.

pub(crate) type Sender = SendRequest<Empty<Bytes>>;

/// What the clients of one run saw.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) ok: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) lat_us: Vec<u32>,
    pub(crate) by_port: BTreeMap<u16, u64>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.ok += other.ok;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.lat_us.extend(other.lat_us);
        for (port, n) in other.by_port {
            *self.by_port.entry(port).or_default() += n;
        }
    }

    fn error(&mut self, e: String) {
        self.errors += 1;
        self.first_error.get_or_insert(e);
    }
}

pub(crate) async fn connect(addr: SocketAddr) -> Result<Sender> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// `GET /` on `sender`; the port the answer names.
pub(crate) async fn one(sender: &mut Sender, addr: SocketAddr) -> Result<u16> {
    sender.ready().await?;
    let req = Request::get("/")
        .header(hyper::header::HOST, addr.to_string())
        .body(Empty::new())?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(format!("{status}: {text}").into());
    }
    text.trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("unexpected answer {text:?}").into())
}

/// What the clients do when: requests until `until` or `stop`, and where to note the
/// first answer of each replica.
#[derive(Clone)]
pub(crate) struct Plan {
    pub(crate) until: Instant,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) seen: Option<Arc<Mutex<BTreeMap<u16, Instant>>>>,
}

/// One client: keep-alive connections to every address of `addrs`, one request at a time,
/// the next on the next address (starting at `first`); a failed connection is opened again.
pub(crate) async fn client(addrs: Vec<SocketAddr>, first: usize, plan: Plan) -> Tally {
    let mut t = Tally::default();
    let mut conns: Vec<Option<Sender>> = addrs.iter().map(|_| None).collect();
    let mut i = first;
    while Instant::now() < plan.until && !plan.stop.load(Ordering::Relaxed) {
        let k = i % addrs.len();
        i += 1;
        if conns[k].is_none() {
            match connect(addrs[k]).await {
                Ok(s) => conns[k] = Some(s),
                Err(e) => t.error(format!("connect {}: {e}", addrs[k])),
            }
        }
        let Some(sender) = conns[k].as_mut() else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let t0 = Instant::now();
        match one(sender, addrs[k]).await {
            Ok(port) => {
                t.ok += 1;
                t.lat_us
                    .push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
                *t.by_port.entry(port).or_default() += 1;
                if let Some(seen) = &plan.seen {
                    seen.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(port)
                        .or_insert_with(Instant::now);
                }
            }
            Err(e) => {
                t.error(e.to_string());
                conns[k] = None;
            }
        }
    }
    t
}

/// Starts `clients` clients on `runtime`.
pub(crate) fn spawn_clients(
    runtime: &tokio::runtime::Runtime,
    addrs: &[SocketAddr],
    clients: usize,
    plan: &Plan,
) -> Vec<tokio::task::JoinHandle<Tally>> {
    (0..clients)
        .map(|j| runtime.spawn(client(addrs.to_vec(), j, plan.clone())))
        .collect()
}

pub(crate) fn join(
    runtime: &tokio::runtime::Runtime,
    handles: Vec<tokio::task::JoinHandle<Tally>>,
) -> Tally {
    runtime.block_on(async move {
        let mut all = Tally::default();
        for h in handles {
            match h.await {
                Ok(t) => all.add(t),
                Err(e) => all.error(format!("client task: {e}")),
            }
        }
        all
    })
}

/// Nearest-rank percentile of sorted `v`, in ms.
pub(crate) fn pct_ms(v: &[u32], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len());
    f64::from(v[rank - 1]) / 1000.0
}

/// `clients` clients against `addrs` for a second (not counted), then for `secs`: rate,
/// latency, errors, answers per replica port, the daemon's CPU.
pub(crate) fn measure(
    runtime: &tokio::runtime::Runtime,
    addrs: &[SocketAddr],
    clients: usize,
    secs: f64,
    daemon: u32,
) -> Result<Value> {
    let warm = Plan {
        until: Instant::now() + Duration::from_secs(1),
        stop: Arc::default(),
        seen: None,
    };
    join(runtime, spawn_clients(runtime, addrs, clients, &warm));
    let before = cpu(daemon)?;
    let t0 = Instant::now();
    let plan = Plan {
        until: t0 + Duration::from_secs_f64(secs),
        stop: Arc::default(),
        seen: None,
    };
    let mut t = join(runtime, spawn_clients(runtime, addrs, clients, &plan));
    let elapsed = t0.elapsed().as_secs_f64();
    let c = cpu_report(&before, &cpu(daemon)?);
    t.lat_us.sort_unstable();
    let daemon_s = c["cpu_s_gantry"].as_f64().unwrap_or(0.0);
    Ok(json!({
        "requests": t.ok,
        "errors": t.errors,
        "first_error": t.first_error,
        "seconds": elapsed,
        "rps": t.ok as f64 / elapsed,
        "p50_ms": pct_ms(&t.lat_us, 0.5),
        "p99_ms": pct_ms(&t.lat_us, 0.99),
        "by_port": t.by_port,
        "host_cpu_busy_pct": c["host_cpu_busy_pct"],
        "daemon_cpu_ms_per_1k_requests": daemon_s * 1e6 / (t.ok.max(1) as f64),
    }))
}

// ---------------------------------------------------------------------------------------
