-- 0006: per-turn debug traces (`GET /api/sessions/{id}/traces`).
--
-- One row per turn, written after the turn when `TRACES__ENABLED` is on.
-- Each write drops the session's oldest rows past the count and byte bounds
-- in the same statement, so the table stays bounded per session. There is no
-- foreign key (as for `messages` since 0004): deleting a session deletes its
-- traces in the same transaction (`PgStore::delete`, the TTL purge).
CREATE TABLE IF NOT EXISTS traces (
    session_id      text NOT NULL,
    -- 32 hex digits, the OpenTelemetry trace id of the turn when exported.
    id              text NOT NULL,
    -- Insertion order: the listing order, and what "oldest" means.
    seq             bigserial NOT NULL,
    events          json NOT NULL,
    -- Bytes of `events` and `user_message`, summed by the byte bound.
    n_bytes         bigint NOT NULL,
    user_message    text,
    is_continuation boolean NOT NULL DEFAULT false,
    duration_ms     double precision NOT NULL,
    -- Unix milliseconds.
    created_at      bigint NOT NULL,
    PRIMARY KEY (session_id, seq)
);
