-- 0002: a version per session, so that every write is conditional.
--
-- Several processes may serve one session (no sticky routing, a process
-- restarted, a balancer that moved it). Each write names the version its
-- writer loaded and sets a new one: `UPDATE sessions ... WHERE id = $1 AND
-- version = $expected`. A writer holding an old copy changes nothing, reloads
-- and decides again, so a stale copy never overwrites the pending action, the
-- active leaf, the turn count or a stored message (docs/persistence.md).
--
-- Versions come from one sequence rather than counting per row, so they
-- never repeat: a session deleted and created again under the same id does
-- not get a version an old copy of the deleted one could match.

CREATE SEQUENCE session_versions;

ALTER TABLE sessions
    ADD COLUMN version bigint NOT NULL DEFAULT nextval('session_versions');
