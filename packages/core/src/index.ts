export * from './errors.js'
export * from './provider/provider.js'
export * from './provider/http-error.js'
export * from './secrets/index.js'
export { ScriptedStep, ScriptedToolCall, ScriptedError, SCRIPT_EXHAUSTED_TEXT } from './provider/scripted-step.js'
export * from './contract/task-contract.js'
export * from './contract/task-shape.js'
export * from './contract/contract-fields.js'
export * from './contract/agent-spec.js'
export * from './contract/output-schema.js'
export { describeViolations, type JsonSchemaCheck, type SchemaViolation } from './schema/json-schema-check.js'
export { checkedStoredContract } from './contract/contract-check.js'
export * from './contract/task-file.js'
export * from './contract/nesting.js'
export * from './contract/quote-name.js'
export { TOOL_SCHEMA_BOUNDS, toolSchemaOutOfBounds } from './schema/schema-bounds.js'
export * from './provider/retry-policy.js'
export * from './provider/openai.js'
export * from './provider/anthropic.js'
export * from './provider/make-provider.js'
export { unsetApiKeys, type UnsetKeys } from './provider/api-keys.js'
export * from './tools/workspace.js'
export { makeRootHandle, type RootHandle, withRootHandle } from './tools/root-handle.js'
export * from './tools/exec.js'
export * from './tools/tools.js'
export type { ToolOutcome } from './tools/tool-outcome.js'
export { commandEnv, contractSecretNames, runCommandSettings, type CommandSettings } from './tools/command-env.js'
export { findBwrap, sandboxUnavailable } from './tools/sandbox.js'
export {
  ToolEffect,
  type ToolSource,
  type ToolAct,
  type ToolArguments,
  type ToolContext,
  type CallableTool,
  type ChildRunTool,
  type ToolDefinition,
  toolActOf,
  RunToolContext
} from './tools/tool-definition.js'
export {
  BUILTIN_TOOLS,
  builtinCatalogue,
  makeToolCatalogue,
  runToolCall,
  runToolCallNow,
  type ToolCallRequest,
  type ToolCatalogue
} from './tools/tool-catalogue.js'
export { agentCatalogue, type AgentTools, DEFAULT_AGENT_TOOLS } from './tools/agent-catalogue.js'
export { FINAL_ANSWER, FINAL_ANSWER_ACCEPTED, finalAnswerTool } from './tools/final-answer.js'
export { execDefinition, listDirDefinition, readFileDefinition, spawnChildDefinition, writeFileDefinition } from './tools/builtin-tools.js'
export { decodeArgumentsObject, TOO_DEEP_ARGUMENTS } from './tools/tool-arguments.js'
export * from './verify/verify.js'
export * from './usage/usage.js'
export { ASK_HUMAN, askHumanDefinition, type AskHumanArgs, decodeAskHumanArgs, MAX_QUESTION_LENGTH } from './tools/ask-human.js'
export * from './provider/fallback.js'
export * from './policy/glob.js'
export * from './policy/command-line.js'
export * from './policy/policy.js'
export * from './policy/command-readings.js'
export {
  DEFINED_TOOL,
  DEFINED_TOOL_VERSION,
  type DefinedTool,
  type DefineTool,
  defineTool,
  isDefinedTool,
  ToolDefinitionError,
  type ToolOptions,
  type ToolRunContext
} from './tools/define-tool.js'
export { catalogueToolOf, MODULE_TOOL_MAX_OUTPUT_BYTES } from './tools/module-tool.js'
export { loadToolModules, ToolModuleError } from './tools/tool-modules.js'
export type { CheckedArguments, JsonSchemaInput, StandardSchemaIssue, StandardSchemaResult, StandardSchemaV1 } from './tools/tool-input.js'
export {
  SecretRef,
  McpValue,
  McpStdioServerSpec,
  McpHttpServerSpec,
  McpServerSpec,
  McpServers,
  MCP_SERVER_NAME,
  MCP_SERVER_NAME_MAX,
  mcpSecretNames
} from './tools/mcp/mcp-server-spec.js'
export { McpServerError, type McpServerErrorReason } from './tools/mcp/mcp-errors.js'
export { CATALOGUE_TOOL_NAME, mcpToolEffect, mcpToolName, type McpToolLeftOut } from './tools/mcp/mcp-tools.js'
export { makeMcpPool, type McpPool, type McpPoolOptions, type McpServerHandle, type McpStartOptions } from './tools/mcp/mcp-pool.js'
