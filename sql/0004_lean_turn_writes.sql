-- 0004: a turn's two writes touch fewer index pages.
--
-- A session row is rewritten on every write (its version changes). When no
-- indexed column changes and the new row version fits on the same page,
-- PostgreSQL makes it a HOT update: no new entry in any of the table's
-- indexes. `updated_at` is indexed (the TTL purge), so the store now moves it
-- only when it is over a minute old (the purge allows for that minute), and
-- pages keep room for the next row version.
ALTER TABLE sessions SET (fillfactor = 70);

-- A load reads a session's messages through the primary key
-- (session_id, id) and sorts them by `seq` (a session holds hundreds of
-- messages, not millions), so this second index of every message insert
-- served nothing else.
DROP INDEX IF EXISTS messages_session_seq_idx;

-- The foreign key ran a trigger per message insert (a lookup and a share
-- lock of the session row, an eighth of a write batch's time), to check
-- what the write itself guarantees: messages are inserted only for the
-- sessions the same statement has just written. Deleting a session now
-- deletes its messages in the same transaction (`PgStore::delete`, the TTL
-- purge), after the session row is locked, so no write can add one after.
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_session_id_fkey;
