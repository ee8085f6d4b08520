-- What some roles may do on some tables only, granted by the owner after each
-- migration (the tables must exist): docker-compose.yml's one-shot `db-grants` runs it
-- as sheetsync_owner after `migrate`, at every `up`. Idempotent. Outside compose, run
-- it after `sheetsync db upgrade`, as the owner:
--
--   psql -v ON_ERROR_STOP=1 -U sheetsync_owner -d sheetsync -f deploy/postgres/grants.sql
--
-- 10-roles.sql grants the rest (and the same to every table a later migration makes).
-- The psql variables worker and console rename the roles, as there.

\set ON_ERROR_STOP on

\if :{?worker}
\else
  \set worker sheetsync_worker
\endif
\if :{?console}
\else
  \set console sheetsync_console
\endif

BEGIN;

-- The console's actions (sheetsync/web/actions.py), the CLI's code: a replay claims
-- dead letters (UPDATE, and SELECT ... FOR UPDATE) and gives back what it could not
-- send; a purge marks them PURGED and records their open answers FAILED in the ledger
-- (an upsert: INSERT ... ON CONFLICT DO UPDATE). It reads everything else.
GRANT UPDATE ON dead_letter TO :"console";
GRANT INSERT, UPDATE ON sheet_transaction TO :"console";
SELECT format('GRANT USAGE ON SEQUENCE %s TO %I',
              pg_get_serial_sequence('sheet_transaction', 'id'), :'console') \gexec

-- Which migrations ran is the owner's business: the worker reads it (the start-up
-- check), nothing more.
REVOKE INSERT, UPDATE, DELETE ON alembic_version FROM :"worker";

COMMIT;
