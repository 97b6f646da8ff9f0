//! The schema of the runtime's tables (`DATABASE__SCHEMA`) and what the
//! migration runner refuses: a database migrated by a newer binary, an
//! applied migration that was edited. A database of the layout before the
//! schema existed (tables in `public`) is moved into the schema on first
//! start and still served; another application's `schema_migrations` in
//! `public` is left alone.

use serde_json::json;

use crate::postgres::{run_binary, server_on, TestDb};
use crate::process::ServerProcess;

/// Whether `schema.table` exists.
async fn exists(db: &TestDb, schema: &str, table: &str) -> bool {
    db.public_client()
        .await
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("{schema}.{table}")],
        )
        .await
        .expect("to_regclass")
        .get(0)
}

/// The highest number among the files of `sql/`.
fn newest_migration() -> u32 {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    std::fs::read_dir(folder)
        .expect("sql/")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.get(..4)?.parse().ok())
        .max()
        .expect("a migration")
}

fn migrate(db: &TestDb, env: &[(&str, &str)]) -> std::process::Output {
    let mut all = vec![("DATABASE_URL", db.url.as_str())];
    all.extend_from_slice(env);
    run_binary(&["migrate"], &all)
}

#[actix_web::test]
async fn the_tables_live_in_their_own_schema_beside_another_applications() {
    let db = TestDb::create().await;
    // A Rails application's table of the same name, with a text version.
    db.public_client()
        .await
        .batch_execute(
            "CREATE TABLE public.schema_migrations (version varchar PRIMARY KEY);
             INSERT INTO public.schema_migrations VALUES ('20240101000000');",
        )
        .await
        .expect("the other application's table");
    let server = server_on(&db.url).await;
    let (status, body) = server
        .app
        .post_chat(&json!({"id": "m1", "session_id": "s1", "content": "hello"}))
        .await;
    assert_eq!(status, 200, "{body}");
    for table in ["schema_migrations", "sessions", "messages"] {
        assert!(exists(&db, "assistant_runtime", table).await, "{table}");
    }
    assert!(!exists(&db, "public", "sessions").await);
    let rails: String = db
        .public_client()
        .await
        .query_one("SELECT version FROM public.schema_migrations", &[])
        .await
        .expect("still there")
        .get(0);
    assert_eq!(rails, "20240101000000");

    let output = migrate(&db, &[("DATABASE__SCHEMA", "tenant_7")]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(exists(&db, "tenant_7", "sessions").await);
}

#[actix_web::test]
async fn a_database_migrated_by_a_newer_binary_is_refused_naming_both_versions() {
    let db = TestDb::create().await;
    let output = migrate(&db, &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    db.client()
        .await
        .batch_execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_by)
             VALUES (999, '0999_future.sql', 'abc', '9.9.9')",
        )
        .await
        .expect("a newer binary's migration");
    for args in [&["migrate"][..], &[][..]] {
        let output = run_binary(
            args,
            &[("DATABASE_URL", db.url.as_str()), ("SERVER__PORT", "0")],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}: {stderr}");
        let newest_known = format!("up to {}", newest_migration());
        for named in [
            "migration 999",
            "0999_future.sql",
            "9.9.9",
            env!("CARGO_PKG_VERSION"),
            newest_known.as_str(),
        ] {
            assert!(
                stderr.contains(named),
                "{args:?}: {named} missing from {stderr}"
            );
        }
    }
}

#[actix_web::test]
async fn an_edited_migration_is_refused() {
    let db = TestDb::create().await;
    let output = migrate(&db, &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let recorded: Option<String> = db
        .client()
        .await
        .query_one(
            "SELECT checksum FROM schema_migrations WHERE version = 2",
            &[],
        )
        .await
        .expect("a row")
        .get(0);
    assert_eq!(recorded.map(|checksum| checksum.len()), Some(64));
    db.client()
        .await
        .batch_execute("UPDATE schema_migrations SET checksum = repeat('0', 64) WHERE version = 2")
        .await
        .expect("alter the record");
    let output = migrate(&db, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("migration 2 (0002_session_version.sql)"),
        "{stderr}"
    );
    assert!(stderr.contains("edited"), "{stderr}");
}

/// A database written by the layout before `DATABASE__SCHEMA` (tables and
/// `schema_migrations` without checksums in `public`) is moved into the
/// schema on the first start, and its conversations are served as before.
#[actix_web::test]
async fn a_database_of_the_previous_layout_is_moved_and_still_served() {
    let db = TestDb::create().await;
    {
        // `public` as the schema writes exactly the old layout's tables.
        let old = ServerProcess::runtime(&[
            ("DATABASE_URL", db.url.as_str()),
            ("DATABASE__SCHEMA", "public"),
        ])
        .await;
        let (status, body) = old
            .app
            .post_chat(&json!({"id": "m1", "session_id": "kept", "content": "hello"}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    db.public_client()
        .await
        .batch_execute(
            "ALTER TABLE public.schema_migrations DROP COLUMN checksum, DROP COLUMN applied_by",
        )
        .await
        .expect("the old schema_migrations");
    assert!(exists(&db, "public", "sessions").await);

    let server = server_on(&db.url).await;
    let session = server.app.session("kept").await;
    assert_eq!(session["turn_number"], 1, "{session}");
    let (status, body) = server
        .app
        .post_chat(&json!({"id": "m2", "session_id": "kept", "content": "again"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["turn_number"], 2, "{body}");
    for table in [
        "schema_migrations",
        "sessions",
        "messages",
        "session_versions",
    ] {
        assert!(exists(&db, "assistant_runtime", table).await, "{table}");
        assert!(
            !exists(&db, "public", table).await,
            "{table} left in public"
        );
    }
    let n_checksums: i64 = db
        .client()
        .await
        .query_one("SELECT count(checksum) FROM schema_migrations", &[])
        .await
        .expect("count")
        .get(0);
    // Every file of sql/ was applied, and each has its checksum now.
    let n_files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
        .expect("sql/")
        .filter(|entry| {
            entry
                .as_ref()
                .is_ok_and(|entry| entry.path().extension().is_some_and(|ext| ext == "sql"))
        })
        .count() as i64;
    assert_eq!(n_checksums, n_files);
}

/// An operator may create the schema for a runtime user that has no CREATE
/// privilege on the database: migrating then works in that schema alone.
#[actix_web::test]
async fn a_schema_made_by_the_operator_serves_a_user_without_create_on_the_database() {
    let db = TestDb::create().await;
    let role = format!("ar_limited_{}", std::process::id());
    let admin = db.public_client().await;
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role};
             CREATE ROLE {role} LOGIN;
             REVOKE CREATE ON DATABASE \"{}\" FROM PUBLIC;
             CREATE SCHEMA assistant_runtime AUTHORIZATION {role};",
            db.url.rsplit('/').next().expect("a database name")
        ))
        .await
        .expect("a limited role and its schema");
    let url = db.url.replacen("postgres@", &format!("{role}@"), 1);
    let output = run_binary(&["migrate"], &[("DATABASE_URL", url.as_str())]);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    // Owned objects go before the role can.
    admin
        .batch_execute(&format!(
            "DROP SCHEMA assistant_runtime CASCADE; DROP ROLE {role};"
        ))
        .await
        .expect("drop the role");
    assert!(output.status.success(), "{stderr}");
}
