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
        version: 9,
        name: "0009_lean_turn_writes.sql",
        sql: include_str!("../../sql/0009_lean_turn_writes.sql"),
    },
];

/// The advisory lock key that serialises migrations across processes
/// (an arbitrary constant: the ASCII of "ar-migr" read as a number).
const MIGRATION_LOCK_KEY: i64 = 0x61_72_2d_6d_69_67_72;

/// Applies the migrations this database has not seen, returning their versions.
///
/// Everything runs in one transaction holding `pg_advisory_xact_lock`, so two
/// processes starting together take turns (the second finds nothing to do),
/// and a failing file leaves the schema as it was (Postgres DDL is
/// transactional). The lock ends with the transaction, even on error.
pub async fn apply(client: &mut Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    // Quiet the "already exists, skipping" notice of every start after the first.
    transaction
        .batch_execute("SET LOCAL client_min_messages = warning")
        .await?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version    integer PRIMARY KEY,
                 name       text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await?;
    let applied: Vec<i32> = transaction
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut newly_applied = Vec::new();
    for migration in MIGRATIONS {
        if applied.contains(&migration.version) {
            continue;
        }
        transaction.batch_execute(migration.sql).await?;
        transaction
            .execute(
                "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                &[&migration.version, &migration.name],
            )
            .await?;
        newly_applied.push(migration.version);
    }
    transaction.commit().await?;
    Ok(newly_applied)
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
            .map(|row| row.get(0))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_migrations_match_the_sql_folder() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../sql");
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
