import type { ToolSpec } from '../provider/provider.js'

/** Defaults and caps of the `exec` tool, shared by its spec and its implementation. */
export const EXEC_DEFAULT_TIMEOUT_MS = 120_000
export const EXEC_MAX_TIMEOUT_MS = 600_000
/** How much of a file `read_file` returns before cutting it off. */
export const READ_FILE_MAX_BYTES = 100 * 1024

const pathProperty = (what: string) => ({
  type: 'string',
  description: `${what}, relative to the workspace root (for example "src/index.ts"). Absolute paths and ".." leaving the workspace are refused.`
})

/*
 * What the model is offered for each built-in tool (docs/task-file.md, "Tools offered to the
 * model"): the `spec` of each tool's definition (builtin-tools.ts). The order the model sees them
 * in is the catalogue's (tool-catalogue.ts).
 */

export const READ_FILE_SPEC: ToolSpec = {
  name: 'read_file',
  description: `Read a UTF-8 text file from the workspace. Files larger than ${READ_FILE_MAX_BYTES / 1024} KiB are cut off with a note.`,
  parameters: {
    type: 'object',
    properties: { path: pathProperty('The file to read') },
    required: ['path'],
    additionalProperties: false
  }
}

export const WRITE_FILE_SPEC: ToolSpec = {
  name: 'write_file',
  description:
    'Create or replace a file in the workspace with the given UTF-8 content. Missing parent folders are created. The file is replaced whole, never appended to.',
  parameters: {
    type: 'object',
    properties: {
      path: pathProperty('The file to write'),
      content: { type: 'string', description: 'The complete new content of the file.' }
    },
    required: ['path', 'content'],
    additionalProperties: false
  }
}

export const LIST_DIR_SPEC: ToolSpec = {
  name: 'list_dir',
  description: 'List the entries of a folder in the workspace, sorted by name; folders end with "/".',
  parameters: {
    type: 'object',
    properties: { path: { ...pathProperty('The folder to list'), default: '.' } },
    required: [],
    additionalProperties: false
  }
}

export const EXEC_SPEC: ToolSpec = {
  name: 'exec',
  description: `Run a shell command (/bin/sh -c) in the workspace root, with no input. Returns the exit code, stdout and stderr. The command and everything it starts are killed after timeoutMs (default ${EXEC_DEFAULT_TIMEOUT_MS} ms, at most ${EXEC_MAX_TIMEOUT_MS} ms); background processes do not outlive the call.`,
  parameters: {
    type: 'object',
    properties: {
      command: { type: 'string', description: 'The command line, for example "npm test".' },
      timeoutMs: {
        type: 'integer',
        minimum: 1,
        maximum: EXEC_MAX_TIMEOUT_MS,
        description: `Milliseconds before the command is killed (default ${EXEC_DEFAULT_TIMEOUT_MS}).`
      }
    },
    required: ['command'],
    additionalProperties: false
  }
}

export const SPAWN_CHILD_SPEC: ToolSpec = {
  name: 'spawn_child',
  description:
    'Start a child run: another agent that works on a sub-goal in its own folder (by default a new subfolder of this workspace) with the same providers and policy, and answers with its final result. Several spawn_child calls in one answer run in parallel.',
  parameters: {
    type: 'object',
    properties: {
      goal: { type: 'string', description: 'What the child run must achieve.' },
      verify: {
        type: 'object',
        description:
          'Optional success check, as in the task file: {"fileContains": {"path", "text"}}, {"fileEquals": ...}, {"command": {"run", "exitCode"}}, {"allOf": [...]}. Paths are relative to the child workspace.'
      },
      limits: { type: 'object', description: 'Optional limits {maxSteps, maxRetries, dispatchCeiling, timeoutMs}; never more than this run has.' },
      workspace: { type: 'string', description: 'Optional folder for the child, relative to this workspace.' }
    },
    required: ['goal'],
    additionalProperties: false
  }
}
