-- 0001: sessions and their messages.
--
-- JSON columns are `json`, not `jsonb`, on purpose: `json` keeps the text as
-- written, so host-owned keys (tool arguments, view data) come back in the
-- order the host or model sent them. Replayed transcripts and re-rendered host
-- contexts stay byte for byte stable, which the provider's prompt cache needs.
-- `jsonb` would sort the keys.

CREATE TABLE sessions (
    id             text PRIMARY KEY,
    owner_id       text,
    title          text,
    -- Unix milliseconds, as in `SessionRecord.created_at`.
    created_at     bigint NOT NULL,
    -- Set by the store on every write; the TTL purge reads it.
    updated_at     timestamptz NOT NULL DEFAULT now(),
    turn_number    integer NOT NULL DEFAULT 0,
    active_leaf    text,
    host_context   json,
    -- The host action the session waits for (`PendingAction`), or NULL.
    -- Acceptance is a conditional UPDATE on `pending_action->>'tool_call_id'`.
    pending_action json
);

CREATE INDEX sessions_created_at_idx ON sessions (created_at DESC, id);
CREATE INDEX sessions_updated_at_idx ON sessions (updated_at);

CREATE TABLE messages (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id         text NOT NULL,
    parent_id  text,
    role       text NOT NULL,
    -- The whole serialized `Message`; the columns beside it are for queries.
    body       json NOT NULL,
    created_at bigint NOT NULL,
    -- Insertion order, kept on update, so a load returns parents before children.
    seq        bigserial NOT NULL,
    PRIMARY KEY (session_id, id)
);

CREATE INDEX messages_session_seq_idx ON messages (session_id, seq);
