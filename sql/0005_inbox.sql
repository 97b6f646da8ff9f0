-- 0005: the inbox (`POST /api/inbox`, `POST /api/assistant/inject` with no
-- session): notes from other systems waiting for the next turn that starts.
--
-- A waiting item has `surfaced = false`. A turn that takes it sets
-- `surfaced` (and `taken_by`, the session) in the same statement that
-- stores the turn's user message (the group commit), so an item is taken
-- exactly when that message is stored: never lost, never delivered twice.
-- `PATCH /api/inbox/{id}/surfaced` sets `surfaced` by hand.
CREATE TABLE IF NOT EXISTS inbox (
    id          text PRIMARY KEY,
    from_agent  text NOT NULL,
    via         text NOT NULL,
    message     text NOT NULL,
    severity    text NOT NULL,
    context     json,
    -- The session the item is for; NULL: the next turn of any session.
    session_id  text,
    surfaced    boolean NOT NULL DEFAULT false,
    taken_by    text,
    -- Insertion order: the listing and draining order.
    seq         bigserial NOT NULL,
    -- Unix milliseconds.
    created_at  bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS inbox_waiting ON inbox (seq) WHERE NOT surfaced;
