//! The replica the benchmark runs as a service (`--replica`): tokio + hyper on
//! `127.0.0.1:$PORT`, keep-alive, `/`, `/health` and `/metrics` (a `queue` gauge).

use super::*;

// ---------------------------------------------------------------------------------------
// The replica (`--replica`).

/// Counts a `/` request in flight while it lives (also when its connection drops).
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) async fn respond(
    path: String,
    in_flight: Arc<AtomicUsize>,
    delay: Duration,
    answer: Bytes,
) -> Response<Full<Bytes>> {
    match path.as_str() {
        "/health" => Response::new(Full::new(Bytes::from_static(b"ok\n"))),
        "/metrics" => Response::new(Full::new(Bytes::from(format!(
            "# TYPE queue gauge\nqueue {}\n",
            in_flight.load(Ordering::Relaxed)
        )))),
        _ => {
            let _counted = InFlight::new(&in_flight);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Response::new(Full::new(answer))
        }
    }
}

/// Serves until killed (a service's replica: Gantry gives `$PORT`).
pub(crate) fn replica() -> Result<()> {
    let port: u16 = std::env::var("PORT")?.parse()?;
    let delay = Duration::from_millis(env_or("REPLICA_DELAY_MS", 0));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))?;
    runtime.block_on(async move {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let answer = Bytes::from(format!("port {port}\n"));
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (in_flight, answer) = (in_flight.clone(), answer.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let answer = respond(
                        req.uri().path().to_string(),
                        in_flight.clone(),
                        delay,
                        answer.clone(),
                    );
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

// ---------------------------------------------------------------------------------------
