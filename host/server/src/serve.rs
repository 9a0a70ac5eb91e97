//! `gantry serve`: open the scheduler, bind the API, run until SIGINT/SIGTERM.
//! Running tasks are left running on shutdown: they are re-attached at the next start.
//! Without `[[auth.tokens]]` it serves only on loopback (unless
//! `auth.allow_unauthenticated`), and it says at start which mode it is in.
//! With `[tls]` it serves HTTPS only (see `tls`); without it, on a non-loopback address,
//! it warns that requests and tokens travel in clear text. The same API is also served on a
//! Unix socket (`socket`, default `<data_dir>/gantry.sock`), where the caller is the local
//! account the kernel names (`gantry_http::local_socket`).
//! Under systemd (`Type=notify`) it says `READY=1` once it answers on both, or once it stands
//! by (a standby answers `/v1/health`), and `STOPPING=1` on SIGTERM (`gantry_http::sd_notify`).

use crate::auth::{Mode, Tokens, startup_mode};
use anyhow::Context;
use gantry_config::Config;
use gantry_config::tls::ServerTls;
use gantry_controller::{Controller, Scheduler};
use gantry_http::shutdown;

/// Runs the daemon.
pub async fn serve(mut config: Config) -> anyhow::Result<()> {
    let shim = gantry_node::executor::shim_executable(
        &std::env::current_exe()
            .context("cannot find the gantry executable (needed as the task shim)")?,
    );
    trust_state_paths(&mut config)?;
    let listen = config.listen.clone();
    let data_dir = config.data_dir.clone();
    let socket = config.socket_path();
    let tokens = Tokens::new(&config.auth)?;
    let tls = ServerTls::load(&config.tls)?;
    let http = config.http.clone();
    let mut listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let mode = startup_mode(&tokens, &config.auth, addr)?;
    let config_anonymous_role = config.auth.anonymous_role;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let serve_options = || gantry_http::ServeOptions {
        settings: http.clone(),
        extra_hosts: Vec::new(),
        tls: tls.as_ref().map(|t| t.config()),
    };
    // With the state on etcd, stand by until this controller leads (`leadership`).
    let leading = if config.store.is_replicated() {
        let shared = listener.into_std()?;
        let standby = tokio::net::TcpListener::from_std(shared.try_clone()?)?;
        listener = tokio::net::TcpListener::from_std(shared)?;
        let url = config
            .store
            .advertise_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{addr}"));
        let name = config.store.controller_name();
        // Judged before anyone is told this controller listens (issue 43, finding 13).
        let store = config.store.clone();
        let verdict =
            tokio::task::spawn_blocking(move || crate::leadership::etcd_trust::verify(&store))
                .await??;
        let unjudged = match verdict {
            crate::leadership::etcd_trust::Verdict::Unknown(why) => {
                tracing::warn!("etcd cannot be judged yet ({why}): standing by until it answers");
                Some(config.store.clone())
            }
            _ => None,
        };
        println!("gantry listening on {scheme}://{addr}");
        println!("gantry store: etcd; controller {name} stands by until it leads");
        // Compile the built-in plugins now, so that taking over does not wait for it.
        let warm = config.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            match gantry_controller::policy_ops::warm_compile_cache(&warm) {
                Ok(n) => tracing::info!(
                    plugins = n,
                    ms = started.elapsed().as_millis() as u64,
                    "standby: built-in plugins compiled ahead of leading"
                ),
                Err(e) => tracing::warn!("standby: cannot compile the built-in plugins ahead: {e}"),
            }
        });
        let election = crate::leadership::election(&config)?;
        let cluster_ca = config.cluster.ca_cert.clone();
        let standing_by = crate::leadership::lead(
            election,
            name,
            url,
            cluster_ca,
            crate::leadership::StandbyServer {
                listener: standby,
                options: serve_options(),
                guard: crate::api::guard::guarded,
            },
            unjudged,
        );
        gantry_http::sd_notify::ready(&format!(
            "standing by on {scheme}://{addr} (etcd); the API forwards to the leader"
        ));
        match standing_by.await? {
            Some(leading) => {
                leading.keep();
                gantry_api::cluster_term::set(leading.term());
                println!("gantry leads (term {})", leading.term());
                Some(leading)
            }
            None => {
                gantry_http::sd_notify::stopping();
                return Ok(());
            }
        }
    } else {
        None
    };
    let fence = leading.as_ref().map(crate::leadership::Leading::fence);
    let (scheduler, events) =
        tokio::task::spawn_blocking(move || Scheduler::open_fenced(config, shim, fence)).await??;
    // Every path the daemon keeps is absolute by now. It changes to `/` before it answers
    // anyone: nothing may resolve against the directory it was started in (a job's relative
    // path would reach the operator's files).
    std::env::set_current_dir("/").context("cannot change to /")?;
    announce(mode, addr);
    announce_anonymous(mode, config_anonymous_role);
    announce_tls(tls.as_ref(), addr);
    let controller = Controller::new(scheduler.clone());
    let app = crate::api::router(controller.clone(), tokens);
    // The Unix socket is bound before the daemon says it listens: whoever waits for that
    // line may use either door at once.
    serve_local_socket(&socket, app.clone(), &http)?;
    tracing::info!(%addr, data_dir = %data_dir.display(), "gantry is serving");
    if leading.is_none() {
        println!("gantry listening on {scheme}://{addr}");
    }
    crate::service_endpoint::open_all(&controller.services());
    crate::service_autoscaler::start(&controller.services());
    tokio::spawn(scheduler.run(events));
    // Both doors are bound: whoever connects now is answered (systemd's start ends here).
    gantry_http::sd_notify::ready(&format!(
        "serving on {scheme}://{addr} and {}",
        socket.display()
    ));
    let stop = async {
        shutdown().await;
        gantry_http::sd_notify::stopping();
    };
    // Connection limits, header and idle timeouts, Host rules: `gantry_http`.
    gantry_http::serve(listener, app, serve_options(), stop).await?;
    if let Some(leading) = &leading {
        leading.resign();
    }
    tracing::info!(
        "gantry stopped; running tasks keep running and are re-attached at the next start"
    );
    Ok(())
}

/// Makes the data directory and the socket's path absolute, and refuses to start on a
/// directory that another account owns or others may write (`gantry_node::trusted_dir`).
fn trust_state_paths(config: &mut Config) -> anyhow::Result<()> {
    gantry_private_files::restrict_umask();
    config.data_dir = gantry_node::trusted_dir::absolute_and_trusted(&config.data_dir)
        .context("refusing the data directory (data_dir)")?;
    let socket = config.socket_path();
    let socket = std::path::absolute(&socket)
        .with_context(|| format!("socket {} is not usable", socket.display()))?;
    if let Some(parent) = socket.parent()
        && parent != config.data_dir
    {
        let made = !parent.exists();
        let parent = gantry_node::trusted_dir::absolute_and_trusted(parent)
            .context("refusing the directory of the API socket (socket)")?;
        if made {
            // Every local account may reach the socket (it names each caller itself).
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot open {} to local users", parent.display()))?;
        }
    }
    config.socket = Some(socket);
    Ok(())
}

/// Serves `app` on the Unix socket too, where the kernel names each caller
/// (`gantry_http::local_socket`); runs until shutdown in the background.
/// Its connections are bounded like TCP's: `http.max_connections` in all,
/// `http.max_connections_per_ip` per local account.
fn serve_local_socket(
    path: &std::path::Path,
    app: axum::Router,
    http: &gantry_config::http::HttpSettings,
) -> anyhow::Result<()> {
    let listener = gantry_http::local_socket::bind(path)
        .with_context(|| format!("cannot listen on the Unix socket {}", path.display()))?;
    let listener = gantry_http::local_socket::LimitedUnixListener::new(
        listener,
        http.max_connections,
        http.max_connections_per_ip,
    );
    println!(
        "gantry local socket {} (callers are who the kernel says)",
        path.display()
    );
    tracing::info!(socket = %path.display(), "serving the API on the Unix socket");
    let service = app.into_make_service_with_connect_info::<gantry_http::local_socket::PeerCred>();
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, service)
            .with_graceful_shutdown(shutdown())
            .await
        {
            tracing::error!("the Unix socket stopped serving: {e}");
        }
    });
    Ok(())
}

/// Says, on stdout and in the log, how requests are authenticated.
fn announce(mode: Mode, addr: std::net::SocketAddr) {
    match mode {
        Mode::Tokens(n) => {
            tracing::info!(tokens = n, "authentication: bearer tokens required");
            println!(
                "gantry auth: {n} API token(s) configured; every request but /v1/health and /metrics needs one"
            );
        }
        Mode::OpenLoopback => {
            tracing::info!("authentication: off (no tokens; loopback only)");
            println!("gantry auth: off (no [[auth.tokens]]); serving on loopback {addr} only");
        }
        Mode::OpenAllowed => {
            let text = format!(
                "AUTHENTICATION IS OFF on {addr}, which is not loopback (auth.allow_unauthenticated = true): anyone who can reach it may submit, cancel and change the policy"
            );
            tracing::warn!("{text}");
            eprintln!("WARNING: {text}");
            println!("gantry auth: off on a non-loopback address (allowed explicitly)");
        }
    }
}

/// Says what a caller without identity may do, when there are such callers.
fn announce_anonymous(mode: Mode, role: gantry_config::auth::Role) {
    if matches!(mode, Mode::Tokens(_)) {
        return;
    }
    if role >= gantry_config::auth::Role::Operator {
        let text = format!(
            "auth.anonymous_role = \"{}\": every local process that reaches the TCP port may act as {} (drain nodes{}, name any user); use this on a single-user machine only",
            role.name(),
            role.name(),
            if role == gantry_config::auth::Role::Admin {
                ", change the policy"
            } else {
                ""
            }
        );
        tracing::warn!("{text}");
        eprintln!("WARNING: {text}");
    } else {
        println!(
            "gantry auth: TCP callers without a token are the user `anonymous` (role {}); the Unix socket names local users",
            role.name()
        );
    }
}

/// Says which certificate is served, or warns when a non-loopback address is plain HTTP.
fn announce_tls(tls: Option<&ServerTls>, addr: std::net::SocketAddr) {
    match tls {
        Some(tls) => {
            tracing::info!(certificate = tls.summary(), "TLS is on (HTTPS only)");
            println!("gantry tls: on, certificate {}", tls.summary());
        }
        None if !addr.ip().is_loopback() => {
            let text = format!(
                "TLS IS OFF on {addr}, which is not loopback: requests and API tokens travel in clear text (set [tls] cert and key)"
            );
            tracing::warn!("{text}");
            eprintln!("WARNING: {text}");
        }
        None => tracing::info!("TLS is off (plain HTTP on loopback)"),
    }
}
