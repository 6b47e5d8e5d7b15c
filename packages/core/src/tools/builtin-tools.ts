import { execTool } from './exec-tool.js'
import { listDirTool, readFileTool, writeFileTool } from './file-tools.js'
import {
  decodeArgumentsObject,
  decodeExecArgs,
  decodeListDirArgs,
  decodeReadFileArgs,
  decodeWriteFileArgs,
  type ExecArgs,
  type ListDirArgs,
  type ReadFileArgs,
  type WriteFileArgs
} from './tool-arguments.js'
import type { CallableTool, ChildRunTool, ToolAct, ToolArguments } from './tool-definition.js'
import { EXEC_SPEC, LIST_DIR_SPEC, READ_FILE_SPEC, SPAWN_CHILD_SPEC, WRITE_FILE_SPEC } from './tool-specs.js'

/*
 * The built-in tools (docs/task-file.md, "Tools offered to the model"), one definition each.
 * Their effect classes are what the journal has always done with them (docs/durability.md):
 * the file reads are not journalled; a `write_file` interrupted after it started is written
 * again (the same content, so no harm); an interrupted `exec` waits for an operator.
 */

const stringAct = (act: ToolAct['act'], value: unknown): ToolAct | undefined => (typeof value === 'string' ? { act, target: value } : undefined)

/** `read_file {path}`: the file's text, capped at 100 KiB. */
export const readFileDefinition: CallableTool<ReadFileArgs> = {
  name: 'read_file',
  source: 'builtin',
  spec: READ_FILE_SPEC,
  effect: 'read',
  runsAs: 'call',
  decode: decodeReadFileArgs,
  policy: (fields) => stringAct('read', fields['path']),
  run: (args, ctx) => readFileTool(ctx.workspace, args)
}

/** `write_file {path, content}`: replaces the file whole, creating missing folders. */
export const writeFileDefinition: CallableTool<WriteFileArgs> = {
  name: 'write_file',
  source: 'builtin',
  spec: WRITE_FILE_SPEC,
  effect: 'idempotent',
  runsAs: 'call',
  decode: decodeWriteFileArgs,
  policy: (fields) => stringAct('write', fields['path']),
  run: (args, ctx) => writeFileTool(ctx.workspace, args)
}

/** `list_dir {path?}`: the folder's entries; the workspace root when `path` is omitted. */
export const listDirDefinition: CallableTool<ListDirArgs> = {
  name: 'list_dir',
  source: 'builtin',
  spec: LIST_DIR_SPEC,
  effect: 'read',
  runsAs: 'call',
  decode: decodeListDirArgs,
  policy: (fields) => stringAct('read', fields['path'] ?? '.'),
  run: (args, ctx) => listDirTool(ctx.workspace, args)
}

/** `exec {command, timeoutMs?}`: a shell command in the workspace, with the run's command settings. */
export const execDefinition: CallableTool<ExecArgs> = {
  name: 'exec',
  source: 'builtin',
  spec: EXEC_SPEC,
  effect: 'effect',
  runsAs: 'call',
  decode: decodeExecArgs,
  policy: (fields) => stringAct('exec', fields['command']),
  run: (args, ctx) => execTool(ctx.workspace, args, ctx.commands)
}

/**
 * `spawn_child {goal, verify?, limits?, workspace?}` (docs/nats.md). Its arguments are checked
 * against the parent's contract when the child is made (actors/src/protocol/child-contract.ts in the
 * actors package); here they only need to be a JSON object. The policy does not judge the call
 * by an act: the child runs under the parent's policy, and a `verify.command` it asks for is
 * judged as an `exec` when the child is made.
 */
export const spawnChildDefinition: ChildRunTool<ToolArguments> = {
  name: 'spawn_child',
  source: 'builtin',
  spec: SPAWN_CHILD_SPEC,
  effect: 'idempotent',
  runsAs: 'child-run',
  decode: decodeArgumentsObject,
  policy: () => undefined
}
