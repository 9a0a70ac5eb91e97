//! The one interface both history databases implement: statements in the SQL that SQLite
//! and PostgreSQL share, with `?N` placeholders, values of four kinds, and transactions of
//! several statements. What history means — the archive (`archive.rs`), the event log and
//! decisions (`history.rs`), accounting (`accounting.rs`) — is written once against
//! [`HistorySql`]; the drivers (`history_sqlite.rs`, `history_postgres.rs`) own their
//! connection, schema, dialect and durability.
//!
//! The shared dialect: `?N` placeholders (PostgreSQL's driver rewrites them to `$N`), the
//! column `"user"` always quoted (a reserved word in PostgreSQL), `ON CONFLICT` instead of
//! `INSERT OR`, `RETURNING` for generated keys, and no parameter whose type only its value
//! could tell (`?1 IS NULL`).
//!
//! Owns: those types and the trait. Does not own any statement's text (the modules above).

use crate::StoreError;

/// A value bound to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// A 64-bit integer (every id, time and count: see [`sql_int`]).
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes (encoded records).
    Bytes(Vec<u8>),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}

impl From<u32> for SqlValue {
    fn from(v: u32) -> Self {
        Self::Int(i64::from(v))
    }
}

impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        Self::Text(v.to_owned())
    }
}

impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}

impl From<Vec<u8>> for SqlValue {
    fn from(v: Vec<u8>) -> Self {
        Self::Bytes(v)
    }
}

impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// A row read back: its columns in the order the statement named them.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<SqlValue>);

impl Row {
    fn column(&self, i: usize, want: &'static str) -> Result<&SqlValue, StoreError> {
        self.0.get(i).ok_or(StoreError::Corrupt {
            tree: "history",
            message: format!("a row has no column {i} ({want})"),
        })
    }

    fn wrong(i: usize, want: &'static str, got: &SqlValue) -> StoreError {
        StoreError::Corrupt {
            tree: "history",
            message: format!("column {i}: expected {want}, found {got:?}"),
        }
    }

    /// Column `i` as an unsigned integer.
    pub fn uint(&self, i: usize) -> Result<u64, StoreError> {
        match self.column(i, "an integer")? {
            SqlValue::Int(v) => Ok(from_sql_int(*v)),
            other => Err(Self::wrong(i, "an integer", other)),
        }
    }

    /// Column `i` as an unsigned integer or NULL.
    pub fn opt_uint(&self, i: usize) -> Result<Option<u64>, StoreError> {
        match self.column(i, "an integer or NULL")? {
            SqlValue::Null => Ok(None),
            SqlValue::Int(v) => Ok(Some(from_sql_int(*v))),
            other => Err(Self::wrong(i, "an integer or NULL", other)),
        }
    }

    /// Column `i` as text.
    pub fn text(&self, i: usize) -> Result<String, StoreError> {
        match self.column(i, "text")? {
            SqlValue::Text(v) => Ok(v.clone()),
            other => Err(Self::wrong(i, "text", other)),
        }
    }

    /// Column `i` as bytes.
    pub fn bytes(&self, i: usize) -> Result<&[u8], StoreError> {
        match self.column(i, "bytes")? {
            SqlValue::Bytes(v) => Ok(v),
            other => Err(Self::wrong(i, "bytes", other)),
        }
    }
}

/// One statement and its parameters (`?1` is `params[0]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The text, in the shared dialect (see the module header).
    pub sql: String,
    /// The values of `?1`, `?2`, ...
    pub params: Vec<SqlValue>,
}

impl Statement {
    /// A statement of `sql` with `params`.
    pub fn new(sql: impl Into<String>, params: Vec<SqlValue>) -> Self {
        Self {
            sql: sql.into(),
            params,
        }
    }
}

/// What a statement of a [`HistorySql::write`] did: the rows it changed, and the rows its
/// `RETURNING` clause gave back (none without one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// Rows inserted, updated or deleted.
    pub changed: u64,
    /// Rows given back.
    pub returned: Vec<Row>,
}

/// A history database: SQLite beside sled, or PostgreSQL.
pub trait HistorySql: Send + Sync {
    /// The backend's name in messages and `/v1/health` (`sqlite`, `postgres`).
    fn backend(&self) -> &'static str;
    /// Runs `statements` in one transaction: all of them or none.
    fn write(&self, statements: Vec<Statement>) -> Result<Vec<Written>, StoreError>;
    /// Runs one reading statement.
    fn read(&self, statement: Statement) -> Result<Vec<Row>, StoreError>;
    /// Makes the sequence numbers generated next follow the highest written (after rows
    /// were copied in with their own numbers).
    fn renumber_after_copy(&self) -> Result<(), StoreError>;
    /// Makes what was written durable now (after a bulk copy).
    fn sync_now(&self) -> Result<(), StoreError>;
    /// Bytes the database takes on this machine's disk (0 for a server's).
    fn bytes_on_disk(&self) -> u64;
    /// Gives the space deleted rows freed back to the file system; returns the bytes.
    fn release_free_space(&self) -> Result<u64, StoreError>;
}

/// Both databases store integers as i64; every id and time here fits (a `u64::MAX` bound
/// saturates).
pub fn sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The reverse of [`sql_int`] (a negative value, never written, reads as 0).
pub fn from_sql_int(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// [`sql_int`] as a bound value.
pub fn int(v: u64) -> SqlValue {
    SqlValue::Int(sql_int(v))
}
