//! `gantry serve`: open the scheduler, bind the API, run until SIGINT/SIGTERM.
//! Running tasks are left running on shutdown: they are re-attached at the next start.

use crate::config::Config;
use crate::scheduler::Scheduler;
use anyhow::Context;

/// Runs the daemon.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let shim = std::env::current_exe()
        .context("cannot find the gantry executable (needed as the task shim)")?;
    let listen = config.listen.clone();
    let data_dir = config.data_dir.clone();
    let (scheduler, events) =
        tokio::task::spawn_blocking(move || Scheduler::open(config, shim)).await??;
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(
            "listening on {addr}, which is not loopback: the API has no authentication yet"
        );
    }
    tracing::info!(%addr, data_dir = %data_dir.display(), "gantry is serving");
    println!("gantry listening on http://{addr}");
    tokio::spawn(scheduler.clone().run(events));
    let app = crate::api::router(scheduler);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown())
        .await?;
    tracing::info!(
        "gantry stopped; running tasks keep running and are re-attached at the next start"
    );
    Ok(())
}

async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
