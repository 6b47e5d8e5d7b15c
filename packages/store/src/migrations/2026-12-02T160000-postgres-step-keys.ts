import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema as it was on 2026-12-02. Later changes are new migrations.
//
// PostgreSQL only: the rows a step writes (`attempts`, `steps`, `journal_entries`) no longer carry
// foreign keys to `runs`. Nearly all of them are written by the commit functions
// (agentvisor_commit, agentvisor_commit_deferred), whose fence reads or updates the run's row
// under its lease token, locked, in the same statement, before they insert anything: the run
// exists, and nobody deletes it until the commit is done. The keys checked it again, each with a
// trigger and a probe of `runs`, three a step: 15-30 µs of the server's 150-180 a step, measured
// (docs/benchmarks.md, "The hot path"). The store's other writers of these tables check the run
// themselves, as a key would (repositories/run-rows.ts); what the keys' ON DELETE CASCADE did, a
// trigger on `runs` does. On SQLite this migration does nothing: a step's rows are one table
// there (run_log), whose key stays.

const TABLES = ['attempts', 'steps', 'journal_entries'] as const

const DROP_KEYS = `
do $$
declare k record;
begin
  for k in
    select c.conrelid::regclass as tab, c.conname as name
      from pg_constraint c
     where c.contype = 'f' and c.confrelid = 'runs'::regclass
       and c.conrelid in (${TABLES.map((t) => `'${t}'::regclass`).join(', ')})
  loop
    execute format('alter table %s drop constraint %I', k.tab, k.name);
  end loop;
end
$$`

const DELETE_ROWS = `
create function agentvisor_delete_step_rows() returns trigger language plpgsql as $fn$
begin
  delete from attempts where run_id = old.id;
  delete from steps where run_id = old.id;
  delete from journal_entries where run_id = old.id;
  return old;
end
$fn$`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql.raw(DROP_KEYS).execute(db)
  await sql.raw(DELETE_ROWS).execute(db)
  await sql.raw('create trigger runs_delete_step_rows before delete on runs for each row execute function agentvisor_delete_step_rows()').execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql.raw('drop trigger runs_delete_step_rows on runs').execute(db)
  await sql.raw('drop function agentvisor_delete_step_rows()').execute(db)
  for (const table of TABLES) {
    await sql.raw(`alter table ${table} add constraint ${table}_run_id_fkey foreign key (run_id) references runs (id) on delete cascade`).execute(db)
  }
}
