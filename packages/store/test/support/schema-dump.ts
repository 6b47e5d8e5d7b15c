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

/**
 * Every object of the store's schema in a PostgreSQL database, as the catalogs define it (Kysely's
 * tables left out): tables' columns with their types, domains, defaults and nullability;
 * constraints of tables and domains; indexes; domains and composite types; functions' and views'
 * definitions; triggers. Two stores with equal catalogs behave alike.
 */
export async function postgresCatalog(url: string): Promise<Record<string, unknown[]>> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const rows = async (text: string): Promise<unknown[]> => (await client.query(text)).rows
  try {
    const { columns, constraints, indexes } = await postgresSchema(url)
    return {
      columns,
      columnTypes: await rows(`
        select table_name, column_name, udt_name, domain_name, character_maximum_length, numeric_precision
        from information_schema.columns
        where table_schema = current_schema() and table_name not like 'kysely_%'
        order by table_name::text collate "C", ordinal_position`),
      constraints,
      domainConstraints: await rows(`
        select t.typname as domain, c.conname as name, pg_get_constraintdef(c.oid) as definition
        from pg_constraint c join pg_type t on t.oid = c.contypid
        where c.connamespace = current_schema()::regnamespace
        order by t.typname::text collate "C", c.conname::text collate "C"`),
      indexes,
      types: await rows(`
        select t.typname as name, t.typtype as kind, format_type(t.typbasetype, t.typtypmod) as base, t.typnotnull as not_null,
          t.typdefault as default, co.collname as collation,
          (select string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' order by a.attnum)
             from pg_attribute a where a.attrelid = t.typrelid and a.attnum > 0 and not a.attisdropped) as attributes
        from pg_type t left join pg_collation co on co.oid = t.typcollation
        where t.typnamespace = current_schema()::regnamespace and (t.typtype = 'd' or (t.typtype = 'c' and (select relkind from pg_class where oid = t.typrelid) = 'c'))
        order by t.typname::text collate "C"`),
      functions: await rows(`
        select p.proname as name, pg_get_function_identity_arguments(p.oid) as arguments, pg_get_functiondef(p.oid) as definition
        from pg_proc p where p.pronamespace = current_schema()::regnamespace
        order by p.proname::text collate "C", pg_get_function_identity_arguments(p.oid) collate "C"`),
      triggers: await rows(`
        select c.relname as table_name, t.tgname as name, pg_get_triggerdef(t.oid) as definition
        from pg_trigger t join pg_class c on c.oid = t.tgrelid
        where c.relnamespace = current_schema()::regnamespace and not t.tgisinternal
        order by c.relname::text collate "C", t.tgname::text collate "C"`),
      views: await rows(`
        select c.relname as name, pg_get_viewdef(c.oid) as definition
        from pg_class c where c.relnamespace = current_schema()::regnamespace and c.relkind in ('v', 'm')
        order by c.relname::text collate "C"`),
      sequences: await rows(`
        select sequencename as name, data_type::text as data_type, start_value, increment_by, cycle from pg_sequences
        where schemaname = current_schema() order by sequencename::text collate "C"`)
    }
  } finally {
    await client.end()
  }
}

/**
 * A SQLite store's schema with each object's SQL text normalized (identifiers unquoted,
 * whitespace collapsed), so that two stores compare equal when their objects are the same
 * whatever the layout of the statements that made them; with each table's columns, indexes and
 * keys as SQLite reads them.
 */
export function sqliteNormalizedSchema(file: string): unknown[] {
  const normalize = (text: string | null): string | null =>
    text === null
      ? null
      : text.replaceAll('"', '').replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').replace(/ ,/g, ',').replace(/ ;/g, ';').trim()
  const raw = new BetterSqlite3(file, { readonly: true })
  try {
    return sqliteSchema(file).map((object) => ({
      ...object,
      sql: normalize(object.sql),
      ...(object.type === 'table'
        ? {
            columns: raw.pragma(`table_xinfo("${object.name}")`),
            indexes: raw.pragma(`index_list("${object.name}")`),
            keys: raw.pragma(`foreign_key_list("${object.name}")`)
          }
        : object.type === 'index'
          ? { columns: raw.pragma(`index_xinfo("${object.name}")`) }
          : {})
    }))
  } finally {
    raw.close()
  }
}
