//! The inbox's SQL (`inbox`, sql/0005_inbox.sql), for `PgStore`. Taking
//! items into a turn is not here: it is part of the group commit's write
//! (`group_commit`, `taking_inbox!`), so it commits with the turn's message.

use deadpool_postgres::Object;
use tokio_postgres::Row;

use super::inbox::{InboxItem, Severity};
use crate::ids::SessionId;

const COLUMNS: &str =
    "id, from_agent, via, message, severity, context::text, session_id, surfaced, created_at";

fn item(row: &Row) -> InboxItem {
    let context: Option<String> = row.get(5);
    let severity: String = row.get(4);
    InboxItem {
        id: row.get(0),
        from_agent: row.get(1),
        via: row.get(2),
        message: row.get(3),
        severity: Severity::parse(&severity).unwrap_or(Severity::Info),
        context: context.and_then(|text| serde_json::from_str(&text).ok()),
        session_id: row.get::<_, Option<String>>(6).map(SessionId::new),
        surfaced: row.get(7),
        created_at: row.get::<_, i64>(8).max(0) as u64,
    }
}

pub(super) async fn add(client: &Object, item: &InboxItem) -> Result<(), tokio_postgres::Error> {
    let statement = client
        .prepare_cached(
            "INSERT INTO inbox (id, from_agent, via, message, severity, context, session_id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6::text::json, $7, $8)",
        )
        .await?;
    let context = item.context.as_ref().map(|context| context.to_string());
    client
        .execute(
            &statement,
            &[
                &item.id,
                &item.from_agent,
                &item.via,
                &item.message,
                &item.severity.as_str(),
                &context,
                &item.session_id.as_ref().map(|id| id.as_str()),
                &(item.created_at as i64),
            ],
        )
        .await?;
    Ok(())
}

pub(super) async fn list(
    client: &Object,
    surfaced: Option<bool>,
    limit: u32,
    offset: u32,
) -> Result<Vec<InboxItem>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM inbox WHERE $1::bool IS NULL OR surfaced = $1
             ORDER BY seq LIMIT $2 OFFSET $3"
        ))
        .await?;
    let rows = client
        .query(&statement, &[&surfaced, &(limit as i64), &(offset as i64)])
        .await?;
    Ok(rows.iter().map(item).collect())
}

pub(super) async fn mark_surfaced(
    client: &Object,
    id: &str,
) -> Result<Option<InboxItem>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached(&format!(
            "UPDATE inbox SET surfaced = true WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client.query_opt(&statement, &[&id]).await?;
    Ok(row.as_ref().map(item))
}

pub(super) async fn most_recent(client: &Object) -> Result<Option<String>, tokio_postgres::Error> {
    let statement = client
        .prepare_cached("SELECT id FROM sessions ORDER BY updated_at DESC, created_at DESC LIMIT 1")
        .await?;
    let row = client.query_opt(&statement, &[]).await?;
    Ok(row.map(|row| row.get(0)))
}
