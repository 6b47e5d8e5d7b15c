import { existsSync } from 'node:fs'
import { quoteName } from '../contract/quote-name.js'
import * as path from 'node:path'
import { pathToFileURL } from 'node:url'
import { Data, Effect } from 'effect'
import { type DefinedTool, hasDefinedToolMark, isDefinedTool } from './define-tool.js'
import { catalogueToolOf } from './module-tool.js'
import { BUILTIN_TOOLS } from './tool-catalogue.js'
import type { CallableTool } from './tool-definition.js'
import { oneLine } from './tool-input.js'

/*
 * A task file's `toolModules` (docs/tools.md, "Tool modules"): ES modules whose `defineTool`
 * exports become tools of the run. Their paths are relative to the task file.
 */

/**
 * A tool module that gives no tools: it cannot be imported (a throw, a syntax error, a missing
 * file, a tool whose `defineTool` failed), it exports none, or one of its tools has a name taken.
 * `message` is one line starting with `field` and the path as written:
 * `toolModules.0 (./tools.mjs): cannot load: <why>`.
 *
 * @example
 * const tools = yield* loadToolModules(task.toolModules, baseDir).pipe(
 *   Effect.mapError((error) => new ContractError({ message: error.message, field: error.field }))
 * )
 */
export class ToolModuleError extends Data.TaggedError('ToolModuleError')<{
  readonly message: string
  /** `toolModules.<index>`. */
  readonly field: string
  /** The module's path as written in the task file. */
  readonly module: string
}> {}

/** Where a tool came from, for messages: `export lookup of toolModules.0 (./tools.mjs)`. */
interface Place {
  readonly field: string
  readonly module: string
  readonly exportName: string
}

const placeText = (place: Place): string => `export ${place.exportName} of ${place.field} (${place.module})`

/** One module's namespace, imported once per process per absolute path (docs/tools.md). */
const imported = new Map<string, Promise<Readonly<Record<string, unknown>>>>()

const importOnce = (absolute: string): Promise<Readonly<Record<string, unknown>>> => {
  let loading = imported.get(absolute)
  if (loading === undefined) {
    loading = import(pathToFileURL(absolute).href) as Promise<Readonly<Record<string, unknown>>>
    // A module that could not be imported is tried again next time (it may have been fixed or created since).
    loading.catch(() => imported.delete(absolute))
    imported.set(absolute, loading)
  }
  return loading
}

/**
 * `defineTool` calls that throw while the module is imported: their message already names the
 * tool. Recognised by tag and fields, so that one thrown by another copy of the package is too.
 */
const definitionProblem = (error: unknown): string | undefined =>
  typeof error === 'object' && error !== null && '_tag' in error && error._tag === 'ToolDefinitionError' && 'tool' in error && 'problem' in error
    ? `tool ${quoteName(String(error.tool))}: ${String(error.problem)}`
    : undefined

/** Every `defineTool` value a module exports, named or default, alone or in an array, by export name. */
const exportedTools = (namespace: Readonly<Record<string, unknown>>): { tools: Array<[string, DefinedTool]>; foreign: string | undefined } => {
  const tools: Array<[string, DefinedTool]> = []
  let foreign: string | undefined
  const take = (exportName: string, value: unknown): void => {
    if (isDefinedTool(value)) tools.push([exportName, value])
    else if (hasDefinedToolMark(value)) foreign ??= exportName
  }
  // By export name, as Node lists a module namespace; a loader that lists them otherwise changes nothing.
  for (const exportName of Object.keys(namespace).sort()) {
    const value = namespace[exportName]
    if (Array.isArray(value)) for (const [index, item] of value.entries()) take(`${exportName}[${index}]`, item)
    else take(exportName, value)
  }
  return { tools, foreign }
}

const BUILTIN_NAMES = new Set(BUILTIN_TOOLS.map((tool) => tool.name))

/**
 * The tools of a task file's `toolModules`, as catalogue entries (source `module`), in the order
 * of the modules and, within a module, of its export names. `paths` are relative to `baseDir`
 * (the task file's folder). The same `defineTool` value exported twice (named and default, or by
 * two modules) is one tool; two different tools of one name, or a tool named like a built-in,
 * fail naming both places. Fails with the first `ToolModuleError` met.
 *
 * @example
 * const tools = yield* loadToolModules(['./tools/tickets.mjs'], path.dirname(taskFile))
 * const catalogue = makeToolCatalogue([...BUILTIN_TOOLS, ...tools])
 */
export const loadToolModules = (paths: ReadonlyArray<string>, baseDir: string): Effect.Effect<ReadonlyArray<CallableTool>, ToolModuleError> =>
  Effect.gen(function* () {
    const byName = new Map<string, { readonly tool: DefinedTool; readonly place: Place }>()
    const tools: Array<CallableTool> = []
    for (const [index, modulePath] of paths.entries()) {
      const field = `toolModules.${index}`
      const fail = (problem: string) => new ToolModuleError({ message: `${field} (${modulePath}): ${problem}`, field, module: modulePath })
      const absolute = path.resolve(baseDir, modulePath)
      const namespace = yield* Effect.tryPromise({
        try: () => importOnce(absolute),
        // Node's own message for a missing module names the importer, which here is agentvisor itself.
        catch: (error) => fail(definitionProblem(error) ?? `cannot load: ${existsSync(absolute) ? oneLine(error) : `no such file ${absolute}`}`)
      })
      const found = exportedTools(namespace)
      if (found.foreign !== undefined) return yield* fail(`export ${found.foreign} is a tool of another agentvisor version`)
      if (found.tools.length === 0) return yield* fail('exports no tools (defineTool values, or arrays of them)')
      for (const [exportName, tool] of found.tools) {
        const place: Place = { field, module: modulePath, exportName }
        if (BUILTIN_NAMES.has(tool.name)) return yield* fail(`tool ${quoteName(tool.name)} (export ${exportName}) has the name of a built-in tool`)
        const known = byName.get(tool.name)
        if (known !== undefined) {
          if (known.tool === tool) continue
          return yield* fail(`two tools are named ${quoteName(tool.name)}: ${placeText(known.place)} and ${placeText(place)}`)
        }
        byName.set(tool.name, { tool, place })
        tools.push(catalogueToolOf(tool))
      }
    }
    return tools
  })
