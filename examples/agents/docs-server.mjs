// The team's docs as an MCP server over stdio (docs/tools.md, "MCP servers"), built with the
// official SDK: agentvisor starts it when a run names it in `mcpServers`, offers its tools as
// `docs__<tool>`, and ends it with the process.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import * as z from 'zod'

const PAGES = {
  'sso.md': 'SSO logins go through the identity proxy; since 2.3 the proxy must be on 1.8 or later.',
  'upgrades.md': 'Every upgrade lists its breaking changes in the release notes; 2.3 raised the proxy requirement.'
}

const server = new McpServer({ name: 'team-docs', version: '1.0.0' })
server.registerTool(
  'search',
  {
    description: 'Searches the team docs; answers the matching pages with their text',
    inputSchema: { query: z.string() },
    // Read only: agentvisor never journals its calls, and the policy allows it unless a rule says otherwise.
    annotations: { readOnlyHint: true }
  },
  async ({ query }) => {
    const words = query.toLowerCase().split(/\s+/)
    const hits = Object.entries(PAGES).filter(([, text]) => words.some((word) => text.toLowerCase().includes(word)))
    return { content: [{ type: 'text', text: hits.map(([page, text]) => `${page}: ${text}`).join('\n') || 'no page matches' }] }
  }
)
await server.connect(new StdioServerTransport())
