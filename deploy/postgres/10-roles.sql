-- sheetsync's PostgreSQL roles, one per service (docs/operating/deployment.md,
-- "PostgreSQL roles"):
--
--   sheetsync_owner     owns the schema and its tables; `sheetsync db upgrade` (migrate)
--   sheetsync_worker    reads and writes rows (the workers, beat's tasks, the CLI); no DDL
--   sheetsync_console   reads; the console's actions are granted by grants.sql
--   sheetsync_exporter  reads, nothing else
--
-- docker-compose.yml mounts this file into the postgres container's
-- /docker-entrypoint-initdb.d/, so PostgreSQL's image runs it once, when the pgdata
-- volume is created: as the bootstrap superuser, in the sheetsync database. The
-- passwords come from the container's environment (POSTGRES_OWNER_PASSWORD,
-- POSTGRES_WORKER_PASSWORD, POSTGRES_CONSOLE_PASSWORD, POSTGRES_EXPORTER_PASSWORD), and
-- none has a default.
--
-- It runs again by hand, as a superuser in a database of sheetsync's own, e.g. on a
-- pgdata volume from before these roles:
--
--   docker compose exec postgres \
--     psql -v ON_ERROR_STOP=1 -U sheetsync -d sheetsync -f /docker-entrypoint-initdb.d/10-roles.sql
--
-- A second run creates nothing twice; it sets each role's password again (a changed
-- password takes effect so), and hands the tables already there (made by another role)
-- to the owner. It takes over every table of the schema public: do not run it in a
-- database that holds another application's tables too.
--
-- The psql variables owner, worker, console and exporter rename the roles
-- (`psql -v worker=...`); grants.sql takes the same ones.

\set ON_ERROR_STOP on

\if :{?owner}
\else
  \set owner sheetsync_owner
\endif
\if :{?worker}
\else
  \set worker sheetsync_worker
\endif
\if :{?console}
\else
  \set console sheetsync_console
\endif
\if :{?exporter}
\else
  \set exporter sheetsync_exporter
\endif

\getenv owner_password POSTGRES_OWNER_PASSWORD
\getenv worker_password POSTGRES_WORKER_PASSWORD
\getenv console_password POSTGRES_CONSOLE_PASSWORD
\getenv exporter_password POSTGRES_EXPORTER_PASSWORD
\if :{?owner_password}
\else
  \set owner_password ''
\endif
\if :{?worker_password}
\else
  \set worker_password ''
\endif
\if :{?console_password}
\else
  \set console_password ''
\endif
\if :{?exporter_password}
\else
  \set exporter_password ''
\endif

-- Every password or nothing: stop, naming the variables that are missing or empty.
SELECT string_agg(name, ', ' ORDER BY n) AS missing_passwords
FROM (VALUES (1, 'POSTGRES_OWNER_PASSWORD', :'owner_password'),
             (2, 'POSTGRES_WORKER_PASSWORD', :'worker_password'),
             (3, 'POSTGRES_CONSOLE_PASSWORD', :'console_password'),
             (4, 'POSTGRES_EXPORTER_PASSWORD', :'exporter_password')) AS given (n, name, value)
WHERE value = '' \gset
\if :{?missing_passwords}
  SELECT set_config('sheetsync.missing_passwords', :'missing_passwords', false) \g /dev/null
  DO $$
  BEGIN
    RAISE EXCEPTION 'set %: the sheetsync database roles'' passwords (no default)',
      current_setting('sheetsync.missing_passwords');
  END
  $$;
\endif

BEGIN;

SELECT format('CREATE ROLE %I', name)
FROM unnest(ARRAY[:'owner', :'worker', :'console', :'exporter']) AS name
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name) \gexec

-- Logins with no other power: none makes roles or databases, and only the owner owns
-- anything.
ALTER ROLE :"owner" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'owner_password';
ALTER ROLE :"worker" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'worker_password';
ALTER ROLE :"console" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'console_password';
ALTER ROLE :"exporter" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'exporter_password';

GRANT CONNECT ON DATABASE :"DBNAME" TO :"owner", :"worker", :"console", :"exporter";

-- The owner owns the schema: only it creates, alters and drops tables there.
ALTER SCHEMA public OWNER TO :"owner";
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO :"worker", :"console", :"exporter";

-- Tables already there (a database migrated before these roles) become the owner's;
-- their sequences and indexes follow them.
SELECT format('ALTER TABLE %I.%I OWNER TO %I', n.nspname, c.relname, :'owner')
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm')
  AND pg_get_userbyid(c.relowner) <> :'owner'
ORDER BY c.relname \gexec
SELECT format('ALTER SEQUENCE %I.%I OWNER TO %I', n.nspname, c.relname, :'owner')
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'S' AND pg_get_userbyid(c.relowner) <> :'owner'
ORDER BY c.relname \gexec

-- Rows, not tables: the worker reads and writes every table's rows (the ledger, dead
-- letters, intents, column maps, links, credentials, answers for `pii rotate`); the
-- console and the exporter read. On the tables there now, and on every table and
-- sequence the owner creates from now on (a later migration's) alike.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO :"worker";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO :"worker";
GRANT SELECT ON ALL TABLES IN SCHEMA public TO :"console", :"exporter";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"worker";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public
  GRANT USAGE, SELECT ON SEQUENCES TO :"worker";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public
  GRANT SELECT ON TABLES TO :"console", :"exporter";

COMMIT;
