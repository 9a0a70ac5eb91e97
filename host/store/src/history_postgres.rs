//! History on a PostgreSQL server (`[history] backend = "postgres"`), as slurmdbd keeps
//! SLURM's in MariaDB: the same tables as the embedded SQLite database
//! (`history_sqlite.rs`), written by the same statements (`sql.rs`), so several
//! controllers can share one history and it outlives any controller's disk.
//!
//! One connection, owned by one thread of its own: callers hand it a request and wait for
//! the answer, as they wait for SQLite's lock. The thread is not inside an async runtime, so
//! the blocking client works from any caller. A connection that broke (the server
//! restarted) is made again at the next request; a request while the server is down fails
//! with an error naming the server, and nothing is retried behind the caller's back.
//! Commits are durable when they return (PostgreSQL's `synchronous_commit`), so there is no
//! background sync; the server reclaims deleted rows itself (autovacuum).
//!
//! Owns: the connection and its thread, the schema, the dialect's last step (`?N` to
//! `$N`, values to PostgreSQL types). Does not own the statements (`archive.rs`,
//! `history.rs`, `accounting.rs`).

use crate::StoreError;
use crate::sql::{HistorySql, Row, SqlValue, Statement, Written};
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, NoTls};
use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Duration;

/// The schema; idempotent, run under an advisory lock so that two controllers starting
/// at once do not race to create it.
const SCHEMA: &str = r#"
BEGIN;
SELECT pg_advisory_xact_lock(7261001);
CREATE TABLE IF NOT EXISTS jobs (
    id BIGINT PRIMARY KEY,
    "user" TEXT NOT NULL,
    account TEXT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    array_id BIGINT,
    end_ms BIGINT NOT NULL,
    record BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs("user", id);
CREATE INDEX IF NOT EXISTS jobs_account ON jobs(account, id);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(queue, id);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, id);
CREATE INDEX IF NOT EXISTS jobs_array ON jobs(array_id, id) WHERE array_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_ms, id);
CREATE TABLE IF NOT EXISTS events (
    seq BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    job BIGINT,
    kind TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_job ON events(job, seq) WHERE job IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_kind ON events(kind, seq) WHERE job IS NULL;
CREATE TABLE IF NOT EXISTS decisions (
    job BIGINT PRIMARY KEY,
    value BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS accounting (
    seq BIGSERIAL PRIMARY KEY,
    job_id BIGINT NOT NULL,
    task_index BIGINT NOT NULL,
    run BIGINT NOT NULL,
    start_ms BIGINT NOT NULL,
    end_ms BIGINT NOT NULL,
    "user" TEXT NOT NULL,
    account TEXT NOT NULL,
    record BYTEA NOT NULL,
    UNIQUE (job_id, task_index, run, start_ms)
);
CREATE INDEX IF NOT EXISTS accounting_end ON accounting(end_ms, seq);
CREATE INDEX IF NOT EXISTS accounting_user ON accounting("user", end_ms);
CREATE INDEX IF NOT EXISTS accounting_account ON accounting(account, end_ms);
COMMIT;
"#;

/// How long a connection attempt may take before the request fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one statement may run on the server (a hung server must not hang the daemon).
const STATEMENT_TIMEOUT: &str = "SET statement_timeout = '30s'";

type Request = Box<dyn FnOnce(&mut Connection) + Send>;

/// The PostgreSQL history database: a handle on the thread that owns the connection.
pub(crate) struct PostgresHistory {
    requests: mpsc::Sender<Request>,
    /// The server, without credentials (for messages).
    server: String,
}

/// The connection, on its thread: made when first needed and again after it broke.
struct Connection {
    config: postgres::Config,
    client: Option<Client>,
    /// Statements prepared on `client`, by their text.
    prepared: HashMap<String, postgres::Statement>,
}

impl PostgresHistory {
    /// Connects to the server `url` names (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`, or
    /// `host=... user=... dbname=...`), creates the schema, and starts the connection's
    /// thread; fails now, naming the server, when it cannot be reached.
    pub(crate) fn connect(url: &str) -> Result<Self, StoreError> {
        let mut config: postgres::Config = url.parse().map_err(|e| StoreError::Postgres {
            server: "(the configured url)".into(),
            message: format!("history.url does not parse: {e}"),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let server = describe(&config);
        let (requests, incoming) = mpsc::channel::<Request>();
        let mut connection = Connection {
            config,
            client: None,
            prepared: HashMap::new(),
        };
        std::thread::Builder::new()
            .name("history-postgres".into())
            .spawn(move || {
                // Ends when the last handle is dropped.
                for request in incoming {
                    request(&mut connection);
                }
            })?;
        let history = Self { requests, server };
        history.call(|c| c.client().map(drop))?;
        Ok(history)
    }

    /// Runs `f` on the connection's thread and waits for its answer.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let request: Request = Box::new(move |c| {
            let result = f(c);
            // After any error the connection is dropped and the next call connects anew:
            // a server that went away can leave a socket the client has not marked closed
            // yet, or a backend that answers once more with a fatal error before it dies.
            // Errors are rare here (history writes and reads), reconnecting is cheap.
            if result.is_err() {
                c.forget();
            }
            // The caller waits on `answer`; it cannot be gone.
            let _ = reply.send(result);
        });
        let gone = || StoreError::Postgres {
            server: self.server.clone(),
            message: "the connection's thread ended".into(),
        };
        self.requests.send(request).map_err(|_| gone())?;
        answer
            .recv()
            .map_err(|_| gone())?
            .map_err(|e| StoreError::Postgres {
                server: self.server.clone(),
                message: e.to_string(),
            })
    }
}

/// `host:port/dbname` of `config`, never its password.
fn describe(config: &postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or("");
    format!("{host}:{port}/{db}")
}

impl Connection {
    fn client(&mut self) -> Result<&mut Client, postgres::Error> {
        let client = match self.client.take() {
            Some(c) if !c.is_closed() => c,
            _ => {
                self.prepared.clear();
                let mut client = self.config.connect(NoTls)?;
                client.batch_execute(STATEMENT_TIMEOUT)?;
                client.batch_execute(SCHEMA)?;
                client
            }
        };
        Ok(self.client.insert(client))
    }

    fn forget(&mut self) {
        self.client = None;
        self.prepared.clear();
    }

    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, postgres::Error> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let prepared = self.client()?.prepare(&dollar_placeholders(sql))?;
        self.prepared.insert(sql.to_owned(), prepared.clone());
        Ok(prepared)
    }

    fn write(&mut self, statements: &[Statement]) -> Result<Vec<Written>, postgres::Error> {
        let prepared = statements
            .iter()
            .map(|s| self.statement(&s.sql))
            .collect::<Result<Vec<_>, _>>()?;
        let mut tx = self.client()?.transaction()?;
        let mut out = Vec::with_capacity(statements.len());
        for (s, p) in statements.iter().zip(&prepared) {
            let params = bound(&s.params);
            let refs = refs(&params);
            if s.sql.contains("RETURNING") {
                let returned = tx
                    .query(p, &refs)?
                    .iter()
                    .map(row)
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(Written {
                    changed: returned.len() as u64,
                    returned,
                });
            } else {
                out.push(Written {
                    changed: tx.execute(p, &refs)?,
                    returned: Vec::new(),
                });
            }
        }
        tx.commit()?;
        Ok(out)
    }

    fn read(&mut self, statement: &Statement) -> Result<Vec<Row>, postgres::Error> {
        let prepared = self.statement(&statement.sql)?;
        let params = bound(&statement.params);
        let rows = self.client()?.query(&prepared, &refs(&params))?;
        rows.iter().map(row).collect()
    }
}

/// `?N` placeholders as PostgreSQL's `$N` (no statement here has a `?` elsewhere).
fn dollar_placeholders(sql: &str) -> String {
    sql.replace('?', "$")
}

/// A value as PostgreSQL receives it, of the type the statement's parameter has.
#[derive(Debug)]
struct Bound<'a>(&'a SqlValue);

impl ToSql for Bound<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            SqlValue::Int(v) => v.to_sql(ty, out),
            // PostgreSQL's text cannot hold a NUL; hostile text keeps every other byte.
            SqlValue::Text(v) if v.contains('\0') => v.replace('\0', "\u{fffd}").to_sql(ty, out),
            SqlValue::Text(v) => v.as_str().to_sql(ty, out),
            SqlValue::Bytes(v) => v.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn bound(params: &[SqlValue]) -> Vec<Bound<'_>> {
    params.iter().map(Bound).collect()
}

fn refs<'a>(params: &'a [Bound<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

fn row(r: &postgres::Row) -> Result<Row, postgres::Error> {
    let mut out = Vec::with_capacity(r.len());
    for (i, column) in r.columns().iter().enumerate() {
        let ty = column.type_();
        out.push(if *ty == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?
                .map_or(SqlValue::Null, SqlValue::Int)
        } else if *ty == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?
                .map_or(SqlValue::Null, |v| SqlValue::Int(i64::from(v)))
        } else if *ty == Type::BYTEA {
            r.try_get::<_, Option<Vec<u8>>>(i)?
                .map_or(SqlValue::Null, SqlValue::Bytes)
        } else {
            r.try_get::<_, Option<String>>(i)?
                .map_or(SqlValue::Null, SqlValue::Text)
        });
    }
    Ok(Row(out))
}

impl HistorySql for PostgresHistory {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn write(&self, statements: Vec<Statement>) -> Result<Vec<Written>, StoreError> {
        self.call(move |c| c.write(&statements))
    }

    fn read(&self, statement: Statement) -> Result<Vec<Row>, StoreError> {
        self.call(move |c| c.read(&statement))
    }

    fn renumber_after_copy(&self) -> Result<(), StoreError> {
        self.call(|c| {
            c.client()?.batch_execute(
                "SELECT setval(pg_get_serial_sequence('events', 'seq'), \
                   COALESCE((SELECT max(seq) FROM events), 0) + 1, false); \
                 SELECT setval(pg_get_serial_sequence('accounting', 'seq'), \
                   COALESCE((SELECT max(seq) FROM accounting), 0) + 1, false);",
            )
        })
    }

    fn sync_now(&self) -> Result<(), StoreError> {
        // Every commit was durable when it returned.
        Ok(())
    }

    fn bytes_on_disk(&self) -> u64 {
        // The server's disk, not this machine's.
        0
    }

    fn release_free_space(&self) -> Result<u64, StoreError> {
        // Autovacuum makes deleted rows' space reusable on the server.
        Ok(0)
    }
}
