//! The schema migrations in `sql/`, embedded in the binary so it needs no files
//! at run time, and the runner that applies them. Files are numbered and
//! append-only: a change to the schema is a new file, never an edit.
//! Only `PgStore` (and `assistant-runtime migrate` through it) calls `apply`.

use tokio_postgres::Client;

/// One numbered file of `sql/`.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    pub version: i32,
    /// The file name in `sql/`, recorded beside the version.
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in the order they apply. A new file of `sql/` is a new
/// line here; the test at the foot of this file fails until it is added.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init.sql",
        sql: include_str!("../../sql/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_session_version.sql",
        sql: include_str!("../../sql/0002_session_version.sql"),
    },
    Migration {
        version: 3,
        name: "0003_session_owner.sql",
        sql: include_str!("../../sql/0003_session_owner.sql"),
    },
    Migration {
        version: 4,
        name: "0004_lean_turn_writes.sql",
        sql: include_str!("../../sql/0004_lean_turn_writes.sql"),
    },
    Migration {
        version: 5,
        name: "0005_inbox.sql",
        sql: include_str!("../../sql/0005_inbox.sql"),
    },
    Migration {
        version: 6,
        name: "0006_traces.sql",
        sql: include_str!("../../sql/0006_traces.sql"),
    },
];

/// The advisory lock key that serialises migrations across processes
/// (an arbitrary constant: the ASCII of "ar-migr" read as a number).
const MIGRATION_LOCK_KEY: i64 = 0x61_72_2d_6d_69_67_72;

/// The release that applies a migration, recorded beside it so that a
/// refusal can name the binary that went ahead.
const BINARY_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The tables (and the free-standing sequence) of the layout before the
/// runtime had a schema of its own, all in `public`; with the migration
/// that made a table, when it is a later one (moved only if that migration
/// is recorded there: a binary run with `DATABASE__SCHEMA=public` made it).
/// `schema_migrations` goes last: the others' check reads it in `public`.
const LEGACY_RELATIONS: [(&str, &str, Option<i32>); 6] = [
    ("TABLE", "sessions", None),
    ("TABLE", "messages", None),
    ("SEQUENCE", "session_versions", None),
    ("TABLE", "inbox", Some(5)),
    ("TABLE", "traces", Some(6)),
    ("TABLE", "schema_migrations", None),
];

/// Why migrating did not happen.
#[derive(Debug)]
pub enum MigrationError {
    /// The database answered with an error (or did not answer).
    Database(tokio_postgres::Error),
    /// The database is not one this binary may run on: migrated by a newer
    /// binary, or an applied migration differs from this binary's file.
    Refused(String),
}

impl std::fmt::Display for MigrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MigrationError::Database(error) => write!(f, "{error}"),
            MigrationError::Refused(why) => f.write_str(why),
        }
    }
}

impl From<tokio_postgres::Error> for MigrationError {
    fn from(error: tokio_postgres::Error) -> MigrationError {
        MigrationError::Database(error)
    }
}

/// A migration as recorded in `schema_migrations`.
struct Applied {
    version: i32,
    name: String,
    checksum: Option<String>,
    applied_by: Option<String>,
}

/// Applies the migrations this database has not seen in `schema` (which the
/// connection's `search_path` names), returning their versions.
///
/// Everything runs in one transaction holding `pg_advisory_xact_lock`, so two
/// processes starting together take turns (the second finds nothing to do),
/// and a failing file leaves the schema as it was (Postgres DDL is
/// transactional). The lock ends with the transaction, even on error.
///
/// Before anything is applied, the recorded migrations are checked: one this
/// binary does not know (a newer binary's) or one whose SHA-256 differs from
/// the embedded file refuses the database. The tables of the layout before
/// `schema` existed are moved into it on first sight (`move_legacy_layout`).
pub async fn apply(client: &mut Client, schema: &str) -> Result<Vec<i32>, MigrationError> {
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    // Quiet the "already exists, skipping" notice of every start after the first.
    transaction
        .batch_execute("SET LOCAL client_min_messages = warning")
        .await?;
    // Created only when missing: `CREATE SCHEMA IF NOT EXISTS` checks the
    // CREATE privilege on the database first, which a runtime user may lack
    // when an operator made the schema for it. `schema` is a plain
    // identifier (`valid_schema_name`), safe unquoted.
    let schema_exists: bool = transaction
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .await?
        .get(0);
    if !schema_exists {
        transaction
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await?;
    }
    move_legacy_layout(&transaction, schema).await?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version    integer PRIMARY KEY,
                 name       text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );
             ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text;
             ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS applied_by text;",
        )
        .await?;
    let applied: Vec<Applied> = transaction
        .query(
            "SELECT version, name, checksum, applied_by FROM schema_migrations ORDER BY version",
            &[],
        )
        .await?
        .iter()
        .map(|row| Applied {
            version: row.get(0),
            name: row.get(1),
            checksum: row.get(2),
            applied_by: row.get(3),
        })
        .collect();
    check_known(&applied)?;
    for record in &applied {
        let Some(migration) = MIGRATIONS.iter().find(|m| m.version == record.version) else {
            continue;
        };
        let expected: String = transaction
            .query_one(CHECKSUM_SQL, &[&migration.sql])
            .await?
            .get(0);
        match &record.checksum {
            Some(recorded) if *recorded != expected => {
                return Err(MigrationError::Refused(format!(
                    "migration {} ({}) was applied with checksum {recorded}, but this binary's file has {expected}: \
                     an applied migration was edited; restore the file (migrations are append-only)",
                    record.version, record.name
                )));
            }
            Some(_) => {}
            // Recorded by a binary from before checksums: its file is taken
            // as the one applied.
            None => {
                transaction
                    .execute(
                        "UPDATE schema_migrations SET checksum = $2 WHERE version = $1",
                        &[&record.version, &expected],
                    )
                    .await?;
            }
        }
    }
    let mut newly_applied = Vec::new();
    for migration in MIGRATIONS {
        if applied
            .iter()
            .any(|record| record.version == migration.version)
        {
            continue;
        }
        transaction.batch_execute(migration.sql).await?;
        transaction
            .execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_by) \
                 VALUES ($1, $2, encode(sha256(convert_to($3::text, 'UTF8')), 'hex'), $4)",
                &[
                    &migration.version,
                    &migration.name,
                    &migration.sql,
                    &BINARY_VERSION,
                ],
            )
            .await?;
        newly_applied.push(migration.version);
    }
    transaction.commit().await?;
    Ok(newly_applied)
}

/// The SHA-256 of a migration's text, computed by the server (PostgreSQL 11+),
/// so the runtime needs no hashing crate.
const CHECKSUM_SQL: &str = "SELECT encode(sha256(convert_to($1::text, 'UTF8')), 'hex')";

/// Refuses a database that has a migration this binary does not know.
fn check_known(applied: &[Applied]) -> Result<(), MigrationError> {
    let newest_known = MIGRATIONS.last().map_or(0, |migration| migration.version);
    let Some(unknown) = applied
        .iter()
        .filter(|record| !MIGRATIONS.iter().any(|m| m.version == record.version))
        .max_by_key(|record| record.version)
    else {
        return Ok(());
    };
    Err(MigrationError::Refused(format!(
        "the database was migrated by a newer binary: it has migration {} ({}, applied by assistant-runtime {}), \
         and this binary (assistant-runtime {BINARY_VERSION}) knows migrations up to {newest_known}; \
         run the newer binary, or restore a backup taken before it",
        unknown.version,
        unknown.name,
        unknown.applied_by.as_deref().unwrap_or("before 0.1.0"),
    )))
}

/// Moves the runtime's tables of the layout before `DATABASE__SCHEMA` from
/// `public` into `schema`, once: when `schema` has no `schema_migrations`
/// yet and `public` holds ours (an integer `version` beside a `name`, and a
/// `sessions` table). Another application's `schema_migrations` (Rails',
/// with a text version) is left alone.
async fn move_legacy_layout(
    transaction: &tokio_postgres::Transaction<'_>,
    schema: &str,
) -> Result<(), MigrationError> {
    if schema == "public" {
        return Ok(());
    }
    let legacy: bool = transaction
        .query_one(
            "SELECT to_regclass($1 || '.schema_migrations') IS NULL
                AND to_regclass('public.sessions') IS NOT NULL
                AND to_regclass('public.messages') IS NOT NULL
                AND EXISTS (SELECT 1 FROM information_schema.columns
                            WHERE table_schema = 'public' AND table_name = 'schema_migrations'
                              AND column_name = 'version' AND data_type = 'integer')
                AND EXISTS (SELECT 1 FROM information_schema.columns
                            WHERE table_schema = 'public' AND table_name = 'schema_migrations'
                              AND column_name = 'name')",
            &[&schema],
        )
        .await?
        .get(0);
    if !legacy {
        return Ok(());
    }
    for (kind, name, made_by) in LEGACY_RELATIONS {
        let exists: bool = transaction
            .query_one(
                "SELECT to_regclass('public.' || $1) IS NOT NULL
                    AND ($2::int4 IS NULL
                         OR EXISTS (SELECT 1 FROM public.schema_migrations WHERE version = $2))",
                &[&name, &made_by],
            )
            .await?
            .get(0);
        if exists {
            transaction
                .batch_execute(&format!("ALTER {kind} public.{name} SET SCHEMA {schema}"))
                .await?;
        }
    }
    log::info!("moved the runtime's tables from schema public into {schema}");
    Ok(())
}

/// Which embedded migrations a database has and which it still lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationStatus {
    pub applied: Vec<i32>,
    pub pending: Vec<i32>,
}

/// Reads the migration state without changing anything (`doctor`): a
/// database without `schema_migrations` has every migration pending.
pub async fn status(client: &Client) -> Result<MigrationStatus, tokio_postgres::Error> {
    let exists: bool = client
        .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
        .await?
        .get(0);
    let applied: Vec<i32> = if exists {
        client
            .query(
                "SELECT version FROM schema_migrations ORDER BY version",
                &[],
            )
            .await?
            .iter()
            .filter_map(|row| row.try_get(0).ok())
            .collect()
    } else {
        Vec::new()
    };
    let pending = MIGRATIONS
        .iter()
        .map(|migration| migration.version)
        .filter(|version| !applied.contains(version))
        .collect();
    Ok(MigrationStatus { applied, pending })
}

/// Whether `name` may be a `DATABASE__SCHEMA`: lower-case letters, digits
/// and `_`, not starting with a digit, at most 63 bytes. Such a name needs no
/// quoting in SQL or in a connection's `search_path` option.
pub fn valid_schema_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|first| first.is_ascii_lowercase() || first == '_');
    first_ok
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_migrations_match_the_sql_folder() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/sql");
        let mut files: Vec<(String, String)> = std::fs::read_dir(folder)
            .expect("sql/ exists")
            .map(|entry| entry.expect("readable entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
            .map(|path| {
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                (name, std::fs::read_to_string(&path).expect("readable file"))
            })
            .collect();
        files.sort();
        let embedded: Vec<(String, String)> = MIGRATIONS
            .iter()
            .map(|migration| (migration.name.to_string(), migration.sql.to_string()))
            .collect();
        assert_eq!(embedded, files);
    }

    /// Versions rise strictly but may skip a number: changes developed in
    /// parallel take their numbers ahead of merging, and the runner applies
    /// whatever a database has not seen, in order.
    #[test]
    fn versions_are_the_file_numbers_in_order() {
        let mut previous = 0;
        for migration in MIGRATIONS {
            assert!(migration.version > previous, "{}", migration.name);
            previous = migration.version;
            let number: i32 = migration.name[..4].parse().expect("a 4-digit prefix");
            assert_eq!(number, migration.version, "{}", migration.name);
        }
    }
}
