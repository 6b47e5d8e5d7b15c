import BetterSqlite3 from 'better-sqlite3'
import pg from 'pg'

/** One schema object as SQLite stores it: its DDL, exactly as the migrations produced it. */
export interface SqliteObject {
  readonly type: string
  readonly name: string
  readonly tbl_name: string
  readonly sql: string | null
}

/** The store's schema in a SQLite file (Kysely's own bookkeeping tables left out). */
export function sqliteSchema(file: string): SqliteObject[] {
  const raw = new BetterSqlite3(file, { readonly: true })
  try {
    return raw
      .prepare("select type, name, tbl_name, sql from sqlite_master where name not like 'sqlite_%' and tbl_name not like 'kysely_%' order by type, name")
      .all() as SqliteObject[]
  } finally {
    raw.close()
  }
}

/** The store's schema in a PostgreSQL database: columns, constraints and indexes (Kysely's tables left out). */
export async function postgresSchema(url: string): Promise<{ columns: unknown[]; constraints: unknown[]; indexes: unknown[] }> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const columns = await client.query(`
      select table_name, column_name, data_type, is_nullable, column_default, collation_name, is_identity, identity_generation
      from information_schema.columns
      where table_schema = current_schema() and table_name not like 'kysely_%'
      order by table_name::text collate "C", ordinal_position`)
    const constraints = await client.query(`
      select conrelid::regclass::text as table_name, conname as name, pg_get_constraintdef(oid) as definition
      from pg_constraint
      -- Keys, foreign keys and checks: PostgreSQL 18 also lists NOT NULL here, which the columns already say.
      where connamespace = current_schema()::regnamespace and conrelid::regclass::text not like 'kysely_%' and contype in ('p', 'u', 'f', 'c')
      order by conrelid::regclass::text collate "C", conname::text collate "C"`)
    const indexes = await client.query(`
      select tablename as table_name, indexname as name, indexdef as definition
      from pg_indexes
      where schemaname = current_schema() and tablename not like 'kysely_%'
      order by tablename::text collate "C", indexname::text collate "C"`)
    return { columns: columns.rows, constraints: constraints.rows, indexes: indexes.rows }
  } finally {
    await client.end()
  }
}
