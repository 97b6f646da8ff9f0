-- 0003: sessions listed by owner.
--
-- `owner_id` has been a column since 0001; ownership checks now set it on a
-- session's first write (the caller's principal), and `GET /api/sessions`
-- lists only the caller's own sessions, newest first. This index serves that
-- query. (0002 is another change's number; the runner applies files in order
-- and accepts gaps.)

CREATE INDEX IF NOT EXISTS sessions_owner_created_idx
    ON sessions (owner_id, created_at DESC, id);
