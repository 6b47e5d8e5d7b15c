import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { quoteName } from '../../contract/quote-name.js'
import { mcpServerLabel } from './mcp-errors.js'
import type { ToolOutcome } from '../tool-outcome.js'

/*
 * An MCP `tools/call` result as the outcome fed back to the model (docs/tools.md, "MCP
 * servers"): text content as it is, every other kind of content described in one line, the
 * `structuredContent` as JSON, and `isError` as `ok: false`.
 */

/** The most characters of a result the model is shown, as `read_file` shows at most 100 KiB. */
export const MCP_OUTPUT_MAX_CHARS = 100 * 1024

type Content = CallToolResult['content'][number]

/** Decoded bytes of base64 text, without decoding it. */
const base64Bytes = (data: string): number => {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding)
}

const describeContent = (content: Content): string => {
  switch (content.type) {
    case 'text':
      return content.text
    case 'image':
    case 'audio':
      return `[${content.type} ${content.mimeType}, ${base64Bytes(content.data)} bytes]`
    case 'resource_link':
      return `[resource link ${content.uri}${content.name === '' ? '' : ` (${content.name})`}${content.mimeType === undefined ? '' : `, ${content.mimeType}`}]`
    case 'resource': {
      const resource = content.resource
      const head = `[resource ${resource.uri}${resource.mimeType === undefined ? '' : `, ${resource.mimeType}`}`
      // An embedded text resource is text the tool meant the model to read.
      if ('text' in resource && typeof resource.text === 'string') return `${head}]\n${resource.text}`
      return `${head}, ${'blob' in resource && typeof resource.blob === 'string' ? base64Bytes(resource.blob) : 0} bytes]`
    }
    default:
      return `[${String((content as { type?: unknown }).type)} content]`
  }
}

/**
 * Whether a text content already is `structured` as JSON: the MCP specification asks servers
 * that return structured content to return it serialised as text too, and the model need not
 * read it twice.
 */
const alreadyAsText = (texts: ReadonlyArray<string>, structured: string): boolean =>
  texts.some((text) => {
    const trimmed = text.trim()
    if (!trimmed.startsWith('{')) return false
    try {
      return JSON.stringify(JSON.parse(trimmed)) === structured
    } catch {
      return false
    }
  })

/** At most `MCP_OUTPUT_MAX_CHARS`, with a note of what was cut. */
export const capOutput = (text: string): string =>
  text.length <= MCP_OUTPUT_MAX_CHARS
    ? text
    : `${text.slice(0, MCP_OUTPUT_MAX_CHARS)}\n\n[output truncated: showing the first ${MCP_OUTPUT_MAX_CHARS} of ${text.length} characters]`

/**
 * The outcome of a `tools/call` result: its content, one item after another on their own lines,
 * then `structuredContent` as JSON when no text already holds it. `isError` results are
 * `ok: false` with the server's text. `redact` removes the server's secrets from the text.
 */
export const mcpResultOutcome = (server: string, tool: string, result: CallToolResult, redact: (text: string) => string): ToolOutcome => {
  const parts = (result.content ?? []).map(describeContent)
  if (result.structuredContent !== undefined) {
    const structured = JSON.stringify(result.structuredContent)
    if (!alreadyAsText(parts, structured)) parts.push(structured)
  }
  let output = parts.join('\n')
  if (result.isError === true && output.trim() === '') output = `${mcpServerLabel(server)}: tool ${quoteName(tool)} reported an error without a message`
  return { ok: result.isError !== true, output: capOutput(redact(output)) }
}
