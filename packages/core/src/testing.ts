/** Test doubles shared by every package's tests and by `scripted` task-file providers. */
export { makeScriptedProvider, type ScriptedProvider, type ScriptedProviderOptions } from './provider/scripted.js'
export { ScriptedStep, ScriptedToolCall, ScriptedError, SCRIPT_EXHAUSTED_TEXT } from './provider/scripted-step.js'
